"""Which versions of a table a reader can still travel to after clean deleted old files.

Decided from the timeline (clean plans and metadata, commit metadata) rather than by listing,
because a deleted file cannot be listed: an as-of view missing a cleaned file would silently
lose that file group's rows.
"""

from __future__ import annotations

from airflow_hudi_occ.core.errors import ArchivedInstantError, CleanedInstantError
from airflow_hudi_occ.core.format.instant import Action, Instant, State
from airflow_hudi_occ.core.format.layout import FileGroupId
from airflow_hudi_occ.core.format.metadata import CleanerPlan, CleanMetadata
from airflow_hudi_occ.core.table.history import TimelineHistory


def read_clean_plan(table, timeline, inst: Instant) -> CleanerPlan:
    path = timeline.file_path(Instant(inst.requested_time, Action.CLEAN, State.REQUESTED))
    return CleanerPlan.decode(table.storage.read(path), table.base_uri, path)




def cleaned_files(timeline) -> dict[str, str]:
    """Relative path -> the clean instant (completed or pending) that deletes it."""
    out: dict[str, str] = {}
    table = timeline.table
    for inst in timeline:
        if inst.action is not Action.CLEAN:
            continue
        if inst.is_completed:
            meta = CleanMetadata.decode(table.storage.read(timeline.file_path(inst)),
                                        timeline.file_path(inst))
            files = meta.deleted_files()
        else:
            files = {f for v in read_clean_plan(table, timeline, inst).files_by_partition.values() for f in v}
        for f in files:
            out.setdefault(f, inst.requested_time)
    return out


def check_as_of_readable(table, as_of: str, timeline=None) -> None:
    """Raise :class:`CleanedInstantError` if a file the table had as of ``as_of`` was cleaned.

    Decided from commit metadata (what each write wrote, what each replacecommit replaced),
    not by listing, because a deleted file cannot be listed: the as-of view would silently
    lose that file group's rows.
    """
    timeline = timeline or table.timeline()
    check_not_archived(table, timeline, as_of=as_of)
    if not any(i.action is Action.CLEAN for i in timeline):
        return
    gone = cleaned_files(timeline)
    if not gone:
        return
    latest: dict[FileGroupId, tuple[str, str]] = {}
    replaced: set[FileGroupId] = set()
    for inst in timeline.completed_writes():
        if inst.requested_time > as_of:
            continue
        meta = timeline.commit_metadata(inst)
        replaced |= meta.replaced_file_groups()
        for s in meta.write_stats():
            if s.path and (s.file_group not in latest or inst.requested_time > latest[s.file_group][0]):
                latest[s.file_group] = (inst.requested_time, s.path)
    needed = [path for fg, (_t, path) in latest.items() if fg not in replaced and path in gone]
    if needed:
        clean_t = gone[needed[0]]
        retained = _earliest_retained(timeline)
        raise CleanedInstantError(
            f"cannot read the table as of {as_of}: clean {clean_t} deleted {len(needed)} file(s) "
            f"that version needs (e.g. {sorted(needed)[0]})", as_of=as_of, clean_instant=clean_t,
            earliest_retained=retained,
            remedy=(f"time travel to {retained} or later" if retained else
                    "time travel to a newer instant") +
                   "; raise hoodie.clean.commits.retained to keep older versions readable")


def _earliest_active(timeline) -> str | None:
    first = timeline.earliest()
    return first.requested_time if first is not None else None


def check_not_archived(table, timeline=None, *, as_of: str | None = None,
                       start: str | None = None) -> None:
    """Raise :class:`ArchivedInstantError` when a read as of ``as_of`` (time travel), or of the
    writes that completed after ``start`` (incremental), needs instants archival moved to the
    history: their commit metadata (which files, which replaced file groups) is no longer on
    the active timeline, and the file versions they wrote have mostly been cleaned."""
    timeline = timeline or table.timeline()
    history = TimelineHistory(table)
    if history.latest_version() < 0:
        return
    earliest = _earliest_active(timeline)
    if as_of is not None and (earliest is None or as_of < earliest):
        newest = history.max_instant_time()
        if newest is None:
            return
        raise ArchivedInstantError(
            f"cannot read the table as of {as_of}: instants up to {newest} are archived; the "
            f"earliest active instant is {earliest}", earliest_active=earliest, as_of=as_of,
            remedy=f"time travel to {earliest} or later" if earliest else
                   "time travel needs an active instant; raise hoodie.keep.min.commits to keep "
                   "more history active")
    if start is not None:
        latest_archived = history.max_completion_time()
        if latest_archived is not None and start < latest_archived:
            raise ArchivedInstantError(
                f"cannot read incrementally from {start}: writes that completed after it, up to "
                f"{latest_archived}, are archived (earliest active instant: {earliest})",
                earliest_active=earliest, start=start,
                remedy=f"start at {latest_archived} or later (a full snapshot read covers what is "
                       "older), or raise hoodie.keep.min.commits so incremental consumers keep up")


def _earliest_retained(timeline) -> str | None:
    best = None
    for inst in timeline.completed():
        if inst.action is Action.CLEAN:
            meta = CleanMetadata.decode(timeline.table.storage.read(timeline.file_path(inst)))
            if meta.earliest_commit_to_retain and (best is None or meta.earliest_commit_to_retain > best):
                best = meta.earliest_commit_to_retain
    return best


__all__ = ["check_as_of_readable", "check_not_archived", "cleaned_files", "read_clean_plan"]
