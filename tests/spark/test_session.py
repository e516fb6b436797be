import os

import pyspark

from airflow_hudi_occ.spark.session import ARROW_BATCH_BYTES, ARROW_BATCH_KEY, arrow_batch_rows, arrow_batches, jar_version


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


def test_a_job_run_in_arrow_batches_gets_batches_of_that_size_and_the_session_its_value_back(spark):
    """The size reaches the Python worker of the action run inside the block (Spark reads it
    when the job is planned), and the session's own setting is back afterwards."""
    import pyarrow as pa

    def sizes(batches):
        for b in batches:
            yield pa.RecordBatch.from_pydict({"n": [b.num_rows]})
    df = spark.range(0, 200, numPartitions=1)
    before = spark.conf.get(ARROW_BATCH_KEY, None)
    with arrow_batches(spark, 64):
        got = [r.n for r in df.mapInArrow(sizes, "n long").collect()]
    assert got == [64, 64, 64, 8]
    assert spark.conf.get(ARROW_BATCH_KEY, None) == before
    assert [r.n for r in df.mapInArrow(sizes, "n long").collect()] == [200]  # Spark's 10,000


def test_arrow_batch_rows_shrink_for_wide_rows():
    from pyspark.sql.types import LongType, StringType, StructField, StructType
    narrow = StructType([StructField("id", LongType()), StructField("v", StringType())])
    wide = StructType([StructField(f"c{i}", StringType()) for i in range(200)])
    assert arrow_batch_rows(narrow, 131_072) == 131_072
    assert arrow_batch_rows(wide, 131_072) == ARROW_BATCH_BYTES // (200 * 20)
