"""HudiJavaWriteOperator for real: ``airflow dags test`` processes running a user's unmodified
Java Hudi job (Hudi 1.2.0's Spark 3.5 bundle, ``scripts/install-java-hudi.sh``) under the
real ZooKeeper lock, read back with hudi-rs.

The overlap is made certain, not hoped for: the first writer's job holds every row in a
Python UDF (after Hudi began its instant) until the test opens a gate, and the test opens it
only once the second writer's DAG run has committed. The first writer then loses by Hudi's
own rule at its commit, and the operator retries it on a fresh instant."""

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.commit.retry import RetryPolicy
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.format.metadata import EXTRA_BATCH_KEY, EXTRA_WRITER_ID
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key

from ..conftest import finish

pytestmark = [pytest.mark.zookeeper, pytest.mark.timeout(900)]

JOB = Path(__file__).resolve().parents[1] / "java_jobs" / "write_rows.py"
BASE_ROWS = [[i, "a", 1, "base"] for i in range(4)]
SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.string())])


@pytest.fixture
def java_setup():
    """What scripts/install-java-hudi.sh installed. A machine without it fails here, naming the
    script (JavaHudiNotInstalledError): these tests never skip."""
    from airflow_hudi_occ.testing.java_hudi import JavaHudiSetup
    return JavaHudiSetup.load()


def java_env(airflow_env, setup, table: str, name: str) -> dict:
    """The table connection both engines write through: ZooKeeper lock (the session's server,
    a lock key of this test's own), no metadata table, the Java set-up in its ``java`` extra."""
    conn = {"conn_type": "hudi_occ", "extra": {
        "lock_provider": "zookeeper", "zookeeper_conn_id": "hudi_zookeeper_default",
        "options": {"hoodie.metadata.enable": "false",
                    "hoodie.write.lock.zookeeper.lock_key": f"java-{name}",
                    "hoodie.datasource.write.recordkey.field": "id",
                    "hoodie.datasource.write.partitionpath.field": "p",
                    "hoodie.datasource.write.precombine.field": "ts"},
        "java": {"spark_submit": setup.spark_submit, "spark_home": setup.spark_home,
                 "python": setup.python, "bundle": setup.hudi_jar}}}
    return {"AIRFLOW_CONN_HUDI_OCC_JAVA": json.dumps(conn), "HUDI_OCC_JAVA_TABLE": table,
            "HUDI_OCC_JAVA_JOB": str(JOB), "HUDI_OCC_WRITE_WINDOW": "off"}


def wait_for(path: Path, proc, what: str, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None, f"the run ended before {what}:\n{finish(proc)[-4000:]}"
        assert time.monotonic() < deadline, f"no {what} within {timeout_s} s"
        time.sleep(0.2)


def java_run(airflow_env, env, rows, date, log_name, gate: Path | None = None):
    return airflow_env.dags_test("hudi_occ_test_java_write", log_name, logical_date=date, env={
        **env, "HUDI_OCC_JAVA_ROWS": json.dumps(rows), **({"HUDI_OCC_JAVA_GATE": str(gate)} if gate else {})})


def commits(path: str) -> list[dict]:
    tl = Table.open(path).timeline()
    return [{"instant": i.requested_time, **tl.commit_metadata(i).extra_metadata}
            for i in tl.completed_by_completion_time() if i.is_write]


def held_writer_loses_and_retries(airflow_env, tmp_path, setup, name, start_winner):
    """The shared script: a base commit (ours), writer A held inside its instant, the winner
    started by ``start_winner(env)`` and committed, then A released: A must conflict on id 1's
    file group, retry on a fresh instant and commit. Returns (env, table, A's log, winner's log)."""
    table = str(tmp_path / "t")
    env = java_env(airflow_env, setup, table, name)
    # the base commit by our core writer (a second of work, not a third Spark job)
    t = Table.create(table, "orders", record_key_fields=["id"], partition_fields=["p"],
                     precombine_field="ts", version=9)
    ArrowTableWriter(t, WriteConfig.from_options({"hoodie.metadata.enable": "false"})).write(
        pa.Table.from_pylist([dict(zip(("id", "p", "ts", "v"), r)) for r in BASE_ROWS],
                             schema=SCHEMA), "insert")

    gate = tmp_path / "gate"
    a = java_run(airflow_env, env, [[1, "a", 2, "A"]], "2024-01-02", f"{name}-A", gate=gate)
    wait_for(Path(str(gate) + ".waiting"), a, "writer A inside its instant")
    winner = start_winner(env)
    win_log = finish(winner)
    gate.touch()
    a_log = finish(a)
    assert winner.returncode == 0 and "state=success" in win_log, win_log[-4000:]
    assert a.returncode == 0 and "state=success" in a_log, a_log[-4000:]
    return env, table, a_log, win_log


def check_a_lost_then_committed(table: str, a_log: str, winner_instant: str) -> None:
    assert ("HoodieWriteConflictException" in a_log or "HoodieEarlyConflictDetectionException" in a_log) and "retrying with a fresh instant" in a_log, a_log[-4000:]
    done = commits(table)
    a_commits = [c for c in done if "hudi_occ_test_java_write" in c.get(EXTRA_WRITER_ID, "")
                 and c.get(EXTRA_BATCH_KEY) == "java/2024-01-02"]
    assert len(a_commits) == 1 and a_commits[0][EXTRA_WRITER_ID].endswith(":attempt2"), done
    assert a_commits[0]["instant"] > winner_instant
    records = {r.instant: r for r in attempt_log.read_records(Table.open(table))}
    lost = [r for r in records.values() if r.outcome == "conflict"]
    assert len(lost) == 1 and lost[0].other_instant == winner_instant, [r.to_json() for r in records.values()]
    assert lost[0].labels["dag_id"] == "hudi_occ_test_java_write" and lost[0].labels["engine"] == "java"
    assert lost[0].instant not in [c["instant"] for c in done]
    assert records[a_commits[0]["instant"]].outcome == "committed"


@pytest.mark.slow  # two airflow dags test processes and three Java jobs: minutes
@pytest.mark.timeout(2400)  # 15 min measured on a machine at load 30-40
def test_two_java_dag_runs_on_one_key_one_conflicts_and_retries_on_a_fresh_instant(airflow_env, tmp_path,
                                                                                   java_setup):
    def start_b(env):
        return java_run(airflow_env, env, [[1, "a", 3, "B"], [5, "b", 1, "B"]], "2024-01-03", "java-B")

    env, table, a_log, b_log = held_writer_loses_and_retries(airflow_env, tmp_path, java_setup, "jj", start_b)
    b_instant = next(c["instant"] for c in commits(table) if c.get(EXTRA_BATCH_KEY) == "java/2024-01-03")
    check_a_lost_then_committed(table, a_log, b_instant)
    # upsert by ordering field: A's retry (ts 2) does not replace B's row (ts 3)
    got = rows_by_key(hudi_read(table))
    assert {k: (r["v"], r["ts"]) for k, r in got.items()} == {
        0: ("base", 1), 1: ("B", 3), 2: ("base", 1), 3: ("base", 1), 5: ("B", 1)}

    # the batch of B is committed: its DAG run again writes nothing, and says so
    again = java_run(airflow_env, env, [[1, "a", 9, "again"]], "2024-01-03", "java-B-again")
    log = finish(again)
    assert again.returncode == 0 and "is already committed as instant " + b_instant in log, log[-4000:]
    assert rows_by_key(hudi_read(table))[1]["v"] == "B"


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_java_writer_loses_to_our_engine_and_retries(airflow_env, tmp_path, java_setup):
    source = tmp_path / "ours.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 6], pa.int64()), "p": ["a", "b"],
                             "ts": pa.array([3, 1], pa.int64()), "v": ["ours", "ours"]}), source)

    def start_ours(env):
        return airflow_env.dags_test("hudi_occ_test_ours_write", "mixed-ours", logical_date="2024-01-03",
                                     env={**env, "HUDI_OCC_OURS_SOURCE": str(source)})

    env, table, a_log, _ = held_writer_loses_and_retries(airflow_env, tmp_path, java_setup, "mix", start_ours)
    ours_instant = next(c["instant"] for c in commits(table) if c.get(EXTRA_BATCH_KEY) == "ours/2024-01-03")
    check_a_lost_then_committed(table, a_log, ours_instant)
    got = rows_by_key(hudi_read(table))
    assert {k: (r["v"], r["ts"]) for k, r in got.items()} == {
        0: ("base", 1), 1: ("ours", 3), 2: ("base", 1), 3: ("base", 1), 6: ("ours", 1)}


class StubTI:
    """The Airflow runtime is the seam of the in-process slice (the DAG runs above are the
    proof through Airflow); the Java job, the lock, the table and the conflict are real."""

    dag_id, task_id, run_id, try_number, map_index = "java_ingest", "java_upsert", "manual__1", 1, -1

    def __init__(self):
        self.xcom = {}

    def xcom_push(self, key, value):
        self.xcom[key] = value


def test_operator_in_process_java_loses_to_our_core_writer_retries_and_commits(tmp_path, java_setup,
                                                                             zk_server, monkeypatch):
    """The default run's slice: one task's Java job held inside its instant while our core
    writer commits the same key under the same ZooKeeper lock; the Java attempt conflicts, the
    operator retries it on a fresh instant, and the rows read by hudi-rs are exact."""
    import threading

    from airflow_hudi_occ.provider.operators.java_write import HudiJavaWriteOperator
    from airflow_hudi_occ.provider.task_keys import XCOM_ATTEMPTS

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", '{"conn_type": "spark", "host": "local[1]"}')
    path = str(tmp_path / "t")
    lock = {"hoodie.write.lock.provider": "zookeeper", "hoodie.write.lock.zookeeper.url": zk_server.hosts,
            "hoodie.write.lock.zookeeper.port": str(zk_server.port),
            "hoodie.write.lock.zookeeper.base_path": "/hudi/locks",
            "hoodie.write.lock.zookeeper.lock_key": "java-in-process", "hoodie.metadata.enable": "false",
            "hoodie.write.concurrency.mode": "optimistic_concurrency_control"}
    t = Table.create(path, "orders", record_key_fields=["id"], partition_fields=["p"],
                     precombine_field="ts", version=9)
    ours = ArrowTableWriter(t, WriteConfig.from_options(lock))
    ours.write(pa.Table.from_pylist([dict(zip(("id", "p", "ts", "v"), r)) for r in BASE_ROWS], schema=SCHEMA),
               "insert")
    gate = tmp_path / "gate"
    # the operator gets the ZooKeeper ensemble from its connection (host without the port:
    # the port field, which Java would ignore, goes into Java's url), the rest as options
    monkeypatch.setenv("AIRFLOW_CONN_HUDI_ZOOKEEPER_DEFAULT", json.dumps({
        "conn_type": "hudi_zookeeper", "host": zk_server.hosts.rsplit(":", 1)[0], "port": zk_server.port,
        "schema": "/hudi/locks"}))
    op = HudiJavaWriteOperator(
        task_id="java_upsert", application=str(JOB), table_path=path, hudi_conn_id=None,
        application_args=[path, json.dumps([[1, "a", 2, "java"]]), "--gate", str(gate)],
        options={k: v for k, v in lock.items() if k not in ("hoodie.write.lock.zookeeper.url",
                                                             "hoodie.write.lock.zookeeper.port")}, spark_conn_id="spark_local", spark_submit=java_setup.spark_submit,
        spark_home=java_setup.spark_home, python=java_setup.python, hudi_bundle=java_setup.hudi_jar,
        batch_key="java/b1", conflict_retries=RetryPolicy(max_conflict_retries=2, base_delay_s=0.1, max_delay_s=0.5),
        write_windows=None)
    ti = StubTI()
    out: dict = {}
    th = threading.Thread(target=lambda: out.update(result=op.execute({"ti": ti})), daemon=True)
    th.start()
    deadline = time.monotonic() + 600
    while not Path(str(gate) + ".waiting").exists():
        assert th.is_alive() and time.monotonic() < deadline, "the Java job never reached its rows"
        time.sleep(0.2)
    won = ArrowTableWriter(Table.open(path), WriteConfig.from_options(lock)).write(
        pa.Table.from_pylist([{"id": 1, "p": "a", "ts": 3, "v": "ours"}], schema=SCHEMA), "upsert")
    gate.touch()
    th.join(timeout=400)
    assert not th.is_alive() and out.get("result"), ti.xcom
    attempts = ti.xcom[XCOM_ATTEMPTS]
    assert [a["outcome"] for a in attempts] == ["conflict", "committed"], attempts
    assert attempts[0]["other_instant"] == won.instant.requested_time
    assert attempts[1]["instant"] > won.instant.requested_time == attempts[0]["other_instant"]
    assert out["result"]["outcome"] == "committed" and out["result"]["batch_key"] == "java/b1"
    rec = attempt_log.read_record(Table.open(path), attempts[0]["instant"])
    assert rec.outcome == "conflict" and rec.labels["dag_id"] == "java_ingest" and rec.labels["engine"] == "java"
    got = rows_by_key(hudi_read(path))
    assert {k: (r["v"], r["ts"]) for k, r in got.items()} == {0: ("base", 1), 1: ("ours", 3), 2: ("base", 1),
                                                              3: ("base", 1)}
    # the timeline page's model names the task of both Java attempts and draws the conflict
    from airflow_hudi_occ.core.inspection.timeline_view import build_timeline_view
    view = build_timeline_view(Table.open(path))
    rows = {r["instant"]: r for r in view["instants"]}
    for a in attempts:
        assert rows[a["instant"]]["writer"]["dag_id"] == "java_ingest", rows.get(a["instant"])
    assert rows[attempts[1]["instant"]]["outcome"] == "committed"
    lost = [c for c in view["conflicts"] if c["instant"] == attempts[0]["instant"]]
    assert lost and lost[0]["other_instant"] == won.instant.requested_time, view["conflicts"]
    assert lost[0]["retried_by"] == attempts[1]["instant"], lost
    # the batch is committed: the task again submits nothing
    again = StubTI()
    assert op.execute({"ti": again})["outcome"] == "already_committed"


@pytest.mark.slow  # two Java jobs, one of them ended by the signal
def test_an_abort_signal_ends_the_java_application_and_the_write_is_retried(tmp_path, java_setup, zk_server,
                                                                             monkeypatch):
    """What the early-conflict sensor does to a doomed writer (it leaves the abort signal for
    the running instant the operator published) stops a Java job too: the operator ends its
    Spark application, retries on a fresh instant, and the killed instant is rolled back
    lazily by Java (a 1 s heartbeat, so that it has expired by then)."""
    import threading

    from airflow_hudi_occ.core.concurrency.abort_signal import raise_abort
    from airflow_hudi_occ.provider.operators.java_write import HudiJavaWriteOperator
    from airflow_hudi_occ.provider.task_keys import XCOM_ATTEMPTS, XCOM_RUNNING

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", '{"conn_type": "spark", "host": "local[1]"}')
    path = str(tmp_path / "t")
    t = Table.create(path, "orders", record_key_fields=["id"], partition_fields=["p"], precombine_field="ts",
                     version=9)
    ArrowTableWriter(t, WriteConfig.from_options({"hoodie.metadata.enable": "false"})).write(
        pa.Table.from_pylist([dict(zip(("id", "p", "ts", "v"), r)) for r in BASE_ROWS], schema=SCHEMA), "insert")
    gate = tmp_path / "gate"
    op = HudiJavaWriteOperator(
        task_id="java_upsert", application=str(JOB), table_path=path, hudi_conn_id=None,
        application_args=[path, json.dumps([[1, "a", 2, "java"]]), "--gate", str(gate)],
        options={"hoodie.metadata.enable": "false", "hoodie.write.lock.provider": "filesystem",
                 "hoodie.client.heartbeat.interval_in_ms": "1000"},
        spark_conn_id="spark_local", spark_submit=java_setup.spark_submit, spark_home=java_setup.spark_home,
        python=java_setup.python, hudi_bundle=java_setup.hudi_jar, batch_key="java/abort",
        conflict_retries=RetryPolicy(max_conflict_retries=2, base_delay_s=0.1, max_delay_s=0.5), write_windows=None)
    ti = StubTI()
    out: dict = {}
    th = threading.Thread(target=lambda: out.update(result=op.execute({"ti": ti})), daemon=True)
    th.start()
    deadline = time.monotonic() + 600
    while XCOM_RUNNING not in ti.xcom:
        assert th.is_alive() and time.monotonic() < deadline, "no running instant published"
        time.sleep(0.2)
    doomed = ti.xcom[XCOM_RUNNING]["instant"]
    assert attempt_log.read_record(Table.open(path), doomed).outcome == attempt_log.RUNNING
    raise_abort(Table.open(path), doomed, "test: doomed by a winner", source="test")
    while not ti.xcom.get(XCOM_ATTEMPTS):
        assert th.is_alive() and time.monotonic() < deadline, "the job was not stopped"
        time.sleep(0.2)
    gate.touch()
    th.join(timeout=400)
    assert not th.is_alive() and out.get("result"), ti.xcom
    attempts = ti.xcom[XCOM_ATTEMPTS]
    assert [a["outcome"] for a in attempts] == ["conflict", "committed"] and attempts[0]["instant"] == doomed
    assert "abort signal" in attempts[0]["error"]["message"]
    tl = Table.open(path).timeline()
    assert tl.get(doomed) is None or not any(i.requested_time == doomed for i in tl.pending()), \
        "the killed instant is still pending after the retry's LAZY rollback"
    assert rows_by_key(hudi_read(path))[1]["v"] == "java"


# -- deferrable: the job detached, HudiWriteJobTrigger waits for it, the table decides ------------

def first_event(trigger, timeout_s: float = 900) -> dict:
    """The real trigger run as the triggerer runs it, to its first event."""
    import asyncio

    async def first():
        async for ev in trigger.run():
            return ev.payload
    return asyncio.run(asyncio.wait_for(first(), timeout_s))


def test_a_deferred_java_attempt_is_decided_from_the_table_and_its_log(tmp_path, monkeypatch):
    """The unit seam of the deferrable path (no Spark: the detached job is a log and an exit
    file as a Java job leaves them): a conflict in the log is retried on a fresh, deferred
    attempt; the commit carrying the writer id is the outcome, whatever the trigger said.
    The real Java job through the real trigger is the slow test below."""
    from airflow.sdk.exceptions import TaskDeferred

    from airflow_hudi_occ.provider import deferred_job
    from airflow_hudi_occ.provider.operators.java_write import HudiJavaWriteOperator
    from airflow_hudi_occ.provider.task_keys import XCOM_ATTEMPTS

    started = []

    def fake_start(hook, application, *, writer_id, directory=None):
        started.append(writer_id)
        return deferred_job.DetachedJob(pid=0, create_time=0.0, host="elsewhere", log_path=str(tmp_path / "l2"),
                                        exit_path=str(tmp_path / "e2"), writer_id=writer_id, started_at=0.0)
    monkeypatch.setattr(deferred_job, "start_detached", fake_start)
    path = str(tmp_path / "t")
    t = Table.create(path, "orders", record_key_fields=["id"], partition_fields=["p"], precombine_field="ts",
                     version=9)
    ArrowTableWriter(t, WriteConfig.from_options({"hoodie.metadata.enable": "false"})).write(
        pa.Table.from_pylist([dict(zip(("id", "p", "ts", "v"), r)) for r in BASE_ROWS], schema=SCHEMA), "insert")
    op = HudiJavaWriteOperator(task_id="java_upsert", application="/jobs/w.py", table_path=path, hudi_conn_id=None,
                               options={"hoodie.metadata.enable": "false"}, deferrable=True, batch_key="java/d1",
                               conflict_retries=RetryPolicy(max_conflict_retries=2, base_delay_s=0.0, max_delay_s=0.0),
                               instant_wait_s=0.0, write_windows=None)
    ti = StubTI()
    writer_1 = "airflow:java_ingest.java_upsert.-1:manual__1:try1:attempt1"
    # attempt 1 ended: its log names Hudi's conflict (the lines as Hudi 1.2.0 printed them)
    (tmp_path / "l1").write_text(
        "26/11/27 13:20:41 INFO HoodieHeartbeatClient: Received request to start heartbeat for instant time "
        "20261127124247024\n"
        ": org.apache.hudi.exception.HoodieWriteConflictException: java.util.ConcurrentModificationException: "
        "Cannot resolve conflicts for overlapping writes between first operation = ConcurrentOperation("
        "actionState=INFLIGHT, actionType=commit, instantTime=20261127124247024), second operation = "
        "ConcurrentOperation(actionState=COMPLETED, actionType=commit, instantTime=20261127124341494)\n")
    (tmp_path / "e1").write_text("1\n")
    job1 = deferred_job.DetachedJob(pid=0, create_time=0.0, host=deferred_job.socket.gethostname(),
                                    log_path=str(tmp_path / "l1"), exit_path=str(tmp_path / "e1"),
                                    writer_id=writer_1, started_at=0.0, instant="20261127124247024")
    died = {"status": "failed", "instant": "20261127124247024", "error": "DriverDied", "message": "ended"}
    with pytest.raises(TaskDeferred) as d:
        op.execute_complete({"ti": ti}, died, attempt=1, attempts=[], job={"detached": job1.to_json()})
    assert d.value.kwargs["attempt"] == 2 and started == [writer_1.replace("attempt1", "attempt2")]
    lost = d.value.kwargs["attempts"][0]
    assert lost["outcome"] == "conflict" and lost["other_instant"] == "20261127124341494", lost
    # attempt 2 committed (its commit carries its writer id); the trigger's word is not needed
    writer_2 = started[0]
    ArrowTableWriter(Table.open(path), WriteConfig.from_options({"hoodie.metadata.enable": "false"}),
                     writer_id=writer_2).write(
        pa.Table.from_pylist([{"id": 1, "p": "a", "ts": 2, "v": "java"}], schema=SCHEMA), "upsert")
    kw = d.value.kwargs
    out = op.execute_complete({"ti": ti}, {"status": "failed", "error": "JobNotStarted"}, **{
        **kw, "job": {**kw["job"], "detached": {**kw["job"]["detached"], "host": "elsewhere"}}})
    assert out["outcome"] == "committed" and out["batch_key"] == "java/d1"
    assert [a["outcome"] for a in ti.xcom[XCOM_ATTEMPTS]] == ["conflict", "committed"]
    assert not os.path.exists(kw["job"]["conf_dir"])  # the attempt's hudi-defaults.conf is gone


@pytest.mark.slow  # two Java jobs through the real trigger
def test_deferrable_java_write_loses_to_our_writer_and_retries_through_the_trigger(tmp_path, java_setup,
                                                                                   zk_server, monkeypatch):
    """``deferrable=True``: the worker submits the Java job detached, publishes its instant
    (XCom and the attempt log, read from Hudi's heartbeat line in the job's log) and defers;
    HudiWriteJobTrigger follows the job; the held job loses to our core writer at its commit,
    execute_complete reads the conflict from the job's log and defers a fresh attempt, which
    commits; hudi-rs reads the rows exactly."""
    from airflow.sdk.exceptions import TaskDeferred

    from airflow_hudi_occ.provider.operators.java_write import HudiJavaWriteOperator
    from airflow_hudi_occ.provider.task_keys import XCOM_ATTEMPTS, XCOM_RUNNING

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", '{"conn_type": "spark", "host": "local[1]"}')
    monkeypatch.setenv("HUDI_OCC_JOBS_DIR", str(tmp_path / "jobs"))
    path = str(tmp_path / "t")
    lock = {"hoodie.write.lock.provider": "zookeeper", "hoodie.write.lock.zookeeper.url": zk_server.hosts,
            "hoodie.write.lock.zookeeper.base_path": "/hudi/locks",
            "hoodie.write.lock.zookeeper.lock_key": "java-deferred", "hoodie.metadata.enable": "false"}
    t = Table.create(path, "orders", record_key_fields=["id"], partition_fields=["p"], precombine_field="ts",
                     version=9)
    ArrowTableWriter(t, WriteConfig.from_options(lock)).write(
        pa.Table.from_pylist([dict(zip(("id", "p", "ts", "v"), r)) for r in BASE_ROWS], schema=SCHEMA), "insert")
    gate = tmp_path / "gate"
    monkeypatch.setenv("AIRFLOW_CONN_HUDI_ZOOKEEPER_DEFAULT", json.dumps({
        "conn_type": "hudi_zookeeper", "host": zk_server.hosts.rsplit(":", 1)[0], "port": zk_server.port,
        "schema": "/hudi/locks"}))
    op = HudiJavaWriteOperator(
        task_id="java_upsert", application=str(JOB), table_path=path, hudi_conn_id=None,
        application_args=[path, json.dumps([[1, "a", 2, "java"]]), "--gate", str(gate)],
        options={k: v for k, v in lock.items() if k != "hoodie.write.lock.zookeeper.url"},
        spark_conn_id="spark_local", spark_submit=java_setup.spark_submit, spark_home=java_setup.spark_home,
        python=java_setup.python, hudi_bundle=java_setup.hudi_jar, batch_key="java/deferred",
        conflict_retries=RetryPolicy(max_conflict_retries=2, base_delay_s=0.1, max_delay_s=0.5), write_windows=None,
        deferrable=True, instant_wait_s=600, poll_interval=0.5)
    ti = StubTI()
    with pytest.raises(TaskDeferred) as d:
        op.execute({"ti": ti})
    held = ti.xcom[XCOM_RUNNING]["instant"]
    rec = attempt_log.read_record(Table.open(path), held)
    assert rec.outcome == attempt_log.RUNNING and rec.labels["engine"] == "java"
    assert not os.path.exists(d.value.kwargs["job"]["conf_dir"])  # Hudi read it; the worker removed it
    deadline = time.monotonic() + 600  # the detached job reaches its rows (inside its instant)
    while not Path(str(gate) + ".waiting").exists():
        assert time.monotonic() < deadline, "the deferred Java job never reached its rows"
        time.sleep(0.2)
    won = ArrowTableWriter(Table.open(path), WriteConfig.from_options(lock)).write(
        pa.Table.from_pylist([{"id": 1, "p": "a", "ts": 3, "v": "ours"}], schema=SCHEMA), "upsert")
    gate.touch()
    with pytest.raises(TaskDeferred) as d2:
        op.execute_complete({"ti": ti}, first_event(d.value.trigger), **d.value.kwargs)
    assert d2.value.kwargs["attempt"] == 2
    out = op.execute_complete({"ti": ti}, first_event(d2.value.trigger), **d2.value.kwargs)
    attempts = ti.xcom[XCOM_ATTEMPTS]
    assert [a["outcome"] for a in attempts] == ["conflict", "committed"], attempts
    assert attempts[0]["instant"] == held and attempts[0]["other_instant"] == won.instant.requested_time
    assert out["outcome"] == "committed" and attempts[1]["instant"] > won.instant.requested_time
    assert attempt_log.read_record(Table.open(path), held).outcome == "conflict"
    got = rows_by_key(hudi_read(path))
    assert {k: (r["v"], r["ts"]) for k, r in got.items()} == {0: ("base", 1), 1: ("ours", 3), 2: ("base", 1),
                                                              3: ("base", 1)}


def test_java_first_writes_of_a_new_table_are_admitted_one_at_a_time(tmp_path, java_setup):
    """No table yet: the first Java write makes the table Java expects (its options' name and
    keys, Java's version 9; Java writes into it: tests/interop/test_java_first_write_table.py)
    and files its request there; a second Java first write finds it and waits. Options that
    do not name the table leave it to Java (no table made, no admission)."""
    from airflow_hudi_occ.core.concurrency import admission as core_admission
    from airflow_hudi_occ.core.config import HeartbeatConfig
    from airflow_hudi_occ.provider.attempt_loop import AttemptLoop
    from airflow_hudi_occ.provider.operators.java_write import HudiJavaWriteOperator

    path = str(tmp_path / "new" / "orders")
    keys = {"hoodie.table.name": "orders", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.metadata.enable": "false", "hoodie.write.lock.provider": "filesystem"}

    def first_writer(task_id, options):
        op = HudiJavaWriteOperator(task_id=task_id, application=str(JOB), table_path=path, hudi_conn_id=None,
                                   options=options, spark_submit=java_setup.spark_submit,
                                   spark_home=java_setup.spark_home, python=java_setup.python,
                                   hudi_bundle=java_setup.hudi_jar, write_windows=None)
        ti = StubTI()
        ti.task_id = task_id
        loop = AttemptLoop(op, {"ti": ti})
        return loop, loop.resolve()

    hb = HeartbeatConfig(interval_ms=60_000, tolerable_misses=2)
    unnamed, run0 = first_writer("unnamed", {k: v for k, v in keys.items() if k != "hoodie.table.name"})
    assert unnamed.batch_request(run0) is None and not (tmp_path / "new").exists()
    one, run1 = first_writer("one", keys)
    table, req1 = one.batch_request(run1)
    assert (table.name, table.version, table.config.record_key_fields) == ("orders", 9, ["id"])
    assert core_admission.try_admit(table, req1, hb).admitted
    two, run2 = first_writer("two", keys)
    table2, req2 = two.batch_request(run2)
    v = core_admission.try_admit(table2, req2, hb)
    assert not v.admitted and [(b.what, b.ident) for b in v.blockers] == [("admitted request", req1.request_id)]
    core_admission.withdraw(table, req1.request_id)
    assert core_admission.try_admit(table2, req2, hb).admitted
