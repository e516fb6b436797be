"""Provider tests: Airflow 3 with SQLite in a temporary AIRFLOW_HOME, real spark-submit, real
ZooKeeper. They need the Airflow venv (``pip install -e .[test,spark,airflow]``); without
Airflow they are not collected."""

import atexit
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

if importlib.util.find_spec("airflow") is None:
    collect_ignore_glob = ["test_*.py"]
else:
    # Before anything imports airflow: its config is read at import time. A home made here is
    # removed when the process ends (each run left one in the temp dir).
    if "AIRFLOW_HOME" not in os.environ:
        os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="hudi-occ-airflow-unit-")
        atexit.register(shutil.rmtree, os.environ["AIRFLOW_HOME"], ignore_errors=True)
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "false")

REPO = Path(__file__).resolve().parents[2]
BIN = os.path.dirname(sys.executable)


class AirflowEnv:
    """One AIRFLOW_HOME (SQLite, migrated once) with the project's DAGs and the test DAGs."""

    def __init__(self, home: Path, zk_hosts: str | None):
        self.home = home
        self.dags = home / "dags"
        self.table = str(home / "tables" / "orders")
        self.staging = str(home / "staging")
        self.env = dict(os.environ)
        self.env.update({
            "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "false", "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PATH": BIN + os.pathsep + os.environ.get("PATH", ""),
            "HUDI_OCC_TABLE": self.table, "HUDI_OCC_STAGING": self.staging,
            "AIRFLOW_CONN_SPARK_DEFAULT": '{"conn_type": "spark", "host": "local[1]"}',
        })
        if zk_hosts:
            self.env["AIRFLOW_CONN_HUDI_ZOOKEEPER_DEFAULT"] = (
                '{"conn_type": "hudi_zookeeper", "host": "%s", "schema": "/hudi/locks", '
                '"extra": {"session_timeout_ms": 10000}}' % zk_hosts)
            self.env["AIRFLOW_CONN_HUDI_OCC_DEFAULT"] = (
                '{"conn_type": "hudi_occ", "extra": {"lock_provider": "zookeeper", '
                '"zookeeper_conn_id": "hudi_zookeeper_default"}}')

    def airflow(self, *args, timeout=600, check=True, **kw):
        return subprocess.run([os.path.join(BIN, "airflow"), *args], env={**self.env, **kw.pop("env", {})},
                              cwd=self.home, capture_output=True, text=True, timeout=timeout, check=check, **kw)

    def dags_test(self, dag_id: str, log_name: str, *, env=None, logical_date: str | None = None,
                  unset: tuple[str, ...] = ()):
        """Start ``airflow dags test`` as its own OS process; output to a log file. ``unset``
        names variables of this environment the process must not see (e.g. a connection)."""
        log = open(self.home / f"{log_name}.log", "w+")
        cmd = [os.path.join(BIN, "airflow"), "dags", "test", dag_id] + ([logical_date] if logical_date else [])
        full = {k: v for k, v in {**self.env, **(env or {})}.items() if k not in unset}
        p = subprocess.Popen(cmd, env=full, cwd=self.home, stdout=log,
                             stderr=subprocess.STDOUT, text=True)
        p.log = log
        return p


def finish(p, timeout=600) -> str:
    p.wait(timeout=timeout)
    p.log.seek(0)
    return p.log.read()


@pytest.fixture(scope="session")
def airflow_env(tmp_path_factory, zk_server):
    home = tmp_path_factory.mktemp("airflow_home")
    env = AirflowEnv(home, zk_server.hosts)
    env.dags.mkdir()
    for f in (REPO / "dags").glob("*.py"):
        shutil.copy(f, env.dags / f.name)
    for f in (Path(__file__).parent / "dags").glob("*.py"):
        shutil.copy(f, env.dags / f.name)
    env.airflow("db", "migrate", timeout=300)
    # Parallel `dags test` processes would each insert every DAG on first sight and collide in
    # SQLite (UNIQUE constraint failed: dag.dag_id): serialize once, serially.
    env.airflow("dags", "reserialize", timeout=300)
    return env


def asset_event_extras(airflow_env, uri: str, env: dict | None = None) -> list[dict]:
    """The extras of every event of asset ``uri`` in the environment's metadata database (read
    by a separate process, as the database belongs to that environment)."""
    code = ("import json, sys\n"
            "from sqlalchemy import select\n"
            "from airflow.models.asset import AssetEvent, AssetModel\n"
            "from airflow.utils.session import create_session\n"
            "with create_session() as s:\n"
            "    rows = s.execute(select(AssetEvent.extra).join(AssetModel, AssetEvent.asset_id == AssetModel.id)"
            ".where(AssetModel.uri == sys.argv[1])).all()\n"
            "    print(json.dumps([r[0] for r in rows]))\n")
    out = subprocess.run([sys.executable, "-c", code, uri], env={**airflow_env.env, **(env or {})},
                         capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])
