import os

import pyspark

from airflow_hudi_occ.spark.session import (ARROW_BATCH_KEY, EXCLUDED_RULES_KEY, LOCAL_RELATION_RULE, arrow_batches,
                                            jar_version, session_conf, task_ids_as_run)


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


def test_a_job_run_in_arrow_batches_gets_batches_of_that_size_and_the_session_its_value_back(spark, monkeypatch):
    """The size reaches the Python worker of the action run inside the block (Spark reads it
    when the job is planned), and the session's own setting is back afterwards. The mechanism
    on every line: on 3.5 arrow_batches does not use it (see the byte-bound tests below)."""
    import pyarrow as pa

    from airflow_hudi_occ.spark import session
    monkeypatch.setattr(session, "bounds_arrow_batch_bytes", lambda s: True)

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


def test_wide_rows_in_arrow_batches_stay_within_sparks_byte_bound(spark):
    """arrow_batches raises the row count only: Spark's byte bound per batch still applies, so
    a batch of wide rows is cut by its size (here 1 MB rows, an 8 MB bound)."""
    import pyarrow as pa
    import pytest

    from airflow_hudi_occ.spark.compat import bounds_arrow_batch_bytes
    if not bounds_arrow_batch_bytes(spark):  # the next test: arrow_batches keeps the row count there
        pytest.skip(f"Spark {spark.version} has no spark.sql.execution.arrow.maxBytesPerBatch (4.0+)")

    def sizes(batches):
        for b in batches:
            yield pa.RecordBatch.from_pydict({"n": [b.num_rows]})
    with session_conf(spark, "spark.sql.execution.arrow.maxBytesPerBatch", str(8 << 20)), \
            arrow_batches(spark, 131_072):
        got = [r.n for r in spark.range(0, 40, numPartitions=1).selectExpr(
            "repeat('x', 1000000) as v").mapInArrow(sizes, "n long").collect()]
    assert sum(got) == 40 and max(got) <= 9


def test_without_a_byte_bound_per_batch_arrow_batches_keeps_the_sessions_row_count(spark, monkeypatch):
    """Spark 3.5 bounds an Arrow batch by its row count only: there arrow_batches leaves the
    session's count as it is, so wide rows cannot make one huge batch."""
    from airflow_hudi_occ.spark import session
    before = spark.conf.get(ARROW_BATCH_KEY, None)
    monkeypatch.setattr(session, "bounds_arrow_batch_bytes", lambda s: False)
    with session.arrow_batches(spark, 131_072):
        assert spark.conf.get(ARROW_BATCH_KEY, None) == before
    monkeypatch.setattr(session, "bounds_arrow_batch_bytes", lambda s: True)
    with session.arrow_batches(spark, 131_072):
        assert spark.conf.get(ARROW_BATCH_KEY) == "131072"
    assert spark.conf.get(ARROW_BATCH_KEY, None) == before


def test_task_ids_as_run_gives_the_rows_of_a_driver_side_frame_the_tasks_that_read_them(spark):
    """A frame made from pandas is a LocalRelation: Spark's optimizer evaluates a projection of
    it on the driver, every row as partition 0, though its scan spreads the rows over tasks.
    Under ``task_ids_as_run`` each row gets the task that reads it, and the session's own
    excluded rules come back afterwards."""
    import pandas as pd
    from pyspark.sql import functions as F
    df = spark.createDataFrame(pd.DataFrame({"id": list(range(8))}))
    assert df.rdd.getNumPartitions() == 2  # local[2]: the scan has two tasks

    def ids():
        return {r[0] for r in df.select(F.spark_partition_id()).collect()}
    assert ids() == {0}  # folded on the driver (what made a plan by task count one task)
    with session_conf(spark, EXCLUDED_RULES_KEY, "org.apache.spark.sql.catalyst.optimizer.PushDownPredicates"):
        with task_ids_as_run(spark):
            assert spark.conf.get(EXCLUDED_RULES_KEY) == \
                f"org.apache.spark.sql.catalyst.optimizer.PushDownPredicates,{LOCAL_RELATION_RULE}"
            assert ids() == {0, 1}
        assert spark.conf.get(EXCLUDED_RULES_KEY) == "org.apache.spark.sql.catalyst.optimizer.PushDownPredicates"
    assert spark.conf.get(EXCLUDED_RULES_KEY, None) is None


def test_a_process_with_a_classic_session_refuses_to_become_a_connect_client(spark):
    """PySpark's functions build Connect or classic columns by a process-wide switch: the
    refusal names the way out, and the classic session goes on working."""
    import pytest

    from airflow_hudi_occ.core.errors import ConfigError
    from airflow_hudi_occ.spark.session import connect_session
    with pytest.raises(ConfigError) as e:
        connect_session("sc://127.0.0.1:1", check_executors=False)
    assert e.value.key == "remote" and "--remote" in e.value.remedy
    assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ
    assert spark.range(3).count() == 3
