"""Processes for table-service concurrency tests (module-level so 'spawn' children import them)."""

from __future__ import annotations

import os
import time
import traceback


def _writer(table_path, options, name):
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    return ArrowTableWriter(Table.open(table_path), WriteConfig.from_options(options), writer_id=name)


def write_then_hang(table_path, options, rows, ready_path):
    """Write all files of one upsert, say so, then hang before committing (to be SIGKILLed)."""
    import pyarrow as pa

    def before_commit(tx):
        with open(ready_path, "w") as f:
            f.write(tx.instant_time)
        while True:
            time.sleep(1)

    _writer(table_path, options, "doomed").write(pa.Table.from_pylist(rows), "upsert",
                                                  before_commit=before_commit)


def write_when_told(table_path, options, rows, ready_path, go_path, results):
    """A slow but live writer: its files are written, it waits (beating) for ``go_path``."""
    import pyarrow as pa

    def before_commit(tx):
        with open(ready_path, "w") as f:
            f.write(tx.instant_time)
        while not os.path.exists(go_path):
            time.sleep(0.05)

    try:
        res = _writer(table_path, options, "slow").write(pa.Table.from_pylist(rows), "upsert",
                                                         before_commit=before_commit)
        results.put({"outcome": "committed", "instant": res.instant.requested_time})
    except BaseException as e:  # reported to the test
        results.put({"outcome": "error", "error": repr(e), "trace": traceback.format_exc()})


def cluster_after_barrier(table_path, options, instant, barrier, results):
    """Execute a scheduled clustering; wait at ``barrier`` just before its commit."""
    from airflow_hudi_occ.core.services.clustering import execute_clustering
    from airflow_hudi_occ.core.errors import RetryableError
    from airflow_hudi_occ.core.table.table import Table
    try:
        res = execute_clustering(Table.open(table_path), options, instant,
                                 before_commit=lambda tx: barrier.wait(timeout=120))
        results.put({"name": "clustering", "outcome": "committed", "instant": res.instant,
                     "completion": res.completion_time})
    except RetryableError as e:
        results.put({"name": "clustering", "outcome": "conflict", "instant": instant, "error": e.to_dict()})
    except BaseException as e:
        results.put({"name": "clustering", "outcome": "error", "error": repr(e),
                     "trace": traceback.format_exc()})


def compact_after_barrier(table_path, options, instant, barrier, results):
    """Execute a scheduled compaction; wait at ``barrier`` (or each of a list) just before its
    commit."""
    from airflow_hudi_occ.core.services.compaction import execute_compaction
    from airflow_hudi_occ.core.errors import RetryableError
    from airflow_hudi_occ.core.table.table import Table
    try:
        barriers = barrier if isinstance(barrier, (list, tuple)) else [barrier]
        res = execute_compaction(Table.open(table_path), options, instant,
                                 before_commit=lambda tx: [b.wait(timeout=120) for b in barriers])
        results.put({"name": "compaction", "outcome": "committed", "instant": res.instant,
                     "completion": res.completion_time})
    except RetryableError as e:
        results.put({"name": "compaction", "outcome": "conflict", "instant": instant, "error": e.to_dict()})
    except BaseException as e:
        results.put({"name": "compaction", "outcome": "error", "error": repr(e),
                     "trace": traceback.format_exc()})

