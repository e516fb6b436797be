"""The metadata table's own clean: old file slices go once compactions have replaced them.

After a compaction of the metadata table (:mod:`.metadata_compaction`) the older base file and
the log files it folded in are no longer read, but stay on storage until a clean deletes them.
Java's writer cleans its metadata table in ``HoodieBackedTableMetadataWriter.cleanIfNecessary``
under rules this module follows (Hudi 1.2):

- **gate**: not while the latest completed compaction has fewer than 3 completed instants after
  it (a reader that listed the logs just before the compaction may still be reading them);
- **policy** (``HoodieMetadataWriteUtils``, ``hoodie.metadata.derive.from.datatable.clean.policy``
  at its default, true): the data table's ``hoodie.clean.policy``; ``KEEP_LATEST_COMMITS``
  retains ``max(20, 1.2 x hoodie.clean.commits.retained)`` commits,
  ``KEEP_LATEST_FILE_VERSIONS`` ``ceil(1.2 x hoodie.clean.fileversions.retained)`` versions;
- **plan** (``CleanPlanner``): per file group, its slices newest first; the newest is always
  kept, and under ``KEEP_LATEST_COMMITS`` also the newest slice older than the earliest commit
  to retain (what a read as of that commit needs); older slices whose base instant is before
  the earliest commit to retain go with all their files. A slice of a pending compaction, or
  holding a pending deltacommit's log, is never planned;
- **instants**: ``<t>.clean.requested`` (``HoodieCleanerPlan``), ``.clean.inflight``, the files
  deleted, ``<t>_<c>.clean`` (``HoodieCleanMetadata``). No instant when nothing is to go (Java
  writes none either).

A clean killed midway leaves its plan; the next run finishes it (deleting a missing file counts
as done) before planning another. Runs under the data table's lock, like every metadata-table
write of ours.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Collection

from airflow_hudi_occ.core.config import CleanConfig, CleanPolicy
from airflow_hudi_occ.core.format.instant import Action, Instant, State
from airflow_hudi_occ.core.format.log_file import LogFileName
from airflow_hudi_occ.core.format.metadata import CleanerPlan, CleanMetadata
from airflow_hudi_occ.core.format.storage import delete_planned_files
from airflow_hudi_occ.core.table.metadata_compaction import BASE_FILE_RE, metadata_partitions
from airflow_hudi_occ.core.table.timeline import complete, create_requested, transition_to_inflight

#: Java's floor on the commits the metadata table retains (HoodieMetadataWriteUtils)
MIN_RETAINED_COMMITS = 20
#: completed instants needed after the latest compaction before a clean (cleanIfNecessary)
INSTANTS_AFTER_COMPACTION = 3


@dataclass
class _Slice:
    base_instant: str
    files: list[str] = field(default_factory=list)  # names in the partition
    pending: bool = False


def retention(config: CleanConfig) -> tuple[CleanPolicy, int]:
    """The metadata table's clean policy and how many commits / versions it keeps, from the
    data table's clean config."""
    policy = config.policy
    if policy is CleanPolicy.KEEP_LATEST_FILE_VERSIONS:
        return policy, int(math.ceil(config.file_versions_retained * 1.2))
    return policy, int(max(float(MIN_RETAINED_COMMITS), config.commits_retained * 1.2))


def _file_groups(mdt, partition: str, timeline) -> dict[str, list[_Slice]]:
    completed = {i.requested_time: i.completion_time or "" for i in timeline.completed()}
    pending = {i.requested_time for i in timeline.pending()}
    first = next(iter(timeline), None)
    active_from = first.requested_time if first is not None else None
    groups: dict[str, dict[str, _Slice]] = {}
    names = mdt.storage.list_names(mdt.storage.path(partition))
    for name in names:
        m = BASE_FILE_RE.match(name)
        if m and (m["instant"] in completed or m["instant"] in pending):
            s = groups.setdefault(m["file_id"], {}).setdefault(m["instant"], _Slice(m["instant"]))
            s.files.append(name)
            s.pending = s.pending or m["instant"] in pending
    for name in names:
        lf = LogFileName.parse(name)
        if lf is None or lf.file_id not in groups:
            continue
        slices = groups[lf.file_id]
        # a log of an instant not on the timeline but newer than its start was staged by a
        # writer before its lock (metadata_commit.stage_metadata_logs): pending, as Java's
        # file group takes a log without a completion time
        is_pending = lf.instant_time in pending or (
            lf.instant_time not in completed and active_from is not None and lf.instant_time > active_from)
        # an active deltacommit's log goes by its completion time; one whose instant is gone
        # from the active timeline (archived) by its instant, which is old; a pending one
        # stays with the newest slice and keeps it
        done = None if is_pending else completed.get(lf.instant_time, lf.instant_time)
        before = [b for b in slices if done is not None and b < done]
        target = slices[max(before)] if before else slices[max(slices)]
        target.files.append(name)
        target.pending = target.pending or is_pending
    return {fid: [s for _, s in sorted(sl.items(), reverse=True)] for fid, sl in groups.items()}


def _writes(timeline) -> list[Instant]:
    return [i for i in timeline.completed() if i.action in (Action.DELTA_COMMIT, Action.COMMIT)]


def _earliest_retained(writes: list[Instant], keep: int) -> Instant | None:
    """The earliest commit ``KEEP_LATEST_COMMITS`` retains, None while it retains them all."""
    return writes[len(writes) - keep] if len(writes) > keep else None


def plan_clean(mdt, timeline, config: CleanConfig) -> CleanerPlan | None:
    """The clean Java would plan on the metadata table now (see the module doc), or None."""
    policy, keep = retention(config)
    writes = _writes(timeline)
    earliest: Instant | None = None
    if policy is CleanPolicy.KEEP_LATEST_COMMITS:
        earliest = _earliest_retained(writes, keep)
        if earliest is None:
            return None
    to_delete: dict[str, list[str]] = {}
    for partition in metadata_partitions(mdt):
        for _fid, slices in _file_groups(mdt, partition, timeline).items():
            if policy is CleanPolicy.KEEP_LATEST_FILE_VERSIONS:
                doomed = slices[keep:]
            else:
                older = [s for s in slices[1:] if s.base_instant < earliest.requested_time]
                doomed = older[1:]  # the newest slice before the earliest retained commit stays
            for s in doomed:
                if not s.pending:
                    to_delete.setdefault(partition, []).extend(f"{partition}/{n}" for n in sorted(s.files))
    if not to_delete:
        return None
    last = writes[-1].requested_time if writes else ""
    return CleanerPlan(policy.value, (earliest.requested_time, earliest.action.value) if earliest else None,
                       last, to_delete)


#: actions of the metadata table's timeline that never write a base file
_NO_BASE_FILES = frozenset({Action.CLEAN, Action.ROLLBACK, Action.SAVEPOINT})


def may_clean(timeline, config: CleanConfig, data_times: Collection[str]) -> bool:
    """Whether :func:`plan_clean` could find anything to delete, from the metadata table's
    timeline alone: False means it would list every metadata partition and plan nothing.

    Why: past the gate, the clean is planned after every commit, and the plan lists each
    metadata partition (four requests under the table lock on S3, for every writer of the
    table, issue 43), while old slices appear only with compactions: most of those plans find
    nothing. A file slice begins with a base file, and the plan takes only base files of
    instants on this timeline; the metadata table writes base files in its compactions and in
    the deltacommits that initialise a partition (their times are not the data table's), never
    in the deltacommit of a data commit (``data_times``: the data table's instant times this
    commit knows; a deltacommit not among them counts as one that may have written base files).
    So the slices of every file group have base times among those instants, and the plan's
    rules need (``KEEP_LATEST_COMMITS``) two slices older than the earliest commit retained
    that are not their group's newest, or (``KEEP_LATEST_FILE_VERSIONS``) more slices than
    the versions kept. Were a base file ever written by a data commit's deltacommit, the cost
    of reading it wrong is a clean put off, not a file lost."""
    policy, keep = retention(config)
    bases = sorted(i.requested_time for i in timeline if i.action not in _NO_BASE_FILES
                   and not (i.action is Action.DELTA_COMMIT and i.requested_time in data_times))
    if policy is CleanPolicy.KEEP_LATEST_FILE_VERSIONS:
        return len(bases) > keep
    retained = _earliest_retained(_writes(timeline), keep)
    if retained is None:
        return False
    earliest = retained.requested_time
    older = [b for b in bases if b < earliest]
    # every group's newest slice stays; when even the newest base is older, it is one of them
    return len(older) >= (3 if bases and bases[-1] < earliest else 2)


def _execute(mdt, inst_time: str, plan: CleanerPlan, completion_time: Callable[[], str]) -> None:
    t0 = time.time()
    inflight = transition_to_inflight(mdt, Instant(inst_time, Action.CLEAN, State.REQUESTED))
    deleted, failed = delete_planned_files(mdt.storage, plan.files_by_partition)
    earliest = plan.earliest_instant_to_retain[0] if plan.earliest_instant_to_retain else ""
    meta = CleanMetadata(inst_time, plan.policy, earliest, plan.last_completed_commit, deleted, failed,
                         int((time.time() - t0) * 1000))
    complete(mdt, inflight, completion_time(), meta.encode())


def clean_if_needed(mdt, config: CleanConfig, new_time: Callable[[], str],
                    data_times: Collection[str] | None = None) -> str | None:
    """Finish a pending clean of the metadata table, then clean when the gate allows it and
    something is to go (``config``: the data table's clean config); the clean's instant, or
    None. The caller holds the table lock. ``data_times``: the data table's instant times the
    caller knows; given, a clean that :func:`may_clean` rules out is not planned (no listing)."""
    timeline = mdt.timeline()
    for inst in [i for i in timeline.pending() if i.action is Action.CLEAN]:
        path = timeline.file_path(Instant(inst.requested_time, Action.CLEAN, State.REQUESTED))
        _execute(mdt, inst.requested_time, CleanerPlan.decode(mdt.storage.read(path), mdt.base_uri, path), new_time)
        timeline = mdt.timeline()
    compactions = [i for i in timeline.completed() if i.action is Action.COMMIT]
    if compactions and sum(1 for i in timeline.completed()
                           if i.requested_time > compactions[-1].requested_time) < INSTANTS_AFTER_COMPACTION:
        return None
    if data_times is not None and not may_clean(timeline, config, data_times):
        return None
    plan = plan_clean(mdt, timeline, config)
    if plan is None:
        return None
    t = new_time()
    create_requested(mdt, Instant(t, Action.CLEAN, State.REQUESTED), plan.encode(mdt.base_uri))
    _execute(mdt, t, plan, new_time)
    return t


__all__ = ["plan_clean", "may_clean", "clean_if_needed", "retention"]
