"""provider/spark_jobs.py: the applications the operators submit, and the job output they read."""

from __future__ import annotations

import os

from airflow_hudi_occ.provider import spark_jobs


def test_the_applications_are_the_engines_jobs():
    assert spark_jobs.SPARK_APP.endswith("airflow_hudi_occ/spark/job.py")
    assert spark_jobs.SERVICE_APP.endswith("airflow_hudi_occ/spark/service_job.py")
    assert os.path.isfile(spark_jobs.SPARK_APP) and os.path.isfile(spark_jobs.SERVICE_APP)


def test_job_output_reads_the_begin_and_result_lines():
    began = []
    out = spark_jobs.JobOutput(on_begin=began.append)
    out('HUDI_OCC_BEGIN {"instant": "20260101000000000"}')
    out("some spark log line")
    out('HUDI_OCC_RESULT {"outcome": "committed", "instant": "20260101000000000"}')
    assert began == [{"instant": "20260101000000000"}]
    assert out.result == {"outcome": "committed", "instant": "20260101000000000"}
