"""What changed in a table since the catalog's last sync, read from the timeline.

Java's HiveSyncTool keeps two table properties in the catalog: ``last_commit_time_sync`` (the
requested time of the newest completed commit it synced) and
``last_commit_completion_time_sync`` (the newest completion time it saw). The next sync reads
the commit metadata of the instants after them (``TimelineUtils.getCommitsTimelineAfter``:
requested after the first, or completed after the second: an instant requested earlier that
completed later, a slow concurrent writer, is not missed) and adds the partitions they wrote:
no listing of the table's partitions per commit, whatever their number.

Partitions to drop: Java drops those a ``delete_partition`` replaced and those a clean marked
deleted. This project's writers do neither, but an ``insert_overwrite`` replaces every file
group of a partition it writes nothing into, and a clean then removes the files; so the
candidates are the partitions a replacecommit replaced file groups in, or a clean deleted files
from, within the window, and one is dropped when it holds no live file group any more (its
files listed, the replaced ones and those of uncompleted instants not counted): the rule that
also covers Java's two cases.

When the catalog has no ``last_commit_time_sync`` (first sync) or it is older than the active
timeline (archived since), every partition is listed once (Java does the same).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import unquote

from airflow_hudi_occ.core.format.instant import Action, Instant
from airflow_hudi_occ.core.format.layout import parse_base_file_name
from airflow_hudi_occ.core.format.log_file import LogFileName
from airflow_hudi_occ.core.format.metadata import CleanMetadata
from airflow_hudi_occ.core.table.file_listing import file_listing
from airflow_hudi_occ.core.table.file_system_view import TimelineCompletionView

#: the table properties Java keeps in the catalog (HoodieHiveSyncClient)
LAST_COMMIT_TIME_SYNC = "last_commit_time_sync"
LAST_COMMIT_COMPLETION_TIME_SYNC = "last_commit_completion_time_sync"

#: actions of Java's commits timeline (compaction completes as a commit)
_COMMITS = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)


@dataclass
class SyncPoint:
    """Where a sync stands: the newest completed commit's requested time and the newest
    completion time; ordered so that a sync only ever moves it forward."""

    commit_time: str | None = None
    completion_time: str | None = None

    @classmethod
    def of(cls, params: dict) -> "SyncPoint":
        return cls(params.get(LAST_COMMIT_TIME_SYNC) or None,
                   params.get(LAST_COMMIT_COMPLETION_TIME_SYNC) or None)

    def key(self) -> tuple[str, str]:
        return (self.commit_time or "", self.completion_time or "")

    def later(self, other: "SyncPoint") -> "SyncPoint":
        """Each of the two times at its maximum (both only ever grow)."""
        return SyncPoint(max(self.commit_time or "", other.commit_time or "") or None,
                         max(self.completion_time or "", other.completion_time or "") or None)

    def params(self) -> dict[str, str]:
        out = {}
        if self.commit_time:
            out[LAST_COMMIT_TIME_SYNC] = self.commit_time
        if self.completion_time:
            out[LAST_COMMIT_COMPLETION_TIME_SYNC] = self.completion_time
        return out


@dataclass
class Changes:
    """What one sync applies: partitions written (to add) and emptied (to drop) since ``since``,
    and the sync point it reaches (``reached``). ``full``: every partition was listed."""

    since: SyncPoint
    reached: SyncPoint
    written: set[str] = field(default_factory=set)
    drop_candidates: set[str] = field(default_factory=set)
    full: bool = False
    #: how many instants' metadata were read
    instants_read: int = 0


def commits(timeline) -> list[Instant]:
    """Completed instants of Java's commits timeline, in requested order."""
    return [i for i in timeline.completed() if i.action in _COMMITS]


def sync_point(timeline) -> SyncPoint:
    """Where a sync of ``timeline`` arrives (Java: the last completed commit's requested time
    and the timeline's latest completion time)."""
    done = commits(timeline)
    if not done:
        return SyncPoint()
    return SyncPoint(done[-1].requested_time,
                     max((i.completion_time or i.requested_time) for i in done))


def _after(inst: Instant, since: SyncPoint) -> bool:
    if since.commit_time is None:
        return True
    if inst.requested_time > since.commit_time:
        return True
    return bool(since.completion_time and inst.completion_time
                and inst.completion_time > since.completion_time)


def changes_since(table, timeline, since: SyncPoint, *, incremental: bool = True) -> Changes:
    """The partitions written and the drop candidates after ``since`` on ``timeline``."""
    reached = sync_point(timeline)
    done = commits(timeline)
    earliest = timeline.earliest()
    full = (not incremental or since.commit_time is None
            or (earliest is not None and since.commit_time < earliest.requested_time))
    ch = Changes(since, reached, full=full)
    if full:
        ch.written = set(file_listing(table, timeline).partitions())
    for inst in done:
        if not (full or _after(inst, since)):
            continue
        if full and inst.action is not Action.REPLACE_COMMIT:
            continue  # the listing named the written partitions; only replaced ones matter here
        meta = timeline.commit_metadata(inst)
        ch.instants_read += 1
        if not full:
            ch.written |= set(meta.partition_to_write_stats)
        if meta.partition_to_replace_file_ids:
            ch.drop_candidates |= {p for p, ids in meta.partition_to_replace_file_ids.items() if ids}
    for inst in timeline.completed():
        if inst.action is Action.CLEAN and (full or _after(inst, since)):
            meta = CleanMetadata.decode(table.storage.read(timeline.file_path(inst)),
                                        timeline.file_path(inst))
            ch.instants_read += 1
            ch.drop_candidates |= {p for p, files in meta.deleted_by_partition.items() if files}
    return ch


def live_partitions(table, timeline, partitions) -> set[str]:
    """Those of ``partitions`` that hold a live file group: a base or log file of a completed
    instant in a file group no completed replacecommit replaced."""
    if not partitions:
        return set()
    listing = file_listing(table, timeline)
    completion = TimelineCompletionView(timeline)
    replaced = completion.replaced_file_groups()
    live = set()
    for p in partitions:
        for name in listing.names(p):
            bf = parse_base_file_name(name, p)
            if bf is not None:
                fg, t = bf.file_group, bf.instant_time
            else:
                lf = LogFileName.parse(name)
                if lf is None:
                    continue
                fg, t = (p, lf.file_id), lf.instant_time
            if fg not in replaced and completion.is_visible(t):
                live.add(p)
                break
    return live


def partition_values(path: str, fields: list[str], extractor: str, decode: bool) -> list[str]:
    """The values of a partition path, as Java's extractors give them: ``MultiPartKeys`` (one
    value per ``/`` segment, ``k=`` stripped), ``HiveStyle`` (the one ``k=v``), ``SinglePart``
    (the whole path as one value), ``NonPartitioned`` (none)."""
    name = extractor.rsplit(".", 1)[-1]
    if not fields or name == "NonPartitionedExtractor":
        return []
    if name in ("SinglePartPartitionValueExtractor",):
        values = [path]
    elif name == "HiveStylePartitionValueExtractor":
        values = [path.split("=", 1)[1] if "=" in path else path]
    else:
        values = [seg.split("=", 1)[1] if "=" in seg else seg for seg in path.split("/")]
    if decode:
        values = [unquote(v) for v in values]
    return values


__all__ = ["SyncPoint", "Changes", "changes_since", "live_partitions", "partition_values", "sync_point",
           "commits", "LAST_COMMIT_TIME_SYNC", "LAST_COMMIT_COMPLETION_TIME_SYNC"]
