"""Airflow's retries told apart by the package's error types (``provider/retry_policy.py``).
Every task has ``retries=2``; none reaches Spark:

- ``bad_config``: a templated lock provider that does not exist (``ConfigError``): the default
  policy fails it at once, one try;
- ``store_down``: the table's object store refuses connections (``StorageUnavailableError``,
  the ``hudi_occ_store_down`` connection points at ``HUDI_OCC_DOWN_ENDPOINT``): retried, three
  tries;
- ``bad_config_user_policy``: the same bad config under a user's policy that retries
  ``ConfigError``: the user's policy decides, three tries.
"""

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG, ExceptionRetryPolicy, RetryAction, RetryRule

from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.provider.operators.write import HudiWriteOperator

BASE = os.environ.get("HUDI_OCC_RETRY_DIR", "/tmp/hudi-occ-retry")
KEYS = {"hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "day"}
RETRY_CONFIG_ERRORS = ExceptionRetryPolicy(rules=[RetryRule(exception=ConfigError, action=RetryAction.RETRY)])

with DAG(dag_id="hudi_occ_retry_policy", schedule=None, start_date=datetime(2024, 1, 1),
         params={"lock": "zookeepr"}, default_args={"retries": 2, "retry_delay": timedelta(seconds=1)}):
    HudiWriteOperator(task_id="bad_config", source=BASE + "/batch.parquet", table_path=BASE + "/table",
                      conflict_retries=0, options={**KEYS, "hoodie.write.lock.provider": "{{ params.lock }}"})
    HudiWriteOperator(task_id="store_down", source=BASE + "/batch.parquet", table_path="s3://bucket/orders",
                      hudi_conn_id="hudi_occ_store_down", conflict_retries=0, options=KEYS)
    HudiWriteOperator(task_id="bad_config_user_policy", source=BASE + "/batch.parquet",
                      table_path=BASE + "/table", conflict_retries=0, retry_policy=RETRY_CONFIG_ERRORS,
                      options={**KEYS, "hoodie.write.lock.provider": "{{ params.lock }}"})
