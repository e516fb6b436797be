"""docker-compose.yaml, checked offline: it parses (``docker-compose config``), has every
service the issue names, and every connection and service the DAGs use exists in it."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE = shutil.which("docker-compose") or "/usr/bin/docker-compose"


@pytest.fixture(scope="module")
def compose():
    # scripts/bootstrap.sh installs it: a missing binary is a broken set-up, not a reason to skip
    assert os.path.exists(COMPOSE), "docker-compose is missing: run scripts/bootstrap.sh " \
        "(apt-get install docker-compose)"
    out = subprocess.run([COMPOSE, "-f", str(REPO / "docker-compose.yaml"), "config"],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    return yaml.safe_load(out.stdout)


def test_services(compose):
    assert set(compose["services"]) >= {"postgres", "zookeeper", "spark-master", "spark-worker",
                                        "airflow-api-server", "airflow-scheduler",
                                        "airflow-dag-processor", "airflow-triggerer"}
    for name in ("airflow-scheduler", "airflow-triggerer", "airflow-dag-processor", "airflow-api-server"):
        assert compose["services"][name]["build"]["dockerfile"] == "docker/Dockerfile.airflow"
    for f in ("docker/Dockerfile.airflow", "docker/Dockerfile.spark"):
        assert "pip install" in (REPO / f).read_text() and "/opt/hudi-occ" in (REPO / f).read_text()


def _dag_connections(env: dict) -> set[str]:
    """Connection ids named by the operators of the example DAGs, parsed under ``env``."""
    code = (
        "import json, sys\n"
        "from airflow.dag_processing.dagbag import DagBag\n"
        "bag = DagBag(sys.argv[1])\n"
        "assert not bag.import_errors, bag.import_errors\n"
        "ids = set()\n"
        "for dag in bag.dags.values():\n"
        "    for t in dag.tasks:\n"
        "        for a in ('hudi_conn_id', 'spark_conn_id'):\n"
        "            if getattr(t, a, None): ids.add(getattr(t, a))\n"
        "print(json.dumps(sorted(ids)))\n")
    out = subprocess.run([sys.executable, "-c", code, str(REPO / "dags")], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    import json
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_every_connection_the_dags_use_is_defined_and_points_at_a_service(compose, tmp_path):
    import json
    scheduler = compose["services"]["airflow-scheduler"]["environment"]
    env = {**os.environ, **{k: str(v) for k, v in scheduler.items() if k.startswith("HUDI_OCC_")},
           "AIRFLOW_HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    used = _dag_connections(env)
    assert used >= {"hudi_occ_default", "spark_cluster"}, used
    for conn_id in used:
        assert f"AIRFLOW_CONN_{conn_id.upper()}" in scheduler, conn_id
    table = json.loads(scheduler["AIRFLOW_CONN_HUDI_OCC_DEFAULT"])
    zk = json.loads(scheduler[f"AIRFLOW_CONN_{table['extra']['zookeeper_conn_id'].upper()}"])
    spark = json.loads(scheduler["AIRFLOW_CONN_SPARK_CLUSTER"])
    assert table["extra"]["lock_provider"] == "zookeeper"
    assert zk["host"].split(":")[0] in compose["services"]
    assert spark["host"].split("://")[1] in compose["services"] and spark["port"] == 7077
    # the table is on a volume every writer (Airflow driver, Spark executors) shares
    for s in ("airflow-scheduler", "spark-worker"):
        assert any((v["target"] if isinstance(v, dict) else v.split(":")[1]) == "/lake"
                   for v in compose["services"][s]["volumes"])
    assert table["host"].startswith("/lake/")
