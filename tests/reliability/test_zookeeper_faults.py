"""Lock faults with the real ZooKeeper server: outages and session expiry.

- Inside the commit, with the lock held, the session is expired (as a long partition would):
  another process takes the lock and commits the same file group; the first writer must not
  complete (LockLostError), and its retry commits once the lock is free.
- Inside the commit, with the lock held, the server stops: the writer cannot prove it holds the
  lock and must not complete; after the restart a retry commits.
- Writer processes run while the server is stopped and restarted mid-run: every batch still
  commits exactly once and the history is serializable.
"""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit import transaction
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import LockLostError
from airflow_hudi_occ.core.commit.rollback import rollback_failed_writes
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.concurrency.locks import table_lock_manager
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.testing.crash import run_writer
from airflow_hudi_occ.testing.zookeeper import ZooKeeperServer, expire_session

from .conftest import assert_unique_times, lock_options, read_rows, wait_until
from .history import check_history, seed_rows, start_workers, wait_workers, write_figures
from .test_stress import BUCKETS

pytestmark = pytest.mark.zookeeper

SEED = [{"id": i, "p": "p0", "value": "seed", "ts": 0} for i in range(10)]


@pytest.fixture
def own_zk(tmp_path):
    """A server of this test's own, so stopping it disturbs no other test."""
    server = ZooKeeperServer(tmp_path / "zk", tick_time_ms=200)
    server.start()
    yield server
    server.stop()


def _seeded(tmp_path, options):
    table = Table.create(str(tmp_path / "tbl"), "zkf", record_key_fields=["id"],
                         partition_fields=["p"], precombine_field="ts")
    ArrowTableWriter(table, WriteConfig.from_options(options)).write(pa.Table.from_pylist(SEED))
    return table


def _inside_commit(monkeypatch, action):
    """Run ``action()`` once, inside commit() with the table lock held (before conflict checks).
    Patched where commit() looks the name up: the transaction module imports it at its top."""
    orig = transaction.resolve_write_conflicts
    done = []

    def wrapped(*a, **kw):
        if not done:
            done.append(True)
            action()
        return orig(*a, **kw)
    monkeypatch.setattr(transaction, "resolve_write_conflicts", wrapped)
    return done


def test_session_expiry_while_holding_the_lock(tmp_path, zk_server, monkeypatch):
    # early detection off: the other writer must reach its commit while we are still pending
    options = lock_options("zookeeper", zk_server.hosts,
                           **{"hoodie.write.concurrency.early.conflict.detection.enable": "false"})
    table = _seeded(tmp_path, options)
    cfg = WriteConfig.from_options(options)
    lm = table_lock_manager(table, cfg)
    other = {}

    def partition_and_race():
        assert lm.is_held()
        expire_session(lm.provider.client, zk_server.hosts)  # returns once we saw LOST
        other["child"] = run_writer(table.base_uri, options,
                                    [{"id": 1, "p": "p0", "value": "other", "ts": 1}])
    fired = _inside_commit(monkeypatch, partition_and_race)

    w = ArrowTableWriter(table, cfg, lock_manager=lm)
    with pytest.raises(LockLostError):
        w.write(pa.Table.from_pylist([{"id": 1, "p": "p0", "value": "expired", "ts": 2}]))
    assert fired
    child = other["child"]
    assert child.returncode == 0 and child.result["outcome"] == "committed", child.stderr[-2000:]
    # The other writer got the lock while we "held" it, and only its commit completed.
    rows = read_rows(table)
    assert rows[1]["value"] == "other"
    assert [i.requested_time for i in table.timeline().completed_writes()][-1] == child.result["instant"]
    # Recovery: the same lock manager (new session) commits the retry.
    monkeypatch.undo()
    rollback_failed_writes(table, cfg, lock_manager=lm)
    ArrowTableWriter(table, cfg, lock_manager=lm).write(
        pa.Table.from_pylist([{"id": 1, "p": "p0", "value": "retry", "ts": 3}]))
    assert read_rows(table)[1]["value"] == "retry"
    assert table.timeline().pending_writes() == []
    assert_unique_times(table)
    lm.close()


def test_server_stops_while_holding_the_lock(tmp_path, own_zk, monkeypatch):
    options = lock_options("zookeeper", own_zk.hosts)
    table = _seeded(tmp_path, options)
    cfg = WriteConfig.from_options(options)
    lm = table_lock_manager(table, cfg)

    def outage():
        assert lm.is_held()
        own_zk.stop()
        wait_until(lambda: not lm.is_held(), 10, "the client to notice the outage")
        # the server returns a little later, while the writer is failing its commit
        threading.Timer(1.0, own_zk.start).start()
    _inside_commit(monkeypatch, outage)
    with pytest.raises(LockLostError):
        ArrowTableWriter(table, cfg, lock_manager=lm).write(
            pa.Table.from_pylist([{"id": 2, "p": "p0", "value": "outage", "ts": 1}]))
    assert read_rows(table) == {i: {"value": "seed", "p": "p0"} for i in range(10)}
    wait_until(own_zk.is_ok, 30, "the server to come back")
    monkeypatch.undo()
    ArrowTableWriter(table, cfg, lock_manager=lm).write(
        pa.Table.from_pylist([{"id": 2, "p": "p0", "value": "after", "ts": 2}]))
    assert read_rows(table)[2]["value"] == "after"
    rollback_failed_writes(table, cfg, lock_manager=lm)
    assert table.timeline().pending_writes() == []
    assert_unique_times(table)
    lm.close()


@pytest.mark.parametrize("n_workers,n_tx", [pytest.param(3, 8),
                                            pytest.param(8, 20, marks=pytest.mark.slow)])
def test_writers_survive_server_restart(tmp_path, own_zk, n_workers, n_tx):
    options = lock_options("zookeeper", own_zk.hosts, **BUCKETS)
    table = Table.create(str(tmp_path / "tbl"), "zkr", record_key_fields=["id"],
                         partition_fields=["p"], precombine_field="ts")
    seed = seed_rows()
    ArrowTableWriter(table, WriteConfig.from_options(options)).write(pa.Table.from_pylist(seed))
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    procs = start_workers(table, options, n_workers, n_tx, log_dir, retry_lock_errors=True, seed=7)
    # Stop the server once a few commits are in, keep it down past the session timeout.
    wait_until(lambda: len(table.timeline().completed_writes()) >= 4, 120, "first commits")
    own_zk.stop()
    stopped_at = len(table.timeline().completed_writes())
    time.sleep(3)
    assert len(table.timeline().completed_writes()) == stopped_at, "a commit completed without ZooKeeper"
    own_zk.start()
    outs = wait_workers(procs)
    # Leftovers of attempts cut off by the outage are dead writes: lazy rollback removes them.
    cfg = WriteConfig.from_options(options)
    # every worker has exited: judge the leftovers' heartbeats as of just past expiry
    rollback_failed_writes(table, cfg, now=time.time() + cfg.heartbeat.expiry_ms / 1000 + 0.2)
    assert table.timeline().pending_writes() == []
    figures = check_history(table, procs, str(tmp_path / "replay"), seed=seed)
    assert figures["transactions"] == n_workers * n_tx
    write_figures("zk-restart", {"writers": n_workers, "tx_per_writer": n_tx,
                                 "lock_errors": sum(o["lock_errors"] for o in outs), **figures})
