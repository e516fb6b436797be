"""A write's input as the submitter checks it, before any Spark session: a path Spark reads
(parquet, csv, json) or a SQL query.

Why a check before Spark: a missing input is the most common mistake of a templated DAG
(``/landing/{{ ds }}/`` for a day not delivered yet), and Spark reports it only after a
session started, as ``PATH_NOT_FOUND`` or "Unable to infer schema", deep in a JVM trace.
:func:`check_source` judges a file-system path before any of that: it must exist and, when
it is a folder, hold at least one data file (Spark skips names starting with ``_`` or
``.``). An object-store URL is listed with the table's storage options (the source is
taken to live on the table's store, with the same credentials; :func:`list_files`, which the
engine's ``object_store`` reads with); a Hadoop scheme (``s3a://``, ``hdfs://``) is left to
Spark, which holds its credentials.

Errors: :class:`~airflow_hudi_occ.core.errors.SourceNotFoundError` naming the source and the
fix; nothing was submitted.
"""

from __future__ import annotations

import glob
import os
from urllib.parse import urlsplit

from airflow_hudi_occ.core.errors import SourceNotFoundError
from airflow_hudi_occ.core.format.storage import open_fs

SOURCE_FORMATS = ("parquet", "csv", "json", "sql")
#: schemes Spark resolves through Hadoop file systems (the user chose the connector)
HADOOP_SCHEMES = frozenset({"s3a", "hdfs", "abfs", "abfss", "wasb", "wasbs", "viewfs", "file"})

#: what a missing or empty source's error advises
SOURCE_REMEDY = ("check the path (a templated path is shown rendered), or make the write wait for "
                 "its input: an upstream task, or a sensor on the path")


def scheme_of(url: str) -> str | None:
    s = urlsplit(url).scheme
    return s if s and len(s) > 1 else None  # a Windows drive letter is not a scheme


def list_files(url: str, storage_options: dict | None) -> list[str]:
    """The data files under ``url`` (a file, a folder or a glob), as fsspec URLs, skipping the
    names Spark skips (``_SUCCESS``, ``.crc``, ``_temporary/``)."""
    fs, path = open_fs(url, storage_options)
    if any(c in path for c in "*?["):
        found = fs.glob(path)
        paths = []
        for p in found:
            paths += fs.find(p) if fs.isdir(p) else [p]
    elif fs.isdir(path):
        paths = fs.find(path)
    elif fs.exists(path):
        paths = [path]
    else:
        return []
    root = path.rstrip("/")
    out = []
    for p in sorted(paths):
        rel = p[len(root):] if p.startswith(root) else p
        if any(part.startswith(("_", ".")) for part in rel.split("/") if part):
            continue
        out.append(fs.unstrip_protocol(p))
    return out


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
        raise SourceNotFoundError("no source path given", source=source, remedy=SOURCE_REMEDY)
    path = local_path(source)
    if path is None:
        scheme = scheme_of(source)
        if scheme in HADOOP_SCHEMES:
            return  # Spark's connector holds the credentials: its check
        try:
            found = list_files(source, storage_options)
        except PermissionError as e:
            raise SourceNotFoundError(f"the source {source!r} cannot be listed: access denied ({e})",
                                      source=source,
                                      remedy="the source is read with the table connection's "
                                             "storage_options: give them credentials that may "
                                             "read it") from None
        if not found:
            raise SourceNotFoundError(f"the source {source!r} does not exist or holds no data "
                                      "files", source=source, remedy=SOURCE_REMEDY)
        return
    matches = glob.glob(path) if glob.has_magic(path) else ([path] if os.path.exists(path) else [])
    if not matches:
        raise SourceNotFoundError(f"the source {source!r} does not exist", source=source, remedy=SOURCE_REMEDY)
    if not any(_holds_data(m) for m in matches):
        raise SourceNotFoundError(f"the source {source!r} holds no data files (only empty folders "
                                  "or names starting with '_' or '.', which Spark skips)",
                                  source=source, remedy=SOURCE_REMEDY)
