"""Our merge-on-read readers list files through the metadata table Java wrote
(core/table/file_listing.py), on tables Java Hudi 1.2 writes at its defaults (metadata table
on: files, column_stats, partition_stats): snapshot, read-optimised, time travel and
incremental reads through it equal the same reads through a storage listing and Java's own
snapshot, no partition folder is listed, and the log files of a deltacommit whose data instant
did not complete are not read. Version 9 in the default run, version 8 slow.
(Copy-on-write: tests/core/table/test_file_listing.py on the Java v9 fixture.)"""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.table.file_listing import SOURCE_METADATA_TABLE
from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.core.table.metadata_listing import read_metadata_listing
from airflow_hudi_occ.core.table.mor_reader import read_incremental, read_optimized, read_snapshot
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.java_hudi import Read, Write
from airflow_hudi_occ.testing.tables import ListCalls
from tests.core.table.test_file_listing import STORAGE

KEYS = dict(record_key="id", partition_fields="p", ordering_field="ts", table_name="t")


def batch(rows: list[tuple]) -> pa.Table:
    return pa.table({"id": pa.array([r[0] for r in rows], pa.int64()),
                     "p": pa.array([r[1] for r in rows], pa.string()),
                     "ts": pa.array([r[2] for r in rows], pa.int64()),
                     "v": pa.array([r[3] for r in rows], pa.string())})


def rows(t: pa.Table) -> list[tuple]:
    if t.num_rows == 0:
        return []
    return sorted((r["id"], r["p"], r["ts"], r["v"]) for r in t.select(["id", "p", "ts", "v"]).to_pylist())


@pytest.mark.parametrize("version", [9, pytest.param(8, marks=pytest.mark.slow)])
def test_our_mor_reads_through_javas_metadata_table_equal_reads_through_the_storage(
        tmp_path, java_hudi, version, monkeypatch):
    path = str(tmp_path / f"mor_v{version}")
    insert = [(i, f"p{i % 3}", 1, f"v{i}") for i in range(12)]
    upsert = [(i, f"p{i % 3}", 2, f"u{i}") for i in range(0, 12, 2)]
    later = [(i, f"p{i % 3}", 3, f"w{i}") for i in (1, 4, 12)]
    first = dict(table_type="MERGE_ON_READ", table_version=version, **KEYS)
    results = java_hudi.run(Write(path, batch(insert), operation="insert", **first),
                            Write(path, batch(upsert), **KEYS), Write(path, batch(later), **KEYS), Read(path))
    times = [r.instant for r in results[:3]]
    java_rows = rows(results[3].rows)
    table = Table.open(path)
    assert "files" in (table.config.get("hoodie.table.metadata.partitions") or "").split(",")
    assert FileSystemView(table).listing.source == SOURCE_METADATA_TABLE
    assert any(".log." in n for files in read_metadata_listing(table).files.values() for n in files)

    calls = ListCalls(monkeypatch)
    reads = {
        "snapshot": lambda o: read_snapshot(table, options=o),
        "read_optimized": lambda o: read_optimized(table, options=o),
        "time_travel": lambda o: read_snapshot(table, as_of=times[1], options=o),
        "incremental": lambda o: read_incremental(table, start=results[0].completion_time, options=o),
    }
    for name, read in reads.items():
        calls.clear()
        through_mdt = rows(read(None))
        assert calls.of_data(table) == [], name  # the metadata table was used
        assert through_mdt == rows(read(STORAGE)), name
        assert through_mdt, name
    assert rows(read_snapshot(table)) == java_rows

    # the last deltacommit completed on the metadata table but not on the data table (a writer
    # killed in between): its log files are not named, and every read is as before it
    timeline = table.timeline()
    last = timeline.get(times[2])
    table.storage.delete(timeline.file_path(last))
    table = Table.open(path)
    view = FileSystemView(table)
    named = {n for p in view.partitions() for n in view.listing.names(p)}
    assert not [n for n in named if f"_{times[2]}." in n]
    storage_view = FileSystemView(table, metadata_enable=False)
    assert [n for p in storage_view.partitions() for n in storage_view.listing.names(p) if f"_{times[2]}." in n]
    before_last = rows(read_snapshot(table, as_of=times[1]))
    assert rows(read_snapshot(table)) == rows(read_snapshot(table, options=STORAGE)) == before_last
