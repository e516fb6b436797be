"""Hudi's metadata table (``.hoodie/metadata``): found, refused or removed, never left stale.

Hudi 1.x keeps a second, merge-on-read table inside ``.hoodie/metadata`` that lists every
partition's files (and optionally column stats, a record index, ...). When
``hoodie.properties`` lists ``files`` in ``hoodie.table.metadata.partitions``, Java readers and
hudi-rs take their file listing from it instead of the storage. A writer that does not update
it makes a commit invisible to those readers: silent data loss for them. (Observed with hudi-rs
0.5 on the Java v9 fixture: a commit made while the metadata table stayed enabled was missing
from its snapshot.) This project updates it only behind
``hoodie.occ.metadata.files.maintain=true`` and only when it holds ``files`` alone
(:func:`maintains_files`, :mod:`.metadata_commit`); otherwise the rules below apply.

What a writer does, under the table lock, before it creates or completes any instant
(:func:`guard_metadata_table`), keyed by Hudi's own ``hoodie.metadata.enable`` and
``hoodie.metadata.auto.delete.partitions`` (Hudi 1.2) and this project's
``hoodie.occ.metadata.delete.unmaintained`` (:func:`judge_metadata_table` decides, without
changing anything, so the Spark job can fail fast on the same judgement):

- ``enable=true`` (Hudi's default): keep it when :func:`maintains_files` says so (this
  project's ``hoodie.occ.metadata.files.maintain``, default true: ``files`` by every action,
  and ``column_stats`` and ``partition_stats`` too, by every action as well,
  :data:`MAINTAINED_PARTITIONS`). Otherwise refuse with
  :class:`MetadataTableEnabledError`, naming the metadata table's partitions and both ways out;
  with :class:`UnmaintainedMetadataPartitionsError` (a subclass) when it holds partitions this
  write does not maintain (:data:`UNMAINTAINED_HINTS`: a record-level index, secondary and
  expression indexes, bloom filters; column and partition stats with the switch false).
  Nothing has been written at that point.
- ``enable=false`` and ``auto.delete.partitions=false``: refuse as well. Java with that pair
  never deletes the metadata table and keeps writing it (``HoodieSparkTable.getMetadataWriter``
  takes the writer path when the table has one and auto-delete is off), which this writer
  cannot do.
- ``enable=false`` with unmaintained partitions: refuse with
  :class:`UnmaintainedMetadataPartitionsError` unless ``hoodie.occ.metadata.delete.unmaintained
  =true`` says to delete them too. Hudi's own key defaults to deleting (apache/hudi#18180 is
  the large record index a misconfigured writer deleted that way), so it cannot be the explicit
  consent; it is honoured as the veto.
- ``enable=false`` otherwise (only ``files``, which Java rebuilds from a listing, or the
  explicit option): remove the metadata table as Java Hudi does for a writer with it disabled
  (``HoodieTable.maybeDeleteMetadataTable``): first clear ``hoodie.table.metadata.partitions``
  and ``...partitions.inflight`` in ``hoodie.properties``, then delete the folder.

Why that order is safe at every crash point (checked with hudi-rs, argued for Java):

1. before the properties change: nothing changed; the next writer starts again.
2. properties replaced (see :meth:`Table.update_properties`: the old file, its backup or the
   new file is there at every moment): readers no longer consult the metadata table, they
   list the storage, which is complete; the folder left behind is ignored. hudi-rs reads all
   rows in this state, with and without the folder.
3. folder partly deleted: as 2. The next writer with ``false`` finishes the deletion; a Java
   writer with the metadata table enabled rebuilds it from a file listing, as after its own
   deletion.

A folder without partitions in ``hoodie.properties`` is not an enabled metadata table (no
reader uses it), so writers with the default proceed on it. A Java writer that turns the
metadata table back on later rebuilds it from the storage; from then on this writer refuses
again unless it, too, runs with ``false``: every writer of a table must agree on
``hoodie.metadata.enable``, as Hudi's own multi-writer docs require.
"""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass

from airflow_hudi_occ.core.errors import MetadataTableEnabledError, UnmaintainedMetadataPartitionsError
from airflow_hudi_occ.core.format.layout import META_FOLDER

log = logging.getLogger(__name__)

METADATA_FOLDER = posixpath.join(META_FOLDER, "metadata")
PARTITIONS_KEY = "hoodie.table.metadata.partitions"
INFLIGHT_PARTITIONS_KEY = "hoodie.table.metadata.partitions.inflight"


def _csv(raw: str | None) -> tuple[str, ...]:
    return tuple(p.strip() for p in (raw or "").split(",") if p.strip())


@dataclass(frozen=True)
class MetadataTableState:
    """What ``hoodie.properties`` and the storage say about the metadata table."""

    partitions: tuple[str, ...] = ()
    inflight_partitions: tuple[str, ...] = ()
    #: None: not looked for (:func:`judged_state`, where the judgement cannot depend on it)
    folder_exists: bool | None = False

    @property
    def enabled(self) -> bool:
        """Readers use it (or a Java writer is building it): committing would make it stale."""
        return bool(self.partitions or self.inflight_partitions)

    @property
    def present(self) -> bool:
        return self.enabled or bool(self.folder_exists)

    def describe(self) -> str:
        if self.enabled:
            parts = ", ".join(self.partitions) or "none complete"
            extra = f"; being built: {', '.join(self.inflight_partitions)}" if self.inflight_partitions else ""
            return f"enabled (partitions: {parts}{extra})"
        if self.folder_exists:
            return "a folder left by a removal that did not finish (no reader uses it)"
        return "none"

    def to_json(self) -> dict:
        return {"enabled": self.enabled, "partitions": list(self.partitions),
                "inflight_partitions": list(self.inflight_partitions),
                "unmaintained_partitions": list(unmaintained_partitions(self)),
                "folder_exists": self.folder_exists}


def metadata_table_state(table) -> MetadataTableState:
    """The state per the table object's properties and one ``exists`` call on the folder."""
    props = table.config.properties
    return MetadataTableState(_csv(props.get(PARTITIONS_KEY)), _csv(props.get(INFLIGHT_PARTITIONS_KEY)),
                              table.storage.exists(table.storage.path(METADATA_FOLDER)))


def declared_state(table) -> MetadataTableState:
    """What the table object's ``hoodie.properties`` say, without looking for the folder
    (``folder_exists`` None): all a caller needs that asks only whether the metadata table is
    enabled or which partitions it has (no request; the ``exists`` call is two on S3, and
    several such callers run under the table lock)."""
    props = table.config.properties
    return MetadataTableState(_csv(props.get(PARTITIONS_KEY)), _csv(props.get(INFLIGHT_PARTITIONS_KEY)), None)


def judged_state(table, config) -> MetadataTableState:
    """:func:`metadata_table_state` for :func:`judge_metadata_table` alone, without the
    ``exists`` call (two requests on S3) where the judgement cannot depend on the folder: its
    existence matters only on a table whose properties list no metadata partition, to a writer
    with ``hoodie.metadata.enable=false`` (which removes a leftover folder); elsewhere
    ``folder_exists`` is None (not looked for)."""
    state = declared_state(table)
    if state.enabled or config.metadata.enable:
        return state
    return metadata_table_state(table)


def remove_metadata_table(table) -> MetadataTableState:
    """Clear the metadata partitions in ``hoodie.properties``, then delete the folder (see the
    module doc for why in this order). The caller holds the table lock. Returns the state
    that was removed."""
    before = metadata_table_state(table)
    if before.enabled:
        table.update_properties({PARTITIONS_KEY: "", INFLIGHT_PARTITIONS_KEY: ""})
    if before.folder_exists:
        table.storage.delete_dir(table.storage.path(METADATA_FOLDER))
    if before.present:
        log.warning("removed the metadata table of %s (%s), as hoodie.metadata.enable=false asks; "
                    "Hudi readers list files from storage from now on", table.base_uri, before.describe())
    return before


FILES_PARTITION = "files"
AUTO_DELETE_KEY = "hoodie.metadata.auto.delete.partitions"
DELETE_UNMAINTAINED_KEY = "hoodie.occ.metadata.delete.unmaintained"

#: metadata-table partitions (Hudi's ``MetadataPartitionType`` paths; the last two are
#: prefixes) this writer does not maintain, each with how a Java writer gives it up: with the
#: index disabled in its config and ``hoodie.metadata.auto.delete.partitions`` at its default,
#: Java 1.2 deletes the partition at its next write (``HoodieTable.deleteMetadataIndexIfNecessary``);
#: a secondary or expression index is dropped with Spark SQL's ``DROP INDEX``. ``files`` is not
#: here: deleting it loses nothing Java does not rebuild from a listing.
UNMAINTAINED_HINTS: dict[str, str] = {
    "record_index": "hoodie.metadata.record.index.enable=false (and "
                    "hoodie.metadata.record.level.index.enable=false)",
    "column_stats": "hoodie.metadata.index.column.stats.enable=false",
    "partition_stats": "hoodie.metadata.index.partition.stats.enable=false",
    "bloom_filters": "hoodie.metadata.index.bloom.filter.enable=false",
    "secondary_index_": "DROP INDEX <name> ON <table> (Spark SQL)",
    "expr_index_": "DROP INDEX <name> ON <table> (Spark SQL)",
}


def _hint(partition: str) -> str:
    for name, hint in UNMAINTAINED_HINTS.items():
        if partition == name or (name.endswith("_") and partition.startswith(name)):
            return hint
    return "disable or drop it in Java"


def unmaintained_partitions(state: MetadataTableState) -> tuple[str, ...]:
    """The metadata partitions (complete or being built) that deleting the metadata table would
    destroy beyond what Java rebuilds from a listing: every one but ``files``."""
    return tuple(p for p in dict.fromkeys(state.partitions + state.inflight_partitions)
                 if p != FILES_PARTITION)


#: the metadata partitions our commits keep (``files``: :mod:`.metadata_commit`; the stats:
#: :mod:`.metadata_stats`), the three Java 1.2 builds at its defaults
MAINTAINED_PARTITIONS = (FILES_PARTITION, "column_stats", "partition_stats")


def maintains_files(state: MetadataTableState, config, *, files_writer: bool, stats_writer: bool = True) -> bool:
    """Whether this write keeps the metadata table itself (:mod:`.metadata_commit`):
    ``hoodie.occ.metadata.files.maintain=true`` with the metadata table on, a caller that
    writes the listing (``files_writer``: every write transaction of every action, clean,
    rollback and the scheduling of services, which changes no file; the data table's
    archival, which moves none) and a metadata table, complete, of ``files`` and any of
    :data:`MAINTAINED_PARTITIONS` (Java 1.2's defaults: ``files``, ``column_stats``,
    ``partition_stats``), whose records every action writes (:mod:`.metadata_stats`).
    ``stats_writer=False`` narrows it to ``files`` alone, for a caller that cannot write
    stats records. A record index or a secondary index is refused whoever writes."""
    kept = set(MAINTAINED_PARTITIONS) if stats_writer else {FILES_PARTITION}
    return (files_writer and config.metadata.enable and config.metadata.maintain_files
            and FILES_PARTITION in state.partitions and set(state.partitions) <= kept
            and not state.inflight_partitions)


def judge_metadata_table(table, config, state: MetadataTableState | None = None, *,
                         files_writer: bool = False, stats_writer: bool = True) -> bool:
    """Whether a writer with ``config`` (its ``metadata`` part: ``enable``,
    ``auto_delete_partitions``, ``delete_unmaintained`` and ``maintain_files``) must remove the metadata table before it writes; raises
    (changing nothing) when it must not write at all. ``files_writer``: the caller writes the
    listing's deltacommit when :func:`maintains_files` says so, ``stats_writer`` its stats
    records too. See the module doc."""
    state = state if state is not None else metadata_table_state(table)
    if not state.present:
        return False
    if not state.enabled:  # a removal's leftover folder: no reader uses it
        return not config.metadata.enable and config.metadata.auto_delete_partitions
    if maintains_files(state, config, files_writer=files_writer, stats_writer=stats_writer):
        return False
    every = tuple(dict.fromkeys(state.partitions + state.inflight_partitions))
    unmaintained = unmaintained_partitions(state)
    if stats_writer and files_writer and config.metadata.enable and config.metadata.maintain_files:
        # with the switch on, a stats writer keeps the stats partitions; what is left refuses
        # (complete ones: a partition being built is not ours to keep)
        unmaintained = tuple(p for p in unmaintained
                             if p not in MAINTAINED_PARTITIONS or p in state.inflight_partitions)
    where = f"table {table.name} at {table.base_uri}"
    if unmaintained and (config.metadata.enable or not config.metadata.delete_unmaintained):
        hints = "; ".join(f"{p}: {_hint(p)}" for p in unmaintained)
        veto = (f" ({AUTO_DELETE_KEY}=false forbids that too, so only the first way is open)"
                if not config.metadata.auto_delete_partitions else "")
        stats_note = ""
        if (config.metadata.enable and config.metadata.maintain_files
                and set(unmaintained) & set(MAINTAINED_PARTITIONS)):
            stats_note = ("; column_stats and partition_stats are kept only by the core "
                          "copy-on-write commits, clean and rollback, not yet by this action")
        raise UnmaintainedMetadataPartitionsError(
            f"{where} has a Hudi metadata table with partitions this writer does not maintain: "
            f"{', '.join(unmaintained)} (all partitions: {', '.join(every)}); writing would leave "
            f"them stale, and deleting them is never done silently{stats_note}", base_path=table.base_uri,
            partitions=every, unmaintained=unmaintained,
            remedy="either give them up in Java first (a Java writer with the index disabled "
                   f"deletes its partition at its next write, {AUTO_DELETE_KEY} left at true: "
                   f"{hints}), then write with hoodie.metadata.enable=false; or set "
                   f"hoodie.metadata.enable=false and {DELETE_UNMAINTAINED_KEY}=true to let this "
                   "writer delete the whole metadata table, these partitions included, as a Java "
                   "writer with the metadata table disabled does (Java rebuilds an index only "
                   "when a writer enables it again, reading the whole table)" + veto)
    if config.metadata.enable:
        switch = ("; hoodie.occ.metadata.files.maintain=true (the default) keeps complete files, "
                  "column_stats and partition_stats partitions for every action that writes the "
                  "listing (writes, clean, rollback, compaction, clustering, the data table's "
                  "archival), and this call is not one of "
                  "them, or the metadata table is still being built"
                  if config.metadata.maintain_files else
                  "; hoodie.occ.metadata.files.maintain=false turned keeping it off")
        raise MetadataTableEnabledError(
            f"{where} has a Hudi metadata table ({', '.join(every)}) that this writer cannot "
            "update: Java Hudi and hudi-rs list files through it and would not see this "
            f"write's files{switch}", base_path=table.base_uri, partitions=every,
            remedy="set hoodie.metadata.enable=false to have the metadata table removed first "
                   "(as Java Hudi does; every writer of the table must then run with it "
                   "disabled, and Java rebuilds it if one turns it back on), or write this "
                   "table with Java Hudi only")
    if not config.metadata.auto_delete_partitions:
        raise MetadataTableEnabledError(
            f"{where} has a Hudi metadata table ({', '.join(every)}) and {AUTO_DELETE_KEY}=false "
            "forbids deleting it; Java with that setting keeps writing the metadata table even "
            "with hoodie.metadata.enable=false, which this writer cannot",
            base_path=table.base_uri, partitions=every,
            remedy=f"remove {AUTO_DELETE_KEY}=false from this writer's options to let it delete the "
                   "metadata table (Java rebuilds files from a listing at its next write), or "
                   "write this table with Java Hudi only")
    return True


def guard_metadata_table(table, config, *, files_writer: bool = False,
                         stats_writer: bool = True) -> MetadataTableState:
    """Make the table safe to commit to; call under the table lock with fresh properties
    (:meth:`Table.reload_config`). Raises what :func:`judge_metadata_table` raises (nothing
    changed); removes the metadata table when the judgement says so. Returns the state found."""
    state = metadata_table_state(table)
    if judge_metadata_table(table, config, state, files_writer=files_writer, stats_writer=stats_writer):
        remove_metadata_table(table)
    return state


__all__ = ["MetadataTableState", "metadata_table_state", "declared_state", "judged_state", "remove_metadata_table",
           "unmaintained_partitions", "maintains_files", "judge_metadata_table", "guard_metadata_table",
           "UNMAINTAINED_HINTS", "MAINTAINED_PARTITIONS", "FILES_PARTITION", "METADATA_FOLDER", "PARTITIONS_KEY",
           "INFLIGHT_PARTITIONS_KEY"]
