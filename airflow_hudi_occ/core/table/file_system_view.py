"""File groups and the file-system view: the latest base file of each file group as of an instant.

This is how every Hudi reader sees a copy-on-write table, and it must give the same answer as
the independent ``hudi`` (hudi-rs) reader:

- base files, named ``<fileId>_<writeToken>_<t>.parquet``, are found in the table's file listing
  (:mod:`.file_listing`: Hudi's metadata table when the table has one and the reader allows
  it, else the partition folders listed);
- a file is visible if its instant ``t`` is completed and not after the as-of time, or if ``t``
  is older than the earliest instant on the active timeline (archived, hence committed);
  files of pending or failed instants are invisible;
- a completed replacecommit removes the file groups it replaced, for reads at or after it;
- per file group the base file with the largest instant time wins.

Consumers see the timeline only through the small :class:`CompletionView` protocol, so a view
can also be built from a timeline snapshot taken under the lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Protocol

from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.format.layout import BaseFile, FileGroupId, parse_base_file_name
from airflow_hudi_occ.core.table.file_listing import FileListing, StorageListing, file_listing
from airflow_hudi_occ.core.table.table import Table

class CompletionView(Protocol):
    """The two facts a file-group view needs from a timeline."""

    def is_visible(self, instant_time: str) -> bool: ...

    def replaced_file_groups(self) -> set[FileGroupId]: ...


class TimelineCompletionView:
    """CompletionView over a Timeline snapshot, optionally as of a requested time."""

    def __init__(self, timeline, as_of: str | None = None):
        self.timeline = timeline
        self.as_of = as_of
        self._completed = set()
        self._pending = set()
        earliest = None
        for inst in timeline:
            if not inst.is_write and inst.action not in (Action.CLEAN, Action.ROLLBACK):
                continue
            if earliest is None or inst.requested_time < earliest:
                earliest = inst.requested_time
            if inst.is_completed and inst.is_write and (as_of is None or inst.requested_time <= as_of):
                self._completed.add(inst.requested_time)
            elif inst.is_pending:
                self._pending.add(inst.requested_time)
        self._earliest = earliest

    def is_visible(self, instant_time: str) -> bool:
        if self.as_of is not None and instant_time > self.as_of:
            return False
        if instant_time in self._completed:
            return True
        if instant_time in self._pending:
            return False
        # Older than anything on the active timeline: archived, therefore committed.
        return self._earliest is not None and instant_time < self._earliest

    def replaced_file_groups(self) -> set[FileGroupId]:
        out: set[FileGroupId] = set()
        for inst in self.timeline.completed():
            if inst.action is not Action.REPLACE_COMMIT:
                continue
            if self.as_of is not None and inst.requested_time > self.as_of:
                continue
            out |= self.timeline.commit_metadata(inst).replaced_file_groups()
        return out


def list_partitions(table: Table, listing: FileListing | None = None) -> list[str]:
    """Partition paths (relative), from ``listing`` (default: the storage, found by their
    ``.hoodie_partition_metadata`` files)."""
    return list((listing or StorageListing(table)).partitions())


def list_base_files(table: Table, partition: str, listing: FileListing | None = None) -> list[BaseFile]:
    """The base files of ``partition`` that ``listing`` names (default: the storage's)."""
    out = []
    for name in (listing or StorageListing(table)).names(partition):
        bf = parse_base_file_name(name, partition)
        if bf is not None:
            out.append(bf)
    return out


@dataclass(frozen=True)
class FileSlice:
    """The visible base file of one file group (copy-on-write: a slice is just a base file)."""

    base_file: BaseFile

    @property
    def partition(self) -> str:
        return self.base_file.partition

    @property
    def file_id(self) -> str:
        return self.base_file.file_id

    @property
    def instant_time(self) -> str:
        return self.base_file.instant_time

    @property
    def file_group(self) -> FileGroupId:
        return self.base_file.file_group

    def to_json(self) -> dict:
        return {"partition": self.partition, "file_id": self.file_id,
                "instant_time": self.instant_time, "path": self.base_file.relative_path}


class FileSystemView:
    """The latest visible file slice of each file group, as of an instant (requested time)."""

    def __init__(self, table: Table, timeline=None, as_of: str | None = None,
                 partitions: Iterable[str] | None = None, *, listing: FileListing | None = None,
                 metadata_enable: bool = True):
        self.table = table
        self.timeline = timeline if timeline is not None else table.timeline()
        self.as_of = as_of
        #: where the files come from (core/table/file_listing.py): the metadata table when the
        #: table has one and ``metadata_enable`` (the reader's hoodie.metadata.enable) allows
        self.listing = listing if listing is not None else file_listing(
            table, self.timeline, metadata_enable=metadata_enable)
        self.completion = TimelineCompletionView(self.timeline, as_of)
        self._partitions = list(partitions) if partitions is not None else None
        self._slices: dict[FileGroupId, FileSlice] | None = None

    def _build(self) -> dict[FileGroupId, FileSlice]:
        replaced = self.completion.replaced_file_groups()
        latest: dict[FileGroupId, FileSlice] = {}
        for part in self.partitions():
            for bf in list_base_files(self.table, part, self.listing):
                if bf.file_group in replaced or not self.completion.is_visible(bf.instant_time):
                    continue
                cur = latest.get(bf.file_group)
                if cur is None or bf.instant_time > cur.instant_time:
                    latest[bf.file_group] = FileSlice(bf)
        return latest

    def partitions(self) -> list[str]:
        """The partitions this view covers: those it was given, else every one listed."""
        return list(self._partitions) if self._partitions is not None else list_partitions(self.table, self.listing)

    @property
    def slices(self) -> dict[FileGroupId, FileSlice]:
        if self._slices is None:
            self._slices = self._build()
        return self._slices

    def latest_file_slices(self, partition: str | None = None) -> list[FileSlice]:
        out = [s for s in self.slices.values() if partition is None or s.partition == partition]
        return sorted(out, key=lambda s: (s.partition, s.file_id))

    def get(self, partition: str, file_id: str) -> FileSlice | None:
        return self.slices.get((partition, file_id))


def relative_path(table, path: str | None) -> str | None:
    """A plan's data file path (full, as Java Hudi writes it, or relative) made relative."""
    if not path:
        return path
    for base in (table.base_uri.rstrip("/") + "/", table.storage.root.rstrip("/") + "/"):
        if path.startswith(base):
            return path[len(base):]
    return path
