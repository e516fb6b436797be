"""The shared library: the Hudi table format, its timeline and the multi-writer protocol.

Pure Python on fsspec, fastavro, kazoo and pyarrow. Nothing here imports Spark or Airflow, so
the same code serves a Spark executor, a driver, an Airflow trigger and the UI.

The sub-packages read as the commit pipeline, each importing only those before it:

- ``errors``, ``config``, ``plugins``: the error hierarchy, typed ``hoodie.*`` configs, registries;
- ``format``: storage and codecs (instant names and times, Avro metadata, base files, layout);
- ``table``: a table on storage: ``hoodie.properties``, the timeline, the file-system view;
- ``concurrency``: locks, heartbeats, markers, conflict resolution, early conflict detection;
- ``commit``: the write transaction, staging and recovery, rollback, retries, the Arrow writer;
- ``services``: clean and clustering, scheduled under the table lock;
- ``inspection``: read models for the CLI and the timeline page (diagnosis of conflicts).

The names most users need are importable from here::

    from airflow_hudi_occ.core import Table, WriteConfig, ArrowTableWriter, WriteConflictError
"""

from __future__ import annotations

import importlib

from airflow_hudi_occ.core.errors import (ConfigError, EarlyConflictError, HudiOccError,  # noqa: F401
                                          RetryableError, WriteAbortedError, WriteConflictError)

#: the public API beyond the errors, imported on first use (a Spark executor that needs only
#: the format pays for nothing else)
_LAZY = {
    "Table": "airflow_hudi_occ.core.table.table",
    "WriteConfig": "airflow_hudi_occ.core.config",
    "ArrowTableWriter": "airflow_hudi_occ.core.commit.writer",
    "WriteTransaction": "airflow_hudi_occ.core.commit.transaction",
    "CommitResult": "airflow_hudi_occ.core.commit.transaction",
    "run_with_conflict_retries": "airflow_hudi_occ.core.commit.retry",
    "run_clean": "airflow_hudi_occ.core.services.clean",
    "schedule_clustering": "airflow_hudi_occ.core.services.clustering",
    "rollback_failed_writes": "airflow_hudi_occ.core.commit.rollback",
}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'airflow_hudi_occ.core' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))


__all__ = ["Table", "WriteConfig", "ArrowTableWriter", "WriteTransaction", "CommitResult",
           "run_with_conflict_retries", "run_clean", "schedule_clustering", "rollback_failed_writes",
           "HudiOccError", "RetryableError", "WriteConflictError", "EarlyConflictError",
           "WriteAbortedError", "ConfigError"]
