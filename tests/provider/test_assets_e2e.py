"""hudi:// assets in real ``airflow dags test`` runs: a write to a templated table path emits
its table's event through the asset alias; a write whose conflicts exhaust its retries emits
no event; assets used wrongly fail their task (before Spark) naming the fix; a
malformed URI fails the import of its own DAG only."""

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.table.table import Table
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


def test_a_templated_table_path_emits_its_event_through_the_alias(airflow_env, asset_env):
    env, base = asset_env
    (base / "landing").mkdir(exist_ok=True)
    pq.write_table(pa.table({"id": [1, 2], "p": ["a", "b"], "ts": [1, 1]}), base / "landing" / "batch.parquet")
    t = Table.create(str(base / "templated"), "t", record_key_fields=["id"], partition_fields=["p"],
                     precombine_field="ts")
    p = airflow_env.dags_test("hudi_occ_test_templated_table", "templated-table", env=env)
    log = finish(p, timeout=300)
    assert p.returncode == 0 and "state=success" in log, log[-4000:]
    (inst,) = t.timeline().completed_writes()
    extras = asset_event_extras(airflow_env, table_uri(str(base / "templated")), env)
    assert len(extras) == 1, extras
    assert (extras[0]["instant"], extras[0]["operation"], extras[0]["rows_inserted"]) == (
        inst.requested_time, "upsert", 2)


@pytest.mark.slow  # the default run keeps the alias event and the refusals
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


@pytest.mark.slow
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
