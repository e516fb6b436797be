import os

import pyspark

from airflow_hudi_occ.spark.session import jar_version


def test_pyspark_python_files_match_the_jars(spark):
    # The Airflow Spark provider pulls pyspark-client, which can overwrite pyspark's Python
    # files with another version's; a mismatch breaks Python <-> JVM calls in subtle ways.
    assert pyspark.__version__ == jar_version(spark)


def test_executors_run_the_project_interpreter(spark):
    import sys

    def probe(_):
        import airflow_hudi_occ  # noqa: F401  (fails if executors use another interpreter)
        import sys as s
        yield s.executable

    found = set(spark.sparkContext.parallelize([0, 1], 2).mapPartitions(probe).collect())
    assert found == {os.environ.get("PYSPARK_PYTHON", sys.executable)}
