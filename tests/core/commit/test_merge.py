"""core.commit.merge against a plain-Python model of Hudi's merge rules (the per-row code the
writer used before the Arrow rewrite), on small tables and on hypothesis-generated ones."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_hudi_occ.core.commit import merge
from airflow_hudi_occ.core.format.base_file import record_key_array, record_keys, with_meta_columns

T0, T1 = "20250101000000000", "20250101000000001"


def model_dedupe(rows: list[dict], pre: str | None) -> list[dict]:
    best: dict[str, int] = {}
    for i, r in enumerate(rows):
        k = str(r["id"])
        j = best.get(k)
        if j is None or pre is None or (r[pre] is not None and (rows[j][pre] is None or r[pre] >= rows[j][pre])):
            best[k] = i
    return [rows[i] for i in sorted(best.values())]


def model_upsert(base: list[dict], incoming: list[dict], pre: str | None):
    """{key: (row, commit time)} after merging a deduped batch into a file group."""
    out = {str(r["id"]): (r, T0) for r in base}
    for r in incoming:
        k = str(r["id"])
        old = out.get(k)
        if old and pre and r[pre] is not None and old[0][pre] is not None and r[pre] < old[0][pre]:
            continue
        out[k] = (r, T1)
    return out


def stored(rows: list[dict]) -> pa.Table:
    t = pa.Table.from_pylist(rows, schema=SCHEMA)
    return with_meta_columns(t, instant_time=T0, partition="p", file_name="f", key_fields=["id"])


SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


def as_dict(res: merge.MergeResult):
    rows = res.user.to_pylist()
    return {k: (r, t) for k, r, t in zip(res.keys.to_pylist(), rows, res.commit_times.to_pylist())}


def test_upsert_keeps_newer_stored_records_and_stamps_the_rest():
    base = [{"id": 1, "ts": 5, "v": "a"}, {"id": 2, "ts": 5, "v": "b"}, {"id": 3, "ts": 5, "v": "c"}]
    inc = [{"id": 1, "ts": 4, "v": "older"}, {"id": 2, "ts": 5, "v": "tie"}, {"id": 9, "ts": 1, "v": "new"}]
    t = pa.Table.from_pylist(inc, schema=SCHEMA)
    res = merge.merge_file_group(stored(base), t, record_key_array(t, ["id"]), mode=merge.UPSERT,
                                 instant=T1, precombine="ts")
    got = as_dict(res)
    assert got["1"] == (base[0], T0)  # the incoming record is strictly older: stored stays
    assert got["2"] == (inc[1], T1)   # a tie goes to the incoming record
    assert got["3"] == (base[2], T0) and got["9"] == (inc[2], T1)
    assert (res.updates, res.inserts, res.deletes) == (1, 1, 0)


def test_delete_and_append():
    base = [{"id": i, "ts": 1, "v": "x"} for i in range(4)]
    t = pa.Table.from_pylist([{"id": 1, "ts": 0, "v": None}, {"id": 7, "ts": 0, "v": None}], schema=SCHEMA)
    res = merge.merge_file_group(stored(base), t, record_key_array(t, ["id"]), mode=merge.DELETE, instant=T1)
    assert sorted(res.keys.to_pylist()) == ["0", "2", "3"] and res.deletes == 1
    res = merge.merge_file_group(stored(base), t, record_key_array(t, ["id"]), mode=merge.APPEND, instant=T1)
    assert res.keys.to_pylist() == ["0", "1", "2", "3", "1", "7"] and res.inserts == 2


def test_added_column_is_null_for_stored_rows():
    base = [{"id": 1, "ts": 1, "v": "a"}]
    wider = pa.schema([*SCHEMA, ("extra", pa.float64())])
    t = pa.Table.from_pylist([{"id": 2, "ts": 1, "v": "b", "extra": 1.5}], schema=wider)
    res = merge.merge_file_group(stored(base), t, record_key_array(t, ["id"]), mode=merge.UPSERT,
                                 instant=T1, schema=wider)
    assert res.user.schema == wider and res.user.column("extra").to_pylist() == [None, 1.5]


@pytest.mark.parametrize("fields, row, want", [
    (["id"], {"id": 7, "name": "x", "f": 1.0, "b": True}, "7"),
    (["name"], {"id": None, "name": None, "f": 1.0, "b": True}, ""),
    (["f"], {"id": 1, "name": "x", "f": 1.0, "b": True}, "1.0"),
    (["b"], {"id": 1, "name": "x", "f": 1.0, "b": False}, "False"),
    (["id", "name"], {"id": 3, "name": "a,b", "f": 0.5, "b": True}, "id:3,name:a,b"),
    (["id", "name"], {"id": None, "name": "z", "f": 0.5, "b": True}, "id:,name:z"),
])
def test_record_keys_are_spelled_as_before(fields, row, want):
    t = pa.Table.from_pylist([row], schema=pa.schema([("id", pa.int64()), ("name", pa.string()),
                                                       ("f", pa.float64()), ("b", pa.bool_())]))
    assert record_keys(t, fields) == [want]


rows_st = st.lists(st.fixed_dictionaries({
    "id": st.integers(0, 6), "ts": st.one_of(st.none(), st.integers(0, 3)),
    "v": st.sampled_from(["a", "b", "c"])}), max_size=14)


@settings(max_examples=150, deadline=None)
@given(base=rows_st, batch=rows_st, use_pre=st.booleans())
def test_dedupe_then_upsert_equals_the_model(base, batch, use_pre):
    pre = "ts" if use_pre else None
    base = model_dedupe(base, "ts")  # a base file holds one record per key
    bt = pa.Table.from_pylist(batch, schema=SCHEMA)
    deduped = merge.dedupe(bt, ["id"], pre)
    assert deduped.to_pylist() == model_dedupe(batch, pre)
    res = merge.merge_file_group(stored(base), deduped, record_key_array(deduped, ["id"]),
                                 mode=merge.UPSERT, instant=T1, precombine=pre)
    assert as_dict(res) == model_upsert(base, deduped.to_pylist(), pre)
    assert len(res.keys) == res.user.num_rows == len(res.commit_times)
