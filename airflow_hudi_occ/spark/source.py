"""A write's input: a path Spark reads (parquet, csv, json) or a SQL query.

Why a check before Spark: a missing input is the most common mistake of a templated DAG
(``/landing/{{ ds }}/`` for a day not delivered yet), and Spark reports it only after a
session started, as ``PATH_NOT_FOUND`` or "Unable to infer schema", deep in a JVM trace.
:func:`check_source` judges a file-system path before any of that: it must exist and, when
it is a folder, hold at least one data file (Spark skips names starting with ``_`` or
``.``). Object-store paths are left to Spark, which holds their credentials.
"""

from __future__ import annotations

import glob
import os
from urllib.parse import urlsplit

from airflow_hudi_occ.core.errors import SourceNotFoundError

SOURCE_FORMATS = ("parquet", "csv", "json", "sql")

_REMEDY = ("check the path (a templated path is shown rendered), or make the write wait for its "
           "input: an upstream task, or a sensor on the path")


def read_source(spark, source: str, fmt: str):
    """The DataFrame of the input (csv with a header and inferred types)."""
    if fmt == "sql":
        return spark.sql(source)
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


def check_source(source: str, fmt: str) -> None:
    """Raise :class:`SourceNotFoundError` if a file-system ``source`` has nothing to read."""
    if fmt == "sql":
        if not (source or "").strip():
            raise SourceNotFoundError("the SQL source is empty", source=source,
                                      remedy="give the query as the source")
        return
    if not (source or "").strip():
        raise SourceNotFoundError("no source path given", source=source, remedy=_REMEDY)
    path = local_path(source)
    if path is None:
        return
    matches = glob.glob(path) if glob.has_magic(path) else ([path] if os.path.exists(path) else [])
    if not matches:
        raise SourceNotFoundError(f"the source {source!r} does not exist", source=source, remedy=_REMEDY)
    if not any(_holds_data(m) for m in matches):
        raise SourceNotFoundError(f"the source {source!r} holds no data files (only empty folders "
                                  "or names starting with '_' or '.', which Spark skips)",
                                  source=source, remedy=_REMEDY)
