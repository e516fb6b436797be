"""Idempotent batches and crash recovery by re-commit (core/recovery.py, WriteTransaction.commit).

Real processes: the racing twins are two spawned OS processes held at a barrier just before
their commits; the crashed writers are child processes that SIGKILL themselves at a named
step (testing/crash.py). The independent hudi-rs reader checks every table.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit import attempt_log

from airflow_hudi_occ.core.commit import recovery, staging
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import CorruptMetadataError
from airflow_hudi_occ.core.concurrency.heartbeat import is_expired
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.format.metadata import EXTRA_BATCH_KEY
from airflow_hudi_occ.core.commit.rollback import rollback_failed_writes
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.commit.transaction import WriteTransaction, find_committed_batch
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.testing.workers import keyed_batch_after_barrier
from airflow_hudi_occ.testing.crash import run_writer
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS

HEARTBEAT_MS = 400  # expiry: 2 misses = 0.8 s

SEED = [{"id": i, "p": f"p{i % 2}", "value": "seed", "ts": 0} for i in range(10)]
BATCH = [{"id": 0, "p": "p0", "value": "batch", "ts": 1}, {"id": 1, "p": "p1", "value": "batch", "ts": 1},
         {"id": 100, "p": "p0", "value": "batch", "ts": 1}]


def options(tmp_path, **extra) -> dict:
    return {**FAST_WRITE_OPTIONS, "hoodie.write.lock.wait_time_ms": "5000",
            "hoodie.client.heartbeat.interval_in_ms": str(HEARTBEAT_MS),
            "hoodie.client.heartbeat.tolerable.misses": "2", **extra}


def new_table(tmp_path, name="t") -> Table:
    return Table.create(str(tmp_path / name), name, record_key_fields=["id"], partition_fields=["p"],
                        precombine_field="ts")


def values(table) -> dict:
    return {k: v["value"] for k, v in rows_by_key(hudi_read(table.base_uri)).items()}


def base_files_of(table, instant) -> dict[str, int]:
    """{relative path: mtime_ns} of the data files an instant wrote."""
    out = {}
    root = table.storage.root
    for d, _, files in os.walk(root):
        if "/.hoodie" in d:
            continue
        for f in files:
            if f.endswith(".parquet") and f"_{instant}." in f:
                p = os.path.join(d, f)
                out[os.path.relpath(p, root)] = os.stat(p).st_mtime_ns
    return out


def wait_expired(table, instant, cfg, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not is_expired(table, instant, cfg.heartbeat):
        assert time.monotonic() < deadline, f"heartbeat of {instant} never expired"
        time.sleep(0.05)


def crash_staged(table, opts, rows, batch_key, point="after_staged", writer_id="dead-writer") -> str:
    child = run_writer(table.base_uri, opts, rows, crash_at=point, batch_key=batch_key,
                       writer_id=writer_id)
    assert child.killed, f"rc={child.returncode}\n{child.stdout}\n{child.stderr[-3000:]}"
    assert child.crash["point"] == point
    return child.crash["instant"]


# -- idempotence -------------------------------------------------------------------------------


def test_rerun_of_committed_batch_writes_nothing(tmp_path):
    table = new_table(tmp_path)
    w = ArrowTableWriter(table, WriteConfig.from_options(options(tmp_path)), writer_id="w")
    first = w.write(pa.Table.from_pylist(BATCH), batch_key="dag/run1/task")
    n = len(table.timeline())
    again = w.write(pa.Table.from_pylist([{**r, "value": "again"} for r in BATCH]),
                    batch_key="dag/run1/task")
    assert (first.outcome, again.outcome) == ("committed", "already_committed")
    assert again.instant.requested_time == first.instant.requested_time
    assert again.attempted_instant is None  # found before anything began
    assert len(table.timeline()) == n  # not even a requested instant
    assert values(table) == {0: "batch", 1: "batch", 100: "batch"}


@pytest.mark.parametrize("lock", ["filesystem", "zookeeper"])
def test_twin_attempts_of_one_batch_racing_commit_exactly_one(tmp_path, lock, request):
    """A zombie task and its retry: both pass the pre-check, write, and reach commit together;
    the check under the lock lets exactly one complete. Inserts of new keys into new file
    groups do not conflict, so without it both would commit and every key would be doubled."""
    table = new_table(tmp_path)
    opts = options(tmp_path, **{"hoodie.write.lock.provider": lock})
    if lock == "zookeeper":
        opts.update({"hoodie.write.lock.zookeeper.url": request.getfixturevalue("zk_server").hosts,
                     "hoodie.write.lock.zookeeper.base_path": f"/recovery-{os.getpid()}-{time.time_ns()}",
                     "hoodie.write.lock.zookeeper.session_timeout_ms": "6000"})
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=keyed_batch_after_barrier,
                         args=(table.base_uri, opts, BATCH, "dag/run/task", barrier, results, f"twin{i}"))
             for i in range(2)]
    for p in procs:
        p.start()
    out = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
    assert all(r["outcome"] != "error" for r in out), out
    out.sort(key=lambda r: r["outcome"])
    lost, won = out
    assert (lost["outcome"], won["outcome"]) == ("already_committed", "committed")
    assert lost["instant"] == won["instant"] == won["began"]
    assert lost["attempted_instant"] == lost["began"] != won["began"]

    tl = table.timeline()
    assert tl.get(lost["began"]) is None  # the losing twin was rolled back ...
    rolled = [i for i in tl.completed() if i.action is Action.ROLLBACK]
    assert len(rolled) == 1
    assert base_files_of(table, lost["began"]) == {}  # ... with its files
    keyed = [i for i in tl.completed_writes()
             if tl.commit_metadata(i).extra_metadata.get(EXTRA_BATCH_KEY) == "dag/run/task"]
    assert [i.requested_time for i in keyed] == [won["instant"]]
    assert values(table) == {0: "batch", 1: "batch", 100: "batch"}  # each key once
    rec = {r.instant: r for r in attempt_log.read_records(table)}[lost["began"]]
    assert rec.error == "BatchAlreadyCommittedError" and won["instant"] in rec.message


# -- re-commit of a staged instant -------------------------------------------------------------


def test_crash_after_staging_is_recommitted_not_rewritten(tmp_path):
    table = new_table(tmp_path)
    opts = options(tmp_path)
    cfg = WriteConfig.from_options(opts)
    ArrowTableWriter(table, cfg).write(pa.Table.from_pylist(SEED))
    dead = crash_staged(table, opts, BATCH, "dag/run/task")
    files = base_files_of(table, dead)
    assert len(files) == 3  # p0: key 0 merged, key 100 in a new group; p1: key 1 merged
    assert staging.read_staged(table, dead).batch_key == "dag/run/task"
    assert values(table) == {r["id"]: "seed" for r in SEED}  # pending: invisible

    wait_expired(table, dead, cfg)
    res = ArrowTableWriter(table, cfg, writer_id="retry").write(
        pa.Table.from_pylist(BATCH), batch_key="dag/run/task", attempt=2)
    assert res.outcome == "recommitted" and res.recovered_from == "dead-writer"
    assert res.instant.requested_time == dead and res.instant.is_completed
    assert base_files_of(table, dead) == files  # same names, not rewritten (mtimes unchanged)
    assert values(table) == {**{r["id"]: "seed" for r in SEED}, 0: "batch", 1: "batch", 100: "batch"}

    tl = table.timeline()
    meta = tl.commit_metadata(tl.get(dead))
    assert meta.extra_metadata[EXTRA_BATCH_KEY] == "dag/run/task"
    assert meta.extra_metadata[staging.EXTRA_RECOVERED_BY] == "retry"
    assert tl.pending() == []
    assert staging.staged_instants(table) == []
    assert not table.storage.exists(table.storage.path(".hoodie", ".temp", dead))  # markers gone
    rec = {r.instant: r for r in attempt_log.read_records(table)}[dead]
    assert (rec.outcome, rec.recovered_from, rec.writer_id) == ("committed", "dead-writer", "retry")
    assert "re-committed" in rec.message
    # ... and the batch is now simply committed
    again = ArrowTableWriter(table, cfg).write(pa.Table.from_pylist(BATCH), batch_key="dag/run/task")
    assert again.outcome == "already_committed" and again.instant.requested_time == dead


def test_staged_instant_of_a_live_writer_is_not_taken_over(tmp_path):
    """Recovery needs a dead writer: a slow one still beating keeps its instant."""
    table = new_table(tmp_path)
    cfg = WriteConfig.from_options(options(tmp_path))
    seen = {}

    def before_commit(tx):  # staging happens inside commit(); stage by hand to pause after it
        seen["t"] = tx.instant_time
        meta = tx.build_metadata([], schema=None)
        staging.stage_commit(table, tx, meta)
        seen["found"] = recovery.find_recoverable(table, "k", cfg)
        tx.stage_commits = False
        tx.staged = staging.read_staged(table, tx.instant_time)

    res = ArrowTableWriter(table, cfg).write(pa.Table.from_pylist(BATCH), batch_key="k",
                                             before_commit=before_commit)
    assert seen["found"] is None  # heartbeat alive
    assert res.outcome == "committed" and res.instant.requested_time == seen["t"]
    assert staging.staged_instants(table) == []  # the committer deletes its staged commit


def test_takeover_conflict_rolls_back_the_staged_instant_and_rewrites(tmp_path):
    table = new_table(tmp_path)
    opts = options(tmp_path)
    cfg = WriteConfig.from_options(opts)
    ArrowTableWriter(table, cfg).write(pa.Table.from_pylist(SEED))
    dead = crash_staged(table, opts, BATCH, "dag/run/task")
    wait_expired(table, dead, cfg)
    # Another writer updates key 0 (the staged instant's file group) and commits meanwhile.
    other = ArrowTableWriter(table, cfg, writer_id="other").write(
        pa.Table.from_pylist([{"id": 0, "p": "p0", "value": "other", "ts": 0}]))

    res = ArrowTableWriter(table, cfg, writer_id="retry").write(
        pa.Table.from_pylist(BATCH), batch_key="dag/run/task", attempt=2)
    assert res.outcome == "committed"  # rewritten ...
    assert res.instant.requested_time > other.instant.requested_time > dead  # ... on a fresh instant
    tl = table.timeline()
    assert tl.get(dead) is None and base_files_of(table, dead) == {}
    assert staging.staged_instants(table) == []
    rec = {r.instant: r for r in attempt_log.read_records(table)}[dead]
    assert rec.outcome == "conflict" and rec.other_instant == other.instant.requested_time
    # the rewrite merged on top of the other writer's commit: ts 1 beats ts 0
    assert values(table) == {**{r["id"]: "seed" for r in SEED}, 0: "batch", 1: "batch", 100: "batch"}


def test_missing_staged_file_rolls_back_and_rewrites(tmp_path):
    table = new_table(tmp_path)
    opts = options(tmp_path)
    cfg = WriteConfig.from_options(opts)
    dead = crash_staged(table, opts, BATCH, "k")
    gone = sorted(base_files_of(table, dead))[0]
    os.unlink(table.storage.path(gone))
    wait_expired(table, dead, cfg)
    res = ArrowTableWriter(table, cfg).write(pa.Table.from_pylist(BATCH), batch_key="k")
    assert res.outcome == "committed" and res.instant.requested_time != dead
    assert table.timeline().get(dead) is None and base_files_of(table, dead) == {}
    rec = {r.instant: r for r in attempt_log.read_records(table)}[dead]
    assert rec.error == "StagedCommitError" and gone in rec.message
    assert values(table) == {0: "batch", 1: "batch", 100: "batch"}


# -- LAZY rollback and staged instants ---------------------------------------------------------


def test_lazy_rollback_leaves_a_staged_instant_alone_for_the_grace_period_only(tmp_path):
    table = new_table(tmp_path)
    opts = options(tmp_path, **{"hoodie.occ.recovery.grace_period_ms": "60000"})
    cfg = WriteConfig.from_options(opts)
    staged = crash_staged(table, opts, BATCH, "k")
    unstaged = crash_staged(table, opts, [{"id": 7, "p": "p1", "value": "x", "ts": 1}], "k2",
                            point="after_all_files")  # died before staging: nothing to recover
    assert staging.staged_instants(table) == [staged]
    wait_expired(table, staged, cfg)
    wait_expired(table, unstaged, cfg)

    now = time.time()
    first = rollback_failed_writes(table, cfg, now=now)
    assert [r.rolled_back for r in first] == [unstaged]  # no grace without a staged commit
    assert table.timeline().get(staged).is_pending
    assert staging.staged_instants(table) == [staged]
    # under the lock too: a direct LAZY-style rollback of it is refused during the grace
    from airflow_hudi_occ.core.commit.rollback import rollback_instant
    skip = rollback_instant(table, staged, cfg, only_if_expired=True, respect_grace=True, now=now)
    assert skip.rollback_instant is None and "grace" in skip.skipped_reason

    later = rollback_failed_writes(table, cfg, now=now + 61)  # nobody came: rolled back
    assert [r.rolled_back for r in later] == [staged]
    assert table.timeline().get(staged) is None and base_files_of(table, staged) == {}
    assert staging.staged_instants(table) == []
    assert values(table) == {}
    # the batch's late retry finds nothing to recover and writes it afresh
    res = ArrowTableWriter(table, cfg).write(pa.Table.from_pylist(BATCH), batch_key="k")
    assert res.outcome == "committed" and values(table) == {0: "batch", 1: "batch", 100: "batch"}


def test_rollback_after_a_takeover_sees_a_live_writer(tmp_path):
    """The takeover beats under the lock: a LAZY rollback (even with no grace) deciding after
    it leaves the instant to its new owner, which completes it."""
    table = new_table(tmp_path)
    opts = options(tmp_path, **{"hoodie.occ.recovery.grace_period_ms": "0"})
    cfg = WriteConfig.from_options(opts)
    dead = crash_staged(table, opts, BATCH, "k")
    wait_expired(table, dead, cfg)
    staged = recovery.find_recoverable(table, "k", cfg)
    assert staged is not None and staged.instant == dead
    tx = WriteTransaction(table, cfg, operation_type=staged.operation_type, writer_id="new-owner",
                          batch_key="k")
    assert tx.take_over(staged)
    assert rollback_failed_writes(table, cfg) == []
    assert table.timeline().get(dead).is_pending
    res = tx.commit_metadata(staged.commit_metadata(), recovered_from=staged.writer_id)
    assert res.instant.requested_time == dead and res.instant.is_completed
    assert find_committed_batch(table, "k").requested_time == dead
    assert values(table) == {0: "batch", 1: "batch", 100: "batch"}


def test_takeover_refused_after_rollback_started(tmp_path):
    """Rollback first, takeover second: the takeover sees the instant gone and changes nothing."""
    table = new_table(tmp_path)
    opts = options(tmp_path, **{"hoodie.occ.recovery.grace_period_ms": "0"})
    cfg = WriteConfig.from_options(opts)
    dead = crash_staged(table, opts, BATCH, "k")
    wait_expired(table, dead, cfg)
    staged = recovery.find_recoverable(table, "k", cfg)
    assert [r.rolled_back for r in rollback_failed_writes(table, cfg)] == [dead]
    tx = WriteTransaction(table, cfg, writer_id="late", batch_key="k")
    assert tx.take_over(staged) is False and tx.heartbeat is None
    assert recovery.find_recoverable(table, "k", cfg) is None


def test_unreadable_staged_commit_is_ignored_and_gets_no_grace(tmp_path):
    table = new_table(tmp_path)
    cfg = WriteConfig.from_options(options(tmp_path))
    tx = WriteTransaction(table, cfg, batch_key="k")
    t = tx.begin()
    tx.start_inflight()
    tx.heartbeat.stop(delete=True)  # the writer is gone: no heartbeat at all
    table.storage.makedirs(table.storage.path(*staging.STAGED_DIR))
    table.storage.write(staging.staged_path(table, t), b'{"instant": "' + t.encode() + b'", "files": [')
    with pytest.raises(CorruptMetadataError) as e:
        staging.read_staged(table, t)
    assert e.value.remedy
    assert recovery.find_recoverable(table, "k", cfg) is None
    assert not staging.in_grace(table, t, cfg)
    assert [r.rolled_back for r in rollback_failed_writes(table, cfg)] == [t]
    assert staging.staged_instants(table) == []
