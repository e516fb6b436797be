"""One look at a running write for an early conflict (:func:`check_instant`): what the
early-conflict trigger polls in the triggerer and the sensor polls in a worker when it does not
defer. Pure ``core``; the why is in ``triggers/hudi_occ.py``.

Errors: storage errors propagate (the trigger reports them to the sensor, which fails).
"""

from __future__ import annotations

import json

from airflow_hudi_occ.core.concurrency.abort_signal import raise_abort
from airflow_hudi_occ.core.concurrency.early_conflict.async_checker import AsyncTimelineServerBasedDetectionStrategy
from airflow_hudi_occ.core.concurrency.heartbeat import is_expired
from airflow_hudi_occ.core.config import ECD_CHECK_COMMIT_CONFLICT, WriteConfig
from airflow_hudi_occ.core.table.table import Table

ABORT_SOURCE = "HudiEarlyConflictSensor"


def check_instant(table_path: str, instant: str, options: dict | None = None,
                  storage_options: dict | None = None) -> dict | None:
    """One look at a running write; an event dict when the watch should end, else None."""
    table = Table.open(table_path, storage_options or None)
    tl = table.timeline()
    inst = tl.get(instant)
    base = {"instant": instant, "table": table_path}
    if inst is None:
        return {**base, "status": "gone"}
    if inst.is_completed:
        return {**base, "status": "completed", "completion_time": inst.completion_time}
    cfg = WriteConfig.from_options({**(options or {}), ECD_CHECK_COMMIT_CONFLICT.key: "true"})
    if is_expired(table, instant, cfg.heartbeat):
        return {**base, "status": "dead"}
    completed_at_start = {i.requested_time for i in tl.completed()
                          if (i.completion_time or i.requested_time) < instant}
    det = AsyncTimelineServerBasedDetectionStrategy(table, instant, cfg,
                                                    completed_at_start=completed_at_start)
    try:
        for p, f in tl.commit_metadata(inst).mutated_file_groups():
            det.add_pending(p, f)
    except Exception:  # noqa: BLE001 - still requested (no plan yet): markers decide
        pass
    err = det.run_check_once()
    if err is None:
        return None
    d = err.to_dict()
    raise_abort(table, instant, json.dumps(d, sort_keys=True), source=ABORT_SOURCE)
    return {**base, "status": "conflict", "other_instant": d.get("other_instant"),
            "file_groups": d.get("file_groups", []), "message": d.get("message")}
