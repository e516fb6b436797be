"""Executing a scheduled compaction plan with Spark.

::

    driver:    core's scheduled-instant pipeline (core/services/scheduled.run_scheduled):
               CompactionTransaction.adopt (a dead executor's inflight compaction is rolled
               back to requested first; a live one's is refused) -> empty compaction.inflight
    executors: one task per plan operation (file slice): abort? -> the files of an earlier
               attempt of this task deleted (by their markers) -> core's compact_file_slice:
               base + exactly the plan's log files merged, MERGE marker, the new base file
               ``<fileId>_<token>_<t>.parquet`` (records keep their commit time)
    driver:    the pipeline's ``commit`` (COMPACT, compacted) under the lock

The per-slice merge and the completion are core's (``compact_file_slice``, ``CompactionWork``
in core/services/compaction.py), so the Arrow executor and this one cannot disagree on what a
compaction writes. A failure rolls the instant
back to *requested* with its plan (core's rule: a compaction is never abandoned), so the next
attempt runs the same plan; a driver killed mid-way leaves it inflight, and the next attempt's
``adopt`` rolls it back once its heartbeat has expired, then runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from airflow_hudi_occ.core.concurrency import abort_signal
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.commit.pipeline import Failure
from airflow_hudi_occ.core.errors import WriteAbortedError
from airflow_hudi_occ.core.format.metadata import CompactionOperation, WriteStat
from airflow_hudi_occ.core.services.compaction import (CompactionResult, CompactionWork, compact_file_slice,
                                                       compaction_config)
from airflow_hudi_occ.core.services.scheduled import run_scheduled
from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.core.format.layout import base_file_name
from airflow_hudi_occ.core.table.mor_reader import CompletionTimes
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.spark.compat import task_per_item
from airflow_hudi_occ.spark.errors import spark_failure
from airflow_hudi_occ.spark.jobgroup import run_watched
from airflow_hudi_occ.spark.writer import SparkTableJob


@dataclass
class CompactionTaskContext:
    """What a compaction task needs, as plain values (shipped in the closure)."""

    base_uri: str
    storage_options: dict
    options: dict
    instant: str


def compact_operation(ctx: CompactionTaskContext, op: CompactionOperation) -> WriteStat:
    """One Spark task: one file slice of the plan into its new base file."""
    from airflow_hudi_occ.core.concurrency.markers.write_markers import markers_for
    from airflow_hudi_occ.spark.executor import clear_previous_attempts, task_token
    table = Table.open(ctx.base_uri, ctx.storage_options or None)
    config = WriteConfig.from_options(ctx.options)
    markers = markers_for(table, ctx.instant, config.marker_type)
    abort_signal.check_abort(table, ctx.instant)
    token = task_token()
    name = base_file_name(op.file_id, token, ctx.instant)
    # a retried task (or a re-run stage) leaves one new base file per file group
    clear_previous_attempts(table, markers, op.partition_path, op.file_id, name)
    completion = CompletionTimes(FileSystemView(table, table.timeline()))
    stat = compact_file_slice(table, ctx.instant, op, completion, token=token,
                              create_marker=markers.create,
                              check_abort=lambda: abort_signal.check_abort(table, ctx.instant),
                              parquet=config.parquet)
    # as executor._write: a file created after the driver's abort is removed by its writer
    if abort_signal.abort_reason(table, ctx.instant) is not None:
        table.storage.delete(table.storage.path(stat.path))
        raise WriteAbortedError(f"compaction {ctx.instant} aborted while writing {stat.path}",
                                instant=ctx.instant, reason="aborted")
    return stat


class SparkCompaction(CompactionWork):
    """Spark's part of a scheduled compaction (``core/services/scheduled``): one task per plan
    operation; a failed job translated as every Spark action's (``errors.spark_failure``)."""

    def __init__(self, job: "SparkCompactionExecutor", table: Table, config, task):
        super().__init__(table, config, lock_manager=job.lock_manager, writer_id=job.writer_id)
        self.job = job
        self.task = task

    def compact(self, tx, ops, timeline) -> list[WriteStat]:
        if not ops:
            return []
        table, task = self.table, self.task
        ctx = CompactionTaskContext(table.base_uri, self.job.storage_options or {},
                                    dict(self.config.write.options), tx.instant_time)
        job = task_per_item(self.job.spark, ops, lambda op: task(ctx, op))
        return run_watched(self.job.spark, table, tx.instant_time, job,
                           description=f"hudi compact {table.name} {tx.instant_time}")

    def failure(self, tx, error) -> Failure:
        return spark_failure(error, tx.instant_time, f"compaction {tx.instant_time}")

    def after_abort(self, tx, failure) -> None:
        """Back to requested, plan kept (core's rollback of a compaction); the signal cleared."""
        abort_signal.clear_abort(self.table, tx.instant_time)


class SparkCompactionExecutor(SparkTableJob):
    """Executes a scheduled compaction plan on Spark, one task per file slice, and commits it."""

    def execute(self, instant: str | None = None, *,
                before_commit: Callable | None = None,
                task: Callable[[CompactionTaskContext, CompactionOperation], WriteStat] = compact_operation
                ) -> CompactionResult:
        """Execute ``instant`` (default: the earliest pending compaction) and commit it.
        ``task`` is the per-slice function (tests wrap it to fail or stall a task)."""
        table = Table.open(self.base_path, self.storage_options)
        work = SparkCompaction(self, table, compaction_config(self.options), task)
        return work.result(run_scheduled(work, instant, before_commit=before_commit))


__all__ = ["SparkCompactionExecutor", "SparkCompaction", "CompactionTaskContext", "compact_operation"]
