"""Clean: delete file versions no retained instant can read any more, as clean instants.

Copy-on-write keeps every old base file version; without a clean the table only grows. Hudi's
two policies are implemented:

- ``KEEP_LATEST_COMMITS`` (``hoodie.clean.commits.retained`` = N, default 10): every read as of
  one of the last N completed commits keeps working. The *earliest commit to retain* is the
  N-th newest completed write, moved back to the earliest pending write if one is older (a
  running writer's snapshot must survive). Per file group the latest version, every version
  at or after that commit, and the last version before it stay; older versions go. A file group
  replaced (clustering, insert_overwrite) before that commit goes entirely.
- ``KEEP_LATEST_FILE_VERSIONS`` (``hoodie.clean.fileversions.retained`` = N, default 3): the N
  newest versions of each file group stay; replaced file groups go. Versions that the earliest
  pending write started from are kept too, so a running writer never loses its input.

Never deleted: files of pending or failed instants (rollback's business), the latest version
of a live file group, and every file a pending clustering plan names as input.

Protocol (the timeline shows it the way Java Hudi 1.x writes it):

1. under the LAZY failed-writes policy, roll back writers whose heartbeat expired
   (:func:`~.rollback.rollback_failed_writes`), newest first, each re-checked under the lock;
2. under the table lock: reload the timeline, finish a pending clean if there is one, else plan
   and write ``<t>.clean.requested`` (HoodieCleanerPlan); a plan with nothing to delete writes
   nothing, as in Hudi;
3. ``<t>.clean.inflight``, delete the planned files (idempotent: a missing file was already
   deleted by an interrupted run of the same plan);
4. under the lock: when this writer keeps a files-only metadata table
   (``hoodie.occ.metadata.files.maintain``, :mod:`~airflow_hudi_occ.core.table.metadata_commit`),
   the metadata table's deltacommit ``<t>`` naming the deleted files, as Java's clean writes it;
   then ``<t>_<c>.clean`` (HoodieCleanMetadata);
5. prune bookkeeping: attempt-log records of instants gone from the timeline, older than the
   retained commits and older than the attempt log's retention (the timeline page's longest
   trends window: ``attempt_log.RETAINED_MS``), counted in the log's pruned summary; and
   abort signals of instants no longer pending.

Time travel: :func:`check_as_of_readable` tells a reader, from the timeline alone, that a
requested as-of time needs a file a clean deleted, so it fails clearly instead of returning
a silently partial table.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

from airflow_hudi_occ.core.format.storage import delete_planned_files
from airflow_hudi_occ.core.config import service_config, CleanConfig, CleanPolicy, FailedWritesPolicy, WriteConfig
from airflow_hudi_occ.core.table.file_system_view import (TimelineCompletionView, list_base_files,
                                                          list_partitions)
from airflow_hudi_occ.core.format.layout import BaseFile
from airflow_hudi_occ.core.format.instant import Action, Instant, State
from airflow_hudi_occ.core.format.instant_time import process_generator
from airflow_hudi_occ.core.catalog.sync import sync_after_commit
from airflow_hudi_occ.core.format.metadata import CleanerPlan, CleanMetadata
from airflow_hudi_occ.core.format.layout import FileGroupId
from airflow_hudi_occ.core.table.time_travel import read_clean_plan as _read_plan
from airflow_hudi_occ.core.table.file_system_view import FileSystemView, relative_path
from airflow_hudi_occ.core.table.mor_reader import CompletionTimes, list_log_files
from airflow_hudi_occ.core.table.table import MERGE_ON_READ
from airflow_hudi_occ.core.format.layout import join_partition
from airflow_hudi_occ.core.table.timeline import complete, transition_to_inflight
from airflow_hudi_occ.core.concurrency import abort_signal
from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.commit.rollback import rollback_failed_writes
from airflow_hudi_occ.core.table.timeline import create_requested
from airflow_hudi_occ.core.concurrency.locks import table_lock_manager
from airflow_hudi_occ.core.table.write_guard import prepare_for_write
from airflow_hudi_occ.core.format.files_change import FilesChange
from airflow_hudi_occ.core.table.metadata_commit import files_block, write_metadata_deltacommit
from airflow_hudi_occ.core.table.metadata_stats import clean_stats_blocks
from airflow_hudi_occ.core.table.metadata_table import maintains_files

log = logging.getLogger(__name__)


@dataclass
class CleanResult:
    clean_instant: str | None
    policy: str
    earliest_commit_to_retain: str | None
    deleted_files: list[str] = field(default_factory=list)
    failed_files: list[str] = field(default_factory=list)
    rolled_back: list[dict] = field(default_factory=list)
    pruned_attempt_records: list[str] = field(default_factory=list)
    pruned_abort_signals: list[str] = field(default_factory=list)
    dry_run: bool = False
    planned_files: list[str] = field(default_factory=list)
    #: the catalog sync after the clean (core/catalog/sync.SyncReport), if one ran
    catalog_sync: object | None = None

    def to_json(self) -> dict:
        out = {"clean_instant": self.clean_instant, "policy": self.policy,
               "earliest_commit_to_retain": self.earliest_commit_to_retain,
               "deleted_files": self.deleted_files, "failed_files": self.failed_files,
               "rolled_back": self.rolled_back, "pruned_attempt_records": self.pruned_attempt_records,
               "pruned_abort_signals": self.pruned_abort_signals, "dry_run": self.dry_run,
               "planned_files": self.planned_files}
        if self.catalog_sync is not None:
            out["catalog_sync"] = self.catalog_sync.to_json()
        return out


def clean_config(config: CleanConfig | WriteConfig | Mapping[str, Any] | None) -> CleanConfig:
    """Accept what callers have: a CleanConfig, a WriteConfig (its options) or hoodie.* options."""
    return service_config(CleanConfig, config)


# --- planning ------------------------------------------------------------------------------


def _committed_versions(table, timeline) -> dict[FileGroupId, list[BaseFile]]:
    """Every committed base file per file group, newest first (pending/failed files skipped)."""
    view = TimelineCompletionView(timeline)
    out: dict[FileGroupId, list[BaseFile]] = {}
    for part in list_partitions(table):
        for bf in list_base_files(table, part):
            if view.is_visible(bf.instant_time):
                out.setdefault(bf.file_group, []).append(bf)
    for v in out.values():
        v.sort(key=lambda b: b.instant_time, reverse=True)
    return out


def _committed_log_files(table, timeline) -> dict[FileGroupId, list[tuple[str, str]]]:
    """Merge-on-read: every committed log file per file group, with its completion time (the
    slice it belongs to is the latest base instant at or before that time)."""
    if table.config.table_type != MERGE_ON_READ:
        return {}
    completion = CompletionTimes(FileSystemView(table, timeline))
    out: dict[FileGroupId, list[tuple[str, str]]] = {}
    for part in list_partitions(table):
        for lf in list_log_files(table, part):
            done = completion.completion_time(lf.instant_time)
            if done is not None:
                out.setdefault(FileGroupId(part, lf.file_id), []).append((done, join_partition(part, lf.name)))
    return out


def _replaced(timeline) -> dict[FileGroupId, Instant]:
    """Replaced file group -> the completed replacecommit that replaced it."""
    out: dict[FileGroupId, Instant] = {}
    for inst in timeline.completed():
        if inst.action is Action.REPLACE_COMMIT:
            for fg in timeline.commit_metadata(inst).replaced_file_groups():
                out.setdefault(fg, inst)
    return out


def _pending_clustering_inputs(timeline) -> tuple[set[FileGroupId], set[str]]:
    groups: set[FileGroupId] = set()
    files: set[str] = set()
    for inst in timeline.pending():
        if inst.action in (Action.REPLACE_COMMIT, Action.CLUSTERING) and timeline.is_clustering(inst):
            plan = timeline.requested_replace_metadata(inst)
            for g in (plan.input_groups if plan else []):
                for part, fid, path in g.slices:
                    groups.add((part, fid))
                    if path:
                        files.add(relative_path(timeline.table, path))
                    files.update(join_partition(part, name) for name in g.log_file_names(part, fid))
    return groups, files


def _completed_before(timeline, instant_time: str, before: str) -> bool:
    inst = timeline.get(instant_time)
    if inst is None:
        return True  # archived: completed long ago
    return inst.is_completed and (inst.completion_time or inst.requested_time) < before


def earliest_commit_to_retain(timeline, commits_retained: int) -> Instant | None:
    """Hudi's rule: the N-th newest completed write, but never after the earliest pending write."""
    commits = [i for i in timeline.completed() if i.action in (Action.COMMIT, Action.REPLACE_COMMIT,
                                                                Action.DELTA_COMMIT)]
    if len(commits) <= commits_retained:
        return None
    nth = commits[len(commits) - commits_retained]
    pending = [i for i in timeline.pending() if i.is_write]
    if pending and pending[0].requested_time < nth.requested_time:
        return pending[0]
    return nth


def plan_clean(table, timeline, config: CleanConfig) -> CleanerPlan:
    """Decide what to delete, from one timeline snapshot (taken under the lock by the caller)."""
    versions = _committed_versions(table, timeline)
    replaced = _replaced(timeline)
    clustering_groups, clustering_files = _pending_clustering_inputs(timeline)
    pending_writes = [i for i in timeline.pending() if i.is_write]
    earliest_pending = pending_writes[0].requested_time if pending_writes else None
    latest_done = timeline.last_completed_write()
    earliest: Instant | None = None
    if config.policy is CleanPolicy.KEEP_LATEST_COMMITS:
        earliest = earliest_commit_to_retain(timeline, config.commits_retained)
        if earliest is None:
            return CleanerPlan(config.policy.value, None,
                               latest_done.requested_time if latest_done else "", {})
    to_delete: dict[str, list[str]] = {}
    slice_logs = _committed_log_files(table, timeline)
    for fg, vs in versions.items():
        protected = {b.relative_path for b in vs if b.relative_path in clustering_files}
        if fg in clustering_groups:
            protected.add(vs[0].relative_path)
        if earliest_pending is not None:
            # the version a running writer started from (the newest completed before it began)
            started_from = next((b for b in vs if _completed_before(
                timeline, b.instant_time, earliest_pending)), None)
            if started_from is not None:
                protected.add(started_from.relative_path)
        rep = replaced.get(fg)
        doomed: list[BaseFile] = []
        if config.policy is CleanPolicy.KEEP_LATEST_COMMITS:
            e = earliest.requested_time
            if rep is not None and rep.requested_time <= e:
                doomed = list(vs)  # replaced as of every retained commit: nobody reads it
            else:
                last_before = next((b for b in vs if b.instant_time < e), None)
                doomed = [b for b in vs[1:] if b.instant_time < e and b is not last_before]
        else:
            if rep is not None and (earliest_pending is None or
                                    (rep.completion_time or rep.requested_time) < earliest_pending):
                doomed = list(vs)
            else:
                doomed = vs[config.file_versions_retained:]
        for b in doomed:
            if b.relative_path not in protected:
                to_delete.setdefault(b.partition, []).append(b.relative_path)
                # merge-on-read: a slice goes whole, base and log files (Hudi's cleaner does the
                # same): a log file left behind has no slice to belong to, and hudi-rs refuses
                # a log file older than every base file of its group
                newer = min((v.instant_time for v in vs if v.instant_time > b.instant_time), default=None)
                to_delete[b.partition].extend(
                    rel for done, rel in slice_logs.get(fg, [])
                    if done >= b.instant_time and (newer is None or done < newer))
        # an NBCC bucket's first writes: a log-only slice older than the group's first base
        # file (its compaction). It is one more version, older than all the others.
        pre = [rel for done, rel in slice_logs.get(fg, []) if done < vs[-1].instant_time]
        if pre:
            if config.policy is CleanPolicy.KEEP_LATEST_COMMITS:
                e = earliest.requested_time
                gone = (rep is not None and rep.requested_time <= e) or any(b.instant_time < e for b in vs)
            else:
                gone = bool(doomed) or len(vs) >= config.file_versions_retained
            if gone:
                to_delete.setdefault(fg.partition, []).extend(pre)
    return CleanerPlan(config.policy.value,
                       (earliest.requested_time, earliest.action.value) if earliest else None,
                       latest_done.requested_time if latest_done else "",
                       {p: sorted(v) for p, v in sorted(to_delete.items())})


# --- executing -----------------------------------------------------------------------------


def _execute(table, lm, gen, inst: Instant, plan: CleanerPlan, config: WriteConfig) -> CleanMetadata:
    t0 = time.time()
    inflight = transition_to_inflight(table, inst)
    deleted, failed = delete_planned_files(  # a missing file is fine (a re-run)
        table.storage, plan.files_by_partition,
        on_error=lambda rel, e: log.warning("clean %s could not delete %s: %s", inst.requested_time, rel, e))
    earliest = plan.earliest_instant_to_retain[0] if plan.earliest_instant_to_retain else ""
    meta = CleanMetadata(inst.requested_time, plan.policy, earliest, plan.last_completed_commit,
                         deleted, failed, int((time.time() - t0) * 1000))
    with lm.locked():
        timeline = table.timeline()
        now = timeline.get(inst.requested_time)
        if now is not None and now.is_pending:
            floor = timeline.latest_time()
            state = prepare_for_write(table, config, files_writer=True, stats_writer=True)
            if maintains_files(state, config, files_writer=True, stats_writer=True):
                # Java's order: the metadata table's deltacommit of the clean completes first
                lm.check_held()
                change = FilesChange.of_clean(meta)
                blocks = files_block(change)  # and the deleted files' column stats tombstones
                blocks.update(clean_stats_blocks(table, state, change.deleted, config.metadata, timeline=timeline))
                done = write_metadata_deltacommit(table, inst.requested_time, blocks, gen.new_time(floor=floor))
                floor = max(floor or "", done.completion_time or "")
            completion = gen.new_time(floor=floor)
            lm.check_held()
            complete(table, inflight, completion, meta.encode(), timeline=timeline)
    return meta


def _prune_bookkeeping(table, timeline, config: CleanConfig, *, now: float | None = None,
                       clean_instant: str | None = None) -> tuple[list[str], list[str]]:
    """Attempt records of instants gone from the timeline, older than the retained commits and
    older than the attempt log's own retention (``attempt_log.RETAINED_MS``: the timeline
    page's longest trends window, so the page never loses a conflict whose retry it still
    counts); abort signals of instants that are no longer pending."""
    cutoff = earliest_commit_to_retain(timeline, config.commits_retained)
    pruned_records: list[str] = []
    if cutoff is not None:
        now_ms = int((time.time() if now is None else now) * 1000)
        doomed = [rec for rec in attempt_log.read_records(table)
                  if timeline.get(rec.instant) is None and rec.instant < cutoff.requested_time
                  and attempt_log.prunable(rec, now_ms)]
        pruned_records = attempt_log.prune_records(table, doomed, clean_instant=clean_instant)
    pruned_signals: list[str] = []
    folder = table.storage.path(".hoodie", ".aux", ".abort")
    try:
        names = table.storage.list_names(folder)
    except FileNotFoundError:
        names = []
    for t in names:
        inst = timeline.get(t)
        if inst is None or inst.is_completed:
            abort_signal.clear_abort(table, t)
            pruned_signals.append(t)
    return pruned_records, pruned_signals


def run_clean(table, config: CleanConfig | WriteConfig | Mapping[str, Any] | None = None, *,
              dry_run: bool = False, lock_manager=None, now: float | None = None) -> CleanResult:
    """Roll back dead writers (LAZY), then plan and execute one clean; see the module doc.

    ``dry_run`` only plans (no rollback, nothing written): the result lists ``planned_files``.
    """
    cfg = clean_config(config)
    table.require_writable()
    if dry_run:
        tl = table.timeline()
        plan = plan_clean(table, tl, cfg)
        e = plan.earliest_instant_to_retain
        return CleanResult(None, plan.policy, e[0] if e else None, dry_run=True,
                           planned_files=sorted(f for v in plan.files_by_partition.values() for f in v))
    lm = lock_manager or table_lock_manager(table, cfg.write)
    gen = process_generator(cfg.write.skew_wait_ms)
    rolled = []
    if cfg.write.failed_writes_policy is FailedWritesPolicy.LAZY:
        rolled = [r.to_json() for r in rollback_failed_writes(table, cfg.write, lock_manager=lm, now=now)]
    deleted: list[str] = []
    failed: list[str] = []
    instant_done: str | None = None
    plan: CleanerPlan | None = None
    # Finish cleans left pending by a crashed run first (their plan still holds), then plan anew.
    for _round in range(2):
        with lm.locked():
            # deleting files a metadata table lists would leave it pointing at missing files,
            # unless this clean keeps the listing (its completion does, see _execute)
            prepare_for_write(table, cfg.write, files_writer=True, stats_writer=True)
            timeline = table.timeline()
            pending = [i for i in timeline.pending() if i.action is Action.CLEAN]
            if pending:
                inst = pending[0]
                plan = _read_plan(table, timeline, inst)
            else:
                plan = plan_clean(table, timeline, cfg)
                if not plan.files_by_partition:
                    break
                t = gen.new_time(floor=timeline.latest_time())
                inst = Instant(t, Action.CLEAN, State.REQUESTED)
                create_requested(table, inst, plan.encode(table.base_uri))
        meta = _execute(table, lm, gen, inst, plan, cfg.write)
        deleted += sorted(meta.deleted_files())
        failed += sorted(f for v in meta.failed_by_partition.values() for f in v)
        instant_done = inst.requested_time
        if not pending:
            break
    # under the lock: two cleans pruning at once would each count the same records in the
    # attempt log's pruned summary
    with lm.locked():
        records, signals = _prune_bookkeeping(table, table.timeline(), cfg, now=now,
                                              clean_instant=instant_done)
    e = plan.earliest_instant_to_retain if plan is not None else None
    log.info("clean %s: %d files deleted, %d writers rolled back", instant_done, len(deleted), len(rolled))
    res = CleanResult(instant_done, cfg.policy.value, e[0] if e else None, deleted, failed, rolled,
                      records, signals)
    if instant_done is not None:
        # a clean may empty partitions (their file groups replaced by an overwrite): the catalog
        # drops them now, as every other action's sync does (core/catalog/sync)
        res.catalog_sync = sync_after_commit(table, cfg.write, instant_done)
    return res


__all__ = ["run_clean", "plan_clean", "CleanResult",
           "earliest_commit_to_retain", "clean_config"]
