"""A misspelt hoodie key: refused when the file is parsed, with the key it misspells."""

from datetime import datetime

from airflow.sdk import DAG

from airflow_hudi_occ.provider.operators.write import HudiWriteOperator

with DAG(dag_id="hudi_occ_bad_key", schedule=None, start_date=datetime(2024, 1, 1)):
    HudiWriteOperator(task_id="upsert", source="/data/landing/", table_path="/data/lake/orders",
                      options={"hoodie.datasource.write.recordkey.field": "id",
                               "hoodie.write.lock.providr": "zookeeper"})
