"""Executing a scheduled compaction plan with Spark.

::

    driver:    CompactionTransaction.adopt (a dead executor's inflight compaction is rolled back
               to requested first; a live one's is refused) -> empty compaction.inflight
    executors: one task per plan operation (file slice): abort? -> the files of an earlier
               attempt of this task deleted (by their markers) -> core's compact_file_slice:
               base + exactly the plan's log files merged, MERGE marker, the new base file
               ``<fileId>_<token>_<t>.parquet`` (records keep their commit time)
    driver:    core's complete_compaction: the ``commit`` (COMPACT, compacted) under the lock

The per-slice merge and the completion are core's (core/services/compaction.py), so the Arrow
executor and this one cannot disagree on what a compaction writes. A failure rolls the instant
back to *requested* with its plan (core's rule: a compaction is never abandoned), so the next
attempt runs the same plan; a driver killed mid-way leaves it inflight, and the next attempt's
``adopt`` rolls it back once its heartbeat has expired, then runs it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from airflow_hudi_occ.core.concurrency import abort_signal
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import HudiOccError, WriteAbortedError
from airflow_hudi_occ.core.format.metadata import CompactionOperation, WriteStat
from airflow_hudi_occ.core.services.compaction import (CompactionResult, CompactionTransaction,
                                                       compact_file_slice, compaction_config,
                                                       complete_compaction)
from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.core.format.layout import base_file_name
from airflow_hudi_occ.core.table.mor_reader import CompletionTimes
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.spark.errors import SparkWriteError, short_message
from airflow_hudi_occ.spark.jobgroup import JobAborted, run_watched
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
                              check_abort=lambda: abort_signal.check_abort(table, ctx.instant))
    # as executor._write: a file created after the driver's abort is removed by its writer
    if abort_signal.abort_reason(table, ctx.instant) is not None:
        table.storage.delete(table.storage.path(stat.path))
        raise WriteAbortedError(f"compaction {ctx.instant} aborted while writing {stat.path}",
                                instant=ctx.instant, reason="aborted")
    return stat


class SparkCompactionExecutor(SparkTableJob):
    """Executes a scheduled compaction plan on Spark, one task per file slice, and commits it."""

    def execute(self, instant: str | None = None, *,
                before_commit: Callable | None = None,
                task: Callable[[CompactionTaskContext, CompactionOperation], WriteStat] = compact_operation
                ) -> CompactionResult:
        """Execute ``instant`` (default: the earliest pending compaction) and commit it.
        ``task`` is the per-slice function (tests wrap it to fail or stall a task)."""
        table = Table.open(self.base_path, self.storage_options)
        cfg = compaction_config(self.options)
        t0 = time.time()
        tx = CompactionTransaction(table, cfg.write, lock_manager=self._lock_manager,
                                   writer_id=self.writer_id)
        plan = tx.adopt(instant)
        try:
            tx.start_inflight(data=b"")  # Java's compaction.inflight is empty
            timeline = table.timeline()
            ops = list(plan.operations)
            stats: list[WriteStat] = []
            if ops:
                ctx = CompactionTaskContext(table.base_uri, self.storage_options or {},
                                            dict(cfg.write.options), tx.instant_time)
                rdd = self.spark.sparkContext.parallelize(ops, len(ops)) \
                          .map(lambda op: task(ctx, op))
                stats = run_watched(self.spark, table, tx.instant_time, rdd.collect,
                                    description=f"hudi compact {table.name} {tx.instant_time}")
            return complete_compaction(table, tx, stats, timeline, started=t0,
                                       before_commit=before_commit)
        except JobAborted as ja:
            err = abort_signal.error_for(tx.instant_time, ja.info)
            self._abort(tx, table, err)
            raise err from None
        except HudiOccError as e:
            self._abort(tx, table, e)
            raise
        except BaseException as e:
            self._abort(tx, table, e)
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            raise SparkWriteError(f"the Spark compaction {tx.instant_time} failed: {short_message(e)}",
                                  instant=tx.instant_time, cause=type(e).__name__) from e

    @staticmethod
    def _abort(tx, table, err) -> None:
        """Back to requested, plan kept (core's rollback of a compaction)."""
        try:
            tx.abort(reason=f"{type(err).__name__}: {short_message(err)}", error=err)
        finally:
            abort_signal.clear_abort(table, tx.instant_time)


__all__ = ["SparkCompactionExecutor", "CompactionTaskContext", "compact_operation"]
