"""hudi:// assets in real ``airflow dags test`` runs: a write whose conflicts exhaust its
retries emits no event; assets used wrongly fail their task (before Spark) naming the fix; a
malformed URI fails the import of its own DAG only."""

import shutil
from pathlib import Path

import pytest

from airflow_hudi_occ.provider.assets import table_uri

from .conftest import asset_event_extras, finish

pytestmark = [pytest.mark.zookeeper, pytest.mark.timeout(900)]

DAGS = Path(__file__).parent / "dags_assets"


@pytest.fixture(scope="module")
def asset_env(airflow_env, tmp_path_factory):
    folder = tmp_path_factory.mktemp("asset_dags")
    for f in DAGS.glob("*.py"):
        shutil.copy(f, folder / f.name)
    base = tmp_path_factory.mktemp("asset_test")
    (base / "plain").mkdir()
    (base / "plain" / "data.csv").write_text("id\n1\n")
    return {"AIRFLOW__CORE__DAGS_FOLDER": str(folder), "HUDI_OCC_ASSET_TEST_BASE": str(base),
            "HUDI_OCC_WRITE_WINDOW": "off"}, base


def test_a_write_that_loses_every_conflict_emits_no_asset_event(airflow_env, asset_env):
    env, base = asset_env
    p = airflow_env.dags_test("hudi_occ_test_conflicts_exhausted", "conflicts-exhausted", env=env)
    log = finish(p, timeout=300)
    assert "2 attempts all lost a conflict" in log, log[-4000:]
    assert "state=success" not in log
    assert asset_event_extras(airflow_env, table_uri(str(base / "table")), env) == []


def test_assets_used_wrongly_fail_the_task_naming_the_fix(airflow_env, asset_env):
    env, base = asset_env
    p = airflow_env.dags_test("hudi_occ_test_bad_asset_use", "bad-asset-use", env=env)
    log = finish(p, timeout=300)
    assert f"asset hudi://file{base}/plain names no Hudi table" in log, log[-4000:]
    assert "point the asset at a table's base path" in log
    assert f"outlet hudi://file{base}/other of task outlet_not_its_table is not the table it writes" in log
    assert "list only the written table's asset in outlets" in log
    assert "spark-submit" not in log and "state=success" not in log


def test_a_malformed_uri_fails_its_own_dag_only(airflow_env, asset_env):
    env, _ = asset_env
    p = airflow_env.dags_test("hudi_occ_bad_asset_uri", "bad-asset-uri", env=env)
    log = finish(p, timeout=300)
    assert p.returncode != 0
    assert "invalid Hudi table URI 'hudi://s3/lake/orders?region=eu': it has a query" in log, log[-4000:]
    assert "storage options belong in the table's connection" in log
    # the other DAG file of the same folder still parses (it ran above, and lists here)
    out = airflow_env.airflow("dags", "list", "-o", "json", env=env, check=False)
    assert "hudi_occ_test_bad_asset_use" in out.stdout, out.stderr[-2000:]
