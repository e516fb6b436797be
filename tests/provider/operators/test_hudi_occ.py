"""``operators/hudi_occ``, the operators' first import path, hands out the very objects of their
new homes, so DAGs, ``provider.yaml`` and the README's imports keep working."""

from __future__ import annotations

from airflow_hudi_occ.provider import spark_jobs, task_keys
from airflow_hudi_occ.provider.operators import hudi_occ, table_service, write


def test_every_old_name_is_the_new_object():
    assert hudi_occ.HudiWriteOperator is write.HudiWriteOperator
    assert hudi_occ.HudiTableServiceOperator is table_service.HudiTableServiceOperator
    assert hudi_occ.committed_instant is write.committed_instant
    for name in ("SPARK_APP", "SERVICE_APP", "APPLICATION_ENV", "DEFAULT_SPARK_CONF"):
        assert getattr(hudi_occ, name) is getattr(spark_jobs, name)
    for name in ("XCOM_ATTEMPTS", "XCOM_RUNNING", "XCOM_TABLE", "task_labels", "default_batch_key"):
        assert getattr(hudi_occ, name) is getattr(task_keys, name)


def test_the_applications_are_the_engines_jobs():
    assert spark_jobs.SPARK_APP.endswith("airflow_hudi_occ/spark/job.py")
    assert spark_jobs.SERVICE_APP.endswith("airflow_hudi_occ/spark/service_job.py")
    import os
    assert os.path.isfile(spark_jobs.SPARK_APP) and os.path.isfile(spark_jobs.SERVICE_APP)


def test_job_output_reads_the_begin_and_result_lines():
    began = []
    out = spark_jobs.JobOutput(on_begin=began.append)
    out('HUDI_OCC_BEGIN {"instant": "20260101000000000"}')
    out("some spark log line")
    out('HUDI_OCC_RESULT {"outcome": "committed", "instant": "20260101000000000"}')
    assert began == [{"instant": "20260101000000000"}]
    assert out.result == {"outcome": "committed", "instant": "20260101000000000"}
