"""The operators' retry policy through a real ``airflow dags test`` (its own process, SQLite):
a configuration error fails after one try although the task has retries; a store that refuses
connections is retried until the task's retries are spent; a user's ``retry_policy=`` replaces
the default. No task reaches Spark (each fails before spark-submit), so this stays cheap."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_hudi_occ.testing.unreachable import refusing_port

from .conftest import finish

pytestmark = [pytest.mark.zookeeper, pytest.mark.timeout(600)]

DAGS = Path(__file__).parent / "dags_retry"

TRIES = ("import json\n"
         "from sqlalchemy import select\n"
         "from airflow.models.taskinstance import TaskInstance\n"
         "from airflow.models.taskinstancehistory import TaskInstanceHistory\n"
         "from airflow.utils.session import create_session\n"
         "with create_session() as s:\n"
         "    tis = s.scalars(select(TaskInstance).where(TaskInstance.dag_id == 'hudi_occ_retry_policy')).all()\n"
         "    hist = s.scalars(select(TaskInstanceHistory).where(TaskInstanceHistory.dag_id == 'hudi_occ_retry_policy')).all()\n"
         "    print(json.dumps({ti.task_id: {'state': str(ti.state), 'try_number': ti.try_number,\n"
         "                                   'earlier': sorted(str(h.state) for h in hist if h.task_id == ti.task_id)}\n"
         "                      for ti in tis}))\n")


def test_config_errors_fail_at_once_and_an_unavailable_store_is_retried(airflow_env, tmp_path):
    folder = tmp_path / "dags"
    folder.mkdir()
    shutil.copy(DAGS / "hudi_occ_retry_policy.py", folder)
    endpoint = f"http://127.0.0.1:{refusing_port()}"
    env = {"AIRFLOW__CORE__DAGS_FOLDER": str(folder), "HUDI_OCC_RETRY_DIR": str(tmp_path),
           "AIRFLOW_CONN_HUDI_OCC_STORE_DOWN": json.dumps({"conn_type": "hudi_occ", "extra": {
               "storage_options": {"endpoint_url": endpoint, "key": "k", "secret": "s"}}})}
    p = airflow_env.dags_test("hudi_occ_retry_policy", "retry-policy", env=env)
    log = finish(p, timeout=500)
    out = subprocess.run([sys.executable, "-c", TRIES], env={**airflow_env.env, **env}, capture_output=True,
                         text=True, timeout=120, check=True)
    tries = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(tries) == {"bad_config", "store_down", "bad_config_user_policy"}, (tries, log[-4000:])
    # retries=2 on every task: the policy decided how many were spent
    # (a history row is an earlier try)
    assert tries["bad_config"] == {"state": "failed", "try_number": 1, "earlier": []}, (tries, log[-4000:])
    assert tries["store_down"]["state"] == "failed" and tries["store_down"]["try_number"] == 3, tries
    assert len(tries["store_down"]["earlier"]) == 2, tries
    assert tries["bad_config_user_policy"]["try_number"] == 3, tries
    assert len(tries["bad_config_user_policy"]["earlier"]) == 2, tries
    # the reasons, as the worker logged them, and the errors with their fixes
    assert "UnknownLockProviderError is not retryable" in log and "did you mean 'zookeeper'?" in log
    assert "StorageUnavailableError is retryable: the next try begins a fresh instant" in log
    assert f"the s3 store at {endpoint} did not answer" in log
    assert "Matched rule for UnknownLockProviderError" in log  # the user's policy (ConfigError), not ours
    assert "spark-submit" not in log
