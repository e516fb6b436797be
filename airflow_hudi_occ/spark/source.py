"""A write's input: a path Spark reads (parquet, csv, json) or a SQL query.

Why a check before Spark: a missing input is the most common mistake of a templated DAG
(``/landing/{{ ds }}/`` for a day not delivered yet), and Spark reports it only after a
session started, as ``PATH_NOT_FOUND`` or "Unable to infer schema", deep in a JVM trace.
:func:`check_source` judges a file-system path before any of that: it must exist and, when
it is a folder, hold at least one data file (Spark skips names starting with ``_`` or
``.``). An object-store URL is listed with the table's storage options (the source is
taken to live on the table's store, with the same credentials); a Hadoop scheme
(``s3a://``, ``hdfs://``) is left to Spark, which holds its credentials.

On an object store Spark has no connector for (``s3://`` without ``hadoop-aws``), executor
tasks read the files through fsspec (:mod:`airflow_hudi_occ.spark.object_store`): parquet
with the columns of every file merged; csv and json with the types of the first file.
"""

from __future__ import annotations

import glob
import os
from urllib.parse import urlsplit

from airflow_hudi_occ.core.errors import SourceNotFoundError
from airflow_hudi_occ.spark import object_store

SOURCE_FORMATS = ("parquet", "csv", "json", "sql")

_REMEDY = ("check the path (a templated path is shown rendered), or make the write wait for its "
           "input: an upstream task, or a sensor on the path")


def read_source(spark, source: str, fmt: str, storage_options: dict | None = None):
    """The DataFrame of the input (csv with a header and inferred types)."""
    if fmt == "sql":
        return spark.sql(source)
    if not object_store.spark_reads(spark, source):
        urls = object_store.list_files(source, storage_options)
        if not urls:
            raise SourceNotFoundError(f"the source {source!r} holds no data files", source=source,
                                      remedy=_REMEDY)
        return object_store.read_files(spark, urls, fmt, storage_options)
    source = object_store.spark_url(source)
    reader = spark.read
    if fmt == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    return reader.format(fmt).load(source)


def local_path(source: str) -> str | None:
    """The local file-system path of ``source``, or None for another scheme (s3a://...)."""
    scheme = urlsplit(source).scheme
    if not scheme or len(scheme) == 1:  # no scheme (a Windows drive letter is not one)
        return source
    if scheme == "file":
        return source[len("file://"):] if source.startswith("file://") else source[len("file:"):]
    return None


def _is_data_file(name: str) -> bool:
    return not name.startswith(("_", "."))


def _holds_data(path: str) -> bool:
    if os.path.isfile(path):
        return True
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if _is_data_file(d)]
        if any(_is_data_file(f) for f in files):
            return True
    return False


def check_source(source: str, fmt: str, storage_options: dict | None = None) -> None:
    """Raise :class:`SourceNotFoundError` if a file-system or fsspec ``source`` has nothing
    to read."""
    if fmt == "sql":
        if not (source or "").strip():
            raise SourceNotFoundError("the SQL source is empty", source=source,
                                      remedy="give the query as the source")
        return
    if not (source or "").strip():
        raise SourceNotFoundError("no source path given", source=source, remedy=_REMEDY)
    path = local_path(source)
    if path is None:
        scheme = object_store.scheme_of(source)
        if scheme in object_store.HADOOP_SCHEMES:
            return  # Spark's connector holds the credentials: its check
        try:
            found = object_store.list_files(source, storage_options)
        except PermissionError as e:
            raise SourceNotFoundError(f"the source {source!r} cannot be listed: access denied ({e})",
                                      source=source,
                                      remedy="the source is read with the table connection's "
                                             "storage_options: give them credentials that may "
                                             "read it") from None
        if not found:
            raise SourceNotFoundError(f"the source {source!r} does not exist or holds no data "
                                      "files", source=source, remedy=_REMEDY)
        return
    matches = glob.glob(path) if glob.has_magic(path) else ([path] if os.path.exists(path) else [])
    if not matches:
        raise SourceNotFoundError(f"the source {source!r} does not exist", source=source, remedy=_REMEDY)
    if not any(_holds_data(m) for m in matches):
        raise SourceNotFoundError(f"the source {source!r} holds no data files (only empty folders "
                                  "or names starting with '_' or '.', which Spark skips)",
                                  source=source, remedy=_REMEDY)
