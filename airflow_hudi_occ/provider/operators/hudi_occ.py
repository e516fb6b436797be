"""The operators' first home, kept so every import path DAGs and ``provider.yaml`` use still
works: :class:`HudiWriteOperator` lives in ``operators/write.py``,
:class:`HudiTableServiceOperator` in ``operators/table_service.py``, the XCom keys and task labels
in ``provider/task_keys.py``, the applications and job output in ``provider/spark_jobs.py``.
"""

from __future__ import annotations

from airflow_hudi_occ.provider.operators.table_service import HudiTableServiceOperator
from airflow_hudi_occ.provider.operators.write import HudiWriteOperator, committed_instant
from airflow_hudi_occ.provider.spark_jobs import (APPLICATION_ENV, DEFAULT_SPARK_CONF, SERVICE_APP, SPARK_APP,
                                                  JobOutput)
from airflow_hudi_occ.provider.task_keys import (XCOM_ATTEMPTS, XCOM_RUNNING, XCOM_TABLE, default_batch_key,
                                                 task_labels)

__all__ = ["APPLICATION_ENV", "DEFAULT_SPARK_CONF", "HudiTableServiceOperator", "HudiWriteOperator",
           "JobOutput", "SERVICE_APP", "SPARK_APP", "XCOM_ATTEMPTS", "XCOM_RUNNING", "XCOM_TABLE",
           "committed_instant", "default_batch_key", "task_labels"]
