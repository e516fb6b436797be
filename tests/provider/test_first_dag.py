"""The README's "Your first DAG": examples/my_first_dag.py, copied into a dags folder and run
with ``airflow dags test`` and no connection for the table, writes a table that hudi-rs reads."""

import shutil
from pathlib import Path

import pytest

from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key

from .conftest import finish

pytestmark = [pytest.mark.zookeeper, pytest.mark.timeout(900)]

FIRST_DAG = Path(__file__).resolve().parents[2] / "examples" / "my_first_dag.py"


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
