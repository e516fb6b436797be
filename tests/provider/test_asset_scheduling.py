"""A real scheduler, DAG processor, triggerer and API server (``airflow standalone``, SQLite):
the ingestion DAG's commit is an event of the table's ``hudi://`` asset, and that event alone
starts ``hudi_occ_downstream``, which receives the commit's instant and counts."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider.assets import table_uri

from .conftest import BIN, REPO, AirflowEnv

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

RUNS = ("import json\n"
        "from sqlalchemy import select\n"
        "from airflow.models.dagrun import DagRun\n"
        "from airflow.utils.session import create_session\n"
        "with create_session() as s:\n"
        "    runs = s.scalars(select(DagRun).where(DagRun.dag_id.in_(['hudi_occ_ingestion', 'hudi_occ_downstream']))).all()\n"
        "    print(json.dumps([{'dag_id': r.dag_id, 'state': str(r.state), 'run_type': str(r.run_type),\n"
        "                       'events': [{'uri': e.asset.uri, 'extra': e.extra} for e in r.consumed_asset_events]}\n"
        "                      for r in runs]))\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_downstream_dag_runs_on_the_ingestion_commit(tmp_path):
    env = AirflowEnv(tmp_path / "home", None)  # no connections: file-system lock, local Spark
    env.dags.mkdir(parents=True)
    for name in ("hudi_occ_ingestion.py", "hudi_occ_downstream.py"):
        shutil.copy(REPO / "dags" / name, env.dags / name)
    port = free_port()
    env.env.update({
        "AIRFLOW__API__PORT": str(port), "AIRFLOW__API__BASE_URL": f"http://localhost:{port}",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://localhost:{port}/execution/",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "false",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        "AIRFLOW__CORE__PARALLELISM": "4", "HUDI_OCC_WRITE_WINDOW": "off",
    })
    env.airflow("db", "migrate", timeout=300)
    log = open(tmp_path / "standalone.log", "w+")
    p = subprocess.Popen([os.path.join(BIN, "airflow"), "standalone"], env=env.env, cwd=env.home,
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        runs = wait_for_downstream(env, p, log)
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
    down = [r for r in runs if r["dag_id"] == "hudi_occ_downstream"]
    assert down and down[0]["state"] == "success" and "asset_triggered" in down[0]["run_type"], runs
    uri = table_uri(env.table)
    events = down[0]["events"]
    assert events and all(e["uri"] == uri for e in events), events
    tl = Table.open(env.table).timeline()
    commits = {i.requested_time for i in tl.completed_writes()}
    for e in events:
        assert e["extra"]["instant"] in commits and e["extra"]["operation"] == "upsert"
        assert e["extra"]["rows_written"] > 0


def wait_for_downstream(env, p, log, timeout_s=600) -> list[dict]:
    deadline = time.time() + timeout_s
    runs: list[dict] = []
    while time.time() < deadline:
        assert p.poll() is None, tail(log)
        out = subprocess.run([sys.executable, "-c", RUNS], env=env.env, capture_output=True, text=True,
                             timeout=120)
        if out.returncode == 0 and out.stdout.strip():
            runs = json.loads(out.stdout.strip().splitlines()[-1])
            if any(r["dag_id"] == "hudi_occ_downstream" and r["state"] in ("success", "failed") for r in runs):
                return runs
        time.sleep(5)
    raise AssertionError(f"no downstream run finished in {timeout_s} s: {runs}\n{tail(log)}")


def tail(log) -> str:
    log.flush()
    log.seek(0)
    return log.read()[-6000:]
