"""Writer processes for concurrency and idempotence tests (module-level so 'spawn' children can import them)."""

from __future__ import annotations

import traceback


def _barrier_writer(table_path, options, barrier, name, timeout: float = 120):
    """A writer of ``table_path`` whose ``before_commit`` hook waits at ``barrier``, and the
    state it records (the instant it began) for the report."""
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter

    writer = ArrowTableWriter(Table.open(table_path), WriteConfig.from_options(options), writer_id=name)
    state = {}

    def before_commit(tx):
        state["instant"] = tx.instant_time
        barrier.wait(timeout=timeout)

    return writer, before_commit, state


def commit_after_barrier(table_path, options, rows, barrier, results, name, timeout: float = 120):
    """Write ``rows`` (a list of dicts) as one upsert, waiting at ``barrier`` just before the
    commit so that every writer has begun and written its files before any of them commits
    (at most ``timeout`` seconds: a rival slower than that finds this writer gone)."""
    import pyarrow as pa

    from airflow_hudi_occ.core.errors import RetryableError

    writer, before_commit, state = _barrier_writer(table_path, options, barrier, name, timeout)
    try:
        res = writer.write(pa.Table.from_pylist(rows), "upsert", before_commit=before_commit)
        results.put({"name": name, "outcome": "committed", "instant": res.instant.requested_time,
                     "completion": res.instant.completion_time, "rows": rows})
    except RetryableError as e:
        results.put({"name": name, "outcome": "conflict", "instant": state.get("instant"),
                     "error": e.to_dict(), "rows": rows})
    except BaseException as e:  # pragma: no cover - reported to the test
        results.put({"name": name, "outcome": "error", "instant": state.get("instant"),
                     "error": repr(e), "trace": traceback.format_exc(), "rows": rows})


def keyed_batch_after_barrier(table_path, options, rows, batch_key, barrier, results, name):
    """Write ``rows`` as batch ``batch_key``, holding at ``barrier`` just before the commit so
    that both attempts of the batch (a zombie and its retry) have passed every pre-check and
    written their files before either commits."""
    import pyarrow as pa

    writer, before_commit, state = _barrier_writer(table_path, options, barrier, name)
    try:
        res = writer.write(pa.Table.from_pylist(rows), "upsert", batch_key=batch_key,
                           before_commit=before_commit)
        results.put({"name": name, "outcome": res.outcome, "began": state.get("instant"),
                     **res.to_json()})
    except BaseException as e:  # pragma: no cover - reported to the test
        results.put({"name": name, "outcome": "error", "began": state.get("instant"),
                     "error": repr(e), "trace": traceback.format_exc()})


def mor_upsert_between_barriers(table_path, options, rows, barriers, results, name):
    """Upsert ``rows`` into a merge-on-read table as one deltacommit, waiting at each of
    ``barriers`` in turn just before the commit (its log files are written by then), so a test
    can schedule or run a compaction while this deltacommit is inflight."""
    import pyarrow as pa

    from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.errors import RetryableError
    from airflow_hudi_occ.core.table.table import Table

    writer = MergeOnReadWriter(Table.open(table_path), WriteConfig.from_options(options), writer_id=name)
    state = {}

    def before_commit(tx):
        state["instant"] = tx.instant_time
        for b in barriers:
            b.wait(timeout=120)

    try:
        res = writer.write(pa.Table.from_pylist(rows), "upsert", before_commit=before_commit)
        results.put({"name": name, "outcome": "committed", "instant": res.instant.requested_time,
                     "completion": res.instant.completion_time, "rows": rows})
    except RetryableError as e:
        results.put({"name": name, "outcome": "conflict", "instant": state.get("instant"),
                     "error": e.to_dict(), "rows": rows})
    except BaseException as e:  # pragma: no cover - reported to the test
        results.put({"name": name, "outcome": "error", "instant": state.get("instant"),
                     "error": repr(e), "trace": traceback.format_exc(), "rows": rows})



def nbcc_upsert_in_turn(table_path, options, rows, turns_dir, barrier, results, name,
                        reverse: bool = True):
    """Upsert ``rows`` into a merge-on-read table as one deltacommit, then, once every writer
    has written its log files (``barrier``), commit in a fixed order of requested times:
    latest-requested first when ``reverse`` (so completion order is the reverse of requested
    order, the case where NBCC's readers must order by completion time), else earliest first.
    The turns are files in ``turns_dir``: ``<instant>.ready`` before the barrier, then
    ``done.<k>`` after the k-th commit."""
    import os
    import time

    import pyarrow as pa

    from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.errors import RetryableError
    from airflow_hudi_occ.core.table.table import Table

    writer = MergeOnReadWriter(Table.open(table_path), WriteConfig.from_options(options), writer_id=name)
    state = {}

    def before_commit(tx):
        state["instant"] = tx.instant_time
        open(os.path.join(turns_dir, f"{tx.instant_time}.ready"), "w").close()
        barrier.wait(timeout=120)
        ready = sorted((f[:-len(".ready")] for f in os.listdir(turns_dir) if f.endswith(".ready")),
                       reverse=reverse)
        k = ready.index(tx.instant_time)
        deadline = time.time() + 120
        while k and not os.path.exists(os.path.join(turns_dir, f"done.{k - 1}")):
            if time.time() > deadline:
                raise TimeoutError(f"turn {k - 1} never committed")
            time.sleep(0.01)
        state["turn"] = k

    try:
        res = writer.write(pa.Table.from_pylist(rows), "upsert", before_commit=before_commit)
        results.put({"name": name, "outcome": "committed", "instant": res.instant.requested_time,
                     "completion": res.instant.completion_time, "rows": rows,
                     "checked": res.checked_instants})
    except RetryableError as e:
        results.put({"name": name, "outcome": "conflict", "instant": state.get("instant"),
                     "error": e.to_dict(), "rows": rows})
    except BaseException as e:  # pragma: no cover - reported to the test
        results.put({"name": name, "outcome": "error", "instant": state.get("instant"),
                     "error": repr(e), "trace": traceback.format_exc(), "rows": rows})
    finally:
        if "turn" in state:
            open(os.path.join(turns_dir, f"done.{state['turn']}"), "w").close()
