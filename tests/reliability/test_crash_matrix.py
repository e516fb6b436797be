"""Crash matrix: a writer process SIGKILLed at every step of the commit protocol, per lock provider.

After each crash: the independent reader (hudi-rs) returns exactly the committed rows; the lock
is free (ZooKeeper: the ephemeral node goes with the session; file lock: expires and is taken
over); lazy rollback of failed writes (what the clean service runs) removes every file of the
dead instant; and the next writer, touching the same file groups with early conflict detection
on, commits.

Default run: each point once per provider. ``HUDI_OCC_SLOW=1``: each point ``CRASH_RUNS`` times
per provider, plus one file-lock case that waits out the real one-minute expiry.

Merge-on-read: the same cell with a deltacommit that only updates stored keys (so its files are
log files behind CREATE markers, as Hudi marks them from version 8), at ``MOR_POINTS``; after recovery and the next write a forced
compaction must leave nothing pending and hudi-rs still reading the model. Default run: the
log-file points with the file lock; the rest, and ZooKeeper, with ``HUDI_OCC_SLOW=1``.
"""

from __future__ import annotations

import json
import os
import time

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.concurrency.heartbeat import is_expired
from airflow_hudi_occ.core.concurrency.locks import get_lock_provider
from airflow_hudi_occ.core.concurrency.locks.storage_based import CLOCK_DRIFT_MS
from airflow_hudi_occ.core.commit.rollback import rollback_failed_writes
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.services.compaction import run_compaction
from airflow_hudi_occ.core.table.table import MERGE_ON_READ
from airflow_hudi_occ.testing.crash import (COMMITTED_POINTS, LOCK_HELD_POINTS, MOR_POINTS, POINTS,
                                            run_writer)
from airflow_hudi_occ.testing.tables import SETUP_HEARTBEAT

from .conftest import (ZK_SESSION_MS, all_files, assert_unique_times, files_naming,
                       lock_options, read_rows, wait_until)

CRASH_RUNS = int(os.environ.get("HUDI_OCC_CRASH_RUNS", "5"))

SEED = [{"id": i, "p": f"p{i % 2}", "value": "seed", "ts": 0} for i in range(20)]
CHILD = [{"id": 0, "p": "p0", "value": "child", "ts": 1}, {"id": 1, "p": "p1", "value": "child", "ts": 1},
         {"id": 100, "p": "p0", "value": "child", "ts": 1}]
NEXT = [{"id": 0, "p": "p0", "value": "next", "ts": 2}, {"id": 1, "p": "p1", "value": "next", "ts": 2},
        {"id": 200, "p": "p1", "value": "next", "ts": 2}]
#: a MOR deltacommit of stored keys only: one log file per partition, CREATE markers
MOR_CHILD = [{"id": 0, "p": "p0", "value": "child", "ts": 1}, {"id": 1, "p": "p1", "value": "child", "ts": 1},
             {"id": 2, "p": "p0", "value": "child", "ts": 1}]


def _as_rows(rows):
    return {r["id"]: {"value": r["value"], "p": r["p"]} for r in rows}


def _zk_lock_children(hosts: str, options: dict, table: Table) -> list[str]:
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoNodeError
    path = options["hoodie.write.lock.zookeeper.base_path"].rstrip("/") + "/" + table.name
    c = KazooClient(hosts=hosts)
    c.start(timeout=10)
    try:
        return c.get_children(path)
    except NoNodeError:
        return []
    finally:
        c.stop()
        c.close()


def _writer(table: Table, cfg: WriteConfig) -> ArrowTableWriter:
    return (MergeOnReadWriter if table.config.table_type == MERGE_ON_READ else ArrowTableWriter)(table, cfg)


def crash_and_recover(table: Table, options: dict, point: str, *, zk_hosts: str | None = None,
                      storage_options: dict | None = None, age_file_lock: bool = True) -> dict:
    """One cell of the matrix; returns what happened (for the report)."""
    cfg = WriteConfig.from_options(options)
    mor = table.config.table_type == MERGE_ON_READ
    child_rows = MOR_CHILD if mor else CHILD
    seed_cfg = WriteConfig.from_options({**options, **SETUP_HEARTBEAT})  # the seed is not under test
    _writer(table, seed_cfg).write(pa.Table.from_pylist(SEED))
    before = read_rows(table, storage_options)
    assert before == _as_rows(SEED)

    child = run_writer(table.base_uri, options, child_rows, crash_at=point, storage_options=storage_options,
                       writer_id=f"crash-{point}")
    assert child.killed, f"child did not die at {point}: rc={child.returncode}\n{child.stderr[-3000:]}"
    crash = child.crash
    assert crash and crash["point"] == point and crash["instant"], child.stdout
    instant = crash["instant"]
    committed = point in COMMITTED_POINTS
    if point == "commit_lock_held":
        assert crash["lock_held"] is True
    if mor and point == "after_first_marker":
        assert crash["marker"][1] == "CREATE" and ".log." in crash["marker"][0], crash

    # 1. Readers see exactly the committed rows: the dead write is invisible unless it completed.
    expected = _as_rows(SEED) | (_as_rows(child_rows) if committed else {})
    assert read_rows(table, storage_options) == expected
    tl = table.timeline()
    assert (tl.get(instant) is not None and tl.get(instant).is_completed) == committed

    # 2. The lock is free.
    kind = options["hoodie.write.lock.provider"]
    if kind == "filesystem":
        lock_path = table.storage.path(".hoodie", "lock")
        if point in LOCK_HELD_POINTS:
            doc = json.loads(table.storage.read(lock_path))
            assert doc["pid"] == crash["pid"], doc  # the dead writer's lock is still there
            probe = get_lock_provider(cfg.lock, base_path=table.base_uri, table_name=table.name,
                                      storage=table.storage)
            if age_file_lock:
                # its holder died on this host: provably gone, so taken over at once, whatever
                # the expiry (and the lock file must stay readable for recovery below)
                assert probe.try_acquire(0)
                probe.release()
            else:  # the real thing: a holder on another host can only expire (1 minute here)
                table.storage.write(lock_path, json.dumps({**doc, "host": "another-host"}).encode())
                assert not probe.try_acquire(0)  # it excludes others until it expires
                wait_until(lambda: probe.try_acquire(0), 90, "the dead writer's file lock to expire", 1)
                probe.release()
        else:
            assert not table.storage.exists(lock_path)
    elif kind == "storage":
        check_storage_lease_of_dead_writer(table, cfg, crash, point)
    elif kind == "zookeeper":
        wait_until(lambda: _zk_lock_children(zk_hosts, options, table) == [],
                   3 * ZK_SESSION_MS / 1000 + 5, "the dead writer's ZooKeeper node to vanish")

    # 3. Lazy rollback (the clean service's first step) removes the garbage of a dead write.
    if not committed:
        wait_until(lambda: is_expired(table, instant, cfg.heartbeat), 10, "heartbeat expiry")
    results = rollback_failed_writes(table, cfg)
    if committed:
        assert results == []
        # the commit is visible; its markers (and heartbeat file) are left over
        assert table.storage.exists(table.storage.path(".hoodie", ".temp", instant))
    else:
        assert [r.rolled_back for r in results] == [instant]
        assert files_naming(table, instant) == [], "files of the dead instant survived rollback"
        strays = [f for f in all_files(table) if f.endswith(".tmp")]
        assert strays == [], f"temporary files survived: {strays}"
    assert table.timeline().pending_writes() == []

    # 4. The next writer (same file groups, early conflict detection on) commits.
    _writer(Table.open(table.base_uri, storage_options), cfg).write(pa.Table.from_pylist(NEXT))
    assert read_rows(table, storage_options) == expected | _as_rows(NEXT)
    if mor:  # the next service run: compaction merges every committed log, nothing stays pending
        out = run_compaction(Table.open(table.base_uri, storage_options), options, force=True)
        assert out["executed"] and out["executed"]["log_files_compacted"] >= 2, out
        assert table.timeline().pending() == []
        assert read_rows(table, storage_options) == expected | _as_rows(NEXT)
    assert_unique_times(table)
    return {"point": point, "instant": instant, "committed": committed,
            "rolled_back": [r.rolled_back for r in results]}


def check_storage_lease_of_dead_writer(table: Table, cfg: WriteConfig, crash: dict, point: str) -> None:
    """A SIGKILLed holder's lease keeps excluding others until validUntil (+ the drift buffer),
    then exactly one waiter takes it over; a writer that died without the lock left it free."""
    lease_path = table.storage.path(".hoodie", ".locks", "table_lock.json")
    probe = get_lock_provider(cfg.lock, base_path=table.base_uri, table_name=table.name,
                              storage=table.storage)
    if point in LOCK_HELD_POINTS:
        lease = json.loads(table.storage.read(lease_path))
        assert f":{crash['pid']}:" in lease["owner"] and lease["expired"] is False, lease
        assert not probe.try_acquire(0)  # the dead writer's lease still excludes others ...
        wait_until(lambda: probe.try_acquire(0), cfg.lock.storage_validity_s + 10,
                   "the dead writer's storage lease to run out", 0.5)
        # ... until it runs out, and not before
        assert time.time() * 1000 > lease["validUntil"] + CLOCK_DRIFT_MS
        probe.release()
    elif table.storage.exists(lease_path):
        assert json.loads(table.storage.read(lease_path))["expired"] is True
    probe.close()


def _fresh_table(tmp_path, i=0, storage_options=None, base=None, table_type=None):
    kw = {"table_type": table_type} if table_type else {}
    return Table.create(base or str(tmp_path / f"t{i}"), "crash", record_key_fields=["id"],
                        partition_fields=["p"], precombine_field="ts", storage_options=storage_options,
                        **kw)


@pytest.mark.parametrize("point", POINTS)
def test_crash_point(point, tmp_path, make_options, lock_kind, request):
    hosts = request.getfixturevalue("zk_server").hosts if lock_kind == "zookeeper" else None
    crash_and_recover(_fresh_table(tmp_path), make_options(), point, zk_hosts=hosts)


def test_crash_inprocess_lock(tmp_path):
    """In-process lock: the crash takes the whole process (and its lock) with it."""
    crash_and_recover(_fresh_table(tmp_path), lock_options("inprocess"), "commit_lock_held")


@pytest.mark.slow
@pytest.mark.parametrize("point", POINTS)
def test_crash_point_repeated(point, tmp_path, make_options, lock_kind, request):
    hosts = request.getfixturevalue("zk_server").hosts if lock_kind == "zookeeper" else None
    for i in range(CRASH_RUNS):
        crash_and_recover(_fresh_table(tmp_path, i), make_options(), point, zk_hosts=hosts)


@pytest.mark.slow
def test_file_lock_really_expires(tmp_path):
    """No ageing: a SIGKILLed holder's lock file is taken over after the configured minute."""
    crash_and_recover(_fresh_table(tmp_path), lock_options("filesystem"), "commit_lock_held",
                      age_file_lock=False)


#: the MOR cells of the default run: the log file's marker, the log file itself, the lock held
MOR_DEFAULT = ("after_first_marker", "mid_log_file", "torn_log_file", "after_all_files",
               "commit_lock_held")


@pytest.mark.parametrize("point", MOR_DEFAULT)
def test_mor_crash_point(point, tmp_path):
    crash_and_recover(_fresh_table(tmp_path, table_type=MERGE_ON_READ), lock_options("filesystem"), point)


@pytest.mark.slow
@pytest.mark.parametrize("point", MOR_POINTS)
def test_mor_crash_point_repeated(point, tmp_path, make_options, lock_kind, request):
    hosts = request.getfixturevalue("zk_server").hosts if lock_kind == "zookeeper" else None
    for i in range(CRASH_RUNS):
        crash_and_recover(_fresh_table(tmp_path, i, table_type=MERGE_ON_READ), make_options(), point,
                          zk_hosts=hosts)
