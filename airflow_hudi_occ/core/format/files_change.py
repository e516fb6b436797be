"""What one action changed in a data table's files: the input of the metadata table's records.

Every action that changes files (commit, deltacommit, replacecommit, clean, rollback,
compaction) has a metadata-table deltacommit at the same instant that tells readers of the
``files`` partition what changed (issue 32, item 1). Java derives those records from each
action's own metadata (``HoodieTableMetadataUtil.convertMetadataToFilesPartitionRecords`` and
friends); this value type is the one shape all of ours are reduced to first, so the records
are built in one place (:func:`~airflow_hudi_occ.core.format.metadata_record.files_records`)
and the other metadata partitions (column and partition stats) can be derived from the same
change.

- ``added``: per partition, file name -> size in bytes after the action (a log file appended
  to carries its size after the append: readers keep the larger of two sizes);
- ``deleted``: per partition, the file names the action removed;
- ``partitions_added``: partitions named in the ``__all_partitions__`` record as present (a
  commit names every partition it wrote, as Java does);
- ``partitions_deleted``: partitions named there as deleted (a clean that removed the last of a
  partition dropped by ``delete_partition``).

A change with no partitions in either list writes no partition-list record (Java's clean and
rollback records have none unless a partition went away).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from airflow_hudi_occ.core.format.metadata import CleanMetadata, WriteStat


@dataclass(frozen=True)
class FilesChange:
    """Files added (with sizes) and deleted per partition, and partitions added / deleted."""

    added: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    deleted: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    partitions_added: tuple[str, ...] = ()
    partitions_deleted: tuple[str, ...] = ()

    @classmethod
    def of_write_stats(cls, stats: Iterable[WriteStat]) -> "FilesChange":
        """A commit's, deltacommit's, replacecommit's or compaction's change: the files its
        write stats name, each with its size after the write (the larger one if a file is
        named twice, as Java merges them), and every partition written listed as present.
        Files a replacecommit replaced are not deleted here: they leave at clean, as in Java."""
        added: dict[str, dict[str, int]] = {}
        for s in stats:
            files = added.setdefault(s.partition_path, {})
            if not s.path:
                continue  # a partition written empty: listed, no file (as Java)
            name = posixpath.basename(s.path)
            files[name] = max(int(s.file_size_in_bytes), files.get(name, 0))
        return cls(added=added, partitions_added=tuple(sorted(added)))

    @classmethod
    def of_clean(cls, meta: CleanMetadata) -> "FilesChange":
        """A clean's change: every file its metadata names per partition (its
        ``deletePathPatterns``: deleted, and failed to delete, as Java lists both), no
        partition-list record (this project's clean never removes a partition)."""
        deleted: dict[str, tuple[str, ...]] = {}
        for part in sorted(set(meta.deleted_by_partition) | set(meta.failed_by_partition)):
            rels = list(meta.deleted_by_partition.get(part, [])) + list(meta.failed_by_partition.get(part, []))
            deleted[part] = tuple(posixpath.basename(r) for r in rels)
        return cls(deleted=deleted)

    @property
    def partitions(self) -> tuple[str, ...]:
        """Every partition with a files record in this change, sorted."""
        return tuple(sorted(set(self.added) | set(self.deleted)))

    @property
    def is_empty(self) -> bool:
        return not (any(self.added.values()) or any(self.deleted.values())
                    or self.partitions_added or self.partitions_deleted)

    def to_json(self) -> dict:
        return {"added": {p: dict(sorted(f.items())) for p, f in sorted(self.added.items())},
                "deleted": {p: sorted(f) for p, f in sorted(self.deleted.items())},
                "partitions_added": list(self.partitions_added),
                "partitions_deleted": list(self.partitions_deleted)}


__all__ = ["FilesChange"]
