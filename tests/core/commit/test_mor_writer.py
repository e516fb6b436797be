"""Merge-on-read writes, read back by hudi-rs and by our reader: both must equal the model.

Every table written here is checked after every deltacommit: snapshot (base + logs merged)
and read-optimised (base files only), ours against hudi-rs, and the snapshot against a plain
dict model of the rows.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.format.log_file import LogFileName
from airflow_hudi_occ.core.table.mor_reader import merge_file_slices, read_optimized, read_snapshot
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key

COLS = ["id", "p", "ts", "v"]


def hudi_read_optimized(path: str) -> pa.Table:
    from hudi import HudiReadOptions, HudiTableBuilder
    t = HudiTableBuilder.from_base_uri(os.path.abspath(path)).build()
    batches = t.read(HudiReadOptions().with_hudi_option("hoodie.read.use.read_optimized.mode", "true"))
    return pa.Table.from_batches(batches) if batches else pa.table({})


@pytest.fixture
def mor(tmp_path):
    return Table.create(str(tmp_path / "mor"), "mor", record_key_fields=["id"], partition_fields=["p"],
                        precombine_field="ts", table_type="MERGE_ON_READ")


def _batch(rows):
    return pa.table({"id": [r[0] for r in rows], "p": [r[1] for r in rows],
                     "ts": [r[2] for r in rows], "v": [r[3] for r in rows]})


class Model:
    """The rows a snapshot must show: EVENT_TIME_ORDERING (larger ts wins, ties to the later
    write), deletes remove whatever was written before them."""

    def __init__(self):
        self.rows: dict = {}

    def upsert(self, rows):
        for r in rows:
            old = self.rows.get(r[0])
            if old is None or r[2] >= old["ts"]:
                self.rows[r[0]] = dict(zip(COLS, r))

    def delete(self, ids):
        for i in ids:
            self.rows.pop(i, None)


def check(table: Table, model: Model):
    ours = rows_by_key(read_snapshot(table), columns=COLS)
    theirs = rows_by_key(hudi_read(table.base_uri), columns=COLS)
    assert theirs == model.rows
    assert ours == model.rows
    ro_ours = rows_by_key(read_optimized(table), columns=COLS)
    assert rows_by_key(hudi_read_optimized(table.base_uri), columns=COLS) == ro_ours


def test_open_refuses_nothing_and_properties_say_mor(mor):
    again = Table.open(mor.base_uri)
    assert again.config.table_type == "MERGE_ON_READ"
    from hudi import HudiTableBuilder
    assert HudiTableBuilder.from_base_uri(mor.base_uri).build().is_mor


def test_inserts_upserts_deletes_over_several_deltacommits(mor):
    w = MergeOnReadWriter(mor, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    m = Model()
    first = [(i, "a" if i % 2 else "b", 1, f"v{i}") for i in range(10)]
    w.write(_batch(first), "insert")
    m.upsert(first)
    check(mor, m)
    assert all(not fs.log_files for fs in merge_file_slices(mor))

    up = [(1, "a", 2, "u1"), (2, "b", 5, "u2"), (4, "b", 1, "tie4")]
    r = w.write(_batch(up), "upsert")
    m.upsert(up)
    check(mor, m)
    assert r.instant.action.value == "deltacommit"
    stats = [s for ss in r.metadata.partition_to_write_stats.values() for s in ss]
    assert {s.path.rsplit("/", 1)[1][0] for s in stats} == {"."}  # log files only
    for s in stats:
        lf = LogFileName.parse(s.log_files[0])
        assert lf.instant_time == r.instant.requested_time and s.base_file.endswith(".parquet")
        assert s.prev_commit < r.instant.requested_time

    # an older ordering value loses to the stored one; a mixed batch inserts and updates
    mixed = [(2, "b", 3, "stale"), (3, "a", 9, "u3"), (20, "a", 1, "new20"), (21, "b", 1, "new21")]
    w.write(_batch(mixed), "upsert")
    m.upsert(mixed)
    check(mor, m)

    w.write(_batch([(1, "a", 0, ""), (2, "b", 0, ""), (20, "a", 0, "")]), "delete")
    m.delete([1, 2, 20])
    check(mor, m)

    # a deleted key comes back with a later write
    back = [(1, "a", 1, "again"), (5, "a", 7, "u5")]
    w.write(_batch(back), "upsert")
    m.upsert(back)
    check(mor, m)
    assert max(len(fs.log_files) for fs in merge_file_slices(mor)) == 4


def test_failed_deltacommit_leaves_nothing_visible(mor):
    w = MergeOnReadWriter(mor, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    m = Model()
    rows = [(i, "a", 1, f"v{i}") for i in range(5)]
    w.write(_batch(rows), "insert")
    m.upsert(rows)

    def boom(tx):
        raise RuntimeError("crash before commit")

    with pytest.raises(RuntimeError):
        w.write(_batch([(1, "a", 9, "lost")]), "upsert", before_commit=boom)
    check(mor, m)
    part = os.path.join(mor.base_uri, "a")
    assert not [n for n in os.listdir(part) if LogFileName.parse(n)]  # rolled back from its marker


def test_unsupported_operations_are_refused(mor, table):
    w = MergeOnReadWriter(mor, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    with pytest.raises(ConfigError):
        w.write(_batch([(1, "a", 1, "x")]), "insert_overwrite")
    with pytest.raises(ConfigError):
        MergeOnReadWriter(table)


@pytest.mark.parametrize("strategy", ["simple", "transactional"])
def test_early_conflict_detection_stops_the_second_deltacommit_at_its_append_marker(mor, strategy):
    """RFC-56 on merge-on-read: writer B appends to a file group whose log writer A has marked
    (APPEND marker, A alive and not yet committed). B stops at its own marker, before writing
    its log file; A commits; the table holds A's rows and nothing of B."""
    from airflow_hudi_occ.core.errors import EarlyConflictError
    from airflow_hudi_occ.core.table.mor_reader import list_log_files
    opts = {**FAST_WRITE_OPTIONS, "hoodie.write.concurrency.early.conflict.detection.enable": "true",
            "hoodie.write.concurrency.early.conflict.detection.strategy": strategy}
    seed = _batch([(1, "a", 1, "seed"), (2, "a", 1, "seed")])
    MergeOnReadWriter(mor, WriteConfig.from_options(opts), writer_id="seed").write(seed, "insert")
    a = MergeOnReadWriter(mor, WriteConfig.from_options(opts), writer_id="A")
    b = MergeOnReadWriter(mor, WriteConfig.from_options(opts), writer_id="B")
    seen = {}

    def b_runs_while_a_is_open(tx):
        with pytest.raises(EarlyConflictError) as e:
            b.write(_batch([(2, "a", 5, "B")]), "upsert")
        seen["error"] = e.value
        # on disk, committed or not
        seen["b_logs"] = [lf for lf in list_log_files(mor, "a") if lf.instant_time == e.value.instant]

    a.write(_batch([(1, "a", 2, "A")]), "upsert", before_commit=b_runs_while_a_is_open)
    assert seen["b_logs"] == []  # B stopped before its log file existed
    err = seen["error"]
    assert err.other_action == "deltacommit" and err.file_groups and err.other_instant != err.instant
    assert not [i for i in mor.timeline().pending()]  # B's instant rolled back
    want = {1: {"id": 1, "p": "a", "ts": 2, "v": "A"}, 2: {"id": 2, "p": "a", "ts": 1, "v": "seed"}}
    got = {k: {c: r[c] for c in COLS} for k, r in rows_by_key(hudi_read(mor.base_uri), "id").items()}
    assert got == want


@pytest.mark.parametrize("operation", ["insert", "upsert"])
def test_a_date_past_year_9999_is_refused_before_the_deltacommit(mor, operation, tmp_path):
    """Before: the first deltacommit (a base file) took it, the next upsert (a log block,
    whose records go through Python's ``date``) failed with a raw ``OverflowError`` after its
    instant existed, leaving a rollback and an attempt record. A copy-on-write table keeps it
    (parquet holds the integer) and hudi-rs reads it back."""
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.format.schema import SchemaError
    from airflow_hudi_occ.testing.tables import tree_snapshot
    far = pa.array([3000000], pa.int32()).cast(pa.date32())
    w = MergeOnReadWriter(mor, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    w.write(pa.table({"id": ["a"], "p": ["d"], "ts": [1], "d": pa.array([0], pa.int32()).cast(pa.date32())}), "insert")
    before = tree_snapshot(tmp_path)
    with pytest.raises(SchemaError) as e:
        w.write(pa.table({"id": ["a"], "p": ["d"], "ts": [2], "d": far}), operation)
    assert e.value.columns == ["d"] and "3000000 days since 1970-01-01" in str(e.value)
    assert "copy-on-write" in e.value.remedy
    assert tree_snapshot(tmp_path) == before
    # a delete carries keys only: the far value does not matter
    w.write(pa.table({"id": ["a"], "p": ["d"], "ts": [3], "d": far}), "delete")
    assert hudi_read(mor.base_uri).num_rows == 0
    cow = Table.create(str(tmp_path / "cow"), "cow", record_key_fields=["id"], partition_fields=["p"],
                       precombine_field="ts")
    for ts in (1, 2):
        ArrowTableWriter(cow, WriteConfig.from_options(FAST_WRITE_OPTIONS)).write(
            pa.table({"id": ["a"], "p": ["d"], "ts": [ts], "d": far}), "upsert")
    assert hudi_read(cow.base_uri).column("d").cast(pa.int32()).to_pylist() == [3000000]
