"""An unknown lock provider: refused when the file is parsed (kazoo is not even imported)."""

from datetime import datetime

from airflow.sdk import DAG

from airflow_hudi_occ.provider.operators.table_service import HudiTableServiceOperator
from airflow_hudi_occ.provider.operators.write import HudiWriteOperator

with DAG(dag_id="hudi_occ_bad_lock_provider", schedule=None, start_date=datetime(2024, 1, 1)):
    HudiWriteOperator(task_id="upsert", source="/data/landing/", table_path="/data/lake/orders",
                      options={"hoodie.write.lock.provider": "zookeepr"})
    HudiTableServiceOperator(task_id="clean", service="clean", table_path="/data/lake/orders")
