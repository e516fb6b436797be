"""Writer processes for idempotence tests (module-level so 'spawn' children can import them)."""

from __future__ import annotations

import traceback


def keyed_batch_after_barrier(table_path, options, rows, batch_key, barrier, results, name):
    """Write ``rows`` as batch ``batch_key``, holding at ``barrier`` just before the commit so
    that both attempts of the batch (a zombie and its retry) have passed every pre-check and
    written their files before either commits."""
    import pyarrow as pa

    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.table import Table
    from airflow_hudi_occ.core.writer import ArrowTableWriter

    table = Table.open(table_path)
    writer = ArrowTableWriter(table, WriteConfig.from_options(options), writer_id=name)
    state = {}

    def before_commit(tx):
        state["instant"] = tx.instant_time
        barrier.wait(timeout=120)

    try:
        res = writer.write(pa.Table.from_pylist(rows), "upsert", batch_key=batch_key,
                           before_commit=before_commit)
        results.put({"name": name, "outcome": res.outcome, "began": state.get("instant"),
                     **res.to_json()})
    except BaseException as e:  # pragma: no cover - reported to the test
        results.put({"name": name, "outcome": "error", "began": state.get("instant"),
                     "error": repr(e), "trace": traceback.format_exc()})
