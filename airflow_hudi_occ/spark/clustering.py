"""Executing a scheduled clustering plan with Spark.

::

    driver:    core's scheduled-instant pipeline (core/services/scheduled.run_scheduled):
               ClusteringTransaction.adopt (lock: the plan, heartbeat, snapshot as the plan
               saw the table) -> inflight
               -> read the plan's file slices: base files by Spark's parquet reader (schemas
               merged); a merge-on-read slice with log files as the plan names it (base file
               + the plan's deltaFilePaths, services/clustering.planned_slices), merged by
               reader.read_merged_slices (core's merge: the logs' updates applied, deletes
               dropped), as Java's clustering executor reads the slice its plan names
               -> each row gets its output file group: one of the group's
               numOutputFileGroups new fileIds, by record-key hash
    executors: per new file group (executor.py, mode "cluster"): marker -> rows sorted by the
               plan's sort columns -> one parquet base file; every record keeps its
               _hoodie_commit_time (incremental readers must not see clustered rows as new)
    driver:    commit as a table service: replacecommit with partitionToReplaceFileIds, under
               the lock, with the configured conflict strategy deciding who yields

A conflict aborts the job like a write does (jobgroup.py): the instant, plan included, is
rolled back, so the clustering can be scheduled again.

Writers after the plan (Hudi's rule, docs/merge-on-read.md): the slices read are those the
plan names (its log files included), never a log that completed after it. Under the Reject
updates strategy (the default, except under prefer-writer) no writer reaches a file group of a
pending plan; under simple with Allow, a deltacommit into one meets the pending plan at its own
commit and loses. Under prefer-writer (Allow), a deltacommit into one of them that completes
after the plan was requested is a conflict for this commit and the clustering yields (as
Java's does): its rows are neither read here nor lost.
"""

from __future__ import annotations

import posixpath
from typing import Callable

from airflow_hudi_occ.core.commit.pipeline import Failure
from airflow_hudi_occ.core.concurrency import abort_signal
from airflow_hudi_occ.core.format.base_file import new_file_id
from airflow_hudi_occ.core.services.clustering import (ClusteringResult, ClusteringWork, planned_slices,
                                                       sort_columns_of)
from airflow_hudi_occ.core.config import ClusteringConfig
from airflow_hudi_occ.core.services.scheduled import Executed, run_scheduled
from airflow_hudi_occ.core.table.file_system_view import relative_path
from airflow_hudi_occ.core.format.metadata import WriteStat
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.format.layout import META_COLUMNS
from airflow_hudi_occ.spark import tagging
from airflow_hudi_occ.spark.errors import spark_failure
from airflow_hudi_occ.spark.executor import STAT_DDL, TaskContext, make_group_fn
from airflow_hudi_occ.spark.jobgroup import run_watched
from airflow_hudi_occ.spark.compat import apply_in_arrow
from airflow_hudi_occ.spark.reader import read_merged_slices
from airflow_hudi_occ.spark.writer import EXTRA_ENGINE, SparkTableJob, arrow_schema_of, sweep_failed_base_files

NAME = "__hudi_src_name"


class SparkClustering(ClusteringWork):
    """Spark's part of a scheduled clustering (``core/services/scheduled``): the plan's slices
    read by Spark, one task per new file group; a failed job translated as every Spark
    action's (``errors.spark_failure``), the failed instant's stray base files swept."""

    extra_metadata = {EXTRA_ENGINE: "spark"}

    def __init__(self, job: "SparkClusteringExecutor", table: Table, config: ClusteringConfig):
        super().__init__(table, config, lock_manager=job.lock_manager, writer_id=job.writer_id)
        self.job = job
        self.spark = job.spark

    def execute(self, tx, plan) -> Executed:
        from pyspark.sql import functions as F

        table, cfg = self.table, self.config
        merged = planned_slices(table, plan, tx.instant_time)
        mapping, rels, replaced = [], [], {}
        plain, logged, logged_names = [], [], []
        for g in plan.input_groups:
            ids = [new_file_id() for _ in range(max(1, g.num_output_file_groups))]
            for part, fid, path in g.slices:
                rel = relative_path(table, path)
                rels.append(rel)
                mapping.append((posixpath.basename(rel), part, ids))
                replaced.setdefault(part, []).append(fid)
                if (part, fid) in merged:
                    logged.append(merged[(part, fid)])
                    logged_names.append(posixpath.basename(rel))
                else:
                    plain.append(rel)
        df = self._read_slices(rels, plain, logged, logged_names)
        m = self.spark.createDataFrame(mapping, f"{NAME} string, __part string, __ids array<string>")
        user_columns = [c for c in df.columns if c not in META_COLUMNS and c != NAME]
        joined = df.join(F.broadcast(m), NAME)
        pick = F.element_at(F.col("__ids"), (F.pmod(F.hash(F.col(tagging.KEY)),
                                                    F.size(F.col("__ids"))) + 1).cast("int"))
        rows_df = joined.select(*user_columns, tagging.KEY, F.col("__part").alias(tagging.PART),
                                pick.alias(tagging.FID), "_hoodie_commit_time")
        ctx = TaskContext(base_uri=table.base_uri, storage_options=self.job.storage_options or {},
                          options=dict(cfg.write.options), instant=tx.instant_time, mode="cluster",
                          user_columns=user_columns,
                          target_schema=arrow_schema_of(df.select(*user_columns)),
                          precombine=None, prev={}, sort_columns=sort_columns_of(plan, cfg),
                          completed_at_start=sorted(tx.snapshot.completed_at_start))
        job = apply_in_arrow(rows_df, (tagging.PART, tagging.FID), make_group_fn(ctx), STAT_DDL)
        rows = run_watched(self.spark, table, tx.instant_time, job.collect,
                           description=f"hudi cluster {table.name} {tx.instant_time}")
        stats = [WriteStat(file_id=r.file_id, path=r.path, partition_path=r.partition,
                           num_writes=r.num_writes, num_inserts=r.num_inserts,
                           file_size_in_bytes=r.file_size, total_write_bytes=r.file_size,
                           create_time_ms=r.write_ms) for r in rows]
        return Executed(stats, replaced)

    def _read_slices(self, rels, plain, logged, logged_names):
        """The plan's rows, each with its slice's base-file name (``NAME``): base files of
        slices without log files by Spark's parquet reader, the slices with log files merged
        by core's merge on the executors (``reader.read_merged_slices``), in the columns of
        every base file merged."""
        from pyspark.sql import functions as F
        table = self.table
        root = table.storage.root
        df = self.spark.read.option("mergeSchema", "true").parquet(*[f"{root}/{r}" for r in rels])
        if not logged:
            return df.withColumn(NAME, F.regexp_extract(F.input_file_name(), r"([^/]+)$", 1))
        schema = df.schema
        frames = []
        if plain:
            frames.append(self.spark.read.schema(schema).parquet(*[f"{root}/{r}" for r in plain])
                          .withColumn(NAME, F.regexp_extract(F.input_file_name(), r"([^/]+)$", 1)))
        frames.append(read_merged_slices(self.spark, table, logged, schema,
                                         storage_options=self.job.storage_options, file_column=NAME,
                                         names=logged_names))
        out = frames[0]
        for f in frames[1:]:
            out = out.unionByName(f)
        return out

    def failure(self, tx, error) -> Failure:
        return spark_failure(error, tx.instant_time, f"clustering {tx.instant_time}")

    def after_abort(self, tx, failure) -> None:
        parts = {p for g in tx.plan.input_groups for p, _f, _ in g.slices}
        sweep_failed_base_files(self.table, tx.instant_time, parts)
        abort_signal.clear_abort(self.table, tx.instant_time)


class SparkClusteringExecutor(SparkTableJob):
    """Executes a scheduled clustering plan on Spark and commits it as a table service."""

    def execute(self, instant: str | None = None, *,
                before_commit: Callable | None = None) -> ClusteringResult:
        """Execute ``instant`` (default: the earliest pending clustering plan) and commit it."""
        table = Table.open(self.base_path, self.storage_options)
        table.require_meta_fields("Spark clustering")
        work = SparkClustering(self, table, ClusteringConfig.from_options(self.options))
        return work.result(run_scheduled(work, instant, before_commit=before_commit))


__all__ = ["SparkClusteringExecutor", "SparkClustering"]
