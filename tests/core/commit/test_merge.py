"""core.commit.merge against plain-Python models of the merge rules: the per-row code the core
writer used before the Arrow rewrite (stored order) and the Spark executor's per-key rules
(batch order), on small tables and on hypothesis-generated ones."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_hudi_occ.core.commit import merge
from airflow_hudi_occ.core.format.base_file import (MERGE_DICTIONARY_COLUMNS, read_parquet, record_key_array,
                                                    with_meta_columns)
from airflow_hudi_occ.core.format.storage import Storage

T0, T1 = "20250101000000000", "20250101000000001"
SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


# -- the models ---------------------------------------------------------------------------------

def model_dedupe(rows: list[dict], pre: str | None) -> list[dict]:
    best: dict[str, int] = {}
    for i, r in enumerate(rows):
        k = str(r["id"])
        j = best.get(k)
        if j is None or pre is None or (r[pre] is not None and (rows[j][pre] is None or r[pre] >= rows[j][pre])):
            best[k] = i
    return [rows[i] for i in sorted(best.values())]


def _older(new: dict, old: dict, pre: str | None) -> bool:
    return bool(pre) and new[pre] is not None and old[pre] is not None and new[pre] < old[pre]


def model_upsert_stored(base: list[dict], incoming: list[dict], pre: str | None):
    """The core writer's loop: ([(key, row, commit time)] in file order, updates, inserts)."""
    by_key = {str(r["id"]): r for r in incoming}
    kept, replacing = [], []
    for r in base:
        k = str(r["id"])
        new = by_key.get(k)
        if new is None or _older(new, r, pre):
            kept.append((k, r, T0))
        else:
            replacing.append((k, new, T1))
    stored = {str(r["id"]) for r in base}
    fresh = [(str(r["id"]), r, T1) for r in incoming if str(r["id"]) not in stored]
    return kept + replacing + fresh, len(replacing), len(fresh)


def model_upsert_batch(base: list[dict], incoming: list[dict], pre: str | None):
    """The Spark executor's rules: a key is kept when any stored copy is newer; incoming rows
    follow in batch order."""
    by_key = {str(r["id"]): r for r in incoming}
    keep_old = {str(r["id"]) for r in base if str(r["id"]) in by_key and _older(by_key[str(r["id"])], r, pre)}
    kept = [(str(r["id"]), r, T0) for r in base if str(r["id"]) not in by_key or str(r["id"]) in keep_old]
    stored = {str(r["id"]) for r in base}
    taken = [(str(r["id"]), r, T1) for r in incoming if str(r["id"]) not in keep_old]
    updates = sum(1 for k, _, _ in taken if k in stored)
    return kept + taken, updates, sum(1 for r in incoming if str(r["id"]) not in stored)


MODELS = {merge.STORED_ORDER: model_upsert_stored, merge.BATCH_ORDER: model_upsert_batch}


# -- helpers ------------------------------------------------------------------------------------

def stored(rows: list[dict], schema: pa.Schema = SCHEMA) -> pa.Table:
    t = pa.Table.from_pylist(rows, schema=schema)
    return with_meta_columns(t, instant_time=T0, partition="p", file_name="f", key_fields=["id"])


def batch(rows: list[dict], schema: pa.Schema = SCHEMA) -> tuple[pa.Table, pa.Array]:
    t = pa.Table.from_pylist(rows, schema=schema)
    return t, record_key_array(t, ["id"])


def triples(res: merge.MergeResult):
    return list(zip(res.keys.to_pylist(), res.user.to_pylist(), res.commit_times.to_pylist()))


# -- examples -----------------------------------------------------------------------------------

@pytest.mark.parametrize("order", [merge.STORED_ORDER, merge.BATCH_ORDER])
def test_upsert_keeps_newer_stored_records_and_stamps_the_rest(order):
    base = [{"id": 1, "ts": 5, "v": "a"}, {"id": 2, "ts": 5, "v": "b"}, {"id": 3, "ts": 5, "v": "c"}]
    inc = [{"id": 1, "ts": 4, "v": "older"}, {"id": 2, "ts": 5, "v": "tie"}, {"id": 9, "ts": 1, "v": "new"}]
    res = merge.merge_file_group(stored(base), *batch(inc), mode=merge.UPSERT, instant=T1,
                                 precombine="ts", order=order)
    got = {k: (r, t) for k, r, t in triples(res)}
    assert got["1"] == (base[0], T0)  # the incoming record is strictly older: stored stays
    assert got["2"] == (inc[1], T1)   # a tie goes to the incoming record
    assert got["3"] == (base[2], T0) and got["9"] == (inc[2], T1)
    assert (res.updates, res.inserts, res.deletes) == (1, 1, 0)


def test_row_order_per_engine():
    base = [{"id": i, "ts": 1, "v": "s"} for i in range(4)]
    inc = [{"id": 7, "ts": 1, "v": "n"}, {"id": 3, "ts": 1, "v": "u"}, {"id": 1, "ts": 1, "v": "u"}]
    core = merge.merge_file_group(stored(base), *batch(inc), mode=merge.UPSERT, instant=T1,
                                  precombine="ts", order=merge.STORED_ORDER)
    spark = merge.merge_file_group(stored(base), *batch(inc), mode=merge.UPSERT, instant=T1,
                                   precombine="ts", order=merge.BATCH_ORDER)
    assert core.keys.to_pylist() == ["0", "2", "1", "3", "7"]  # updates in stored order, then new
    assert spark.keys.to_pylist() == ["0", "2", "7", "3", "1"]  # the batch as it came


def test_delete_and_append():
    base = [{"id": i, "ts": 1, "v": "x"} for i in range(4)]
    t, keys = batch([{"id": 1, "ts": 0, "v": None}, {"id": 7, "ts": 0, "v": None}])
    res = merge.merge_file_group(stored(base), t, keys, mode=merge.DELETE, instant=T1)
    assert res.keys.to_pylist() == ["0", "2", "3"] and res.deletes == 1
    assert res.commit_times.to_pylist() == [T0] * 3
    res = merge.merge_file_group(stored(base), t, keys, mode=merge.APPEND, instant=T1)
    assert res.keys.to_pylist() == ["0", "1", "2", "3", "1", "7"] and res.inserts == 2
    assert res.commit_times.to_pylist() == [T0] * 4 + [T1] * 2


@pytest.mark.parametrize("mode", [merge.UPSERT, merge.DELETE, merge.APPEND])
def test_commit_times_read_as_dictionaries_come_back_as_one_dictionary(tmp_path, mode):
    """A base file of several row groups whose times were written by two commits: read as the
    writers read it (a dictionary per row group), merged, and written back as given."""
    rows = [{"id": i, "ts": 1, "v": "x"} for i in range(6)]
    t = stored(rows)
    t = t.set_column(0, "_hoodie_commit_time", pa.array([T0, T0, "20241231000000000", T0, T1, T1]))
    pq.write_table(t, tmp_path / "f.parquet", row_group_size=2)  # three row groups
    base = read_parquet(Storage(str(tmp_path)), "f.parquet", dictionary=MERGE_DICTIONARY_COLUMNS)
    assert base.column("_hoodie_commit_time").num_chunks == 3
    assert pa.types.is_dictionary(base.column("_hoodie_commit_time").type)
    t2 = "20250101000000002"
    res = merge.merge_file_group(base, *batch([{"id": 4, "ts": 2, "v": "u"}, {"id": 9, "ts": 2, "v": "n"}]),
                                 mode=mode, instant=t2, precombine="ts", order=merge.STORED_ORDER)
    assert res.commit_times.type == merge.TIMES_TYPE
    want = {merge.UPSERT: [T0, T0, "20241231000000000", T0, T1, t2, t2],
            merge.DELETE: [T0, T0, "20241231000000000", T0, T1],
            merge.APPEND: [T0, T0, "20241231000000000", T0, T1, T1, t2, t2]}[mode]
    assert res.commit_times.to_pylist() == want
    # the instant is one dictionary entry, however many rows carry it
    assert sorted(set(res.commit_times.dictionary.to_pylist())) == sorted(set(want))


def test_with_instant_reuses_an_entry_already_in_the_dictionary():
    times = merge.stored_times(pa.array([T0, T1, None]))
    out = merge.with_instant(times, 2, T1)
    assert out.to_pylist() == [T0, T1, None, T1, T1]
    assert len(out.dictionary) == 2


def test_target_schema_nulls_an_added_column_for_stored_rows():
    base = [{"id": 1, "ts": 1, "v": "a"}]
    wider = pa.schema([*SCHEMA, ("extra", pa.float64())])
    res = merge.merge_file_group(stored(base), *batch([{"id": 2, "ts": 1, "v": "b", "extra": 1.5}], wider),
                                 mode=merge.UPSERT, instant=T1, schema=wider)
    assert res.user.schema == wider and res.user.column("extra").to_pylist() == [None, 1.5]


def test_without_a_schema_the_stored_column_order_comes_first():
    """The core writer's permissive concatenation: stored columns in their order, added after."""
    base = [{"id": 1, "ts": 1, "v": "a"}, {"id": 2, "ts": 1, "v": "b"}]
    other = pa.schema([("extra", pa.float64()), ("v", pa.string()), ("id", pa.int64()), ("ts", pa.int64())])
    res = merge.merge_file_group(stored(base), *batch([{"id": 2, "ts": 2, "v": "c", "extra": 0.5}], other),
                                 mode=merge.UPSERT, instant=T1, precombine="ts", order=merge.STORED_ORDER)
    assert res.user.column_names == ["id", "ts", "v", "extra"]
    assert res.user.to_pylist()[1] == {"id": 2, "ts": 2, "v": "c", "extra": 0.5}
    # every incoming record older: the stored file's schema as it was
    res = merge.merge_file_group(stored(base), *batch([{"id": 2, "ts": 0, "v": "c", "extra": 0.5}], other),
                                 mode=merge.UPSERT, instant=T1, precombine="ts", order=merge.STORED_ORDER)
    assert res.user.schema == SCHEMA and res.updates == 0


def test_dedupe_null_and_tied_ordering_values():
    rows = [{"id": 1, "ts": None, "v": "first null"}, {"id": 1, "ts": None, "v": "second null"},
            {"id": 2, "ts": 3, "v": "a"}, {"id": 2, "ts": None, "v": "null loses"}, {"id": 2, "ts": 3, "v": "tie: later"},
            {"id": 3, "ts": 1, "v": "x"}]
    t, _ = batch(rows)
    assert [r["v"] for r in merge.dedupe(t, ["id"], "ts").to_pylist()] == ["first null", "tie: later", "x"]
    assert [r["v"] for r in merge.dedupe(t, ["id"], None).to_pylist()] == ["second null", "tie: later", "x"]


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
    assert record_key_array(t, fields).to_pylist() == [want]


# -- properties ---------------------------------------------------------------------------------

rows_st = st.lists(st.fixed_dictionaries({
    "id": st.integers(0, 6), "ts": st.one_of(st.none(), st.integers(0, 3)),
    "v": st.sampled_from(["a", "b", "c"])}), max_size=14)


@settings(max_examples=200, deadline=None)
@given(base=rows_st, rows=rows_st, use_pre=st.booleans(),
       order=st.sampled_from([merge.STORED_ORDER, merge.BATCH_ORDER]), unique_base=st.booleans())
def test_dedupe_then_upsert_equals_the_model(base, rows, use_pre, order, unique_base):
    pre = "ts" if use_pre else None
    if unique_base:  # a base file written by upserts holds one record per key; appends may not
        base = model_dedupe(base, "ts")
    deduped = merge.dedupe(pa.Table.from_pylist(rows, schema=SCHEMA), ["id"], pre)
    assert deduped.to_pylist() == model_dedupe(rows, pre)
    res = merge.merge_file_group(stored(base), deduped, record_key_array(deduped, ["id"]),
                                 mode=merge.UPSERT, instant=T1, precombine=pre, order=order)
    want, updates, inserts = MODELS[order](base, deduped.to_pylist(), pre)
    assert triples(res) == want
    assert (res.updates, res.inserts, res.deletes) == (updates, inserts, 0)


@settings(max_examples=100, deadline=None)
@given(base=rows_st, rows=rows_st)
def test_delete_equals_the_model(base, rows):
    t, keys = batch(rows)
    res = merge.merge_file_group(stored(base), t, keys, mode=merge.DELETE, instant=T1)
    gone = {str(r["id"]) for r in rows}
    assert triples(res) == [(str(r["id"]), r, T0) for r in base if str(r["id"]) not in gone]
    assert res.deletes == sum(1 for r in base if str(r["id"]) in gone)
