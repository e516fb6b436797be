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
from airflow_hudi_occ.core.format.metadata import EXTRA_BATCH_KEY, EXTRA_WRITER_ID
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key

from ..conftest import finish

pytestmark = [pytest.mark.zookeeper, pytest.mark.timeout(900)]

JOB = Path(__file__).resolve().parents[1] / "java_jobs" / "write_rows.py"
BASE_ROWS = [[i, "a", 1, "base"] for i in range(4)]


@pytest.fixture
def java_setup():
    from airflow_hudi_occ.testing.java_hudi import JavaHudiNotInstalledError, JavaHudiSetup
    try:
        return JavaHudiSetup.load()
    except JavaHudiNotInstalledError as e:
        pytest.skip(str(e))


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


def wait_for(path: Path, proc, what: str, timeout_s: float = 240) -> None:
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
    """The shared script: a base commit (Java), writer A held inside its instant, the winner
    started by ``start_winner(env)`` and committed, then A released: A must conflict on id 1's
    file group, retry on a fresh instant and commit. Returns (env, table, A's log, winner's log)."""
    table = str(tmp_path / "t")
    env = java_env(airflow_env, setup, table, name)
    base = java_run(airflow_env, env, BASE_ROWS, "2024-01-01", f"{name}-base")
    log = finish(base)
    assert base.returncode == 0 and "state=success" in log, log[-4000:]

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
