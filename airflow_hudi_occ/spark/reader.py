"""Readers as Spark DataFrames: snapshot, time travel and incremental, from core's view.

They return the rows any Hudi reader returns (hudi-rs is the oracle in the tests):

- snapshot / time travel: the latest visible base file of every file group, as of a
  *requested* time (core :class:`FileSystemView`, its files listed through Hudi's metadata
  table when the table has one: core/table/file_listing.py), read by Spark's parquet reader with the
  columns of every file merged (a file written before a column was added reads it as null);
  on an object store Spark has no connector for (``s3://`` without ``hadoop-aws``), by
  executor tasks through fsspec with the table's storage options (object_store.py);
- incremental: completed writes whose *completion* time is in ``(start, end]`` (version 8
  semantics, so out-of-order completions are neither lost nor read twice), then, per file
  group they touched, the newest of their base files, keeping the rows whose
  ``_hoodie_commit_time`` is one of those instants.

- merged slices (:func:`read_merged_slices`): merge-on-read file slices (a base file and its
  log files) as core merges them (``core/table/mor_reader.read_file_slice``: updates by the
  ordering field, deletes dropped; the one merge the core reader, compaction and clustering
  share), one executor task per group of slices; what the Spark clustering reads for a file
  group with log files.

Errors: core's (:class:`TableNotFoundError` for a wrong path; :class:`ArchivedInstantError`
when a time travel or an incremental window reaches archived instants). An empty table or window reads
as an empty DataFrame with the meta columns.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import pyarrow as pa

from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.spark import object_store
from airflow_hudi_occ.core.config import ReadConfig
from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.table.mor_reader import CompletionTimes, MergeFileSlice, read_file_slice
from airflow_hudi_occ.core.table.table import MERGE_ON_READ, Table
from airflow_hudi_occ.core.format.layout import META_COLUMNS
from airflow_hudi_occ.core.table.time_travel import check_as_of_readable, check_not_archived
from airflow_hudi_occ.spark.compat import default_parallelism


def _refuse_merge_on_read(table: Table) -> None:
    """These readers take base files only: on a merge-on-read table that would silently be a
    read-optimised read (log files ignored), so it is refused rather than returned."""
    if table.config.table_type == MERGE_ON_READ:
        raise ConfigError(f"table {table.name} is MERGE_ON_READ: the Spark readers read base files "
                          "only and would miss its log files", key="hoodie.table.type",
                          value=MERGE_ON_READ,
                          remedy="read it with airflow_hudi_occ.core.table.mor_reader.read_snapshot "
                                 "(or read_optimized), or with hudi-rs")


def _read(spark, table: Table, rels: list[str]):
    if not rels:
        return spark.createDataFrame([], ", ".join(f"{c} string" for c in META_COLUMNS))
    urls = [table.storage.uri(r) for r in rels]
    if object_store.spark_reads(spark, table.base_uri):
        return spark.read.option("mergeSchema", "true").parquet(
            *[object_store.spark_url(u) for u in urls])
    return object_store.read_files(spark, urls, "parquet", table.storage.storage_options)


def read_snapshot(spark, base_path: str, *, as_of: str | None = None, storage_options=None, options=None):
    """The table now, or as of a requested instant time (time travel). ``options``: the
    reader's ``hoodie.*`` keys (core's ``ReadConfig``: ``hoodie.metadata.enable=false`` lists
    the storage even when the table has a metadata table)."""
    table = Table.open(base_path, storage_options)
    _refuse_merge_on_read(table)
    view = FileSystemView(table, as_of=as_of, metadata_enable=ReadConfig.from_options(options).metadata_enable)
    if as_of is not None:
        check_as_of_readable(table, as_of, view.timeline)
    return _read(spark, table, [s.base_file.relative_path for s in view.latest_file_slices()])


def incremental_instants(table: Table, start: str | None, end: str | None) -> list[str]:
    tl = table.timeline()
    check_not_archived(table, tl, start=start or "0")  # from the beginning includes archived writes
    out = []
    for inst in tl.completed_writes():
        c = inst.completion_time or inst.requested_time
        if (start is None or c > start) and (end is None or c <= end):
            out.append(inst.requested_time)
    return out


def read_incremental(spark, base_path: str, *, start: str | None = None, end: str | None = None,
                     storage_options=None):
    """Rows written by writes that completed in ``(start, end]``."""
    from pyspark.sql import functions as F
    table = Table.open(base_path, storage_options)
    _refuse_merge_on_read(table)
    if not table.config.populates_meta_fields:
        # as in Hudi: without _hoodie_commit_time a row cannot say which write brought it
        raise ConfigError(f"table {table.name} has virtual keys (hoodie.populate.meta.fields=false): "
                          "its rows carry no commit time, so an incremental read cannot select them",
                          key="hoodie.populate.meta.fields", value="false",
                          remedy="read a snapshot or as of an instant, or write the table with meta fields")
    selected = incremental_instants(table, start, end)
    if not selected:
        return _read(spark, table, [])
    tl = table.timeline()
    latest: dict[tuple[str, str], tuple[str, str]] = {}
    for t in selected:
        for s in tl.commit_metadata(tl.get(t)).write_stats():
            if not s.path:
                continue
            cur = latest.get(s.file_group)
            if cur is None or t > cur[0]:
                latest[s.file_group] = (t, s.path)
    df = _read(spark, table, sorted(p for _, p in latest.values()))
    return df.where(F.col("_hoodie_commit_time").isin(selected))


def read_merged_slices(spark, table: Table, slices: Sequence[MergeFileSlice], schema, *,
                       storage_options=None, file_column: str | None = None,
                       names: Sequence[str] | None = None):
    """A DataFrame of the merged rows of merge-on-read ``slices`` (each a base file and its
    log files), read by executor tasks with core's merge (``mor_reader.read_file_slice``), so
    that no second merger exists: the rows any Hudi snapshot reader returns for those slices.

    ``schema``: the Spark schema of the result (the rows are conformed to it: a column the
    slice lacks reads as null); ``file_column`` adds, per row, ``names[i]`` (default: the
    slice's base-file name) for the slice it came from. The slices travel in the task closure
    (plain dataclasses); each task opens the table once and reads the completion times once.
    A slice is merged in one task's memory: clustering plans pick small file groups."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from airflow_hudi_occ.spark.compat import to_arrow_schema
    from airflow_hudi_occ.spark.object_store import conform

    slices = list(slices)
    labels = list(names) if names is not None else [
        fs.base.base_file.relative_path.rsplit("/", 1)[-1] if fs.base is not None else str(fs.file_group)
        for fs in slices]
    arrow = to_arrow_schema(schema, timezone="UTC")
    out_schema = arrow.append(pa.field(file_column, pa.string(), True)) if file_column else arrow
    spark_schema = from_arrow_schema(out_schema)
    if not slices:
        return spark.createDataFrame([], spark_schema)
    base_uri, so = table.base_uri, dict(storage_options or {})

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from airflow_hudi_occ.core.table.file_system_view import FileSystemView
        opened = completion = None
        for b in batches:
            for i in b.column(0).to_pylist():
                if opened is None:
                    opened = Table.open(base_uri, so or None)
                    completion = CompletionTimes(FileSystemView(opened))
                t = conform(read_file_slice(opened, slices[i], completion), arrow)
                if file_column:
                    t = t.append_column(file_column, pa.array([labels[i]] * t.num_rows, pa.string()))
                yield from t.to_batches()

    n = max(1, min(len(slices), default_parallelism(spark)))
    index = spark.createDataFrame([(i,) for i in range(len(slices))], "i int").repartition(n)
    return index.mapInArrow(read, spark_schema)
