"""A deferrable write in a real ``airflow standalone`` (scheduler, DAG processor, triggerer,
API server; SQLite): while Spark runs the task instance is ``deferred`` (no worker slot held),
its XCom already names the running instant, and the task ends ``success`` with the commit."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_hudi_occ.core.table.table import Table

from .conftest import BIN, AirflowEnv
from .test_asset_scheduling import free_port, tail

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

STATE = ("import json, sys\n"
         "from sqlalchemy import select\n"
         "from airflow.models.taskinstance import TaskInstance as TI\n"
         "from airflow.models.xcom import XComModel as X\n"
         "from airflow.utils.session import create_session\n"
         "with create_session() as s:\n"
         "    tis = s.scalars(select(TI).where(TI.dag_id == 'hudi_occ_test_deferrable', TI.run_id == sys.argv[1])).all()\n"
         "    xs = s.scalars(select(X).where(X.dag_id == 'hudi_occ_test_deferrable', X.run_id == sys.argv[1])).all()\n"
         "    print(json.dumps({'states': [str(t.state) for t in tis],\n"
         "                      'xcom': {x.key: x.value for x in xs}}, default=str))\n")


def _look(env, run_id: str) -> dict:
    out = subprocess.run([sys.executable, "-c", STATE, run_id], env=env.env, capture_output=True, text=True,
                         timeout=120)
    if out.returncode != 0 or not out.stdout.strip():
        return {"states": [], "xcom": {}}
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_deferred_while_spark_runs_then_success(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    env = AirflowEnv(tmp_path / "home", None)
    env.dags.mkdir(parents=True)
    shutil.copy(Path(__file__).parent / "dags_deferrable" / "hudi_occ_deferrable_dag.py", env.dags)
    src = str(tmp_path / "src.parquet")
    pq.write_table(pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"], "ts": [1, 1, 1]}), src)
    hold = tmp_path / "hold"  # the job waits before its commit until 2 files are here
    port = free_port()
    env.env.update({
        "AIRFLOW__API__PORT": str(port), "AIRFLOW__API__BASE_URL": f"http://localhost:{port}",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://localhost:{port}/execution/",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "false",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        "AIRFLOW__CORE__PARALLELISM": "4", "HUDI_OCC_WRITE_WINDOW": "off",
        "HUDI_OCC_DEFER_SOURCE": src, "HUDI_OCC_TEST_COMMIT_BARRIER": f"{hold}:2",
    })
    env.airflow("db", "migrate", timeout=300)
    log = open(tmp_path / "standalone.log", "w+")
    p = subprocess.Popen([os.path.join(BIN, "airflow"), "standalone"], env=env.env, cwd=env.home,
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    seen: list = []
    try:
        deadline = time.time() + 300
        while time.time() < deadline:  # the DAG parsed: trigger it
            assert p.poll() is None, tail(log)
            if env.airflow("dags", "trigger", "hudi_occ_test_deferrable", "--run-id", "first",
                           check=False).returncode == 0:
                break
            time.sleep(5)
        else:
            raise AssertionError(tail(log))
        deferred = None
        deadline = time.time() + 400
        while time.time() < deadline:  # held before its commit: the task must be deferred
            look = _look(env, "first")
            seen.append(look["states"])
            if look["states"] == ["deferred"] and hold.exists() and os.listdir(hold):
                deferred = look
                break
            time.sleep(2)
        assert deferred, f"never deferred while the job ran: {seen}\n{tail(log)}"
        running = json.loads(deferred["xcom"]["hudi_occ_running_instant"]) \
            if isinstance(deferred["xcom"].get("hudi_occ_running_instant"), str) \
            else deferred["xcom"].get("hudi_occ_running_instant")
        assert running and running.get("instant"), deferred
        assert "hudi-occ" in str(deferred["xcom"].get("_link_HudiTimelineLink")), deferred
        (hold / "go").touch()  # let the job commit
        deadline = time.time() + 300
        while time.time() < deadline:
            look = _look(env, "first")
            seen.append(look["states"])
            if look["states"] and look["states"][0] in ("success", "failed", "up_for_retry"):
                break
            time.sleep(3)
        assert look["states"] == ["success"], f"{seen}\n{tail(log)}"
        ret = look["xcom"].get("return_value")
        ret = json.loads(ret) if isinstance(ret, str) else ret
        assert ret["outcome"] == "committed" and ret["instant"] == running["instant"], ret
        assert [a["outcome"] for a in ret["attempts"]] == ["committed"], ret
        killed = _mark_failed_while_deferred(env, port, hold, seen, log)
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
    tl = Table.open(env.table).timeline()
    assert running["instant"] in {i.requested_time for i in tl.completed_writes()}, running
    # the killed attempt: no process left (checked above), its instant pending for a rollback
    assert killed in {i.requested_time for i in tl.pending_writes()}, killed


def _mark_failed_while_deferred(env, port, hold, seen, log) -> str:
    """A second run, held before its commit; once deferred, a user marks the task failed
    through the REST API: the triggerer's ``on_kill`` must end the job's whole process tree."""
    import psutil

    from .test_ui_server import _http
    for f in hold.iterdir():
        f.unlink()
    env.airflow("dags", "trigger", "hudi_occ_test_deferrable", "--run-id", "killed")
    deadline = time.time() + 400
    look = {}
    while time.time() < deadline:
        look = _look(env, "killed")
        seen.append(look["states"])
        if look["states"] == ["deferred"] and any(hold.iterdir()):
            break
        time.sleep(2)
    assert look.get("states") == ["deferred"], f"{seen}\n{tail(log)}"
    running = look["xcom"]["hudi_occ_running_instant"]
    running = json.loads(running) if isinstance(running, str) else running
    root = psutil.Process(running["pid"])
    tree = [root] + root.children(recursive=True)
    assert any("spark_job.py" in " ".join(p.cmdline()) for p in tree), [p.cmdline() for p in tree]
    pw = json.loads((env.home / "simple_auth_manager_passwords.json.generated").read_text())["admin"]
    base = f"http://localhost:{port}"
    status, body, _ = _http("POST", f"{base}/auth/token", body={"username": "admin", "password": pw})
    assert status in (200, 201), body
    token = json.loads(body)["access_token"]
    status, body, _ = _http("PATCH", f"{base}/api/v2/dags/hudi_occ_test_deferrable/dagRuns/killed/"
                            "taskInstances/upsert", token=token, body={"new_state": "failed"})
    assert status == 200, body
    _, alive = psutil.wait_procs(tree, timeout=90)
    assert not alive, [(p.pid, p.cmdline()) for p in alive] + [tail(log)]
    return running["instant"]
