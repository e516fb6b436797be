"""A write's input: a path Spark reads (parquet, csv, json) or a SQL query.

The check before Spark (:func:`check_source`: the source exists and holds data files) is
:mod:`airflow_hudi_occ.spark.submit.source`, which the operator runs without pyspark; the
job runs it again before its session starts.

On an object store Spark has no connector for (``s3://`` without ``hadoop-aws``), executor
tasks read the files through fsspec (:mod:`airflow_hudi_occ.spark.object_store`): parquet
with the columns of every file merged; csv and json with the types of the first file.
"""

from __future__ import annotations

from airflow_hudi_occ.core.errors import SourceNotFoundError
from airflow_hudi_occ.spark import object_store
from airflow_hudi_occ.spark.submit.source import SOURCE_REMEDY, list_files


def read_source(spark, source: str, fmt: str, storage_options: dict | None = None):
    """The DataFrame of the input (csv with a header and inferred types)."""
    if fmt == "sql":
        return spark.sql(source)
    if not object_store.spark_reads(spark, source):
        urls = list_files(source, storage_options)
        if not urls:
            raise SourceNotFoundError(f"the source {source!r} holds no data files", source=source,
                                      remedy=SOURCE_REMEDY)
        return object_store.read_files(spark, urls, fmt, storage_options)
    source = object_store.spark_url(source)
    reader = spark.read
    if fmt == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    return reader.format(fmt).load(source)
