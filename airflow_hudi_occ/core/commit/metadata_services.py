"""The metadata table's table services after a commit of ours: compaction, clean, archival.

Java's writer keeps its metadata table small itself (``HoodieBackedTableMetadataWriter
.performTableServices``, under the data table's lock): it finishes a pending compaction, cleans,
compacts when ``hoodie.metadata.compact.max.delta.commits`` deltacommits have piled up, then
archives the metadata table's timeline. A table written only by our writer with
``hoodie.occ.metadata.files.maintain=true`` would otherwise grow a log file per commit without
bound. This module runs the same sequence, in Java's order, right after our data instant
completed and still under the table lock (:mod:`~airflow_hudi_occ.core.commit.transaction`):

1. :func:`~airflow_hudi_occ.core.table.metadata_compaction.finish_pending_compactions`;
2. :func:`~airflow_hudi_occ.core.table.metadata_clean.clean_if_needed` (Java cleans only when
   the latest compaction has at least three completed instants after it);
3. :func:`~airflow_hudi_occ.core.table.metadata_compaction.compact_if_needed`, put off while
   other writers wait for the lock (``LockManager.others_waiting``), up to twice Java's trigger:
   its hold is the longest of the table (issue 43), so it runs when nobody queues behind it;
4. :func:`~airflow_hudi_occ.core.commit.archival.archive_metadata_table`.

The data commit is done when this runs, so a failure here is logged, never raised: the
metadata table stays correct (every step is crash-safe on its own) and the next commit, ours or
Java's, runs the services again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Collection

from airflow_hudi_occ.core.commit.archival import archival_config, archive_metadata_table
from airflow_hudi_occ.core.config import CleanConfig, service_config
from airflow_hudi_occ.core.table.metadata_clean import clean_if_needed
from airflow_hudi_occ.core.table.metadata_compaction import (compact_if_needed, finish_pending_compactions,
                                                             open_metadata_table)

log = logging.getLogger(__name__)


@dataclass
class MetadataServicesResult:
    finished: list[str] = field(default_factory=list)
    cleaned: str | None = None
    compacted: str | None = None
    archived: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"finished": self.finished, "cleaned": self.cleaned, "compacted": self.compacted,
                "archived": self.archived}


def run_metadata_table_services(table, config, lock_manager, new_time: Callable[[], str],
                                data_times: Collection[str] | None = None) -> MetadataServicesResult:
    """Steps 1-4 of the module doc on ``table``'s metadata table; the caller holds the table
    lock (``lock_manager``) and has completed its data instant. ``new_time()`` gives instant
    times above everything on both timelines (the transaction's generator); ``data_times``
    the data table's instant times the caller listed in this hold (the clean is then planned
    only when :func:`~airflow_hudi_occ.core.table.metadata_clean.may_clean` allows)."""
    mdt = open_metadata_table(table)
    result = MetadataServicesResult()
    lock_manager.check_held()
    result.finished = finish_pending_compactions(mdt, new_time)
    lock_manager.check_held()
    result.cleaned = clean_if_needed(mdt, service_config(CleanConfig, config), new_time, data_times)
    lock_manager.check_held()
    result.compacted = compact_if_needed(table, mdt, config.metadata.compact_max_delta_commits, new_time,
                                         defer=lambda: (lock_manager.others_waiting() or 0) > 0)
    lock_manager.check_held()
    result.archived = archive_metadata_table(table, mdt, archival_config(config), lock_manager).archived
    return result


__all__ = ["run_metadata_table_services", "MetadataServicesResult"]
