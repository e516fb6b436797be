"""What must hold on a table before a writer or a table service creates or completes an instant.

Another process may change ``hoodie.properties`` at any time: a Java writer on Hudi 1.1 upgrades
the table to version 9, or turns the metadata table on. So the check runs under the table lock,
on properties read afresh, at both ends of every instant this project writes (begin and
completion of writes, clustering, clean and rollback): the version is one this writer writes
(upgraded if the writer asks for it, :mod:`.table_version`), no enabled metadata table is
left behind stale (:mod:`.metadata_table`), and a metadata table this writer keeps is the
table's own, not another table's copied in (:mod:`.metadata_trust`). It costs one small read
per instant, and one listing of the metadata table's timeline when the writer keeps it.
"""

from __future__ import annotations

from airflow_hudi_occ.core.table.metadata_table import (MetadataTableState, guard_metadata_table,
                                                        judge_metadata_table, maintains_files,
                                                        metadata_table_state)
from airflow_hudi_occ.core.table.merge_mode import check_merge_mode
from airflow_hudi_occ.core.table.metadata_trust import check_own_metadata_table
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


__all__ = ["prepare_for_write", "check_for_write"]
