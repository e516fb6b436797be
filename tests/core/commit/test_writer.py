"""Tagging in the Arrow writer: which stored files a batch's keys are looked up in.

A file whose key range (its parquet footer's statistics) misses every key of the batch is not
read; a file that may hold one is, and an update still lands in the file group that holds its
key. Checked by counting the column reads and by reading the table back with hudi-rs.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.commit import writer as writer_module
from airflow_hudi_occ.core.format import base_file
from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import InvalidOrderingValueError, InvalidRecordKeyError
from airflow_hudi_occ.core.format.layout import META_COLUMNS
from airflow_hudi_occ.core.format.schema import SchemaError
from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key, tree_snapshot


def _rows(ids, v, as_text=False):
    return pa.table({"id": [f"k{i:05d}" if as_text else i for i in ids], "p": ["a"] * len(ids),
                     "ts": [1] * len(ids), "v": [v] * len(ids)})


@pytest.fixture
def column_reads(monkeypatch):
    reads = []
    real = writer_module.read_parquet_columns

    def counting(storage, rel, columns):
        reads.append(rel)
        return real(storage, rel, columns)

    monkeypatch.setattr(writer_module, "read_parquet_columns", counting)
    return reads


@pytest.mark.parametrize("as_text", [False, True], ids=["integer-key", "text-key"])
def test_files_outside_the_batch_key_range_are_not_read(tmp_path, column_reads, as_text):
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    w = ArrowTableWriter(table, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    for n in range(3):  # three file groups in one partition: ids 0-9, 100-109, 200-209
        w.write(_rows(range(n * 100, n * 100 + 10), f"v{n}", as_text))
    assert len(FileSystemView(table).latest_file_slices("a")) == 3
    column_reads.clear()

    # fresh keys above every range: nothing is read, one new file group
    w.write(_rows(range(300, 305), "fresh", as_text))
    assert column_reads == []

    # an update of ids 105-107 (and a fresh key in the same range): only the middle file is read
    column_reads.clear()
    result = w.write(_rows([105, 106, 107, 150], "upd", as_text))
    assert len(column_reads) == 1
    touched = {s.file_id for s in result.metadata.write_stats() if s.prev_commit != "null"}
    assert len(touched) == 1

    got = rows_by_key(hudi_read(table.base_uri), "id")
    key = (lambda i: f"k{i:05d}") if as_text else (lambda i: i)
    assert len(got) == 30 + 5 + 1  # no key duplicated by a skipped lookup
    assert [got[key(i)]["v"] for i in (105, 106, 107, 150)] == ["upd"] * 4
    assert got[key(104)]["v"] == "v1" and got[key(0)]["v"] == "v0"


def test_text_keys_are_never_pruned_by_an_integer_order():
    """'10' < '9' as text: a range of text keys says nothing about integers, so such files are read."""
    probe = base_file.KeyProbe
    assert probe(pa.array([5, 6])).may_hold(("10", "9")) is True
    assert probe(pa.array([20, 30])).may_hold((10, 19)) is False
    assert probe(pa.array(["k4", "k9"])).may_hold(("k1", "k3")) is False
    assert probe(pa.array(["k4", "k9"])).may_hold(("k1", "k5")) is True


def test_a_file_inside_the_batch_range_but_between_its_keys_is_not_read():
    """Key by key, as Hudi's bloom index prunes: the batch 0..9 + 500 spans [0, 500], yet a file
    holding 100..109 can hold none of its keys."""
    probe = base_file.KeyProbe(pa.array([500, *range(10)], pa.int64()))
    assert probe.may_hold((100, 109)) is False
    assert probe.may_hold((5, 5)) is True and probe.may_hold((499, 500)) is True
    assert probe.may_hold((501, 900)) is False
    text = base_file.KeyProbe(pa.array(["k500", "k001", "k009"]))
    assert text.may_hold(("k100", "k109")) is False and text.may_hold(("k009", "k100")) is True


def test_small_commits_that_also_update_shared_keys_read_only_the_files_holding_them(tmp_path, column_reads):
    """The overlapping small-commit pattern: each commit upserts the shared keys 0..9 and adds
    one fresh key, so each adds a file group holding one key far above the shared ones. A
    commit must read the shared keys' file and not every one-key file."""
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    w = ArrowTableWriter(table, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    for i in range(8):
        w.write(_rows([*range(10), 1000 + i], f"c{i}"))
    groups = FileSystemView(table).latest_file_slices("a")
    assert len(groups) == 8  # the shared keys' group and one group per fresh key
    column_reads.clear()
    w.write(_rows([*range(10), 2000], "last"))
    assert len(column_reads) == 1
    got = rows_by_key(hudi_read(table.base_uri), "id")
    assert {k: r["v"] for k, r in got.items()} == {**{k: "last" for k in [*range(10), 2000]},
                                                   **{1000 + i: f"c{i}" for i in range(8)}}


def test_a_merge_on_read_table_is_refused_naming_its_writer(tmp_path):
    from airflow_hudi_occ.core.errors import ConfigError
    table = Table.create(str(tmp_path / "mor"), "mor", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts", table_type="MERGE_ON_READ")
    with pytest.raises(ConfigError) as e:
        ArrowTableWriter(table, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    assert "MergeOnReadWriter" in e.value.remedy
    assert table.timeline().completed() == []


@pytest.mark.parametrize("distinct", [3, 400], ids=["few-partitions", "many-partitions"])
def test_partition_groups_equal_a_row_by_row_grouping(tmp_path, distinct):
    """Both ways of splitting a batch (a pass per partition for few values, a sort for many)
    give each partition path exactly its rows, in batch order, nulls as Hive's default."""
    import random
    rng = random.Random(distinct)
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["a", "b"],
                         hive_style_partitioning=True)
    n = 3000
    a = [rng.choice([None, *range(distinct)]) for _ in range(n)]
    b = [rng.choice(["x", "y", None]) for _ in range(n)]
    data = pa.table({"id": list(range(n)), "a": a, "b": b})
    want: dict[str, list[int]] = {}
    for i in range(n):
        want.setdefault(writer_module.partition_path_of(table, {"a": a[i], "b": b[i]}), []).append(i)
    got = {p: idx.to_pylist() for p, idx in writer_module.partition_groups(table, data).items()}
    assert got == want
    assert "a=__HIVE_DEFAULT_PARTITION__/b=__HIVE_DEFAULT_PARTITION__" in got


@pytest.mark.parametrize("combine", [None, "false", "true"])
def test_bulk_insert_writes_duplicate_keys_as_given_unless_asked_to_combine(tmp_path, combine):
    """Hudi's ``hoodie.combine.before.insert`` (default false): a bulk_insert writes the batch as
    it is, as Java Hudi does; true combines the copies of a key (the larger ts wins). insert
    combines either way. hudi-rs reads exactly what was written."""
    opts = dict(FAST_WRITE_OPTIONS)
    if combine is not None:
        opts["hoodie.combine.before.insert"] = combine
    batch = pa.table({"id": [1, 2, 1, 3, 2], "p": ["a", "a", "a", "b", "a"], "ts": [1, 5, 3, 1, 2],
                      "v": ["x1", "y5", "x3", "z", "y2"]})
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    ArrowTableWriter(table, WriteConfig.from_options(opts)).write(batch, "bulk_insert")
    got = sorted((r["id"], r["v"]) for r in hudi_read(table.base_uri).to_pylist())
    if combine == "true":
        assert got == [(1, "x3"), (2, "y5"), (3, "z")]
    else:
        assert got == [(1, "x1"), (1, "x3"), (2, "y2"), (2, "y5"), (3, "z")]
    other = Table.create(str(tmp_path / "i"), "i", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    ArrowTableWriter(other, WriteConfig.from_options(opts)).write(batch, "insert")
    assert sorted((r["id"], r["v"]) for r in hudi_read(other.base_uri).to_pylist()) == \
        [(1, "x3"), (2, "y5"), (3, "z")]


def test_an_upsert_copies_untouched_records_with_the_key_text_they_were_stored_with(tmp_path):
    """Hudi copies a record the batch does not touch as it is, record key included. A table
    written by another key generator (Hudi 0.x's ComplexKeyGenerator spells one field as
    ``id:5``) keeps that text; only the batch's records are spelled by this writer."""
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    w = ArrowTableWriter(table, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    first = w.write(_rows(range(5), "v0")).instant.requested_time
    (s,) = FileSystemView(table).latest_file_slices("a")
    path = table.storage.path(s.base_file.relative_path)
    stored = pq.read_table(path)
    stored = stored.set_column(stored.schema.get_field_index("_hoodie_record_key"), "_hoodie_record_key",
                               pa.array([f"id:{i}" for i in stored.column("id").to_pylist()]))
    pq.write_table(stored, path)

    second = w.write(_rows([2, 7], "v1")).instant.requested_time
    got = {r["id"]: (r["_hoodie_record_key"], r["_hoodie_commit_time"], r["v"])
           for r in hudi_read(table.base_uri).to_pylist()}
    assert got == {0: ("id:0", first, "v0"), 1: ("id:1", first, "v0"), 3: ("id:3", first, "v0"),
                   4: ("id:4", first, "v0"), 2: ("2", second, "v1"), 7: ("7", second, "v1")}


@pytest.mark.parametrize("distinct", [3, 400], ids=["few-partitions", "many-partitions"])
def test_values_that_spell_the_same_partition_path_are_all_written_with_their_own_values(tmp_path, distinct):
    """Two value combinations can spell one partition path: a null and the literal Hive default,
    or ``("x/y", "z")`` and ``("x", "y/z")``. Hudi writes both into that one partition; every
    row keeps its own values (none may be lost, nor take its neighbour's partition value)."""
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["a", "b"],
                         precombine_field="ts")
    a = ["x/y", "x", None, "__HIVE_DEFAULT_PARTITION__", "x/y", "x"] + [f"f{i}" for i in range(distinct)]
    b = ["z", "y/z", "k", "k", "z", "y/z"] + ["k"] * distinct
    n = len(a)
    rows = pa.table({"id": list(range(n)), "a": a, "b": b, "ts": [1] * n})
    groups = writer_module.partition_groups(table, rows)
    assert sorted(i for idx in groups.values() for i in idx.to_pylist()) == list(range(n))
    assert groups["x/y/z"].to_pylist() == [0, 1, 4, 5]  # batch order
    ArrowTableWriter(table, WriteConfig.from_options(FAST_WRITE_OPTIONS)).write(rows, "insert")
    got = hudi_read(table.base_uri).sort_by("id").select(["id", "a", "b"])
    assert got.to_pylist() == rows.select(["id", "a", "b"]).to_pylist()


# -- float record keys (issue 40) ------------------------------------------------------------------

def _float_keyed(tmp_path, table_type: str, bucket: bool = False):
    table = Table.create(str(tmp_path / "fk"), "fk", record_key_fields=["k"], partition_fields=["day"],
                         precombine_field="ts", table_type=table_type)
    options = dict(FAST_WRITE_OPTIONS, **({"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2"}
                                          if bucket else {}))
    cls = ArrowTableWriter if table_type == "COPY_ON_WRITE" else MergeOnReadWriter
    return table, cls(table, WriteConfig.from_options(options))


def _float_rows(keys, ts, v, typ=pa.float64()):
    return pa.table({"k": pa.array(keys, typ), "day": ["d"] * len(keys), "ts": ts, "v": v})


def _stored(table):
    """{record key text: (ts, v)} as hudi-rs reads the table, refusing a key stored twice."""
    out = {}
    for r in hudi_read(table.base_uri).to_pylist():
        assert r["_hoodie_record_key"] not in out, f"key {r['_hoodie_record_key']!r} stored twice"
        out[r["_hoodie_record_key"]] = (r["ts"], r["v"])
    return out


@pytest.mark.parametrize("table_type,bucket", [("COPY_ON_WRITE", False), ("MERGE_ON_READ", False),
                                               ("COPY_ON_WRITE", True)], ids=["cow", "mor", "cow-bucket"])
def test_nan_and_signed_zero_keys_are_one_row_per_java_key_and_the_larger_ordering_value_wins(
        tmp_path, table_type, bucket):
    """Two rows of key NaN in one upsert were both committed (key 'nan' twice): NaN != NaN in
    the in-batch dedupe. Now every key is spelled as Java spells it and compared as text:
    NaN is one key, -0.0 and 0.0 are two, as in a table Java writes."""
    nan = float("nan")
    table, w = _float_keyed(tmp_path, table_type, bucket)
    w.write(_float_rows([nan, nan, -0.0, 0.0, 1e20], [2, 3, 1, 1, 1], ["a", "b", "neg", "pos", "big"]))
    assert _stored(table) == {"NaN": (3, "b"), "-0.0": (1, "neg"), "0.0": (1, "pos"), "1.0E20": (1, "big")}
    w.write(_float_rows([nan, float("inf")], [9, 1], ["c", "inf"]))  # a larger ordering value wins
    w.write(_float_rows([nan], [1], ["old"]))                        # a smaller one does not
    assert _stored(table) == {"NaN": (9, "c"), "-0.0": (1, "neg"), "0.0": (1, "pos"), "1.0E20": (1, "big"),
                              "Infinity": (1, "inf")}


def test_float32_keys_are_spelled_as_java_floats_not_through_a_double(tmp_path):
    table, w = _float_keyed(tmp_path, "COPY_ON_WRITE")
    w.write(_float_rows([0.1, float("nan"), float("nan")], [1, 1, 2], ["a", "b", "c"], pa.float32()))
    assert _stored(table) == {"0.1": (1, "a"), "NaN": (2, "c")}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_keys_stored_in_python_s_spelling_refuse_an_upsert_that_would_duplicate_them(tmp_path, monkeypatch,
                                                                                      table_type):
    """A table written before keys were spelled as Java does holds 'nan' where this version
    spells 'NaN': an upsert of NaN there is refused before any instant exists, naming the
    column and the remedy, the table unchanged; the remedy (insert_overwrite of the partition
    read back) respells its keys, after which the upsert replaces the row."""
    nan = float("nan")
    table, w = _float_keyed(tmp_path, table_type)
    with monkeypatch.context() as m:  # the old spelling: Python's str()
        m.setattr(base_file, "java_float_text", lambda v, single=False: str(v))
        w.write(_float_rows([nan, 1e20, 1.5], [2, 2, 2], ["a", "b", "c"]))
    assert set(_stored(table)) == {"nan", "1e+20", "1.5"}
    before = tree_snapshot(tmp_path / "fk")
    t0 = time.monotonic()
    with pytest.raises(InvalidRecordKeyError) as e:
        w.write(_float_rows([nan], [3], ["new"]))
    print(f"refused in {time.monotonic() - t0:.2f} s")
    cow = table_type == "COPY_ON_WRITE"
    assert e.value.column == "k" and "'nan'" in str(e.value)
    assert ("insert_overwrite" if cow else "copy the table into a new one") in e.value.remedy
    assert tree_snapshot(tmp_path / "fk") == before  # no instant, no rollback, no attempt record
    stored = read_table(table).drop_columns([c for c in META_COLUMNS])
    if cow:
        w.write(stored, "insert_overwrite")
    else:
        table = Table.create(str(tmp_path / "copy"), "fk", record_key_fields=["k"], partition_fields=["day"],
                             precombine_field="ts", table_type=table_type)
        w = MergeOnReadWriter(table, WriteConfig.from_options(FAST_WRITE_OPTIONS))
        w.write(stored, "insert")
    w.write(_float_rows([nan], [3], ["new"]))
    assert _stored(table) == {"NaN": (3, "new"), "1.0E20": (2, "b"), "1.5": (2, "c")}


# -- null ordering values (issue 40) -------------------------------------------------------------

_ORDERED = pa.schema([("id", pa.string()), ("day", pa.string()), ("ts", pa.int64()), ("v", pa.string())])


def _ordered_table(tmp_path, table_type, options=None):
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["day"],
                         precombine_field="ts", table_type=table_type)
    cls = ArrowTableWriter if table_type == "COPY_ON_WRITE" else MergeOnReadWriter
    w = cls(table, WriteConfig.from_options({**FAST_WRITE_OPTIONS, **(options or {})}))
    w.write(pa.Table.from_pylist([{"id": "a", "day": "d", "ts": 1, "v": "stored"}], schema=_ORDERED), "insert")
    return table, w


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("operation,options", [
    ("upsert", {}), ("insert", {}), ("bulk_insert", {"hoodie.combine.before.insert": "true"})],
    ids=["upsert", "insert", "bulk_insert-combine"])
def test_a_null_ordering_value_is_refused_before_any_instant(tmp_path, table_type, operation, options):
    """A write that compares ordering values (every write that combines a batch's copies of
    a key: an upsert, an insert, a bulk_insert with hoodie.combine.before.insert) of rows
    whose precombine value is null is refused before any instant exists, naming the column,
    the count and the first row, the table byte-identical. On main a merge-on-read upsert of
    ``ts`` null onto a stored ``ts`` 1 committed, and the readers disagreed: ours (and
    compaction) let the null win, hudi-rs kept the stored row, Java Hudi 1.2 could not read
    the table (a NullPointerException); an insert stored a null that the next upsert met the
    same way."""
    table, w = _ordered_table(tmp_path, table_type, options)
    before = tree_snapshot(tmp_path / "t")
    batch = pa.Table.from_pylist([{"id": "b", "day": "d", "ts": 2, "v": "x"},
                                  {"id": "a", "day": "d", "ts": None, "v": "null"},
                                  {"id": "c", "day": "d", "ts": None, "v": "null"}], schema=_ORDERED)
    t0 = time.monotonic()
    with pytest.raises(InvalidOrderingValueError) as e:
        w.write(batch, operation)
    print(f"refused in {time.monotonic() - t0:.3f} s: {e.value}")
    assert (e.value.column, e.value.rows) == ("ts", 2)
    assert "'ts'" in str(e.value) and "row 1 of the batch" in str(e.value)
    assert "nothing was written" in str(e.value) and "coalesce(ts, 0)" in e.value.remedy
    assert tree_snapshot(tmp_path / "t") == before  # no instant, no rollback, no attempt record
    # the readers agree on the stored row (they did not on main, merge-on-read)
    assert read_table(Table.open(table.base_uri)).column("v").to_pylist() == ["stored"]
    assert hudi_read(table.base_uri).column("v").to_pylist() == ["stored"]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_writes_that_compare_no_ordering_value_keep_null_ones(tmp_path, table_type):
    """A delete carries no ordering value (Hudi's delete): one with a null ``ts`` goes
    through, as before; so does a copy-on-write bulk_insert, which writes its batch as given
    (Hudi's), while a merge-on-read one combines its keys and is refused."""
    table, w = _ordered_table(tmp_path, table_type)
    w.write(pa.Table.from_pylist([{"id": "a", "day": "d", "ts": None, "v": "gone"}], schema=_ORDERED), "delete")
    new = pa.Table.from_pylist([{"id": "n", "day": "d", "ts": None, "v": "new"}], schema=_ORDERED)
    if table_type == "MERGE_ON_READ":
        with pytest.raises(InvalidOrderingValueError):
            w.write(new, "bulk_insert")
        assert read_table(Table.open(table.base_uri)).num_rows == 0
        return
    w.write(new, "bulk_insert")
    got = read_table(Table.open(table.base_uri))
    assert list(zip(got.column("id").to_pylist(), got.column("ts").to_pylist())) == [("n", None)]


# -- column names (issue 40) ---------------------------------------------------------------------

@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("names,named", [
    (["id", "day", "amount", "amount"], "'amount'"),            # was KeyError after a rollback
    (["id", "day", "id"], "'id'"),                              # was KeyError before the instant
    (["id", "day", "_hoodie_record_key", "_hoodie_record_key"], "'_hoodie_record_key'"),
    (["id", "day", "my amount"], "'my amount'"),                # was committed, unreadable by hudi-rs
], ids=["duplicate", "duplicate-key", "duplicate-meta", "not-avro"])
def test_column_names_a_table_cannot_hold_are_refused_before_any_instant(tmp_path, table_type, names, named):
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["day"],
                         table_type=table_type)
    cls = ArrowTableWriter if table_type == "COPY_ON_WRITE" else MergeOnReadWriter
    batch = pa.Table.from_arrays([pa.array(["d"] if n == "day" else [1]) if n != "_hoodie_record_key"
                                  else pa.array(["x"]) for n in names], names=names)
    before = tree_snapshot(tmp_path / "t")
    t0 = time.monotonic()
    with pytest.raises(SchemaError) as e:
        cls(table, WriteConfig.from_options(FAST_WRITE_OPTIONS)).write(batch)
    print(f"refused in {time.monotonic() - t0:.3f} s")
    assert named in str(e.value) and e.value.remedy
    assert tree_snapshot(tmp_path / "t") == before  # no instant, no rollback, no partition folder


@pytest.mark.parametrize("column, shown", [
    (pa.array([0, 3000000], pa.int32()).cast(pa.date32()), "3000000 days since 1970-01-01"),
    (pa.array([0, -70000000000000000], pa.int64()).cast(pa.timestamp("us")),
     "-70000000000000000 microseconds since 1970-01-01"),
])
def test_a_partition_value_past_year_9999_is_refused_naming_the_column(tmp_path, column, shown):
    """Before: a raw ``OverflowError: date value out of range`` from pyarrow while the
    partition paths were spelled (before the instant: the table was left as it was)."""
    from airflow_hudi_occ.core.errors import InvalidPartitionPathError
    from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, tree_snapshot
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["day"])
    before = tree_snapshot(tmp_path)
    with pytest.raises(InvalidPartitionPathError) as e:
        ArrowTableWriter(table, WriteConfig.from_options(FAST_WRITE_OPTIONS)).write(
            pa.table({"id": ["a", "b"], "day": column}), "upsert")
    assert e.value.column == "day" and e.value.value == shown and f"value {shown}" in str(e.value)
    assert tree_snapshot(tmp_path) == before
