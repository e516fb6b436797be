"""End to end: ``airflow dags test`` processes (SQLite, real spark-submit, real ZooKeeper lock)
running the example DAGs at the same time against one table, checked with hudi-rs."""

import glob
import os
import signal
import time

import psutil
import pytest

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.format.metadata import EXTRA_BATCH_KEY
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider.examples import expected_table
from airflow_hudi_occ.provider.spark_jobs import APPLICATION_ENV
from airflow_hudi_occ.testing.spark_job import PATH as TEST_JOB
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key

from .conftest import finish

pytestmark = [pytest.mark.zookeeper, pytest.mark.timeout(900)]


def committed_batches(path):
    t = Table.open(path)
    tl = t.timeline()
    return [(i.requested_time, tl.commit_metadata(i).extra_metadata.get(EXTRA_BATCH_KEY))
            for i in tl.completed_by_completion_time() if i.is_write]


def check_table(path, staging):
    files = sorted(glob.glob(os.path.join(staging, "*", "*.parquet")))
    want = expected_table(files)
    got = rows_by_key(hudi_read(path))  # raises on a duplicate key
    assert sorted(got) == sorted(want), "lost or extra keys"
    assert {k: (r["v"], r["ts"]) for k, r in got.items()} == {k: (r["v"], r["ts"]) for k, r in want.items()}
    return got


def test_ingestion_and_backfill_in_parallel_conflict_retry_and_verify(airflow_env, tmp_path):
    # Each writer commits only once both have begun: they provably overlap, and the one that
    # finds the other's markers (early detection, by bucket) may stop before its commit.
    env = {"HUDI_OCC_TEST_COMMIT_BARRIER": f"{tmp_path / 'barrier'}:2:begin", "HUDI_OCC_WRITE_WINDOW": "off",
           "HUDI_OCC_ADMISSION": "off", APPLICATION_ENV: TEST_JOB}
    procs = [airflow_env.dags_test("hudi_occ_backfill", "backfill", env=env),
             airflow_env.dags_test("hudi_occ_ingestion", "ingestion", env=env)]
    logs = [finish(p) for p in procs]
    for p, log in zip(procs, logs):
        assert p.returncode == 0 and "state=success" in log, log[-4000:]
    t = Table.open(airflow_env.table)
    records = list(attempt_log.read_records(t))
    conflicts = [r for r in records if r.outcome == "conflict"]
    commits = [r for r in records if r.outcome == "committed"]
    # Both write the same buckets and overlap: one loses (stopped early, or at its commit),
    # is rolled back, and commits on a later attempt with a fresh instant (a later attempt of
    # the same Airflow try, or of a later try: each try counts its attempts from 1).
    assert len(commits) == 2 and conflicts, [r.to_json() for r in records]

    def order(r):
        return int(r.labels.get("try_number", 0)), r.attempt

    for loser in conflicts:
        retry = next(r for r in commits if r.labels.get("dag_id") == loser.labels.get("dag_id"))
        assert order(retry) > order(loser) and retry.instant > loser.instant
        assert loser.other_instant and loser.file_groups
    assert {r.labels.get("dag_id") for r in records} == {"hudi_occ_backfill", "hudi_occ_ingestion"}
    assert all(set(r.labels) >= {"dag_id", "task_id", "run_id", "try_number", "map_index"} for r in records)
    assert loser.instant not in [i for i, _ in committed_batches(airflow_env.table)]
    check_table(airflow_env.table, airflow_env.staging)


@pytest.mark.slow  # ~2 min: one more dags-test process and Spark job
def test_airflow_retry_of_a_committed_batch_adds_nothing(airflow_env):
    before = committed_batches(airflow_env.table) if os.path.exists(airflow_env.table) else []
    p = airflow_env.dags_test("hudi_occ_test_retry_after_commit", "retry")
    log = finish(p)
    assert p.returncode == 0 and "state=success" in log, log[-4000:]
    assert "simulated crash after commit" in log  # try 1 failed after its commit
    assert "is already committed as instant" in log  # try 2 found it
    after = committed_batches(airflow_env.table)
    new = [b for b in after if b not in before]
    assert len(new) == 1 and new[0][1].startswith("hudi_occ_test_retry_after_commit/"), new
    check_table(airflow_env.table, airflow_env.staging)


def _job_processes(marker):
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(marker in a for a in (p.info["cmdline"] or [])):
                out.append(p)
        except psutil.Error:
            pass
    return out


@pytest.mark.slow  # ~1 min; the default run keeps the deferred write whose cancel kills the driver
def test_killing_a_write_task_leaves_no_spark_process_and_rollback_removes_the_instant(airflow_env, tmp_path):
    hold = tmp_path / "hold"
    p = airflow_env.dags_test("hudi_occ_test_long_write", "long_write",
                              env={"HUDI_OCC_TEST_HOLD": f"{hold}:99"})  # held before its commit
    deadline = time.time() + 400
    while time.time() < deadline and not (hold.exists() and os.listdir(hold)):
        assert p.poll() is None, finish(p)[-4000:]
        time.sleep(0.5)
    assert hold.exists() and os.listdir(hold), "the write never reached its commit"
    instant = os.listdir(hold)[0]
    root = psutil.Process(p.pid)
    tree = root.children(recursive=True)
    assert any("spark_job.py" in " ".join(c.cmdline()) for c in tree if c.is_running())
    t = Table.open(airflow_env.table)
    assert t.timeline().get(instant).is_pending
    p.send_signal(signal.SIGTERM)  # what Airflow's supervisor sends to a task it kills
    log = finish(p, timeout=300)
    assert "killed the Spark process tree" in log, log[-4000:]
    gone, alive = psutil.wait_procs(tree, timeout=10)
    assert not alive, [(a.pid, a.cmdline()) for a in alive]
    assert not _job_processes(str(hold)) and not [q for q in _job_processes("spark_job.py")
                                                   if instant in " ".join(q.cmdline())]
    # The instant is left pending; once its heartbeat expired, the next rollback removes it.
    assert Table.open(airflow_env.table).timeline().get(instant).is_pending
    # A real wait, not now=: the services DAG runs in its own process (airflow dags test) and
    # judges the heartbeat by its own clock; the point is that the real DAG finds it expired.
    time.sleep(3)  # heartbeat interval 1 s x 2 misses
    svc = airflow_env.dags_test("hudi_occ_table_services", "services")
    log = finish(svc)
    assert svc.returncode == 0, log[-4000:]
    t = Table.open(airflow_env.table)
    assert t.timeline().get(instant) is None
    assert not any(instant in f for f in t.storage.walk_files(t.base_uri) if f.endswith(".parquet"))
    check_table(airflow_env.table, airflow_env.staging)


ADMISSION_OPTS = {"hoodie.datasource.write.recordkey.field": "id",
                  "hoodie.datasource.write.partitionpath.field": "p",
                  "hoodie.datasource.write.precombine.field": "ts",
                  "hoodie.write.lock.provider": "filesystem",
                  "hoodie.client.heartbeat.interval_in_ms": "2000"}


def _admission_table(tmp_path, batch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.config import WriteConfig
    path = str(tmp_path / "adm")
    table = Table.create(path, "adm", record_key_fields=["id"], partition_fields=["p"], precombine_field="ts")
    ArrowTableWriter(table, WriteConfig.from_options(ADMISSION_OPTS)).write(
        pa.Table.from_pylist([{"id": i, "p": "ab"[i % 2], "ts": 1, "v": "seed"} for i in range(6)]), "upsert")
    src = str(tmp_path / "batch.parquet")
    pq.write_table(pa.Table.from_pylist(batch), src)
    return table, src


def _wait_in_log(p, text, timeout=400):
    deadline = time.time() + timeout
    while time.time() < deadline:
        p.log.seek(0)
        log = p.log.read()
        if text in log:
            return log
        assert p.poll() is None, log[-4000:]
        time.sleep(0.5)
    raise AssertionError(f"{text!r} never appeared in the task log")


@pytest.mark.slow  # a dags-test process and a spark-submit (~1 min idle); the default run keeps
# the deferrable admission through the real trigger (test_deferrable_operator.py) and the
# spark-submit stopped right after begin (tests/spark/test_job.py)
def test_a_write_waits_for_an_overlapping_live_writer_then_commits_with_a_fresh_instant(airflow_env, tmp_path):
    """Admission through a real ``airflow dags test``: two live writers (core transactions in
    this process, the same file lock) declared partitions b and zz; the DAG's batch writes a
    and b. Before any spark-submit the task waits for the one on b, naming it, its DAG-less
    owner and the partition, and not for the disjoint one; once that writer ends, the write is
    admitted and commits with an instant later than the writer it waited for, while the
    disjoint writer is still live (disjoint writers run at once)."""
    from airflow_hudi_occ.core.commit.transaction import WriteTransaction
    from airflow_hudi_occ.core.config import WriteConfig
    batch = [{"id": i, "p": "ab"[i % 2], "ts": 2, "v": "new"} for i in range(6)]
    table, src = _admission_table(tmp_path, batch)
    cfg = WriteConfig.from_options(ADMISSION_OPTS)
    disjoint = WriteTransaction(table, cfg, footprint=["zz"])
    disjoint.begin()
    overlap = WriteTransaction(table, cfg, footprint=["b"])
    overlap.begin()
    try:
        p = airflow_env.dags_test("hudi_occ_test_admission", "admission", env={
            "HUDI_OCC_ADMISSION_TABLE": table.base_uri, "HUDI_OCC_ADMISSION_SOURCE": src})
        log = _wait_in_log(p, f"waiting for {overlap.instant_time} ({overlap.writer_id}) on partitions b")
        waiting = next(line for line in log.splitlines() if "waiting for" in line)
        assert disjoint.instant_time not in waiting, waiting
        time.sleep(2)  # still waiting: nothing submitted, no instant of its own
        assert {i.requested_time for i in Table.open(table.base_uri).timeline().pending()} == \
            {disjoint.instant_time, overlap.instant_time}
        overlap.abort(reason="the overlapping writer ends")
        log = finish(p)
        assert p.returncode == 0 and "state=success" in log, log[-4000:]
        assert "admitted after waiting" in log and "1 admission wait(s)" in log, log[-4000:]
        tl = Table.open(table.base_uri).timeline()
        assert tl.get(disjoint.instant_time).is_pending  # live all along, never waited for
    finally:
        overlap.abort()
        disjoint.abort()
    [mine] = [i for i in tl.completed_writes() if i.requested_time > overlap.instant_time]
    rec = attempt_log.read_record(Table.open(table.base_uri), mine.requested_time)
    assert rec.outcome == "committed" and rec.labels["dag_id"] == "hudi_occ_test_admission"
    got = rows_by_key(hudi_read(table.base_uri))
    assert {k: r["v"] for k, r in got.items()} == {i: "new" for i in range(6)}
