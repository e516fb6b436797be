"""Merge-on-read at table version 9 (Hudi 1.1): created, written, compacted and upgraded from 8.

What version 9 changes for MOR is the properties (``hoodie.table.ordering.fields`` instead of
the precombine field, ``hoodie.table.format=native``); log files are still named with the
deltacommit's own instant, as Java 1.1 names them in a version 9 MOR table (hudi-rs fixture
``sample_table/mor/avro/v9_lance_nonhivestyle``: ``.875d6ca6-...-0_20260503194343537.log.1_0-60-156``
is deltacommit 20260503194343537's log on a base file of 20260503194334929) and in the
metadata table of ``tests/fixtures/java-hudi-tables/v9_txns_simple_overwrite.zip``.
hudi-rs must read exactly the model's rows after every step.
"""

from __future__ import annotations

import os

from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.format.log_file import LogFileName
from airflow_hudi_occ.core.services.compaction import execute_compaction, schedule_compaction
from airflow_hudi_occ.core.table.mor_reader import merge_file_slices, read_snapshot
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key
from tests.core.commit.test_mor_writer import COLS, Model, _batch, check

V9 = {**FAST_WRITE_OPTIONS, "hoodie.write.table.version": "9"}


def _mor(tmp_path, version):
    return Table.create(str(tmp_path / f"v{version}"), f"mor{version}", record_key_fields=["id"],
                        partition_fields=["p"], precombine_field="ts", table_type="MERGE_ON_READ",
                        version=version)


def _steps(t: Table, opts: dict, m: Model):
    w = MergeOnReadWriter(t, WriteConfig.from_options(opts))
    rows = [(i, "ab"[i % 2], 1, f"v{i}") for i in range(8)]
    w.write(_batch(rows), "insert")
    m.upsert(rows)
    check(t, m)
    up = [(1, "b", 2, "u1"), (2, "a", 0, "stale"), (4, "a", 3, "u4")]
    r = w.write(_batch(up), "upsert")
    m.upsert(up)
    check(t, m)
    for fs in merge_file_slices(t):
        assert all(lf.instant_time == r.instant.requested_time for lf in fs.log_files)
    w.write(_batch([(3, "b", 0, "")]), "delete")
    m.delete([3])
    check(t, m)
    c = schedule_compaction(t, opts, force=True)
    execute_compaction(t, opts, c)
    check(t, m)
    after = [(4, "a", 5, "after"), (9, "b", 1, "n9")]
    w.write(_batch(after), "upsert")
    m.upsert(after)
    check(t, m)
    return c


def test_created_written_and_compacted_at_version_9(tmp_path):
    t = _mor(tmp_path, 9)
    props = Table.open(t.base_uri).config
    assert props.get("hoodie.table.version") == "9" and props.get("hoodie.table.type") == "MERGE_ON_READ"
    assert props.get("hoodie.table.ordering.fields") == "ts" and props.get("hoodie.table.precombine.field") is None
    assert props.get("hoodie.table.format") == "native"
    m = Model()
    c = _steps(t, V9, m)
    assert Table.open(t.base_uri).version == 9
    # log names: .<fileId>_<deltacommit>.log.<v>_<token>, as Java 1.1 names them at version 9
    logs = [LogFileName.parse(n) for p in ("a", "b") for n in os.listdir(os.path.join(t.base_uri, p))]
    assert {lf.version for lf in logs if lf} == {1}
    done = {i.requested_time for i in t.timeline().completed() if i.action.value == "deltacommit"}
    assert {lf.instant_time for lf in logs if lf} <= done
    # time travel to the compaction, read by both
    want = rows_by_key(read_snapshot(t, as_of=c), columns=COLS)
    assert rows_by_key(hudi_read(t.base_uri, as_of=c), columns=COLS) == want


def test_version_8_mor_table_upgraded_to_9_by_a_write(tmp_path):
    t = _mor(tmp_path, 8)
    m = Model()
    w = MergeOnReadWriter(t, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    rows = [(i, "ab"[i % 2], 1, f"v{i}") for i in range(6)]
    w.write(_batch(rows), "insert")
    w.write(_batch([(1, "b", 2, "u1")]), "upsert")  # a version 8 log file stays in the slice
    m.upsert(rows)
    m.upsert([(1, "b", 2, "u1")])
    assert Table.open(t.base_uri).version == 8
    up = [(2, "a", 4, "v9write"), (1, "b", 1, "stale")]
    MergeOnReadWriter(Table.open(t.base_uri), WriteConfig.from_options(V9)).write(_batch(up), "upsert")
    m.upsert(up)
    t9 = Table.open(t.base_uri)
    assert t9.version == 9 and t9.config.get("hoodie.table.ordering.fields") == "ts"
    assert t9.config.get("hoodie.table.precombine.field") is None
    check(t9, m)
    c = schedule_compaction(t9, V9, force=True)
    execute_compaction(t9, V9, c)
    check(t9, m)
