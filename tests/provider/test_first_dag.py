"""The README's "Your first DAG": examples/my_first_dag.py, copied into a dags folder and run
with ``airflow dags test`` and no connection for the table, writes a table that hudi-rs reads."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key

from .conftest import finish

pytestmark = [pytest.mark.zookeeper, pytest.mark.timeout(900)]

FIRST_DAG = Path(__file__).resolve().parents[2] / "examples" / "my_first_dag.py"


def test_the_readme_first_dag_parses_and_its_options_pass_the_writers_check(tmp_path):
    """The default run's slice of the test below: the DAG as a newcomer copies it imports with no
    error and no connection, and the options of its write task pass the same check a write makes
    before anything runs (the run itself, a dags-test process and a spark-submit, is --slow; the
    same operator runs through ``airflow dags test`` in tests/provider/test_dags_e2e.py)."""
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(FIRST_DAG, dags / FIRST_DAG.name)
    code = (
        "import json, sys\n"
        "from airflow.dag_processing.dagbag import DagBag\n"
        "from airflow_hudi_occ.core.config import WriteConfig\n"
        "bag = DagBag(sys.argv[1])\n"
        "assert not bag.import_errors, bag.import_errors\n"
        "dag = bag.dags['my_first_hudi_dag']\n"
        "op = dag.get_task('upsert_orders')\n"
        "WriteConfig.from_options(op.options)\n"
        "print(json.dumps({'tasks': sorted(dag.task_ids), 'upstream': sorted(op.upstream_task_ids),\n"
        "                  'operation': op.operation, 'retries': op.conflict_retries}))\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("AIRFLOW_CONN_HUDI_OCC_DEFAULT", "AIRFLOW_CONN_HUDI_ZOOKEEPER_DEFAULT")}
    env.update(AIRFLOW_HOME=str(tmp_path / "home"), PYTHONPATH=str(FIRST_DAG.parents[1]))
    out = subprocess.run([sys.executable, "-c", code, str(dags)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"tasks": ["land_batch", "upsert_orders"], "upstream": ["land_batch"],
                   "operation": "upsert", "retries": 5}, got


@pytest.mark.slow  # ~2-3 min: a dags-test process and a spark-submit; the default run keeps the
# check above and the same operator through `airflow dags test` (tests/provider/test_dags_e2e.py)
def test_the_readme_first_dag_runs_as_documented(airflow_env, tmp_path):
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(FIRST_DAG, dags / FIRST_DAG.name)
    env = {"AIRFLOW__CORE__DAGS_FOLDER": str(dags),
           "AIRFLOW_VAR_MY_TABLE": str(tmp_path / "lake" / "orders"),
           "AIRFLOW_VAR_MY_LANDING": str(tmp_path / "landing")}
    # As on a fresh machine: no table connection (file-system lock), no ZooKeeper connection.
    p = airflow_env.dags_test("my_first_hudi_dag", "first-dag", env=env,
                              unset=("AIRFLOW_CONN_HUDI_OCC_DEFAULT", "AIRFLOW_CONN_HUDI_ZOOKEEPER_DEFAULT"))
    log = finish(p)
    assert p.returncode == 0 and "state=success" in log, log[-4000:]
    assert "no connection hudi_occ_default" in log  # the embedded defaults were used
    rows = rows_by_key(hudi_read(str(tmp_path / "lake" / "orders")))
    assert sorted(rows) == list(range(100))
    assert {r["amount"] for r in rows.values()} == {i * 10 for i in range(100)}
