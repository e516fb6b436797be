"""Early conflict detection across implementations (issue 30 item 6, third case).

Both sides write DIRECT markers (``.hoodie/.temp/<instant>/<partition>/<fileId>_<token>_<instant>
.parquet.marker.<IOType>``) and keep a heartbeat (``.hoodie/.heartbeat/<instant>``); a writer
with ``hoodie.write.concurrency.early.conflict.detection.enable=true`` checks, before each of
its markers, the markers of the other writers whose heartbeat is alive, by fileId.

- Java stops on our marker: our upsert is paused after its first file group's marker (its
  heartbeat running); Java's upsert of the same file group, with early detection on (Hudi's
  default strategy for direct markers, ``SimpleDirectMarkerBasedDetectionStrategy``), must fail
  with ``HoodieEarlyConflictDetectionException`` before completing; ours then commits.
- Ours stops on Java's: Java's upsert has written its marker and waits for the table lock at
  its commit (the test holds Java's lock file, ``.hoodie/lock``; ours takes a lock file
  elsewhere, so it is not held up); our upsert of the same file group with early detection on
  must fail with ``EarlyConflictError`` before writing a data file; Java then commits.
Slow (two JVMs).
"""

from __future__ import annotations

import glob
import os
import threading
import time

import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import EarlyConflictError
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.java_hudi import Read, Write
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key
from tests.interop.java_lock import java_held_at_its_commit
from tests.interop.rows import batch

pytestmark = pytest.mark.slow

ECD = {"hoodie.write.markers.type": "DIRECT",
       "hoodie.write.concurrency.early.conflict.detection.enable": "true"}
OURS = {**FAST_WRITE_OPTIONS, "hoodie.metadata.enable": "false",
        "hoodie.write.concurrency.mode": "optimistic_concurrency_control", **ECD}
JAVA = {"hoodie.metadata.enable": "false",
        "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
        "hoodie.cleaner.policy.failed.writes": "LAZY",
        "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider",
        "hoodie.write.lock.wait_time_ms_between_retry": "200", "hoodie.write.lock.num_retries": "300",
        # the heartbeat interval ours writes with (FAST_WRITE_OPTIONS): each side judges the
        # other's heartbeat by its own interval, as Hudi does
        "hoodie.client.heartbeat.interval_in_ms": FAST_WRITE_OPTIONS["hoodie.client.heartbeat.interval_in_ms"],
        **ECD}
EARLY_JAVA = "HoodieEarlyConflictDetectionException"


def new_table(path: str) -> Table:
    table = Table.create(path, "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts", version=9)
    ArrowTableWriter(table, WriteConfig.from_options(OURS)).write(
        batch([(i, "a" if i % 2 else "b", 1, "x") for i in range(6)]), "insert")
    return table


def markers(path: str) -> list[str]:
    return glob.glob(os.path.join(path, ".hoodie", ".temp", "*", "*", "*.marker.*"))


def test_java_stops_on_our_marker(tmp_path, java_hudi):
    path = str(tmp_path / "t")
    new_table(path)
    first_partition, paused, release = [], threading.Event(), threading.Event()

    def before_file(tx, partition, file_id):
        if first_partition:  # the first file group's marker exists: hold here
            paused.set()
            assert release.wait(120)
        first_partition.append(partition)

    outcome: dict = {}

    def ours():
        try:
            outcome["result"] = ArrowTableWriter(Table.open(path), WriteConfig.from_options(OURS)).write(
                batch([(1, "a", 2, "ours"), (0, "b", 2, "ours")]), "upsert", before_file=before_file)
        except BaseException as e:  # noqa: BLE001 - reported below
            outcome["error"] = e

    t = threading.Thread(target=ours)
    t.start()
    try:
        assert paused.wait(60), outcome
        ours_markers = markers(path)
        assert len(ours_markers) == 1, ours_markers
        # Java upserts another key of the file group our marker is on
        key = 3 if first_partition[0] == "a" else 2
        java_write, = java_hudi.run(Write(path, batch([(key, first_partition[0], 2, "java")]), operation="upsert",
                                          options=JAVA), check=False)
    finally:
        release.set()
        t.join(120)
    assert not java_write.ok, "Java committed over our live marker"
    assert java_write.error.has(EARLY_JAVA), java_write.error
    assert "error" not in outcome, outcome["error"]
    java_read, = java_hudi.run(Read(path))
    expected = {i: {"id": i, "v": "x"} for i in range(6)}
    expected[0], expected[1] = {"id": 0, "v": "ours"}, {"id": 1, "v": "ours"}
    for read in (java_read.rows, hudi_read(path), read_table(Table.open(path))):
        assert rows_by_key(read, columns=["id", "v"]) == expected


def test_ours_stops_on_java_marker(tmp_path, java_hudi):
    path = str(tmp_path / "t")
    new_table(path)
    ours_options = {**OURS, "hoodie.write.lock.filesystem.path": str(tmp_path / "our-lock")}
    run = java_hudi.start(Write(path, batch([(3, "a", 2, "java")]), operation="upsert", options=JAVA),
                          Read(path), continue_on_error=True)
    with java_held_at_its_commit(run, path) as deadline:
        while not markers(path):
            assert run.proc.poll() is None, run.log_tail()
            assert time.monotonic() < deadline, f"Java wrote no marker:\n{run.log_tail()}"
            time.sleep(0.02)
        java_marker = markers(path)
        with pytest.raises(EarlyConflictError):
            ArrowTableWriter(Table.open(path), WriteConfig.from_options(ours_options)).write(
                batch([(1, "a", 2, "ours")]), "upsert")
    java_write, java_read = run.wait()
    assert java_write.ok, java_write.error
    print(f"Java's marker: {[os.path.relpath(m, path) for m in java_marker]}")
    expected = {i: {"id": i, "v": "x"} for i in range(6)}
    expected[3] = {"id": 3, "v": "java"}
    for read in (java_read.rows, hudi_read(path), read_table(Table.open(path))):
        assert rows_by_key(read, columns=["id", "v"]) == expected
