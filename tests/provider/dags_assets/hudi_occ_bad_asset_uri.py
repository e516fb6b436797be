"""A DAG scheduled on a malformed hudi:// URI: this file fails to import, no other."""

from datetime import datetime

from airflow.sdk import DAG, Asset, task

with DAG(dag_id="hudi_occ_bad_asset_uri", schedule=[Asset("hudi://s3/lake/orders?region=eu")],
         start_date=datetime(2024, 1, 1), catchup=False):

    @task
    def never():
        return None

    never()
