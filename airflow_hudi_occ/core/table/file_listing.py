"""Where a table's file listing comes from: Hudi's metadata table, or the storage.

Every reader (copy-on-write and merge-on-read snapshots, time travel, incremental and
read-optimised reads, the Spark engine's readers) and every writer's tagging find a table's
partitions and the files in each through one :class:`FileListing`, chosen once per
file-system view by :func:`file_listing`. On an object store that is the point of Hudi's
metadata table: one listing of ``.hoodie/metadata/files`` and a few reads replace a listing
of every partition folder (``bench/metadata_listing.py`` measures it).

The rule is Java Hudi 1.x's (``HoodieTableMetadata.create``: ``HoodieBackedTableMetadata``
when the reader's ``hoodie.metadata.enable`` is true and the table's files partition is
available, else ``FileSystemBackedTableMetadata``):

- the metadata table is used when ``hoodie.properties`` lists ``files`` in
  ``hoodie.table.metadata.partitions`` (complete: a partition still being built is only in
  ``...partitions.inflight``; ``HoodieTableMetadataUtil.isFilesPartitionAvailable``) and the
  reader's ``hoodie.metadata.enable`` says so (default true for readers, as
  ``HoodieMetadataConfig.DEFAULT_METADATA_ENABLE_FOR_READERS`` in Java 1.x), on table versions
  8 and 9 (version 6's metadata table appends to log files named by base instant, which
  :mod:`.metadata_listing` does not read: a version 6 table is listed from storage);
- otherwise the storage is listed, as before.

Which records of the metadata table a reader trusts (:mod:`.metadata_trust`, Java's
``HoodieTableMetadataUtil.getValidInstantTimestamps`` made stricter): a writer completes the
metadata table's deltacommit *before* its data instant, so a deltacommit completed on the
metadata table may belong to a data instant that is still in flight, or that died and was
rolled back. Its records are skipped when its instant is pending on the data timeline the view
reads (Java skips exactly those) or named by a rollback on it. A metadata table holding
completed deltacommits of instants the data table never had is another table's (copied, or a
restore gone wrong): Java 1.2 takes its records and lists the other table's files; here the
storage is listed instead, with a warning naming the metadata table and those instants, and
writers refuse to append to it (:func:`~.metadata_trust.check_own_metadata_table`). Either way
the names a listing gives are only candidates: the view keeps the files of instants the data
timeline commits, as it does with a storage listing.

Errors: a metadata table that does not decode raises
:class:`~airflow_hudi_occ.core.errors.CorruptMetadataError` with a remedy (read it with
``hoodie.metadata.enable=false``, or have Java rebuild it); it never falls back to the
storage silently, which could hide that the metadata table and the storage disagree.
"""

from __future__ import annotations

import logging
import posixpath
from typing import Protocol

from airflow_hudi_occ.core.errors import CorruptMetadataError
from airflow_hudi_occ.core.format.layout import META_FOLDER, PARTITION_METADATA_FILE
from airflow_hudi_occ.core.table.metadata_commit import open_metadata_table
from airflow_hudi_occ.core.table.metadata_listing import MetadataListing, read_metadata_listing
from airflow_hudi_occ.core.table.metadata_table import FILES_PARTITION, METADATA_FOLDER, PARTITIONS_KEY
from airflow_hudi_occ.core.table.metadata_trust import describe_foreign, foreign_instants, untrusted_instants
from airflow_hudi_occ.core.table.table import Table

log = logging.getLogger(__name__)

#: the table versions whose metadata table this project reads (Hudi 1.x's layout)
METADATA_LISTING_VERSIONS = (8, 9)
SOURCE_METADATA_TABLE = "metadata_table"
SOURCE_STORAGE = "storage"

_REMEDY = ("read the table with hoodie.metadata.enable=false (its files are listed from the "
           "storage), and let Java Hudi rebuild the metadata table (a Java writer with "
           "hoodie.metadata.enable=false deletes it, the next one with true rebuilds it)")


class FileListing(Protocol):
    """A table's partitions and the file names in each: all a file-system view needs."""

    source: str

    def partitions(self) -> list[str]:
        """Partition paths (relative; ``""`` for a table without partitions), sorted."""
        ...

    def names(self, partition: str) -> list[str]:
        """The names of the files directly in ``partition`` (base and log files among them)."""
        ...


class StorageListing:
    """The storage, listed: partitions by their ``.hoodie_partition_metadata`` files (one walk
    of the table), then each partition folder when asked for (one list call each)."""

    source = SOURCE_STORAGE

    def __init__(self, table: Table):
        self.table = table
        self._partitions: list[str] | None = None

    def partitions(self) -> list[str]:
        if self._partitions is None:
            storage = self.table.storage
            if not self.table.config.partition_fields:
                self._partitions = [""]
            else:
                self._partitions = sorted(
                    posixpath.dirname(rel) for rel in storage.walk_files(storage.root)
                    if not rel.startswith(META_FOLDER + "/") and rel.endswith(PARTITION_METADATA_FILE))
        return self._partitions

    def names(self, partition: str) -> list[str]:
        storage = self.table.storage
        return storage.list_names(storage.path(partition) if partition else storage.root)


class MetadataTableListing:
    """The ``files`` partition of the metadata table, read once when first asked (so a view
    that lists nothing reads nothing), keeping the records of trusted instants only."""

    source = SOURCE_METADATA_TABLE

    def __init__(self, table: Table, timeline):
        self.table = table
        self.timeline = timeline
        self._listing: MetadataListing | None = None
        #: the storage's listing, when the metadata table was removed since the properties
        #: were read, or is another table's (the source stays metadata_table: that is what
        #: was decided)
        self.fallback: StorageListing | None = None
        #: the instants of a metadata table that is not this table's (:mod:`.metadata_trust`)
        self.foreign: tuple[str, ...] = ()

    def untrusted_instants(self) -> set[str]:
        """Data instants whose records this listing skips: pending on its timeline, or named
        by a rollback on it (:func:`~.metadata_trust.untrusted_instants`)."""
        return untrusted_instants(self.table, self.timeline)

    @property
    def listing(self) -> MetadataListing:
        if self._listing is None:
            try:
                mdt = open_metadata_table(self.table)
                mdt_timeline = mdt.timeline() if mdt is not None else None  # listed once for both
                if mdt_timeline is not None:
                    self.foreign = foreign_instants(self.table, self.timeline, mdt_timeline)
                if self.foreign:
                    log.warning("%s; its records are not read, the files of %s are listed from the "
                                "storage (a writer refuses the table until it is removed or replaced)",
                                describe_foreign(self.table, self.foreign), self.table.base_uri)
                    self.fallback = StorageListing(self.table)
                    self._listing = MetadataListing()
                    return self._listing
                untrusted = self.untrusted_instants()
                self._listing = read_metadata_listing(self.table, trusted=lambda t: t not in untrusted,
                                                      mdt=mdt, mdt_timeline=mdt_timeline)
            except CorruptMetadataError as e:
                raise CorruptMetadataError(
                    f"the file listing in the metadata table of {self.table.base_uri} cannot be "
                    f"read: {e.message}", path=e.path, base_path=self.table.base_uri, remedy=_REMEDY) from e
            except (ValueError, EOFError, KeyError, TypeError) as e:
                raise CorruptMetadataError(
                    f"the file listing in the metadata table of {self.table.base_uri} cannot be "
                    f"read: {e}", base_path=self.table.base_uri, remedy=_REMEDY) from e
            if not self._listing.instants:
                self._listing = self._without_instants()
        return self._listing

    def _without_instants(self) -> MetadataListing:
        """A complete files partition always has an instant (Java initialises it with a base
        file). None read: either a writer with ``hoodie.metadata.enable=false`` removed the
        metadata table after these properties were read (it clears them first), and the
        storage is the listing again, or the metadata table is broken: an empty listing then
        would read as an empty table, so it is refused."""
        fresh = Table.open(self.table.base_uri, self.table.storage.storage_options)
        if uses_metadata_table(fresh):
            raise CorruptMetadataError(
                f"hoodie.properties of {self.table.base_uri} lists the metadata table's files "
                "partition as complete, but the metadata table has no completed listing",
                path=self.table.storage.path(METADATA_FOLDER), base_path=self.table.base_uri, remedy=_REMEDY)
        self.fallback = StorageListing(fresh)
        return MetadataListing()

    def partitions(self) -> list[str]:
        listing = self.listing
        if self.fallback is not None:
            return self.fallback.partitions()
        return sorted(listing.partitions)

    def names(self, partition: str) -> list[str]:
        listing = self.listing
        if self.fallback is not None:
            return self.fallback.names(partition)
        return sorted(listing.files.get(partition, {}))


def uses_metadata_table(table: Table, metadata_enable: bool = True) -> bool:
    """Whether a reader with ``hoodie.metadata.enable=metadata_enable`` lists ``table``'s files
    through its metadata table (the module doc's rule; the properties as ``table`` read them)."""
    partitions = [p.strip() for p in (table.config.get(PARTITIONS_KEY) or "").split(",")]
    return (metadata_enable and FILES_PARTITION in partitions
            and table.config.version in METADATA_LISTING_VERSIONS)


def file_listing(table: Table, timeline=None, *, metadata_enable: bool = True) -> FileListing:
    """The listing a view of ``table`` as of ``timeline`` (default: a fresh one) reads."""
    if uses_metadata_table(table, metadata_enable):
        return MetadataTableListing(table, timeline if timeline is not None else table.timeline())
    return StorageListing(table)


__all__ = ["FileListing", "StorageListing", "MetadataTableListing", "file_listing", "uses_metadata_table",
           "METADATA_LISTING_VERSIONS", "SOURCE_METADATA_TABLE", "SOURCE_STORAGE"]
