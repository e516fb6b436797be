"""What must hold on a table before a writer or a table service creates or completes an instant.

Another process may change ``hoodie.properties`` at any time: a Java writer on Hudi 1.1 upgrades
the table to version 9, or turns the metadata table on. So the check runs under the table lock,
on properties read afresh, at both ends of every instant this project writes (begin and
completion of writes, clustering, clean and rollback): the version is one this writer writes
(upgraded if the writer asks for it, :mod:`.table_version`), no enabled metadata table is
left behind stale (:mod:`.metadata_table`), and a metadata table this writer keeps is the
table's own, not another table's copied in (:mod:`.metadata_trust`).

Every storage request made under the table lock costs every writer of the table its latency
(issue 43: 20 to 50 ms on an object store), so a write transaction splits the check in two:
:func:`check_before_lock` makes the whole judgement before the lock, reading what it needs and
changing nothing, and :func:`confirm_under_lock` confirms under the lock, with one request
(S3: a HEAD of ``hoodie.properties``; locally a ``stat``), that the properties it judged are
still the table's; only when they are not, or when the judgement found something to change
(a properties change a dead writer left, a metadata table to remove, an upgrade), does
:func:`prepare_for_write` run in full under the lock. Why the one request is enough: every
change these checks look for is a change of ``hoodie.properties`` (Java's upgrade, a metadata
table enabled or removed: the partitions are listed there), made under the table lock; what is
not (a metadata folder left without partitions by a Java bootstrap that died) is ignored by
every reader and judged again by the next write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from airflow_hudi_occ.core.table.metadata_table import (MetadataTableState, guard_metadata_table,
                                                        judge_metadata_table, judged_state,
                                                        maintains_files, metadata_table_state)
from airflow_hudi_occ.core.table.merge_mode import check_merge_mode
from airflow_hudi_occ.core.table.metadata_trust import check_own_metadata_table
from airflow_hudi_occ.core.table.timeline import Timeline, listed_ahead
from airflow_hudi_occ.core.table.table_version import ensure_write_version, nine_properties


def prepare_for_write(table, config, *, files_writer: bool = False,
                      stats_writer: bool = True) -> MetadataTableState:
    """Reload the table's properties, check and align its version, deal with its metadata
    table; ``config`` is the :class:`~airflow_hudi_occ.core.config.WriteConfig` of the caller,
    who holds the table lock; ``files_writer``: the caller writes the metadata table's listing
    when :func:`~.metadata_table.maintains_files` says so (every write transaction, clean,
    rollback, the scheduling of services; not the data table's archival yet), ``stats_writer``
    its column and partition stats too (every action does; False narrows the judgement to a
    metadata table of ``files`` alone).
    Raises (nothing changed) when the table cannot be written, among others
    :class:`~airflow_hudi_occ.core.errors.ForeignMetadataTableError` for a metadata table this
    writer would keep that is another table's."""
    table.recover_properties()
    table.reload_config()
    table.require_writable()
    check_merge_mode(table, config)
    state = guard_metadata_table(table, config, files_writer=files_writer, stats_writer=stats_writer)
    if maintains_files(state, config, files_writer=files_writer, stats_writer=stats_writer):
        check_own_metadata_table(table)  # never append to another table's metadata table
    ensure_write_version(table, config.write_table_version, config.auto_upgrade)
    return state


def check_before_lock(table, config, *, files_writer: bool = False, stats_writer: bool = True,
                      timeline: Callable[[], Timeline] | None = None) -> MetadataTableState | None:
    """:func:`prepare_for_write`'s judgement before the table lock, changing nothing: the
    metadata table's state when :func:`prepare_for_write` would change nothing on the table as
    it is now (confirm it under the lock with :func:`confirm_under_lock`), None when it would
    change something (the properties read from their backup, a metadata table to remove, an
    upgrade; the caller then runs :func:`prepare_for_write` under the lock). Raises what
    :func:`prepare_for_write` raises, before any instant exists. ``timeline``: gives a data
    timeline (a listing the caller started as this call began: it is waited for only if the
    metadata table's instants are checked), which that check starts from
    (``metadata_trust.foreign_instants``: an instant it lacks is looked up on a fresh listing,
    so the order of the two listings does not matter)."""
    # the metadata table's timeline, which the check of its instants lists, listed while the
    # properties are read (issue 43: two round trips in a row before every commit's lock);
    # only when this writer kept it at its last commit, so a writer that does not keep it
    # makes no request for it
    kept = table.kept("metadata_table") if files_writer and config.metadata.enable else None
    with listed_ahead(kept):
        table.reload_config()
        table.require_writable()
        check_merge_mode(table, config)
        state = judged_state(table, config)
        if judge_metadata_table(table, config, state, files_writer=files_writer, stats_writer=stats_writer):
            return None  # a removal: under the lock
        if maintains_files(state, config, files_writer=files_writer, stats_writer=stats_writer):
            check_own_metadata_table(table, timeline() if timeline is not None else None)
    wanted, have = config.write_table_version, table.config.version
    if wanted is not None and wanted != have:
        if wanted < have or not config.auto_upgrade:
            ensure_write_version(table, wanted, config.auto_upgrade)  # raises before any change
        return None  # an upgrade: under the lock
    if table.properties_version is None:  # read from the backup, or a store that cannot tell
        return None
    return state


@dataclass(frozen=True)
class Look:
    """A writer's judgement before begin's lock (:func:`check_before_lock`, ``files_writer``)
    with the data timeline listed meanwhile."""
    state: MetadataTableState | None
    timeline: Timeline


def look_before_begin(table, config) -> Look:
    """:func:`check_before_lock` for a writer of files, with the data timeline listed at the same
    time, for what the writer checks before it begins (its schema) and for the check of the
    metadata table's instants. Why: on an object store the listing, ``hoodie.properties`` and
    the metadata table's timeline are round trips that need none of each other's answers; a
    single writer's commit waited for the listing before the other two (issue 43)."""
    listing = table.storage.ahead(table.timeline)
    state = check_before_lock(table, config, files_writer=True, timeline=listing.result)
    return Look(state, listing.result())


def confirm_under_lock(table, config, seen: MetadataTableState | None, *, files_writer: bool = False,
                       stats_writer: bool = True, unchanged: bool | None = None) -> MetadataTableState:
    """Under the table lock: ``seen`` (from :func:`check_before_lock`) when ``hoodie.properties``
    is still the file judged then (one request: see the module doc), else
    :func:`prepare_for_write` in full. ``unchanged``: that request's answer, when the caller
    asked it under the same hold already (beside its other reads)."""
    if seen is not None and (table.properties_unchanged() if unchanged is None else unchanged):
        return seen
    return prepare_for_write(table, config, files_writer=files_writer, stats_writer=stats_writer)


def check_for_write(table, config, *, files_writer: bool = True, stats_writer: bool = True) -> None:
    """The same judgement without the lock and without changing anything, for a fail-fast
    check before expensive work starts (the Spark job before its session, whose commit goes
    through the core transaction and keeps the listing and the stats): raises what
    :func:`prepare_for_write` would raise on the table as it is now."""
    table.require_writable()
    check_merge_mode(table, config)
    state = metadata_table_state(table)
    judge_metadata_table(table, config, state, files_writer=files_writer,  # raises, changes nothing
                         stats_writer=stats_writer)
    if maintains_files(state, config, files_writer=files_writer, stats_writer=stats_writer):
        check_own_metadata_table(table)
    wanted, have = config.write_table_version, table.config.version
    if wanted is not None and wanted != have and (wanted < have or not config.auto_upgrade):
        ensure_write_version(table, wanted, config.auto_upgrade)  # raises before any change
    if wanted is not None and wanted > have:
        nine_properties(table.config.properties)  # raises for a payload this writer cannot carry


__all__ = ["prepare_for_write", "check_before_lock", "look_before_begin", "Look", "confirm_under_lock", "check_for_write"]
