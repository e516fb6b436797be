"""Whose records Hudi's metadata table holds: which a reader takes, and whether it is the table's.

A writer completes the metadata table's deltacommit *before* its data instant (Java's order,
:mod:`.metadata_commit`), so a deltacommit completed on the metadata table may belong to a
data instant still in flight, or one that died and was rolled back. Java Hudi 1.2 decides which
log blocks a reader takes with ``HoodieTableMetadataUtil.getValidInstantTimestamps`` (read in
the 1.2.0 bundle): the data table's completed instants (active timeline), every completed
deltacommit of the metadata table whose instant is not pending on the data table, the
instants completed data rollbacks and restores name, the metadata table's own rollbacks and
restores, and its initialisation deltacommits (``00000000000000...``); its base files are
always read. This module keeps that rule with two departures, both stricter:

- :func:`untrusted_instants`: records of a data instant pending on the reader's timeline are
  skipped, as Java skips them, and so are those of an instant a rollback on it names (Java
  counts them valid, relying on the rollback having rolled the metadata table's deltacommit
  back too);
- :func:`foreign_instants`: a completed deltacommit of an instant the data table never had
  (neither on its active timeline, in any state, nor archived, nor named by a rollback; not an
  initialisation nor the metadata table's own log compaction) is *foreign*: the metadata table
  was copied from another table or restored from a backup that does not match ("a restore gone
  wrong"). Java 1.2 counts such a deltacommit valid (it is completed and not pending on the data
  table), so Java and hudi-rs list the other table's files and miss this table's own; its base
  file, written by the other table's initialisation or compaction, is the other table's
  listing too. Skipping the foreign blocks alone would still leave a wrong listing, so a
  reader here lists the storage instead, with a warning (:mod:`.file_listing`), and a writer
  that would append to it is refused before any instant exists
  (:func:`check_own_metadata_table`, :class:`~airflow_hudi_occ.core.errors.ForeignMetadataTableError`;
  Java 1.2's writer rebuilds the metadata table only when it has no completed instant at all,
  ``HoodieBackedTableMetadataWriter.isBootstrapNeeded``, and otherwise appends to it).

Cost: the metadata table's timeline is listed (readers list it anyway); the data table's
timeline is listed again, its rollbacks read and its archived instant times read (once per
history snapshot and process) only while some deltacommit is still unexplained, which on a
table of its own happens after archival moved the data instants of deltacommits the metadata
table still keeps.
"""

from __future__ import annotations

from airflow_hudi_occ.core.errors import CorruptMetadataError, ForeignMetadataTableError
from airflow_hudi_occ.core.format.instant import Action, Instant, State, parse_file_name
from airflow_hudi_occ.core.format.metadata import RollbackMetadata, RollbackPlan
from airflow_hudi_occ.core.table.history import TimelineHistory
from airflow_hudi_occ.core.table.metadata_commit import open_metadata_table
from airflow_hudi_occ.core.table.metadata_table import (DELETE_UNMAINTAINED_KEY, METADATA_FOLDER,
                                                        metadata_table_state, unmaintained_partitions)

#: Hudi's ``HoodieTableMetadata.SOLO_COMMIT_TIMESTAMP``: the metadata table's initialisation
#: deltacommits are this plus a few milliseconds (``00000000000000000``, ``...001``, ...)
SOLO_COMMIT_TIMESTAMP = "00000000000000"
#: how many foreign instants a message names
_NAMED = 5


def _rollback_targets(table, inst: Instant) -> set[str]:
    """The data instants one rollback names: its completed metadata, else (an empty completed
    file, as Java wrote before 1.x, or a rollback still pending) its plan, as Java's
    ``getRollbackedCommits`` falls back to it."""
    storage = table.storage
    if inst.is_completed:
        path = storage.path(table.config.timeline_folder, inst.file_name(table.config.layout_version))
        try:
            return {t for t, _a in RollbackMetadata.decode(storage.read(path), path).rolled_back}
        except CorruptMetadataError:
            pass
    path = storage.path(table.config.timeline_folder,
                        Instant(inst.requested_time, Action.ROLLBACK, State.REQUESTED).file_name())
    try:
        return {RollbackPlan.decode(storage.read(path), path).instant_time}
    except (CorruptMetadataError, FileNotFoundError):
        return set()


def rolled_back_instants(table, timeline) -> set[str]:
    """Data instants a rollback on ``timeline`` (completed or pending) names."""
    out: set[str] = set()
    for inst in timeline:
        if inst.action is Action.ROLLBACK:
            out |= _rollback_targets(table, inst)
    return out


def untrusted_instants(table, timeline) -> set[str]:
    """Data instants whose metadata-table records a reader of ``timeline`` skips: pending on it,
    or named by a rollback on it (see the module doc)."""
    return {i.requested_time for i in timeline.pending()} | rolled_back_instants(table, timeline)


def _own_deltacommit(mdt_timeline, inst: Instant) -> bool:
    """An initialisation deltacommit, or the metadata table's own log compaction (requested as
    ``logcompaction``, completed as a deltacommit): instants no data table has."""
    if inst.requested_time.startswith(SOLO_COMMIT_TIMESTAMP):
        return True
    return any((p := parse_file_name(n)) is not None and p.action is Action.LOG_COMPACTION
               for n in mdt_timeline.files_of(inst.requested_time))


def _archived_rollback_targets(table, since: str) -> set[str]:
    out: set[str] = set()
    rows = TimelineHistory(table).read(["action", "metadata"], min_time=since).to_pylist()
    for r in rows:
        if r["action"] == Action.ROLLBACK.value and r["metadata"]:
            try:
                out |= {t for t, _a in RollbackMetadata.decode(r["metadata"]).rolled_back}
            except CorruptMetadataError:
                continue
    return out


def foreign_instants(table, timeline=None, mdt_timeline=None) -> tuple[str, ...]:
    """The completed deltacommits of ``table``'s metadata table (its timeline ``mdt_timeline``;
    listed when not given) whose instants the data table never had (see the module doc),
    sorted; empty when it has none, or no metadata table. ``timeline``: a data timeline
    already loaded (before the metadata table's), checked first; a
    deltacommit it lacks is checked again on the timeline listed after the metadata table's
    (a deltacommit completes only after its data instant is requested, so one of a write that
    began after ``timeline`` was loaded is found there)."""
    if mdt_timeline is None:
        mdt = open_metadata_table(table)
        if mdt is None:
            return ()
        mdt_timeline = mdt.timeline()
    left = {i.requested_time for i in mdt_timeline.completed()
            if i.action is Action.DELTA_COMMIT and not _own_deltacommit(mdt_timeline, i)}
    if timeline is not None:
        left -= {i.requested_time for i in timeline}
    if left:
        fresh = table.timeline()
        left -= {i.requested_time for i in fresh}
        if left:
            left -= rolled_back_instants(table, fresh)
    if left:
        history = TimelineHistory(table)
        left -= set(history.completion_times())  # cached per snapshot
        if left:  # archived without a completion time
            left -= history.instant_times(min_time=min(left))
        if left:
            left -= _archived_rollback_targets(table, min(left))
    return tuple(sorted(left))


def describe_foreign(table, instants) -> str:
    """What a foreign metadata table is, for messages and warnings."""
    shown = ", ".join(instants[:_NAMED]) + (f" and {len(instants) - _NAMED} more" if len(instants) > _NAMED else "")
    return (f"the metadata table {table.storage.path(METADATA_FOLDER)} holds {len(instants)} completed "
            f"deltacommit(s) of instants the timeline of {table.base_uri} never had ({shown}): it "
            "belongs to another table (copied, or restored from a backup that does not match)")


def check_own_metadata_table(table, timeline=None) -> None:
    """Refuse a writer that would append to a metadata table that is not ``table``'s own
    (:func:`foreign_instants`); call before any instant exists. Nothing is changed."""
    foreign = foreign_instants(table, timeline)
    if not foreign:
        return
    folder = table.storage.path(METADATA_FOLDER)
    others = unmaintained_partitions(metadata_table_state(table))
    switch = "hoodie.metadata.enable=false"
    if others:
        switch += (f" and {DELETE_UNMAINTAINED_KEY}=true (its {', '.join(others)} are the other "
                   "table's: this table loses nothing)")
    raise ForeignMetadataTableError(
        f"{describe_foreign(table, foreign)}. Writing would add this table's files to it, and "
        "Java Hudi and hudi-rs, which take its records, would go on listing the other table's "
        "files and miss this table's own", path=folder, base_path=table.base_uri, instants=foreign,
        remedy=f"put this table's own metadata table back at {folder} if a backup has it; otherwise "
               f"write once with {switch}, which removes the metadata table as "
               "Java Hudi does (hoodie.table.metadata.partitions cleared first, then the folder "
               "deleted; no data file is touched), and let a Java writer with the metadata table "
               "enabled rebuild it from the storage. Until then this package's readers list the "
               "storage")


__all__ = ["SOLO_COMMIT_TIMESTAMP", "rolled_back_instants", "untrusted_instants", "foreign_instants", "describe_foreign", "check_own_metadata_table"]
