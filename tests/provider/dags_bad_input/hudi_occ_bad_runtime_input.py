"""Bad input only known at run time: each task must fail naming what is wrong and the fix,
before Spark writes anything. ``HUDI_OCC_BAD_INPUT_DIR`` holds ``table`` (a Hudi table),
``plain`` (a folder of plain parquet files), ``landing/batch.parquet`` and
``landing/hostile.parquet`` (a partition value that would leave the table)."""

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_hudi_occ.provider.operators.write import HudiWriteOperator

BASE = os.environ.get("HUDI_OCC_BAD_INPUT_DIR", "/tmp/hudi-occ-bad-input")
KEYS = {"hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "day"}

with DAG(dag_id="hudi_occ_bad_runtime_input", schedule=None, start_date=datetime(2024, 1, 1),
         params={"lock": "zookeepr"}, default_args={"retries": 0}):
    HudiWriteOperator(task_id="missing_source", source=BASE + "/landing/{{ ds }}/",
                      table_path=BASE + "/table", options=KEYS, conflict_retries=0)
    HudiWriteOperator(task_id="plain_folder", source=BASE + "/landing/batch.parquet",
                      table_path=BASE + "/plain", options=KEYS, conflict_retries=0)
    HudiWriteOperator(task_id="templated_lock_provider", source=BASE + "/landing/batch.parquet",
                      table_path=BASE + "/table", conflict_retries=0,
                      options={**KEYS, "hoodie.write.lock.provider": "{{ params.lock }}"})
    HudiWriteOperator(task_id="hostile_partition", source=BASE + "/landing/hostile.parquet",
                      table_path=BASE + "/table", options=KEYS, conflict_retries=0)
