"""Each side rolls back the other's dead writer once its heartbeat expired (issue 30 item 6,
fourth case), under the LAZY failed-writes policy.

Both sides write with the same heartbeat interval (1 s, ours' ``FAST_WRITE_OPTIONS``; why it
must be shared: docs/java-interop.md) and the file-system lock both take (``.hoodie/lock``).

- Java rolls back ours: a writer of ours (a real subprocess) is killed with SIGKILL after its
  data files (``after_all_files``); once its heartbeat expired, Java's ``clean`` with OCC and
  ``hoodie.clean.failed.writes.policy=LAZY`` (Hudi runs the LAZY rollback of failed writes at
  the start of clean) rolls our instant back; then Java upserts again.
- Ours rolls back Java's: a Java upsert is killed (SIGKILL to its JVM) while it waits for the
  commit lock after writing its data file (the test holds ``.hoodie/lock``); once its heartbeat
  expired, our ``rollback_failed_writes`` (LAZY) rolls it back; then Java writes again.

After each rollback every reader (Java, hudi-rs, ours) reads the model, and no file of the
dead instant is left (data files, markers, timeline, heartbeat). Slow (a JVM each).
"""

from __future__ import annotations

import glob
import os
import time

import pytest

from airflow_hudi_occ.core.commit.rollback import rollback_failed_writes
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.crash import run_writer
from airflow_hudi_occ.testing.java_hudi import Read, Service, Write
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key
from tests.interop.java_lock import java_held_at_its_commit, pending_inflight
from tests.interop.rows import batch

pytestmark = pytest.mark.slow

HEARTBEAT_MS = FAST_WRITE_OPTIONS["hoodie.client.heartbeat.interval_in_ms"]
OURS = {**FAST_WRITE_OPTIONS, "hoodie.metadata.enable": "false",
        "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
        "hoodie.clean.failed.writes.policy": "LAZY"}
JAVA = {"hoodie.metadata.enable": "false",
        "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
        "hoodie.clean.failed.writes.policy": "LAZY",
        "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider",
        "hoodie.write.lock.wait_time_ms_between_retry": "200", "hoodie.write.lock.num_retries": "300",
        "hoodie.client.heartbeat.interval_in_ms": HEARTBEAT_MS}
#: interval x tolerable misses (2), and a margin
EXPIRY_S = int(HEARTBEAT_MS) / 1000 * 2 + 1.5


def new_table(path: str) -> dict:
    table = Table.create(path, "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts", version=9)
    ArrowTableWriter(table, WriteConfig.from_options(OURS)).write(
        batch([(i, "a" if i % 2 else "b", 1, "x") for i in range(6)]), "insert")
    return {i: {"id": i, "v": "x"} for i in range(6)}


def pending(path: str) -> list[str]:
    names = os.listdir(os.path.join(path, ".hoodie", "timeline"))
    done = {n.split("_")[0] for n in names if "_" in n and n[:1].isdigit()}
    return sorted({n.split(".")[0] for n in names if n[:1].isdigit() and "_" not in n} - done)


def data_files(path: str, instant: str) -> list[str]:
    return [f for f in glob.glob(os.path.join(path, "*", f"*_{instant}.*"))]


def leftovers(path: str, instant: str) -> list[str]:
    """Every file of ``instant`` still on the table: data files, markers, timeline, heartbeat."""
    hoodie = os.path.join(path, ".hoodie")
    out = data_files(path, instant)
    out += glob.glob(os.path.join(hoodie, ".temp", instant))
    out += [n for n in os.listdir(os.path.join(hoodie, "timeline")) if n.startswith(instant)]
    out += glob.glob(os.path.join(hoodie, ".heartbeat", instant))
    return out


def completed_actions(step) -> list[str]:
    return [c["action"] for c in step.completed]


def test_java_lazy_clean_rolls_back_our_dead_writer(tmp_path, java_hudi):
    path = str(tmp_path / "t")
    expected = new_table(path)
    dead = run_writer(path, OURS, [{"id": 1, "p": "a", "ts": 9, "v": "dead"},
                                   {"id": 100, "p": "b", "ts": 9, "v": "dead"}], crash_at="after_all_files")
    assert dead.killed, dead.stderr[-2000:]
    dead_instant, = pending(path)
    assert data_files(path, dead_instant), "our dead writer left no data file to roll back"
    time.sleep(EXPIRY_S)  # our heartbeat expires (Java judges it by the shared interval)
    t0 = time.monotonic()
    clean, after_rollback, write, final = java_hudi.run(
        Service(path, "clean", options=JAVA), Read(path),
        Write(path, batch([(2, "b", 3, "java")]), operation="upsert", options=JAVA), Read(path))
    print(f"Java clean + read + upsert + read: {time.monotonic() - t0:.1f}s; "
          f"clean's instants: {clean.completed} pending {clean.pending}")
    assert "rollback" in completed_actions(clean), clean.completed  # Java's LAZY rollback ran in clean
    assert leftovers(path, dead_instant) == []
    for read in (after_rollback.rows,):
        assert rows_by_key(read, columns=["id", "v"]) == expected
    assert write.ok
    expected[2] = {"id": 2, "v": "java"}
    for read in (final.rows, hudi_read(path), read_table(Table.open(path))):
        assert rows_by_key(read, columns=["id", "v"]) == expected
    # and ours writes again on top
    ArrowTableWriter(Table.open(path), WriteConfig.from_options(OURS)).write(batch([(3, "a", 4, "ours")]), "upsert")
    expected[3] = {"id": 3, "v": "ours"}
    for read in (java_hudi.read(path), hudi_read(path), read_table(Table.open(path))):
        assert rows_by_key(read, columns=["id", "v"]) == expected


def test_our_lazy_rollback_rolls_back_java_dead_writer(tmp_path, java_hudi):
    path = str(tmp_path / "t")
    expected = new_table(path)
    run = java_hudi.start(Write(path, batch([(3, "a", 2, "dead"), (100, "b", 2, "dead")]), operation="upsert",
                                options=JAVA))
    with java_held_at_its_commit(run, path) as deadline:
        dead_instant, = pending_inflight(path)
        while len(data_files(path, dead_instant)) < 2:  # both file groups written
            assert run.proc.poll() is None, run.log_tail()
            assert time.monotonic() < deadline, f"Java wrote no data file:\n{run.log_tail()}"
            time.sleep(0.02)
        time.sleep(1.0)  # Java is now retrying the lock
        run.kill()
    assert dead_instant in pending(path)
    written = [os.path.relpath(f, path) for f in data_files(path, dead_instant)]
    # its heartbeat is still fresh (it beat under a second ago): ours leaves it alone
    assert rollback_failed_writes(Table.open(path), WriteConfig.from_options(OURS)) == []
    assert data_files(path, dead_instant)
    time.sleep(EXPIRY_S)  # Java's heartbeat expires (ours judges it by the shared interval)
    results = rollback_failed_writes(Table.open(path), WriteConfig.from_options(OURS))
    assert [r.rolled_back for r in results] == [dead_instant], results
    print(f"Java's dead instant {dead_instant}, its files {written}; our rollback: {results}")
    assert leftovers(path, dead_instant) == []
    java_read_after, write, final = java_hudi.run(
        Read(path), Write(path, batch([(4, "b", 3, "java")]), operation="upsert", options=JAVA), Read(path))
    assert rows_by_key(java_read_after.rows, columns=["id", "v"]) == expected
    assert write.ok
    expected[4] = {"id": 4, "v": "java"}
    for read in (final.rows, hudi_read(path), read_table(Table.open(path))):
        assert rows_by_key(read, columns=["id", "v"]) == expected
