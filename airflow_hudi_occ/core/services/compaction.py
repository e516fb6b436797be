"""Compaction of merge-on-read tables: merge a file slice's log files into a new base file.

**Scheduling** (:func:`schedule_compaction`) happens under the table lock, so the plan sees a
static table and its instant time is larger than every completion time already on the
timeline. It first asks Hudi's trigger (``hoodie.compact.inline.trigger.strategy``, default
NUM_COMMITS: at least ``hoodie.compact.inline.max.delta.commits`` = 5 deltacommits since the
last compaction), then plans as Java 1.x's ``BaseHoodieCompactionPlanGenerator`` does:

- every latest file slice with committed log files, except file groups already in a pending
  compaction or clustering plan (one pending plan per file group);
- only log files whose deltacommit completed before the compaction instant. A deltacommit
  still inflight is *not* a reason to refuse its file group (Hudi 1.x does not): when it
  completes, its completion time is after the compaction's instant, so readers put its log
  file into the *new* slice, the one the compaction's base file starts;
- ``hoodie.compaction.strategy`` orders and bounds the slices (log-size based, the default,
  bounded by ``hoodie.compaction.target.io``; log-count based; unbounded).

The plan is Hudi's ``HoodieCompactionPlan`` in ``<t>.compaction.requested``.

**Executing** needs no lock. :class:`CompactionTransaction` adopts the plan (heartbeat, an
empty ``<t>.compaction.inflight`` as Java writes it), :func:`execute_compaction` merges each
slice with the merge-on-read reader's merge (base + the plan's log files, nothing newer),
writes ``<fileId>_<token>_<t>.parquet`` behind a MERGE marker (records keep their
``_hoodie_commit_time``), and commits: ``<t>_<c>.commit`` with ``operationType`` COMPACT and
``compacted`` true. Deltacommits never make a compaction abort (see ``concurrency/conflict``):
Java's ``completeCompaction`` runs no conflict resolution, because on table version 8 a
deltacommit that completes after the plan is in the new slice, whatever file group it touched.

**Failure**: a compaction is never abandoned, only retried. A dead executor's inflight
compaction is rolled back (a rollback instant deletes the files its markers name and the
inflight file) back to *requested*, with its plan, and executed again by the next
:func:`execute_compaction`. Readers never see a pending compaction's base files (their instant
is not completed), and a writer appending meanwhile writes its own log file, which belongs to
the new slice once the compaction completes (hudi-rs and Java slice by completion time).

Errors: :class:`ConfigError` (not a merge-on-read table, an unknown strategy),
:class:`InstantStateError` (no such pending compaction; a live executor already runs it), and
the transaction's retryable errors at commit (lock, a replaced file group).
"""

from __future__ import annotations

import logging
import time
from abc import abstractmethod
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping

import pyarrow as pa

from airflow_hudi_occ.core.commit.rollback import rollback_instant
from airflow_hudi_occ.core.services.scheduled import (Executed, ScheduledInstantTransaction, ScheduledOutcome,
                                                     ScheduledWork, run_scheduled)
from airflow_hudi_occ.core.concurrency.clustering_gate import pending_clustering_file_groups
from airflow_hudi_occ.core.concurrency.heartbeat import is_expired
from airflow_hudi_occ.core.concurrency.locks import table_lock_manager
from airflow_hudi_occ.core.config import (LOG_FILE_NUM_STRATEGY, LOG_FILE_SIZE_STRATEGY, CompactionConfig,
                                          CompactionTriggerStrategy, WriteConfig, service_config)
from airflow_hudi_occ.core.errors import ConfigError, InstantStateError
from airflow_hudi_occ.core.format.base_file import write_parquet, write_token
from airflow_hudi_occ.core.format.instant import Action, Instant, State
from airflow_hudi_occ.core.format.instant_time import process_generator
from airflow_hudi_occ.core.format.layout import FileGroupId, join_partition, parse_base_file_name
from airflow_hudi_occ.core.format.log_file import LogFileName
from airflow_hudi_occ.core.format.metadata import CommitMetadata, CompactionOperation, CompactionPlan, WriteStat
from airflow_hudi_occ.core.table.file_system_view import FileSlice, FileSystemView
from airflow_hudi_occ.core.format.layout import base_file_name
from airflow_hudi_occ.core.table.mor_reader import CompletionTimes, MergeFileSlice, merge_file_slices, read_file_slice
from airflow_hudi_occ.core.table.table import MERGE_ON_READ
from airflow_hudi_occ.core.table.timeline import create_requested
from airflow_hudi_occ.core.table.write_guard import prepare_for_write

log = logging.getLogger(__name__)

COMPACT = "COMPACT"
FILE_NAME = "_hoodie_file_name"
_MB = 1024 * 1024


def compaction_config(config: CompactionConfig | WriteConfig | Mapping[str, Any] | None) -> CompactionConfig:
    return service_config(CompactionConfig, config)


def _require_mor(table) -> None:
    if table.config.table_type != MERGE_ON_READ:
        raise ConfigError(f"table {table.name} is {table.config.table_type}: only merge-on-read "
                          "tables have log files to compact", key="hoodie.table.type",
                          value=table.config.table_type,
                          remedy="compact merge-on-read tables; cluster copy-on-write ones")


# --- the trigger -----------------------------------------------------------------------------


def _instant_seconds(t: str) -> float:
    return datetime.strptime(t[:14], "%Y%m%d%H%M%S").timestamp() + int(t[14:] or 0) / 1000


def deltacommits_since_compaction(timeline, *, after_last_request: bool = False) -> tuple[int, str | None]:
    """Completed deltacommits after the last compaction, and the time elapsed ones count from.

    Hudi's anchor is the last completed compaction (a completed ``commit`` on a MOR table);
    with NUM_COMMITS_AFTER_LAST_REQUEST, the last *requested* one, pending or not. With no
    compaction yet, every deltacommit counts and time runs from the first one.
    """
    compactions = [i for i in timeline if i.action is Action.COMMIT and i.is_completed]
    if after_last_request:
        compactions += timeline.pending_compactions()
    anchor = max((i.requested_time for i in compactions), default=None)
    deltas = [i for i in timeline.completed() if i.action is Action.DELTA_COMMIT
              and (anchor is None or i.requested_time > anchor)]
    start = anchor or min((i.requested_time for i in deltas), default=None)
    return len(deltas), start


def trigger_reached(timeline, cfg: CompactionConfig, *, now: float | None = None) -> tuple[bool, str]:
    """Hudi's ``needCompact``: whether scheduling should plan at all, and why (for logs)."""
    trig = cfg.trigger
    n, since = deltacommits_since_compaction(
        timeline, after_last_request=trig is CompactionTriggerStrategy.NUM_COMMITS_AFTER_LAST_REQUEST)
    elapsed = (now if now is not None else time.time()) - _instant_seconds(since) if since else 0.0
    by_num = n >= cfg.max_delta_commits
    by_time = since is not None and elapsed >= cfg.max_delta_seconds
    ok = {CompactionTriggerStrategy.NUM_COMMITS: by_num,
          CompactionTriggerStrategy.NUM_COMMITS_AFTER_LAST_REQUEST: by_num,
          CompactionTriggerStrategy.TIME_ELAPSED: by_time,
          CompactionTriggerStrategy.NUM_AND_TIME: by_num and by_time,
          CompactionTriggerStrategy.NUM_OR_TIME: by_num or by_time}[trig]
    why = (f"{trig.value}: {n} deltacommits (need {cfg.max_delta_commits}), "
           f"{int(elapsed)}s elapsed (need {cfg.max_delta_seconds})")
    return ok, why


# --- planning --------------------------------------------------------------------------------


def _operation(table, fs: MergeFileSlice) -> CompactionOperation:
    storage = table.storage
    base = fs.base
    base_size = storage.size(storage.path(base.base_file.relative_path)) if base is not None else 0
    log_size = sum(storage.size(storage.path(p)) for p in fs.log_paths())
    read_mb = (base_size + log_size) / _MB
    write_mb = base_size / _MB
    # a log-only slice (NBCC's new bucket) has no data file; its base instant is its first
    # deltacommit's, as Java keys a base-less group's slice by a log file's instant
    base_instant = base.instant_time if base is not None else min(lf.instant_time for lf in fs.log_files)
    return CompactionOperation(
        fs.partition, fs.file_group.file_id, base_instant,
        base.base_file.name if base is not None else None,
        [lf.name for lf in fs.log_files],
        {"TOTAL_LOG_FILES": float(len(fs.log_files)), "TOTAL_LOG_FILES_SIZE": float(log_size),
         "TOTAL_IO_READ_MB": read_mb, "TOTAL_IO_WRITE_MB": write_mb, "TOTAL_IO_MB": read_mb + write_mb})


def _apply_strategy(ops: list[CompactionOperation], cfg: CompactionConfig) -> list[CompactionOperation]:
    """Hudi's strategies: the log-size and log-count ones filter by their threshold, order
    largest first and stop once ``target.io`` MB is used (BoundedIOCompactionStrategy)."""
    if cfg.strategy == LOG_FILE_SIZE_STRATEGY:
        ops = [o for o in ops if o.metrics["TOTAL_LOG_FILES_SIZE"] >= cfg.logfile_size_threshold]
        ops.sort(key=lambda o: (-o.metrics["TOTAL_LOG_FILES_SIZE"], o.partition_path, o.file_id))
    elif cfg.strategy == LOG_FILE_NUM_STRATEGY:
        ops = [o for o in ops if o.metrics["TOTAL_LOG_FILES"] >= cfg.logfile_num_threshold]
        ops.sort(key=lambda o: (-o.metrics["TOTAL_LOG_FILES"], o.partition_path, o.file_id))
    else:
        return ops
    out, remaining = [], float(cfg.target_io_mb)
    for o in ops:
        if remaining <= 0:
            break
        remaining -= o.metrics["TOTAL_IO_MB"]
        out.append(o)
    return out


def _completed_before(completion: CompletionTimes, lf: LogFileName, instant_time: str) -> bool:
    done = completion.completion_time(lf.instant_time)
    return done is not None and done < instant_time


def plan_compaction(table, timeline, cfg: CompactionConfig, instant_time: str) -> CompactionPlan:
    """The plan a compaction at ``instant_time`` would take on this timeline (no writes)."""
    excluded: set[FileGroupId] = set(timeline.pending_compaction_file_groups())
    excluded |= set(pending_clustering_file_groups(timeline))
    view = FileSystemView(table, timeline)
    completion = CompletionTimes(view)
    ops = []
    for fs in merge_file_slices(table, view):
        if fs.file_group in excluded:
            continue
        # only log files of deltacommits completed before this instant (Java's "IMPORTANT" rule:
        # a log completing later belongs to the slice this compaction starts)
        logs = tuple(lf for lf in fs.log_files if _completed_before(completion, lf, instant_time))
        if logs:
            ops.append(_operation(table, MergeFileSlice(fs.base, logs, fs.group)))
    return CompactionPlan(_apply_strategy(ops, cfg))


def schedule_compaction(table, config: CompactionConfig | WriteConfig | Mapping[str, Any] | None = None,
                        *, lock_manager=None, force: bool = False, now: float | None = None) -> str | None:
    """Plan a compaction under the table lock; its instant time, or None if the trigger is not
    reached (``force`` skips the trigger) or no slice has log files to compact."""
    cfg = compaction_config(config)
    _require_mor(table)
    table.require_writable()
    lm = lock_manager or table_lock_manager(table, cfg.write)
    gen = process_generator(cfg.write.skew_wait_ms)
    with lm.locked():
        prepare_for_write(table, cfg.write, files_writer=True)  # a plan changes no file
        timeline = table.timeline()
        if not force:
            ok, why = trigger_reached(timeline, cfg, now=now)
            if not ok:
                log.info("compaction not scheduled: %s", why)
                return None
        t = gen.new_time(floor=timeline.latest_time())
        plan = plan_compaction(table, timeline, cfg, t)
        if not plan.operations:
            log.info("compaction not scheduled: no file slice with committed log files")
            return None
        create_requested(table, Instant(t, Action.COMPACTION, State.REQUESTED), plan.encode())
    log.info("scheduled compaction %s: %d file slices", t, len(plan.operations))
    return t


def show_compaction(table, config: CompactionConfig | WriteConfig | Mapping[str, Any] | None = None) -> list[dict]:
    """Pending compaction plans, for the CLI, operators and the timeline page."""
    hb = compaction_config(config).write.heartbeat
    tl = table.timeline()
    out = []
    for inst in tl.pending_compactions():
        plan = tl.compaction_plan(inst) or CompactionPlan()
        alive = inst.state is State.INFLIGHT and not is_expired(table, inst.requested_time, hb)
        out.append({"instant": inst.requested_time, "state": inst.state.value,
                    "executor_alive": alive,
                    "file_groups": [str(FileGroupId(*op.file_group)) for op in plan.operations],
                    "log_files": sum(len(op.delta_file_names) for op in plan.operations)})
    return out


# --- executing -------------------------------------------------------------------------------


class CompactionTransaction(ScheduledInstantTransaction):
    """A transaction that adopts a scheduled compaction instead of creating an instant
    (``services/scheduled``). An inflight one whose executor is dead is first rolled back to
    requested (its files deleted, its plan kept), as Hudi does before re-running a compaction;
    one whose executor is alive is refused."""

    service = "compaction"

    def __init__(self, table, config: WriteConfig | None = None, **kw):
        super().__init__(table, config, action=Action.COMPACTION, operation_type=COMPACT, **kw)

    def check_table(self) -> None:
        _require_mor(self.table)

    def before_lock(self, instant_time: str | None) -> str:
        target = self.pick(self.table.timeline(), instant_time)
        if target.state is State.INFLIGHT and is_expired(self.table, target.requested_time,
                                                         self.config.heartbeat):
            rollback_instant(self.table, target.requested_time, self.config,
                             lock_manager=self.lock_manager, only_if_expired=True,
                             reason="compaction executor died", time_generator=self._time)
        return target.requested_time

    def read_plan(self, timeline, instant: Instant) -> CompactionPlan:
        return timeline.compaction_plan(instant) or CompactionPlan()

    @staticmethod
    def pick(timeline, instant_time: str | None) -> Instant:
        pending = timeline.pending_compactions()
        if instant_time is None:
            if not pending:
                raise InstantStateError("no pending compaction to execute",
                                        remedy="schedule one first (hudi-occ compact TABLE --schedule-only)")
            return pending[0]
        inst = next((i for i in pending if i.requested_time == instant_time), None)
        if inst is None:
            raise InstantStateError(f"{instant_time} is not a pending compaction", instant=instant_time,
                                    remedy="list pending compactions with `hudi-occ compact TABLE --show`")
        return inst

    @property
    def detector(self):
        """No early conflict detection: the plan fixed the log files this compaction reads, and
        a deltacommit appending to the same file group meanwhile writes the next slice, so a
        shared fileId in the markers is not a conflict (the commit-time rule says the same)."""
        return None

    def build_metadata(self, stats, **kw) -> CommitMetadata:
        meta = super().build_metadata(stats, **kw)
        meta.compacted = True  # as Java marks a compaction's commit
        return meta


@dataclass
class CompactionResult:
    instant: str
    completion_time: str | None
    stats: list[WriteStat] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"outcome": "committed", "instant": self.instant,
                "completion_time": self.completion_time, "operation": COMPACT,
                "seconds": round(self.seconds, 3), "file_groups": len(self.stats),
                "log_files_compacted": sum(s.log_counts.get("totalLogFilesCompacted", 0)
                                           for s in self.stats),
                "rows_written": sum(s.num_writes for s in self.stats)}


def compact_file_slice(table, instant_time: str, op: CompactionOperation, completion: CompletionTimes,
                       *, token: str, create_marker, check_abort=None, parquet=None) -> WriteStat:
    """Merge one plan operation (base + exactly the plan's log files) into the compaction's new
    base file, behind its marker: the per-slice step any executor runs (the Arrow one here, one
    Spark task per slice in spark/compaction.py). ``create_marker(partition, name, io_type)``
    and ``check_abort()`` are the caller's (a transaction in-process, the markers and the abort
    signal on a Spark executor); ``token`` makes each attempt's file name distinct; ``parquet``:
    the base file's ``hoodie.parquet.*`` settings (a ParquetConfig; None: the defaults)."""
    # a log-only slice (NBCC's new bucket) is merged from its logs alone into the first base file
    base = parse_base_file_name(op.data_file_name, op.partition_path) if op.data_file_name else None
    logs = tuple(LogFileName.parse(n) for n in op.delta_file_names)
    t0 = time.time()
    fs = (MergeFileSlice(FileSlice(base), logs) if base is not None
          else MergeFileSlice(None, logs, FileGroupId(op.partition_path, op.file_id)))
    merged = read_file_slice(table, fs, completion)
    name = base_file_name(op.file_id, token, instant_time)
    rel = join_partition(op.partition_path, name)
    if check_abort is not None:
        check_abort()
    create_marker(op.partition_path, name, "MERGE" if base is not None else "CREATE")
    # records keep their commit time and sequence number; only the file they live in changes
    i = merged.schema.get_field_index(FILE_NAME)
    merged = merged.set_column(i, FILE_NAME, pa.array([name] * merged.num_rows, pa.string()))
    size = write_parquet(table.storage, rel, merged, parquet)
    log_size = int(op.metrics.get("TOTAL_LOG_FILES_SIZE", 0))
    return WriteStat(file_id=op.file_id, path=rel, partition_path=op.partition_path,
                     prev_commit=op.base_instant_time, num_writes=merged.num_rows,
                     file_size_in_bytes=size, total_write_bytes=size,
                     prev_base_file=base.name if base is not None else None,
                     upsert_time_ms=int((time.time() - t0) * 1000),
                     log_counts={"totalLogFilesCompacted": len(logs), "totalLogSizeCompacted": log_size})


class CompactionWork(ScheduledWork):
    """What every compaction executor shares (``services/scheduled``): its transaction, the
    timeline it reads once inflight, and the commit's schema (the last write that timeline
    saw), so the Arrow executor below and Spark's (``spark/compaction``) cannot disagree on
    what a compaction commits. They supply :meth:`compact`: the plan's slices, each merged by
    :func:`compact_file_slice`."""

    transaction_class = CompactionTransaction
    config: CompactionConfig
    #: the timeline read once the instant is inflight: the slices' completion times, the schema
    timeline = None

    def execute(self, tx, plan: CompactionPlan) -> Executed:
        self.timeline = self.table.timeline()
        return Executed(self.compact(tx, list(plan.operations), self.timeline))

    @abstractmethod
    def compact(self, tx: CompactionTransaction, ops: list[CompactionOperation], timeline) -> list[WriteStat]:
        """The new base file of every operation, behind its marker."""

    def schema(self, tx) -> str | None:
        last = self.timeline.last_completed_write()
        return self.timeline.commit_metadata(last).schema if last is not None else None

    @staticmethod
    def result(outcome: ScheduledOutcome) -> CompactionResult:
        res = outcome.commit
        return CompactionResult(res.instant.requested_time, res.instant.completion_time,
                                outcome.executed.stats, outcome.seconds)


class ArrowCompaction(CompactionWork):
    """The pure-Arrow executor: every slice merged in this process, one after the other."""

    def compact(self, tx, ops, timeline) -> list[WriteStat]:
        completion = CompletionTimes(FileSystemView(self.table, timeline))
        return [compact_file_slice(self.table, tx.instant_time, op, completion,
                                   token=write_token(0, 0, tx.attempt), create_marker=tx.create_marker,
                                   check_abort=tx.check_abort, parquet=tx.config.parquet)
                for op in ops]


def execute_compaction(table, config: CompactionConfig | WriteConfig | Mapping[str, Any] | None = None,
                       instant: str | None = None, *, lock_manager=None, writer_id: str | None = None,
                       before_commit=None) -> CompactionResult:
    """Run a scheduled compaction in this process with Arrow (small tables), then commit it. A
    failure rolls it back to requested: the plan survives."""
    work = ArrowCompaction(table, compaction_config(config), lock_manager=lock_manager, writer_id=writer_id)
    return work.result(run_scheduled(work, instant, before_commit=before_commit))


def run_compaction(table, config: CompactionConfig | WriteConfig | Mapping[str, Any] | None = None,
                   *, schedule_only: bool = False, instant: str | None = None, force: bool = False,
                   lock_manager=None) -> dict:
    """What ``hudi-occ compact`` does: execute ``instant``; or schedule (trigger permitting, or
    ``force``) and, unless ``schedule_only``, execute what was scheduled, else the earliest
    pending compaction (Hudi's inline compaction also runs pending plans first)."""
    cfg = compaction_config(config)
    if instant is not None:
        return {"scheduled": None,
                "executed": execute_compaction(table, cfg, instant, lock_manager=lock_manager).to_json()}
    t = schedule_compaction(table, cfg, lock_manager=lock_manager, force=force)
    out: dict = {"scheduled": t, "executed": None}
    if schedule_only:
        return out
    pending = [i.requested_time for i in table.timeline().pending_compactions()]
    run = t if t is not None else (pending[0] if pending else None)
    if run is not None:
        out["executed"] = execute_compaction(table, cfg, run, lock_manager=lock_manager).to_json()
    return out


__all__ = ["schedule_compaction", "plan_compaction", "execute_compaction", "run_compaction",
           "compact_file_slice", "CompactionWork", "ArrowCompaction",
           "show_compaction", "trigger_reached", "deltacommits_since_compaction",
           "CompactionTransaction", "CompactionResult", "compaction_config", "COMPACT"]
