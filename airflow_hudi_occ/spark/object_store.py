"""Files on an object store that Spark itself cannot open, read by executors through fsspec.

Why: Spark reaches S3 only through Hadoop's ``s3a`` connector (``hadoop-aws`` and the AWS SDK
jars), which pip's pyspark does not ship, and which would need the credentials a second time,
in Spark's configuration (visible in the UI's environment page). The engine already has an
object-store client on every executor (fsspec, the same one the core writes with), so the
files a job must *read* from the store (base files for the index lookup and the readers, the
source data) are listed on the driver and read by executor tasks with pyarrow, one task per
slice of files, Arrow batches straight into Spark (``mapInArrow``): no row-wise Python.

Which path is taken (:func:`spark_reads`):

- a local path, or a Hadoop scheme the user wrote on purpose (``s3a://``, ``hdfs://``,
  ``abfs(s)://``, ``wasb(s)://``): Spark reads it natively;
- an fsspec URL (``s3://``, ``gs://``, ``az://``, ...): read through fsspec here, unless the
  session sets ``spark.hudi_occ.read.native=true``: a cluster with ``hadoop-aws`` (and the
  ``spark.hadoop.fs.s3a.*`` credentials) then reads ``s3://`` tables as ``s3a://`` natively.

The storage options (credentials included) reach the executors inside the task closure, as
the write tasks get them (``executor.TaskContext``): pickled into the task binary, not into
Spark's configuration, so they are on no command line and not on the UI's environment page.
Trade-off: the task binary travels on Spark's RPC, which is plain text unless
``spark.authenticate`` + ``spark.network.crypto.enabled`` are set; a cluster that already
holds credentials (instance roles, ``s3a`` configuration) can pass no keys at all.

Errors: a file that cannot be read fails its task and Spark reports the executor's exception
(``FileNotFoundError``, ``PermissionError``) with the URL in it.
"""

from __future__ import annotations

import io
from typing import Iterable, Iterator
from urllib.parse import urlsplit

import pyarrow as pa

from airflow_hudi_occ.core.format.storage import open_fs
from airflow_hudi_occ.spark.submit.source import HADOOP_SCHEMES, scheme_of
from airflow_hudi_occ.spark.compat import default_parallelism

NATIVE_CONF = "spark.hudi_occ.read.native"
#: fsspec schemes whose Hadoop counterpart a natively configured cluster reads
_HADOOP_NAME = {"s3": "s3a", "gcs": "gs"}
FILE_COLUMN = "__hudi_file"


def spark_reads(spark, url: str) -> bool:
    """Whether Spark's own readers open ``url`` (else :func:`read_files` does)."""
    scheme = scheme_of(url)
    if scheme is None or scheme in HADOOP_SCHEMES:
        return True
    return _native_conf(spark)


def spark_url(url: str) -> str:
    """``url`` as Spark's Hadoop file systems name it (``s3://`` -> ``s3a://``)."""
    scheme = scheme_of(url)
    if scheme in _HADOOP_NAME:
        return _HADOOP_NAME[scheme] + url[len(scheme):]
    return url


def _native_conf(spark) -> bool:
    try:
        return str(spark.conf.get(NATIVE_CONF, "false")).lower() == "true"
    except Exception:  # pragma: no cover - a session without the key
        return False


def _open(url: str, storage_options: dict):
    return open_fs(url, storage_options)


def read_one(url: str, fmt: str, storage_options: dict, columns: list[str] | None = None) -> pa.Table:
    """One file as an Arrow table (parquet, csv with a header, json lines)."""
    fs, path = _open(url, storage_options)
    if fmt == "parquet":
        import pyarrow.parquet as pq
        with fs.open(path, "rb") as f:
            return pq.read_table(f, columns=columns)
    data = io.BytesIO(fs.cat_file(path))
    if fmt == "csv":
        import pyarrow.csv as pcsv
        t = pcsv.read_csv(data)
    elif fmt == "json":
        import pyarrow.json as pjson
        t = pjson.read_json(data)
    else:
        raise ValueError(f"unknown file format {fmt!r}")
    return t.select(columns) if columns else t


def file_schema(urls: Iterable[str], fmt: str, storage_options: dict | None) -> pa.Schema:
    """The columns of every file merged (a column missing from a file reads as null), as
    Spark's ``mergeSchema`` does. Parquet: the footers only; csv / json: the first file."""
    so = dict(storage_options or {})
    urls = list(urls)
    if fmt == "parquet":
        import pyarrow.parquet as pq
        schemas = []
        for u in urls:
            fs, path = _open(u, so)
            with fs.open(path, "rb") as f:
                schemas.append(pq.read_schema(f))
    else:
        schemas = [read_one(urls[0], fmt, so).schema]
    return _plain(pa.unify_schemas(schemas, promote_options="permissive"))


def _plain(schema: pa.Schema) -> pa.Schema:
    """Spark takes plain string / binary from Python (its large types only one way)."""
    fields = []
    for f in schema:
        t = f.type
        if pa.types.is_large_string(t):
            t = pa.string()
        elif pa.types.is_large_binary(t):
            t = pa.binary()
        fields.append(pa.field(f.name, t, True))
    return pa.schema(fields)


def conform(t: pa.Table, schema: pa.Schema) -> pa.Table:
    """``t`` with exactly ``schema``'s columns, in order (absent ones null)."""
    cols = []
    for f in schema:
        if f.name in t.column_names:
            cols.append(t.column(f.name).cast(f.type))
        else:
            cols.append(pa.nulls(t.num_rows, f.type))
    return pa.Table.from_arrays(cols, schema=schema)


def read_files(spark, urls: list[str], fmt: str, storage_options: dict | None, *,
               schema: pa.Schema | None = None, columns: list[str] | None = None,
               file_column: str | None = None):
    """A DataFrame of the files at ``urls``, read by executor tasks through fsspec.
    ``file_column`` adds each row's file name (what Spark's ``_metadata.file_name`` gives)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    so = dict(storage_options or {})
    if schema is None:
        schema = file_schema(urls, fmt, so) if urls else pa.schema([])
    if columns is not None:
        schema = pa.schema([schema.field(c) for c in columns])
    out_schema = schema.append(pa.field(file_column, pa.string(), True)) if file_column else schema
    spark_schema = from_arrow_schema(out_schema)
    if not urls:
        return spark.createDataFrame([], spark_schema)
    read_cols = list(schema.names) if columns is not None else None

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for url in b.column(0).to_pylist():
                t = conform(read_one(url, fmt, so, read_cols), schema)
                if file_column:
                    name = url.rstrip("/").rsplit("/", 1)[-1]
                    t = t.append_column(file_column, pa.array([name] * t.num_rows, pa.string()))
                yield from t.to_batches()

    n = max(1, min(len(urls), default_parallelism(spark)))
    files = spark.createDataFrame([(u,) for u in urls], "url string").repartition(n)
    return files.mapInArrow(read, spark_schema)


__all__ = ["NATIVE_CONF", "read_files", "spark_reads", "spark_url", "file_schema"]
