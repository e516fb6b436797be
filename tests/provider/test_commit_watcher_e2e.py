"""The commit watcher in a real Airflow: ``airflow standalone`` (scheduler, DAG processor,
triggerer, API server; SQLite) with ``examples/on_any_commit.py``. Commits made outside
Airflow, by a plain core writer in this process, by the ``hudi-occ`` CLI (a clustering) in
another, and by Java Hudi (an upsert through its Spark datasource, ``testing/java_hudi.py``)
fire the DAG through the triggerer's ``HudiCommitTrigger``; the commits made before the
watcher started do not (``start="latest"``), and none is reported twice."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider.assets import table_uri
from airflow_hudi_occ.testing.java_hudi import JavaHudi
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS

from .conftest import BIN, REPO, AirflowEnv
from .test_asset_scheduling import free_port, tail

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

DAG_ID = "hudi_occ_on_any_commit"
STATE = ("import json\n"
         "from sqlalchemy import select\n"
         "from airflow.models.dagrun import DagRun\n"
         "from airflow.models.asset_state_store import AssetStateStoreModel\n"
         "from airflow.utils.session import create_session\n"
         "with create_session() as s:\n"
         "    runs = s.scalars(select(DagRun).where(DagRun.dag_id == 'hudi_occ_on_any_commit')).all()\n"
         "    cursor = s.scalars(select(AssetStateStoreModel.value).where(\n"
         "        AssetStateStoreModel.key == 'hudi_occ.commit_cursor')).all()\n"
         "    print(json.dumps({'cursor': [json.loads(c) for c in cursor],\n"
         "                      'runs': [{'state': str(r.state), 'run_type': str(r.run_type),\n"
         "                                'events': [e.extra for e in r.consumed_asset_events]} for r in runs]}))\n")


#: Java Hudi writing our table beside us (as tests/interop do): OCC with its file-system lock,
#: no metadata table (ours keeps none)
JAVA = {"hoodie.metadata.enable": "false",
        "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
        "hoodie.clean.failed.writes.policy": "LAZY",
        "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider"}


def _write(table, ids):
    ArrowTableWriter(table, WriteConfig.from_options(FAST_WRITE_OPTIONS)).write(
        pa.Table.from_pylist([{"id": i, "p": "a", "ts": i, "v": str(i)} for i in ids]), "insert")


def _state(env) -> dict:
    out = subprocess.run([sys.executable, "-c", STATE], env=env.env, capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 and out.stdout.strip() else {}


def _wait(env, p, log, what, until, timeout_s=600) -> dict:
    deadline = time.time() + timeout_s
    state: dict = {}
    while time.time() < deadline:
        assert p.poll() is None, tail(log)
        state = _state(env)
        if state and until(state):
            return state
        time.sleep(3)
    raise AssertionError(f"waited {timeout_s} s for {what}: {state}\n{tail(log)}")


def test_commits_outside_airflow_fire_the_dag_through_the_triggerer(tmp_path):
    java = JavaHudi(tmp_path / "java")  # fails at once, naming the install script, if missing
    env = AirflowEnv(tmp_path / "home", None)
    env.dags.mkdir(parents=True)
    shutil.copy(REPO / "examples" / "on_any_commit.py", env.dags / "on_any_commit.py")
    path = str(tmp_path / "orders")
    table = Table.create(path, "orders", record_key_fields=["id"], partition_fields=["p"], precombine_field="ts")
    _write(table, [1])
    _write(table, [2])  # before the watcher: not reported
    port = free_port()
    env.env.update({
        "AIRFLOW__API__PORT": str(port), "AIRFLOW__API__BASE_URL": f"http://localhost:{port}",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://localhost:{port}/execution/",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "false",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "HUDI_OCC_WATCHED_TABLE": path, "HUDI_OCC_WATCH_POLL_S": "1",
        # SQLite and a loaded 2-core machine: the API server answered a task's start after
        # Airflow's 5 s timeout (measured at a load average of 57), failing the task
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
    })
    env.airflow("db", "migrate", timeout=300)
    log = open(tmp_path / "standalone.log", "w+")
    p = subprocess.Popen([os.path.join(BIN, "airflow"), "standalone"], env=env.env, cwd=env.home,
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # the trigger's first poll in the triggerer keeps its cursor (after commit 2) in the
        # asset's state store: only then are the next commits new to it
        before = [i for i in Table.open(path).timeline().completed_by_completion_time()]
        state = _wait(env, p, log, "the watcher's first poll in the triggerer", lambda s: s["cursor"])
        assert state["cursor"] == [f"{before[-1].completion_time}_{before[-1].requested_time}"], state
        _write(table, [3, 4])
        opts = [a for k, v in FAST_WRITE_OPTIONS.items() for a in ("--option", f"{k}={v}")]
        cli = [sys.executable, "-m", "airflow_hudi_occ.cli.app"]
        subprocess.run([*cli, "cluster", "schedule", path, *opts], env=env.env, check=True, timeout=300)
        subprocess.run([*cli, "cluster", "run", path, *opts], env=env.env, check=True, timeout=300)
        # a commit by Java Hudi, in its own JVM: no code of ours writes it
        by_java = java.write(path, [{"id": 5, "p": "a", "ts": 5, "v": "java"}], operation="upsert", options=JAVA)
        done = [i for i in Table.open(path).timeline().completed_by_completion_time()
                if i.action.value in ("commit", "replacecommit")]
        new = {i.requested_time for i in done[2:]}
        assert len(done) == 5 and done[3].action.value == "replacecommit", done
        [java_commit] = [c["requested"] for c in by_java.completed if c["action"] == "commit"]
        assert done[4].requested_time == java_commit and done[4].action.value == "commit"

        def reported(s):
            got = [e["payload"]["instant"] for r in s["runs"] for e in r["events"]]
            return set(got) >= new and all(r["state"] in ("success", "failed") for r in s["runs"])

        state = _wait(env, p, log, "DAG runs consuming both new commits", reported)
        time.sleep(6)  # a few more polls: no event for an old commit, none twice
        state = _state(env)
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
    runs = state["runs"]
    assert runs and all(r["state"] == "success" and "asset_triggered" in r["run_type"] for r in runs), runs
    payloads = [e["payload"] for r in runs for e in r["events"]]
    assert all(e["from_trigger"] for r in runs for e in r["events"])
    assert sorted(pl["instant"] for pl in payloads) == sorted(new), payloads  # once each, no old one
    by_instant = {pl["instant"]: pl for pl in payloads}
    assert by_instant[done[2].requested_time]["rows_written"] == 2
    assert by_instant[done[2].requested_time]["operation"] == "insert"
    assert by_instant[done[3].requested_time]["action"] == "replacecommit"
    assert by_instant[java_commit]["action"] == "commit" and by_instant[java_commit]["operation"] == "upsert"
    assert all(pl["table_uri"] == table_uri(path) for pl in payloads)
    assert state["cursor"] == [f"{done[4].completion_time}_{done[4].requested_time}"], state
