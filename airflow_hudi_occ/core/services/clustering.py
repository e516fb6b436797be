"""Clustering: rewrite small file groups into fewer, larger (optionally sorted) ones.

Scheduling (:func:`schedule_clustering`) happens under the table lock, so the plan sees a
static table: per partition, the latest file slices smaller than
``hoodie.clustering.plan.strategy.small.file.limit``, largest first, packed into groups of at
most ``...max.bytes.per.group``, each written back as ceil(size / ``...target.file.max.bytes``)
new file groups, at most ``...max.num.groups`` groups. File groups already in a pending
clustering plan, or in the recorded footprint of a pending write (its inflight file), are left
out: clustering them would only produce a doomed instant. The plan is a
``<t>.clustering.requested`` (``replacecommit.requested`` on version 6, :func:`plan_action`)
holding HoodieRequestedReplaceMetadata (operationType CLUSTER) whose slices name their base
file and, on merge-on-read, their log files, as Java's planner writes them: Java's executor
reads exactly the slice a plan names, and so do ours (:func:`planned_slices`).

Executing needs no lock (:class:`ClusteringTransaction` adopts the scheduled instant, starts its
heartbeat, writes new file groups behind markers, keeping each record's original
``_hoodie_commit_time``); completing is an ordinary commit with conflict resolution, as a table
service, with ``partitionToReplaceFileIds`` naming the input file groups. The configured
strategy decides who yields: under prefer-writer an overlapping ingestion that completed first
wins and the clustering aborts; under simple the later commit loses. A loser is rolled back
(the plan goes with it) and can be scheduled again.

Writers and pending plans: ``hoodie.clustering.updates.strategy`` (inferred as Hudi does:
Allow under prefer-writer, Reject otherwise) decides whether a write may touch file groups of a
pending plan; see :func:`check_write_against_pending_clustering`.

:func:`execute_clustering` is the pure-Arrow executor for tables one process can rewrite; the
Spark executor is ``airflow_hudi_occ.spark.clustering``.
"""

from __future__ import annotations

import logging
import math
import posixpath
from dataclasses import dataclass, field
from typing import Any, Mapping

import pyarrow as pa

from airflow_hudi_occ.core.config import service_config, ClusteringConfig, WriteConfig
from airflow_hudi_occ.core.errors import InstantStateError
from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.core.concurrency.heartbeat import is_expired
from airflow_hudi_occ.core.format.layout import FileGroupId
from airflow_hudi_occ.core.format.instant import Action, Instant, State
from airflow_hudi_occ.core.format.instant_time import process_generator
from airflow_hudi_occ.core.format.metadata import ClusteringGroup, RequestedReplaceMetadata, WriteStat
from airflow_hudi_occ.core.services.scheduled import (Executed, ScheduledInstantTransaction, ScheduledOutcome,
                                                     ScheduledWork, run_scheduled)
from airflow_hudi_occ.core.concurrency.locks import table_lock_manager
from airflow_hudi_occ.core.table.write_guard import prepare_for_write
from airflow_hudi_occ.core.table.file_system_view import relative_path
from airflow_hudi_occ.core.concurrency.clustering_gate import pending_clustering_file_groups
from airflow_hudi_occ.core.table.timeline import create_requested
from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.commit.rollback import files_of_instant
from airflow_hudi_occ.core.format.base_file import new_file_id, read_parquet, with_meta_columns, write_parquet, write_token
from airflow_hudi_occ.core.format.layout import base_file_name
from airflow_hudi_occ.core.format.layout import join_partition
from airflow_hudi_occ.core.table.mor_reader import (CompletionTimes, MergeFileSlice, merge_file_slices,
                                                     read_file_slice)
from airflow_hudi_occ.core.table.table import MERGE_ON_READ
from airflow_hudi_occ.core.format.layout import META_COLUMNS

log = logging.getLogger(__name__)

CLUSTER = "CLUSTER"
COMMIT_TIME = "_hoodie_commit_time"


def clustering_config(config: ClusteringConfig | WriteConfig | Mapping[str, Any] | None) -> ClusteringConfig:
    """Accept what callers have: a ClusteringConfig, a WriteConfig (its options) or hoodie.* options."""
    return service_config(ClusteringConfig, config)


# --- scheduling ----------------------------------------------------------------------------


def pending_clustering(timeline) -> list[Instant]:
    return [i for i in timeline.pending()
            if i.action in (Action.REPLACE_COMMIT, Action.CLUSTERING) and timeline.is_clustering(i)]


def _pending_write_footprints(timeline) -> set[FileGroupId]:
    out: set[FileGroupId] = set()
    for inst in timeline.pending():
        if not inst.is_write or inst.state is not State.INFLIGHT or timeline.is_clustering(inst):
            continue
        out |= timeline.commit_metadata(inst).mutated_file_groups()
    return out


def plan_clustering(table, timeline, config: ClusteringConfig) -> list[ClusteringGroup]:
    view = FileSystemView(table, timeline)
    excluded = set(pending_clustering_file_groups(timeline)) | _pending_write_footprints(timeline)
    slices = view.latest_file_slices()
    logs = _planned_log_paths(table, view)
    parts = list(config.partitions) or sorted({s.partition for s in slices})
    base = table.base_uri.rstrip("/")
    groups: list[ClusteringGroup] = []
    for part in parts:
        cands = []
        for s in view.latest_file_slices(part):
            if s.file_group in excluded:
                continue
            size = table.storage.size(table.storage.path(s.base_file.relative_path))
            if size < config.small_file_limit:
                cands.append((size, s))
        cands.sort(key=lambda x: (-x[0], x[1].file_id))
        current: list = []
        current_bytes = 0
        packed: list[tuple[list, int]] = []
        for size, s in cands:
            if current and current_bytes + size > config.max_bytes_per_group:
                packed.append((current, current_bytes))
                current, current_bytes = [], 0
            current.append(s)
            current_bytes += size
        if current:
            packed.append((current, current_bytes))
        for members, nbytes in packed:
            if len(members) < 2 and not (config.sort_columns and config.single_group_clustering):
                continue  # one unsorted file rewritten as itself gains nothing
            n = max(1, math.ceil(nbytes / config.target_file_max_bytes))
            groups.append(ClusteringGroup(
                [(s.partition, s.file_id, f"{base}/{s.base_file.relative_path}") for s in members], n,
                {s.file_group: logs[s.file_group] for s in members if s.file_group in logs}))
            if len(groups) >= config.max_num_groups:
                return groups
    return groups


def _planned_log_paths(table, view: FileSystemView) -> dict[FileGroupId, list[str]]:
    """The committed log files of every merge-on-read latest slice, as the plan names them:
    full paths, latest first (Java's ``FileSlice`` keeps its logs under the reverse
    ``LogFileComparator``: instant, version, write token), so that any executor, Java's
    included, reads the whole slice."""
    if table.config.table_type != MERGE_ON_READ:
        return {}
    base = table.base_uri.rstrip("/")
    out: dict[FileGroupId, list[str]] = {}
    for fs in merge_file_slices(table, view):
        if fs.base is None or not fs.log_files:
            continue
        ordered = sorted(fs.log_files, key=lambda lf: (lf.instant_time, lf.version, lf.write_token),
                         reverse=True)
        out[fs.file_group] = [f"{base}/{join_partition(fs.partition, lf.name)}" for lf in ordered]
    return out


def schedule_clustering(table, config: ClusteringConfig | WriteConfig | Mapping[str, Any] | None = None,
                        *, lock_manager=None) -> str | None:
    """Plan clustering under the table lock; the new instant's time, or None if nothing to do."""
    cfg = clustering_config(config)
    table.require_writable()
    _refuse_bucket_index(table, cfg)
    lm = lock_manager or table_lock_manager(table, cfg.write)
    gen = process_generator(cfg.write.skew_wait_ms)
    with lm.locked():
        prepare_for_write(table, cfg.write, files_writer=True)  # a plan changes no file
        timeline = table.timeline()
        groups = plan_clustering(table, timeline, cfg)
        if not groups:
            return None
        t = gen.new_time(floor=timeline.latest_time())
        params = {"hoodie.clustering.plan.strategy.sort.columns": ",".join(cfg.sort_columns)} \
            if cfg.sort_columns else {}
        plan = RequestedReplaceMetadata(CLUSTER, groups, params)
        create_requested(table, Instant(t, plan_action(table), State.REQUESTED), plan.encode())
    log.info("scheduled clustering %s: %d groups, %d file groups", t, len(groups),
             sum(len(g.slices) for g in groups))
    return t


def plan_action(table) -> Action:
    """The action a clustering plan is requested under: ``clustering`` on table versions 8 and
    up (Java 1.x's timeline: ``<t>.clustering.requested`` / ``.inflight``, completed as a
    ``replacecommit``), whose executor looks for the plan only there; ``replacecommit`` on
    version 6, as Java 0.x wrote it."""
    return Action.CLUSTERING if table.config.version >= 8 else Action.REPLACE_COMMIT


def _refuse_bucket_index(table, cfg: ClusteringConfig) -> None:
    """Clustering rewrites records into new file groups with fresh ids; under the (simple) bucket
    index a record's file group *is* its bucket (the file id's prefix), so clustered records
    would become unreachable by the index and the next upsert would duplicate them. Java Hudi
    refuses to cluster such tables too."""
    if table.config.bucket_num or cfg.write.index.buckets:
        raise ConfigError(
            "clustering is not supported on a table with the bucket index: records would leave "
            "their bucket's file group", key="hoodie.index.type", value="BUCKET",
            remedy="size the buckets at creation (hoodie.bucket.index.num.buckets); cluster only "
                   "tables with the simple index")


def show_clustering(table) -> list[dict]:
    """Pending clustering plans, for the CLI and operators."""
    tl = table.timeline()
    out = []
    for inst in pending_clustering(tl):
        plan = tl.requested_replace_metadata(inst)
        out.append({"instant": inst.requested_time, "state": inst.state.value,
                    "sort_columns": (plan.strategy_params.get("hoodie.clustering.plan.strategy.sort.columns")
                                     if plan else None) or None,
                    "groups": [{"num_output_file_groups": g.num_output_file_groups,
                                "file_groups": [str(FileGroupId(p, f)) for p, f, _ in g.slices]}
                               for g in (plan.input_groups if plan else [])]})
    return out


# --- writers meeting a pending plan --------------------------------------------------------


# --- executing -----------------------------------------------------------------------------


class ClusteringTransaction(ScheduledInstantTransaction):
    """A transaction that adopts a clustering instant scheduled earlier instead of creating one
    (``services/scheduled``). An inflight plan whose executor's heartbeat is alive is refused;
    a dead executor's files are deleted and the plan is executed again."""

    service = "clustering"

    def __init__(self, table, config: WriteConfig | None = None, **kw):
        super().__init__(table, config, action=Action.REPLACE_COMMIT, operation_type=CLUSTER, **kw)

    def pick(self, timeline, instant_time: str | None) -> Instant:
        plans = pending_clustering(timeline)
        if instant_time is None:
            if not plans:
                raise InstantStateError("no pending clustering plan to execute",
                                        remedy="schedule one first (hudi-occ cluster schedule)")
            return plans[0]
        inst = timeline.get(instant_time)
        if inst is None or inst.is_completed or inst not in plans:
            raise InstantStateError(
                f"{instant_time} is not a pending clustering instant", instant=instant_time,
                remedy="list pending plans with `hudi-occ cluster show TABLE`")
        return inst

    def resume_inflight(self, instant: Instant) -> None:
        t = instant.requested_time
        if not is_expired(self.table, t, self.config.heartbeat):
            super().resume_inflight(instant)
        for rels in files_of_instant(self.table, t).values():
            for rel in rels:
                self.table.storage.delete(self.table.storage.path(rel))
        self.table.storage.delete_dir(self.table.storage.path(".hoodie", ".temp", t))

    def read_plan(self, timeline, instant: Instant) -> RequestedReplaceMetadata:
        return timeline.requested_replace_metadata(instant)


@dataclass
class ClusteringResult:
    instant: str
    completion_time: str | None
    replaced: dict[str, list[str]] = field(default_factory=dict)
    stats: list[WriteStat] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"outcome": "committed", "instant": self.instant, "completion_time": self.completion_time,
                "operation": CLUSTER, "seconds": round(self.seconds, 3),
                "replaced_file_groups": sum(len(v) for v in self.replaced.values()),
                "new_file_groups": len(self.stats),
                "rows_written": sum(s.num_writes for s in self.stats)}


def latest_schema(timeline) -> str | None:
    last = timeline.last_completed_write()
    return timeline.commit_metadata(last).schema if last is not None else None


def sort_columns_of(plan: RequestedReplaceMetadata, config: ClusteringConfig) -> list[str]:
    v = plan.strategy_params.get("hoodie.clustering.plan.strategy.sort.columns")
    return [c.strip() for c in v.split(",") if c.strip()] if v else list(config.sort_columns)


def planned_slices(table, plan: RequestedReplaceMetadata, requested_time: str) -> dict[FileGroupId, MergeFileSlice]:
    """The merge-on-read slices of ``plan`` that have log files to read, each with exactly the
    log files the plan names, in the merge's read order (completion time): what Java's
    clustering executor reads (base file + ``deltaFilePaths``), so that our executors and
    Java's turn one plan into the same rows. A log file that completed after the plan was
    requested belongs to a writer the conflict rule judges (the clustering gate keeps writers
    out of planned file groups; under prefer-writer one that completes first wins), never to
    this rewrite.

    A plan of ours from before plans named their log files lists none: its slices keep the
    logs that completed before it was requested (the planner saw those under the lock), so
    running it does not drop their updates and deletes. A log file the plan names that the
    table no longer has (its deltacommit restored away) makes the plan unrunnable."""
    if table.config.table_type != MERGE_ON_READ:
        return {}
    view = FileSystemView(table)
    completion = CompletionTimes(view)
    current = {fs.file_group: fs for fs in merge_file_slices(table, view) if fs.base is not None}
    out: dict[FileGroupId, MergeFileSlice] = {}
    for g in plan.input_groups:
        for part, fid, _path in g.slices:
            fg = FileGroupId(part, fid)
            named = set(g.log_file_names(part, fid))
            fs = current.get(fg)
            have = fs.log_files if fs is not None else ()
            if named:
                keep = tuple(lf for lf in have if lf.name in named)
            else:
                keep = tuple(lf for lf in have
                             if (completion.completion_time(lf.instant_time) or requested_time) < requested_time)
            missing = named - {lf.name for lf in keep}
            if missing:
                raise InstantStateError(
                    f"clustering plan {requested_time} names log files of {fg} the table no longer "
                    f"has: {sorted(missing)}", instant=requested_time,
                    remedy=f"roll the plan back (hudi-occ rollback TABLE --instant {requested_time}) and "
                           "schedule clustering again")
            if keep:
                out[fg] = MergeFileSlice(fs.base, keep)
    return out


class ClusteringWork(ScheduledWork):
    """What every clustering executor shares (``services/scheduled``): its transaction and the
    schema its commit records (the last completed write's, read at commit). The Arrow executor
    below and Spark's (``spark/clustering``) supply :meth:`execute`."""

    transaction_class = ClusteringTransaction
    config: ClusteringConfig

    def schema(self, tx) -> str | None:
        return latest_schema(self.table.timeline())

    @staticmethod
    def result(outcome: ScheduledOutcome) -> ClusteringResult:
        res, done = outcome.commit, outcome.executed
        return ClusteringResult(res.instant.requested_time, res.instant.completion_time,
                                done.replaced or {}, done.stats, outcome.seconds)


class ArrowClustering(ClusteringWork):
    """The pure-Arrow executor: each group's slices read and rewritten in this process."""

    def execute(self, tx, plan: RequestedReplaceMetadata) -> Executed:
        table = self.table
        sort_cols = sort_columns_of(plan, self.config)
        stats: list[WriteStat] = []
        replaced: dict[str, list[str]] = {}
        merged = planned_slices(table, plan, tx.instant_time)
        for g in plan.input_groups:
            pieces = [read_file_slice(table, merged[(p, f)]) if (p, f) in merged
                      else read_parquet(table.storage, relative_path(table, path)) for p, f, path in g.slices]
            data = pa.concat_tables(pieces, promote_options="permissive")
            if sort_cols:
                data = data.sort_by([(c, "ascending") for c in sort_cols])
            part = g.slices[0][0]
            n = max(1, g.num_output_file_groups)
            per = math.ceil(data.num_rows / n) if data.num_rows else 0
            for i in range(n):
                chunk = data.slice(i * per, per) if per else data.slice(0, 0)
                if chunk.num_rows == 0 and i > 0:
                    continue
                fid = new_file_id()
                name = base_file_name(fid, write_token(0, 0, tx.attempt), tx.instant_time)
                rel = posixpath.join(part, name) if part else name
                tx.check_abort()
                tx.create_marker(part, name, "CREATE")
                if table.config.populates_meta_fields:
                    full = with_meta_columns(chunk.drop_columns([c for c in META_COLUMNS if c in chunk.column_names]),
                                             instant_time=tx.instant_time, partition=part, file_name=name,
                                             key_fields=table.config.record_key_fields,
                                             commit_times=chunk.column(COMMIT_TIME).to_pylist())
                else:  # virtual keys: the rows as they are, no meta columns
                    full = chunk
                size = write_parquet(table.storage, rel, full, tx.config.parquet)
                stats.append(WriteStat(file_id=fid, path=rel, partition_path=part, num_writes=full.num_rows,
                                       num_inserts=full.num_rows, file_size_in_bytes=size,
                                       total_write_bytes=size))
            for p, f, _ in g.slices:
                replaced.setdefault(p, []).append(f)
        return Executed(stats, replaced)


def execute_clustering(table, config: ClusteringConfig | WriteConfig | Mapping[str, Any] | None = None,
                       instant: str | None = None, *, lock_manager=None, writer_id: str | None = None,
                       before_commit=None) -> ClusteringResult:
    """Run a scheduled plan in this process with Arrow (small tables), then commit it."""
    work = ArrowClustering(table, clustering_config(config), lock_manager=lock_manager, writer_id=writer_id)
    return work.result(run_scheduled(work, instant, before_commit=before_commit))


__all__ = ["schedule_clustering", "plan_clustering", "execute_clustering", "show_clustering",
           "ClusteringTransaction", "ClusteringWork", "ArrowClustering", "ClusteringResult",
           "planned_slices",
           "pending_clustering", "clustering_config"]
