"""Archival: move old completed instants from the active timeline to the LSM history.

Every commit lists the active timeline under the table lock, so a timeline that only grows makes
every commit slower as the table ages (measured: 18-20x at 10,000 instants). Archival keeps it
at Hudi's bounds: once more than ``hoodie.keep.max.commits`` (30) completed writes are active,
the oldest go to the history until ``hoodie.keep.min.commits`` (20) remain, together with the
clean and rollback instants older than the newest write archived (Hudi's TimelineArchiverV2).

Never archived (each gives a boundary; the smallest wins):

- the earliest pending instant of any action, and the last completed write before it (the base
  snapshot of the running writer; Hudi keeps it too). Stricter than Hudi, which looks only at
  pending writes: a pending rollback or clean still names instants it works on;
- the earliest replacecommit/clustering instant at or after the latest clean's earliest instant
  to retain (all of them when no clean has run): until a clean deleted the file groups a
  replacecommit replaced, that replacecommit is what hides them from readers. On top of Hudi's
  rule, a replacecommit is archived only once its replaced file groups have no base file left;
- the earliest instant the latest clean plan retains (time travel within the clean's window);
- the first savepoint (unless ``hoodie.archive.beyond.savepoint``).

Steps, all under the table lock (crash-safe in this order):

1. finish an interrupted archival: an active completed instant at or before the newest archived
   time whose row is in the history was archived but not yet deleted: delete its files;
2. write the batch as a new layer-0 history file and publish a snapshot naming it
   (:class:`~airflow_hudi_occ.core.table.history.TimelineHistory`);
3. delete the archived instants' files: requested and inflight first, then the completed files
   in ascending order (a reader never sees a hole, nor a completed instant come back as pending);
   leftover marker folders of those instants go too;
4. compact the history (Hudi's universal compaction) and delete snapshots no reader needs.

Readers treat a base file older than the earliest active instant as committed (as Java Hudi
does for archived instants), which is why nothing is archived past a pending instant.

It lives in ``commit`` rather than ``services`` because every commit may end with it (Hudi's
write client archives in its post-commit step); the CLI, the Spark service job and the
operators call :func:`run_archival` like any other table service.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Mapping

from airflow_hudi_occ.core.config import ArchivalConfig, WriteConfig, service_config
from airflow_hudi_occ.core.format.instant import Action, Instant, State, parse_file_name
from airflow_hudi_occ.core.format.metadata import CleanerPlan
from airflow_hudi_occ.core.table.file_system_view import list_base_files
from airflow_hudi_occ.core.table.history import ArchivedInstant, TimelineHistory
from airflow_hudi_occ.core.table.metadata_compaction import latest_compaction_time, open_metadata_table
from airflow_hudi_occ.core.table.metadata_table import declared_state
from airflow_hudi_occ.core.concurrency.locks import table_lock_manager
from airflow_hudi_occ.core.table.write_guard import prepare_for_write

log = logging.getLogger(__name__)

_WRITE_ACTIONS = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)


@dataclass
class ArchivalResult:
    archived: list[str] = field(default_factory=list)     # requested times, ascending
    history_file: str | None = None
    compacted: list[str] = field(default_factory=list)
    finished_interrupted: list[str] = field(default_factory=list)
    boundary: str | None = None
    boundary_reason: str | None = None
    active_writes_before: int = 0
    dry_run: bool = False

    def to_json(self) -> dict:
        return {"archived": self.archived, "history_file": self.history_file,
                "compacted": self.compacted, "finished_interrupted": self.finished_interrupted,
                "boundary": self.boundary, "boundary_reason": self.boundary_reason,
                "active_writes_before": self.active_writes_before, "dry_run": self.dry_run}


def archival_config(config: ArchivalConfig | WriteConfig | Mapping[str, Any] | None) -> ArchivalConfig:
    return service_config(ArchivalConfig, config)


# --- what may go --------------------------------------------------------------------------------


def _latest_clean_plan(timeline) -> CleanerPlan | None:
    cleans = [i for i in timeline if i.action is Action.CLEAN and i.is_completed]
    if not cleans:
        return None
    inst = cleans[-1]
    path = timeline.file_path(Instant(inst.requested_time, Action.CLEAN, State.REQUESTED))
    try:
        return CleanerPlan.decode(timeline.table.storage.read(path), timeline.table.base_uri, path)
    except FileNotFoundError:
        return None


def _replaced_groups_still_present(table, timeline, inst: Instant) -> bool:
    """Whether a completed replacecommit still hides base files (its replaced file groups)."""
    replaced = timeline.commit_metadata(inst).replaced_file_groups()
    by_partition: dict[str, set[str]] = {}
    for partition, file_id in replaced:
        by_partition.setdefault(partition, set()).add(file_id)
    for part, ids in by_partition.items():
        if any(bf.file_id in ids for bf in list_base_files(table, part)):
            return True
    return False


def metadata_table_bound(table, timeline) -> tuple[str, str] | None:
    """Java's hold on data-table archival while the table has a metadata table
    (``TimelineArchiverV2.getCommitInstantsToArchive``): nothing is archived before the metadata
    table's first compaction, and no write completed after its latest compaction (a compacted
    base file stands for the data timeline up to its instant; what came later is still read
    from the metadata table's logs, whose deltacommits the data timeline must still confirm)."""
    if not declared_state(table).enabled:
        return None
    mdt_timeline = open_metadata_table(table).timeline()
    latest = latest_compaction_time(mdt_timeline)
    if latest is None:
        return "0", "no compaction yet on the metadata table"
    after = [i for i in timeline if i.is_completed and i.action in _WRITE_ACTIONS
             and (i.completion_time or "") > latest]
    if not after:
        return None
    first = min(after, key=lambda i: i.requested_time)
    return first.requested_time, f"completed after the metadata table's latest compaction {latest}"


def plan_archival(table, timeline, config: ArchivalConfig,
                  extra_bounds: tuple[tuple[str, str], ...] = ()) -> tuple[list[Instant], str | None, str | None]:
    """The instants to archive (ascending), the boundary time and why it is there;
    ``extra_bounds``: more ``(time, reason)`` boundaries (the metadata table's, see
    :func:`metadata_table_bound` and :func:`archive_metadata_table`)."""
    writes = [i for i in timeline if i.is_completed and i.action in _WRITE_ACTIONS]
    if len(writes) <= config.max_commits:
        return [], None, None
    bounds: list[tuple[str, str]] = list(extra_bounds)
    pending = timeline.pending()
    if pending:
        first = pending[0]
        before = [w for w in writes if w.requested_time < first.requested_time]
        bounds.append((before[-1].requested_time if before else first.requested_time,
                       f"pending {first.action.value} {first.requested_time}"))
    plan = _latest_clean_plan(timeline)
    replace_like = [i for i in timeline if i.action in (Action.REPLACE_COMMIT, Action.CLUSTERING)]
    if replace_like:
        if plan is None:
            lower = None
        elif plan.earliest_instant_to_retain:
            lower = plan.earliest_instant_to_retain[0]
        else:
            cleans = [i for i in timeline if i.action is Action.CLEAN and i.is_completed]
            lower = cleans[-1].requested_time
        after = [i for i in replace_like if lower is None or i.requested_time >= lower]
        if after:
            bounds.append((after[0].requested_time, f"replacecommit {after[0].requested_time} "
                                                    "not yet cleaned"))
    if plan is not None and plan.earliest_instant_to_retain:
        bounds.append((plan.earliest_instant_to_retain[0], "earliest instant the latest clean retains"))
    savepoints = [i for i in timeline if i.action is Action.SAVEPOINT and i.is_completed]
    if savepoints and not config.beyond_savepoint:
        bounds.append((savepoints[0].requested_time, f"savepoint {savepoints[0].requested_time}"))
    boundary, reason = min(bounds) if bounds else (None, None)
    savepoint_times = {s.requested_time for s in savepoints}
    chosen: list[Instant] = []
    limit = len(writes) - config.min_commits
    for w in writes:
        if len(chosen) >= limit or (boundary is not None and w.requested_time >= boundary):
            break
        if w.requested_time in savepoint_times:
            continue
        if w.action is Action.REPLACE_COMMIT and _replaced_groups_still_present(table, timeline, w):
            boundary, reason = w.requested_time, f"replacecommit {w.requested_time}: replaced file " \
                                                 "groups not yet cleaned"
            break
        chosen.append(w)
    if not chosen:
        return [], boundary, reason
    last = chosen[-1].requested_time
    services = [i for i in timeline if i.is_completed and i.action in (Action.CLEAN, Action.ROLLBACK)
                and i.requested_time < last]
    return sorted(chosen + services, key=lambda i: i.requested_time), boundary, reason


# --- moving ---------------------------------------------------------------------------------------


def _read(table, timeline, name: str) -> bytes | None:
    try:
        data = table.storage.read(table.storage.path(table.config.timeline_folder, name))
    except FileNotFoundError:
        return None
    return data or None


def _to_archived(table, timeline, inst: Instant) -> ArchivedInstant:
    """The history row Hudi writes for an instant (MetadataConversionUtils.createLSMTimelineInstant):
    the completed file's bytes as metadata; the clean plan, or a replacecommit's requested (or,
    when not empty, inflight) content as plan."""
    names = timeline.files_of(inst.requested_time)
    completed = [n for n in names if (p := parse_file_name(n)) is not None and p.is_completed]
    metadata = _read(table, timeline, completed[0]) if completed else None
    plan = None
    if inst.action is Action.CLEAN:
        req = [n for n in names if n.endswith(".clean.requested")]
        plan = _read(table, timeline, req[0]) if req else None
    elif inst.action is Action.COMMIT and any(n.endswith(".compaction.requested") for n in names):
        plan = _read(table, timeline, next(n for n in names if n.endswith(".compaction.requested")))
    elif inst.action in (Action.REPLACE_COMMIT, Action.CLUSTERING):
        for suffix in (".requested", ".inflight"):
            for n in names:
                if n.endswith(suffix) and n != (completed[0] if completed else None):
                    plan = _read(table, timeline, n) or plan
    return ArchivedInstant(inst.requested_time, inst.completion_time, inst.action.value, metadata, plan)


def _delete_archived(table, timeline, instants: list[Instant]) -> None:
    """Pending-state files first, then completed files in ascending order (Hudi's order).
    Leftover marker folders are found by one listing of ``.hoodie/.temp`` rather than an
    ``exists`` per archived instant (two requests each on S3, under the table lock)."""
    folder = table.config.timeline_folder
    completed_files: list[str] = []
    temp = table.storage.path(".hoodie", ".temp")
    with_markers = set(table.storage.list_names(temp))
    for inst in instants:
        for n in timeline.files_of(inst.requested_time):
            p = parse_file_name(n)
            if p is not None and p.is_completed:
                completed_files.append(n)
            else:
                table.storage.delete(table.storage.path(folder, n))
        if inst.requested_time in with_markers:
            table.storage.delete_dir(table.storage.path(".hoodie", ".temp", inst.requested_time))
    for n in sorted(completed_files):
        table.storage.delete(table.storage.path(folder, n))


def _finish_interrupted(table, timeline, history: TimelineHistory) -> list[str]:
    newest = history.max_instant_time()
    if newest is None:
        return []
    leftovers = [i for i in timeline if i.is_completed and i.requested_time <= newest]
    if not leftovers:
        return []
    archived = history.instant_times(min_time=leftovers[0].requested_time)
    done = [i for i in leftovers if i.requested_time in archived]
    if done:
        log.info("finishing an interrupted archival: %d instant(s) already in the history", len(done))
        _delete_archived(table, timeline, done)
    return [i.requested_time for i in done]


def _archive_locked(table, cfg: ArchivalConfig, lm, *, dry_run: bool = False,
                    extra_bounds: tuple[tuple[str, str], ...] = ()) -> ArchivalResult:
    """The archival steps of the module doc on ``table``; the caller holds the lock."""
    timeline = table.timeline()
    history = TimelineHistory(table)
    result = ArchivalResult(dry_run=dry_run)
    if not dry_run:
        result.finished_interrupted = _finish_interrupted(table, timeline, history)
        if result.finished_interrupted:
            timeline = table.timeline()
    result.active_writes_before = sum(1 for i in timeline
                                      if i.is_completed and i.action in _WRITE_ACTIONS)
    bounds = tuple(extra_bounds)
    if result.active_writes_before > cfg.max_commits:
        held = metadata_table_bound(table, timeline)
        bounds += (held,) if held else ()
    chosen, result.boundary, result.boundary_reason = plan_archival(table, timeline, cfg, bounds)
    result.archived = [i.requested_time for i in chosen]
    if dry_run or not chosen:
        return result
    rows = [_to_archived(table, timeline, i) for i in chosen]
    lm.check_held()
    result.history_file = history.append(rows)
    lm.check_held()
    _delete_archived(table, timeline, chosen)
    result.compacted = history.compact(cfg.compaction_batch_size, cfg.compaction_max_bytes)
    log.info("archived %d instant(s) of %s into %s", len(chosen), table.base_uri, result.history_file)
    return result


def run_archival(table, config: ArchivalConfig | WriteConfig | Mapping[str, Any] | None = None, *,
                 dry_run: bool = False, lock_manager=None) -> ArchivalResult:
    """Archive what Hudi's rules allow, under the table lock; see the module doc. A table whose
    metadata table our writer keeps (``hoodie.occ.metadata.files.maintain=true``, files only)
    is archived as Java archives it, held back by the metadata table's compactions
    (:func:`metadata_table_bound`): archival moves no file, so the listing stays true."""
    cfg = archival_config(config)
    lm = lock_manager or table_lock_manager(table, cfg.write)
    with lm.locked():
        if not dry_run:
            prepare_for_write(table, cfg.write, files_writer=True)
        return _archive_locked(table, cfg, lm, dry_run=dry_run)


def archive_metadata_table(table, mdt, config: ArchivalConfig, lm) -> ArchivalResult:
    """Archive the metadata table ``mdt`` of ``table`` as Java's writer does after its own
    compaction and clean (``performTableServices``), under the data table's lock (held by the
    caller): keep limits one above the data table's (``hoodie.keep.min/max.commits`` + 1, as
    ``HoodieMetadataWriteUtils`` sets them), never at or past the data table's earliest active
    write or pending instant (``TimelineUtils.getEarliestInstantForMetadataArchival``: the data
    timeline must still confirm every deltacommit that is active), nor at or past the metadata
    table's latest compaction (the slices after it are what readers merge)."""
    mdt_cfg = ArchivalConfig(config.min_commits + 1, config.max_commits + 1, True, config.beyond_savepoint,
                             config.compaction_batch_size, config.compaction_max_bytes, config.write)
    mdt_timeline = mdt.timeline()
    writes = sum(1 for i in mdt_timeline if i.is_completed and i.action in _WRITE_ACTIONS)
    if writes <= mdt_cfg.max_commits:
        # Nothing to archive (plan_archival's first rule), so nothing is read: this runs under
        # the lock after every commit. What an interrupted archival left (instants both in the
        # history and active, which readers take once) is finished by the next archival that
        # runs, before it plans (_archive_locked).
        return ArchivalResult(active_writes_before=writes)
    data = table.timeline()
    bounds = []
    firsts = [i for i in data if i.action in _WRITE_ACTIONS or i.action is Action.CLUSTERING]
    pending = data.pending()
    candidates = [x.requested_time for x in (firsts[:1] + pending[:1])]
    if candidates:
        bounds.append((min(candidates), "the data table's earliest active write or pending instant"))
    latest = latest_compaction_time(mdt_timeline)
    bounds.append((latest or "0", f"the metadata table's latest compaction {latest}" if latest
                   else "no compaction yet on the metadata table"))
    # a deltacommit requested before that compaction but completed after it (Java's writer
    # compacts after taking its own instant time) still has its log in the newest slice
    straddling = [i.requested_time for i in mdt_timeline
                  if latest and (i.is_pending or (i.completion_time or "") > latest)]
    if straddling:
        bounds.append((min(straddling), "a metadata-table instant completed after its latest compaction"))
    held = _held_back(mdt, mdt_timeline, mdt_cfg, tuple(bounds))
    if held is not None:
        # The timeline is the one this hold listed (pinned: only lock holders change it), so
        # the plan is the one _archive_locked would make: nothing goes, and the history (two
        # reads) is not read. Leftovers of an interrupted archival wait for the next archival
        # that moves something, which finishes them before it plans.
        return held
    return _archive_locked(mdt, mdt_cfg, lm, extra_bounds=tuple(bounds))


def _held_back(table, timeline, cfg: ArchivalConfig,
               extra_bounds: tuple[tuple[str, str], ...]) -> ArchivalResult | None:
    """An :class:`ArchivalResult` saying why nothing of ``timeline`` may be archived (its
    boundary), or None when something may."""
    chosen, boundary, reason = plan_archival(table, timeline, cfg, extra_bounds)
    if chosen:
        return None
    writes = sum(1 for i in timeline if i.is_completed and i.action in _WRITE_ACTIONS)
    return ArchivalResult(boundary=boundary, boundary_reason=reason, active_writes_before=writes)


def archive_if_needed(table, timeline, config: ArchivalConfig | WriteConfig | Mapping[str, Any] | None,
                      *, lock_manager=None) -> ArchivalResult | None:
    """After a commit (``hoodie.archive.automatic``): archive only when the timeline the commit
    already loaded holds more completed writes than ``hoodie.keep.max.commits`` and lets
    something go; otherwise no lock is taken (None when nothing is due; the result naming the
    boundary when something is due but held back).

    Why plan before the lock: on a table with a metadata table, nothing completed after its
    latest compaction may be archived, and the compaction comes every
    ``hoodie.metadata.compact.max.delta.commits`` (put off while writers wait). So for most of
    those commits the keep limit is passed and nothing may go; taking the lock to find that
    out was a third hold of the table lock on a third of the commits at 8 writers (issue 43:
    about 1 s each, every writer waiting). Planning on the commit's own timeline (listed under
    its completion hold) and a listing of the metadata table's timeline, both a little old by
    now, can only hold back more than a fresh look: whatever it misses, the next commit's
    check sees."""
    cfg = archival_config(config)
    if not cfg.automatic:
        return None
    writes = sum(1 for i in timeline if i.is_completed and i.action in _WRITE_ACTIONS)
    if writes <= cfg.max_commits:
        return None
    held = metadata_table_bound(table, timeline)
    held_back = _held_back(table, timeline, cfg, (held,) if held else ())
    if held_back is not None:
        log.debug("archival of %s due but held back at %s (%s): the lock is not taken",
                  table.base_uri, held_back.boundary, held_back.boundary_reason)
        return held_back
    return run_archival(table, cfg, lock_manager=lock_manager)


__all__ = ["run_archival", "archive_if_needed", "plan_archival", "ArchivalResult", "archival_config",
           "archive_metadata_table", "metadata_table_bound"]
