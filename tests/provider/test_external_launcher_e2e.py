"""The external launcher in a real ``airflow standalone`` (scheduler, DAG processor, triggerer,
api-server; LocalExecutor on SQLite), with operators that are not this package's launching the
job: the Spark provider's ``SparkSubmitOperator`` and a ``BashOperator`` running
``spark-submit {{ hudi_occ_job.command }}`` (tests/provider/dags_external/). Both write the
same keys of one table at once; the harness's barrier holds each commit until both attempts
have begun, so exactly one loses and is launched again, through its own operator, on a fresh
instant. Then the table's attempt records on the timeline page in headless Chromium (the
screenshot ``external_launcher_timeline.png`` in ``HUDI_OCC_SCREENSHOT_DIR``, default the
test's tmp). About five minutes on two cores: slow.

The fast slice of the same decisions (the table and the attempt log deciding, a conflict
launched again through a fresh operator) runs in the default suite:
tests/provider/launchers/test_external.py."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.airflow_standalone import AirflowStandalone, standalone_env
from airflow_hudi_occ.testing.spark_job import BARRIER_ENV, BARRIER_TIMEOUT_ENV
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key

from .conftest import BIN, AirflowEnv
from .test_asset_scheduling import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

DAG_ID = "hudi_occ_test_external"
TASKS = ("via_spark_submit", "via_bash")
SEED_OPTS = {"hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "p",
             "hoodie.datasource.write.precombine.field": "ts"}


def _rows(v: str) -> list[dict]:
    return [{"id": i, "p": f"d{i % 2}", "ts": 2, "v": v} for i in range(8)]


def _xcom(af: AirflowStandalone, task_id: str, key: str):
    entry = af.api("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/race/taskInstances/{task_id}/xcomEntries/{key}")
    value = entry["value"]
    return json.loads(value) if isinstance(value, str) else value


def test_external_operators_launch_each_attempt_a_conflict_is_retried_through_them_and_shown(tmp_path):
    from selenium.webdriver.common.by import By

    from tests.provider.test_ui_server import _chrome, _full_page_shot, _open_page

    path = str(tmp_path / "lake" / "orders")
    table = Table.create(path, "orders", record_key_fields=["id"], partition_fields=["p"], precombine_field="ts")
    ArrowTableWriter(table, WriteConfig.from_options(SEED_OPTS)).write(pa.Table.from_pylist(_rows("seed")), "insert")
    sources = tmp_path / "landing"
    sources.mkdir()
    pq.write_table(pa.Table.from_pylist(_rows("A")), sources / "a.parquet")
    pq.write_table(pa.Table.from_pylist(_rows("B")), sources / "b.parquet")

    home, port = tmp_path / "home", free_port()
    env = AirflowEnv(home, None).env
    env.update(standalone_env(home, port))
    env.update({
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW_CONN_SPARK_LOCAL": '{"conn_type": "spark", "host": "local[1]"}',
        "HUDI_OCC_EXT_TABLE": path, "HUDI_OCC_EXT_SOURCES": str(sources),
        "HUDI_OCC_TABLES": f"orders={path}",
        BARRIER_ENV: f"{tmp_path / 'barrier'}:2:begin", BARRIER_TIMEOUT_ENV: "600",
    })
    (home / "dags").mkdir(parents=True)
    shutil.copy(Path(__file__).parent / "dags_external" / "hudi_occ_external_dags.py", home / "dags")
    af = AirflowStandalone(home, env, port, bin_dir=BIN, log_path=tmp_path / "standalone.log")
    try:
        af.start()
        af.wait_for_dags([DAG_ID])
        af.trigger(DAG_ID, "race")
        af.wait_for_runs([DAG_ID], timeout_s=1500)
        states = af.task_states(DAG_ID, "race")
        assert states == {t: "success" for t in TASKS}, f"{states}\n{af.log_tail()}"

        # each task's attempts as it recorded them (XCom) and as the table's attempt log keeps them
        outs = {t: _xcom(af, t, "return_value") for t in TASKS}
        outcomes = {t: [a["outcome"] for a in outs[t]["attempts"]] for t in TASKS}
        assert sorted(outcomes.values()) == [["committed"], ["conflict", "committed"]], outcomes
        loser_task = next(t for t in TASKS if outcomes[t][0] == "conflict")
        winner_task = next(t for t in TASKS if t != loser_task)
        job = _xcom(af, loser_task, "hudi_occ_job")  # the last attempt's job as its operator got it
        assert job["attempt"] == 2 and job["writer_id"].endswith(":race:try1:attempt2")
        assert "--attempt 2" in job["command"] and job["command"].startswith(job["application"])

        records = [r for r in attempt_log.read_records(Table.open(path)) if r.labels.get("dag_id") == DAG_ID]
        by_task = {t: sorted((r for r in records if r.labels.get("task_id") == t), key=lambda r: r.attempt)
                   for t in TASKS}
        lost, retry = by_task[loser_task]
        [won] = by_task[winner_task]
        assert (lost.outcome, retry.outcome, won.outcome) == (attempt_log.CONFLICT, attempt_log.COMMITTED,
                                                             attempt_log.COMMITTED)
        assert lost.other_instant == won.instant and lost.file_groups and retry.instant > won.instant
        assert [r.writer_id for r in (lost, retry)] == [
            f"airflow:{DAG_ID}.{loser_task}.-1:race:try1:attempt{n}" for n in (1, 2)]
        assert outs[loser_task]["instant"] == retry.instant and outs[winner_task]["instant"] == won.instant

        # the table holds the retry's values: it committed last
        last = "A" if loser_task == "via_spark_submit" else "B"
        assert rows_by_key(hudi_read(path), columns=["id", "v"]) == {i: {"id": i, "v": last} for i in range(8)}

        # the attempts on the timeline page, in the browser
        driver = _chrome(tmp_path)
        try:
            _open_page(driver, SimpleNamespace(base=af.base_url), af.token(),
                       f"table=orders&dag_id={DAG_ID}&task_id={loser_task}&run_id=race")
            shots = Path(os.environ.get("HUDI_OCC_SCREENSHOT_DIR") or tmp_path)
            shots.mkdir(parents=True, exist_ok=True)
            _full_page_shot(driver, shots / "external_launcher_timeline.png", 1400)
            bars = lambda outcome: {e.get_attribute("data-instant") for e in  # noqa: E731
                                    driver.find_elements(By.CSS_SELECTOR, f"#gantt rect.bar.outcome-{outcome}")}
            edges = lambda kind: {(e.get_attribute("data-from"), e.get_attribute("data-to")) for e in  # noqa: E731
                                  driver.find_elements(By.CSS_SELECTOR, f"#gantt line.{kind}-edge")}
            assert bars("conflict") == {lost.instant}
            assert {retry.instant, won.instant} <= bars("committed")
            assert (lost.instant, won.instant) in edges("conflict") and (lost.instant, retry.instant) in edges("retry")
            assert {e.get_attribute("data-instant") for e in
                    driver.find_elements(By.CSS_SELECTOR, "#gantt rect.task-match")} == {lost.instant, retry.instant}
            labels = {t.get_attribute("data-lane") for t in driver.find_elements(By.CSS_SELECTOR, "#gantt text.lane-label")}
            assert {f"{DAG_ID} \u203a {t}" for t in TASKS} <= labels, labels
        finally:
            driver.quit()
    finally:
        af.stop()
    assert not af.survivors, af.survivors
