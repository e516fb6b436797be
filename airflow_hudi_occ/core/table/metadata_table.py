"""Hudi's metadata table (``.hoodie/metadata``): found, refused or removed, never left stale.

Hudi 1.x keeps a second, merge-on-read table inside ``.hoodie/metadata`` that lists every
partition's files (and optionally column stats, a record index, ...). When
``hoodie.properties`` lists ``files`` in ``hoodie.table.metadata.partitions``, Java readers and
hudi-rs take their file listing from it instead of the storage. This writer cannot update it,
so a commit on such a table would be invisible to those readers: silent data loss for them.
(Observed with hudi-rs 0.5 on the Java v9 fixture: a commit made while the metadata table stayed
enabled was missing from its snapshot.)

What a writer does, under the table lock, before it creates or completes any instant
(:func:`guard_metadata_table`), keyed by Hudi's own ``hoodie.metadata.enable``:

- ``true`` (Hudi's default): refuse with :class:`MetadataTableEnabledError`, naming the
  metadata table's partitions and both ways out. Nothing has been written at that point.
- ``false``: remove the metadata table as Java Hudi does for a writer with it disabled
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

from airflow_hudi_occ.core.errors import MetadataTableEnabledError
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
    folder_exists: bool = False

    @property
    def enabled(self) -> bool:
        """Readers use it (or a Java writer is building it): committing would make it stale."""
        return bool(self.partitions or self.inflight_partitions)

    @property
    def present(self) -> bool:
        return self.enabled or self.folder_exists

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
                "folder_exists": self.folder_exists}


def metadata_table_state(table) -> MetadataTableState:
    """The state per the table object's properties and one ``exists`` call on the folder."""
    props = table.config.properties
    return MetadataTableState(_csv(props.get(PARTITIONS_KEY)), _csv(props.get(INFLIGHT_PARTITIONS_KEY)),
                              table.storage.exists(table.storage.path(METADATA_FOLDER)))


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


def guard_metadata_table(table, metadata_enable: bool) -> MetadataTableState:
    """Make the table safe to commit to; call under the table lock with fresh properties
    (:meth:`Table.reload_config`). Raises :class:`MetadataTableEnabledError` (nothing
    changed) when the table has an enabled metadata table and ``hoodie.metadata.enable`` is
    not false; removes it when it is false. Returns the state found."""
    state = metadata_table_state(table)
    if not state.present:
        return state
    if not metadata_enable:
        remove_metadata_table(table)
        return state
    if state.enabled:
        raise MetadataTableEnabledError(
            f"table {table.name} at {table.base_uri} has a Hudi metadata table "
            f"({', '.join(state.partitions + state.inflight_partitions)}) that this writer cannot "
            "update: Java Hudi and hudi-rs list files through it and would not see this "
            "write's files", base_path=table.base_uri,
            partitions=state.partitions + state.inflight_partitions,
            remedy="set hoodie.metadata.enable=false to have the metadata table removed first "
                   "(as Java Hudi does; every writer of the table must then run with it "
                   "disabled, and Java rebuilds it if one turns it back on), or write this "
                   "table with Java Hudi only")
    return state


__all__ = ["MetadataTableState", "metadata_table_state", "remove_metadata_table",
           "guard_metadata_table", "METADATA_FOLDER", "PARTITIONS_KEY", "INFLIGHT_PARTITIONS_KEY"]
