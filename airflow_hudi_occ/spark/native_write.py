"""New file groups written by Spark's own parquet writer, then published under Hudi names.

A write that only creates file groups (``bulk_insert``, ``insert_overwrite``) has nothing to
merge, so its records never need to reach Python: the five meta columns are Spark
expressions, Spark's parquet writer writes one file per file group into a staging folder, and
the driver moves each file to its Hudi name. Two plans feed it:

- a batch that combines keys but has no duplicate: every input task writes the records it
  reads into file groups of its own, after a keys-only counting job that shuffles a hash of
  each key (file_group_plan.plan_by_task);
- otherwise the records are shuffled by file group and deduplicated there.

A copy-on-write ``bulk_insert`` that does not combine keys (Hudi's default) is written by
pyarrow in its input tasks instead (pair_write.py: cheaper meta columns, no sort, the batch
check in the same job); it shares this module's markers, staging and :func:`publish`.

What a Hudi write guarantees is kept:

- names: ``<fileId>_<writeToken>_<instant>.parquet``, the token fixed per file group
  (``<group index>-0-0``), so ``_hoodie_file_name`` is known before
  the job and a retried Spark task
  cannot leave a second file (Spark's commit protocol keeps one attempt's output, and only
  committed output is in the staging folder);
- markers before data: the driver creates every marker (after the one early-conflict check
  of all planned file groups) before the job starts, and data files appear under their
  names only after the job; the staging folder lives in the instant's marker folder
  (``.hoodie/.temp/<instant>/.spark-staging``), so a rollback removes it with the markers;
- early conflicts: the driver's async checker and the abort signal cancel the job group as
  for the Python route (jobgroup.py), and both are looked at again before publishing.

Only on a local file system (a rename there is atomic and cheap) and for schemas that both
writers store alike (no ``timestamp`` column, which Spark would store as INT96); anything
else takes the Python route (executor.py).
"""

from __future__ import annotations

import os
import posixpath
import time

import pyarrow.parquet as pq
from pyspark.sql import functions as F
from pyspark.sql import types as T

from airflow_hudi_occ.core.concurrency import abort_signal
from airflow_hudi_occ.core.config import ParquetConfig
from airflow_hudi_occ.core.concurrency.markers.write_markers import markers_for
from airflow_hudi_occ.core.errors import WriteAbortedError
from airflow_hudi_occ.core.format.base_file import UNIQUE_META_COLUMNS
from airflow_hudi_occ.core.format.layout import META_COLUMNS, base_file_name, join_partition
from airflow_hudi_occ.core.format.metadata import WriteStat
from airflow_hudi_occ.spark import tagging
from airflow_hudi_occ.spark.session import task_ids_as_run

STAGING = ".spark-staging"
GROUP = "__hudi_group"


def applies(table, mode: str, spark_schema) -> bool:
    """Whether this write may take the native route (see the module docstring)."""
    return mode == "create" and table.storage.is_local and not _has_timestamp(spark_schema)


def _has_timestamp(dt) -> bool:
    if isinstance(dt, T.TimestampType):
        return True
    if isinstance(dt, T.StructType):
        return any(_has_timestamp(f.dataType) for f in dt.fields)
    if isinstance(dt, T.ArrayType):
        return _has_timestamp(dt.elementType)
    if isinstance(dt, T.MapType):
        return _has_timestamp(dt.keyType) or _has_timestamp(dt.valueType)
    return False


def file_names(planned: list, instant: str) -> dict:
    """(partition, fileId) -> the base file name it gets, token ``<index>-0-0``."""
    return {g: base_file_name(g[1], f"{i}-0-0", instant) for i, g in enumerate(planned)}


def create_markers(table, config, instant: str, names: dict) -> None:
    """Every marker, and every partition's metadata, before the job writes a byte."""
    markers = markers_for(table, instant, config.marker_type)
    markers.create_many([(p, name, "CREATE") for (p, _), name in names.items()])
    for p in sorted({p for p, _ in names}):
        if p:
            table.write_partition_metadata(p, instant)


def staging_dir(table, instant: str) -> str:
    return table.storage.path(".hoodie", ".temp", instant, STAGING)


def write_job(spark, records, user_columns: list[str], instant: str, names: dict, out_dir: str,
              meta_fields: bool = True, parquet: ParquetConfig | None = None, sort_by_key: bool = False):
    """The Spark action (to run under the watched job group): ``records`` (one per key,
    shuffled by file group, with the key, partition and file id columns) with the meta
    columns (``meta_fields=False``, virtual keys: without them), written by Spark's parquet
    writer into ``out_dir/<GROUP>=<index>/`` with ``parquet``'s codec, row group and page
    sizes (Hudi's ``hoodie.parquet.*``; parquet-mr's own keys, as Java Hudi passes them);
    ``sort_by_key``: each file's rows by record key (a bulk_insert's sort mode)."""
    index = spark.createDataFrame(
        [(p, f, i, names[(p, f)]) for i, (p, f) in enumerate(names)],
        "__ip string, __if string, __hudi_group int, __iname string")
    df = records.join(F.broadcast(index), (records[tagging.PART] == index["__ip"])
                      & (records[tagging.FID] == index["__if"]))
    # Sorted by GROUP before the meta columns exist: Spark's writer needs that order and would
    # otherwise sort the wide rows. The sequence number is <instant>_<group>_<row of the task>.
    df = df.sortWithinPartitions(GROUP, tagging.KEY) if sort_by_key else df.sortWithinPartitions(GROUP)
    seq = F.monotonically_increasing_id().bitwiseAND((1 << 33) - 1).cast("string")
    meta = {
        "_hoodie_commit_time": F.lit(instant),
        "_hoodie_commit_seqno": F.concat(F.lit(f"{instant}_"), F.col(GROUP).cast("string"), F.lit("_"), seq),
        "_hoodie_record_key": F.col(tagging.KEY),
        "_hoodie_partition_path": F.col(tagging.PART),
        "_hoodie_file_name": F.col("__iname"),
    }
    # Every column nullable, as the Python route writes them (readers that concatenate files
    # of one table want one schema): a condition Spark cannot fold keeps the column nullable.
    known = F.col(GROUP) >= 0
    cols = [F.when(known, meta[c]).alias(c) for c in META_COLUMNS] if meta_fields else []
    cols += [F.when(known, F.col(c)).alias(c) for c in user_columns]
    out = df.select(*cols, GROUP)

    def action():
        w = out.write.mode("overwrite").partitionBy(GROUP).option(
            "compression", parquet.codec if parquet is not None else "snappy")
        if parquet is not None and parquet.block_size is not None:
            w = w.option("parquet.block.size", str(parquet.block_size))
        if parquet is not None and parquet.page_size is not None:
            w = w.option("parquet.page.size", str(parquet.page_size))
        for c in UNIQUE_META_COLUMNS:  # no dictionary built only to be dropped (as base_file.py)
            w = w.option(f"parquet.enable.dictionary#{c}", "false")
        with task_ids_as_run(spark):  # a plan by input task: the tasks it counted
            w.parquet(out_dir)
    return action


def staged_files(names: dict, out_dir: str) -> list[tuple[str, str, str, str]]:
    """What Spark's writer staged: (partition, fileId, name, staged file) per file group of
    ``names`` that got records (one whose hash range stayed empty has no file). A staged
    folder outside them (the input changed after it was counted) fails the write before
    anything is moved."""
    folders = {g: i for i, g in enumerate(names)}
    staged = {n.split("=", 1)[1] for n in os.listdir(out_dir) if n.startswith(f"{GROUP}=")} \
        if os.path.isdir(out_dir) else set()
    unplanned = staged - {str(v) for v in folders.values()}
    if unplanned:
        raise RuntimeError(
            f"Spark wrote {len(unplanned)} file group(s) the plan did not count: the input "
            "changed between the count and the write; make it deterministic (e.g. cache it) "
            "and retry")
    out = []
    for (partition, file_id), name in names.items():
        folder = os.path.join(out_dir, f"{GROUP}={folders[(partition, file_id)]}")
        if not os.path.isdir(folder):
            continue
        files = [n for n in os.listdir(folder) if n.endswith(".parquet") and not n.startswith(".")]
        if len(files) != 1:
            raise RuntimeError(f"Spark wrote {len(files)} files for file group "
                               f"{partition}/{file_id}; expected one")
        out.append((partition, file_id, name, os.path.join(folder, files[0])))
    return out


def publish(table, instant: str, staged: list[tuple[str, str, str, str]], out_dir: str,
            started: float) -> list[WriteStat]:
    """Move each file group's one staged file (``staged``: (partition, fileId, name, staged
    file), :func:`staged_files` or the pyarrow route's reports) to its Hudi name, after an
    abort check; its write stat from the footer. The staging folder is removed after."""
    abort_signal.check_abort(table, instant)
    ms = int((time.time() - started) * 1000)
    stats = []
    for partition, file_id, name, source in staged:
        rel = join_partition(partition, name)
        dest = table.storage.path(rel)
        os.makedirs(posixpath.dirname(dest), exist_ok=True)
        if os.path.exists(dest):
            raise FileExistsError(f"base file {rel} already exists")
        os.rename(source, dest)
        rows = pq.read_metadata(dest).num_rows
        size = os.path.getsize(dest)
        stats.append(WriteStat(file_id=file_id, path=rel, partition_path=partition, prev_commit="null",
                               num_writes=rows, num_deletes=0, num_update_writes=0, num_inserts=rows,
                               file_size_in_bytes=size, total_write_bytes=size, prev_base_file=None,
                               create_time_ms=ms, upsert_time_ms=0))
    table.storage.delete_dir(out_dir)
    if abort_signal.abort_reason(table, instant) is not None:  # aborted while publishing
        raise WriteAbortedError(f"write {instant} aborted while publishing its files",
                                instant=instant, reason="aborted")
    return stats
