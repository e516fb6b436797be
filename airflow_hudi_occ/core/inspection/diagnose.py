"""Why would (or did) a write abort: commit-time conflicts and early-conflict checks, judged
exactly as the writer judges them, as data for the CLI, the UI and the engines.

Each diagnosis rebuilds what the writer of instant ``T`` saw when it began (its snapshot
lives only in the writer's memory) and asks the same strategy objects the commit and the
early-detection path use, so the answer is the commit's answer.
"""

from __future__ import annotations

import time
from typing import Any, Iterable

from airflow_hudi_occ.core.concurrency.conflict import find_conflicts, strategy_from_config
from airflow_hudi_occ.core.concurrency.operation import ConcurrentOperation
from airflow_hudi_occ.core.concurrency.early_conflict.detector import create_detector, get_detection_strategy
from airflow_hudi_occ.core.concurrency.heartbeat import heartbeat_age_s, is_expired
from airflow_hudi_occ.core.concurrency.markers.write_markers import markers_for
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import EarlyConflictError, WriteConflictError
from airflow_hudi_occ.core.format.instant import Instant
from airflow_hudi_occ.core.format.layout import FileGroupId, file_group_names
from airflow_hudi_occ.core.inspection.timeline_view import rollbacks_by_target


def reconstruct_snapshot(tl, t: str) -> tuple[Instant | None, set[str], set[str], bool]:
    """What the writer of ``t`` saw when it began: (last completed write, pending at start,
    completed at start, exact?).

    The writer's own snapshot lives only in its memory, so it is rebuilt from the timeline.
    ``t`` was generated under the lock after every completion time already on the timeline
    (both come from the same skew-waiting generator), so "completed before ``t``" is
    "completion time < ``t``". Version 6 has no completion times: an instant requested before
    ``t`` is then taken as completed before it, which is why the result is marked inexact.
    """
    exact = True
    completed: set[str] = set()
    pending: set[str] = set()
    last: Instant | None = None
    for inst in tl:
        if inst.requested_time >= t:
            continue
        if inst.is_completed and inst.completion_time is None:
            exact = False
        done_before = inst.is_completed and (inst.completion_time or inst.requested_time) < t
        if done_before:
            completed.add(inst.requested_time)
            if inst.is_write:
                last = inst  # the timeline is sorted by requested time, as last_completed_write()
        else:
            pending.add(inst.requested_time)
    return last, pending, completed, exact


def heartbeat_doc(config: WriteConfig) -> dict[str, int]:
    hb = config.heartbeat
    return {"interval_ms": hb.interval_ms, "tolerable_misses": hb.tolerable_misses,
            "expiry_ms": hb.expiry_ms}


def strategy_for(table, config: WriteConfig, name: str | None = None, *, now: float | None = None):
    """The conflict resolution strategy ``WriteTransaction.begin()`` would build (``name``
    overrides the configured one)."""
    now = time.time() if now is None else now
    return strategy_from_config(config, table=table, name=name, clock=lambda: now)


def diagnose_conflicts(table, timeline, config: WriteConfig, inst: Instant, *,
                       file_groups: Iterable[FileGroupId] | None = None, strategy=None,
                       now: float | None = None) -> dict[str, Any]:
    """Would the pending instant ``inst`` commit now, and if not, because of which instants?

    ``file_groups`` judges those instead of what the instant's markers (and plan) name. The
    result is a JSON-ready document; ``would_abort`` and ``reasons`` carry the verdict."""
    now = time.time() if now is None else now
    t = inst.requested_time
    strategy = strategy or strategy_for(table, config, now=now)
    own = ConcurrentOperation.from_timeline(timeline, inst)
    given = set(file_groups or ())
    if given:
        groups, source = given, "given"
    else:
        groups = markers_for(table, t).file_groups()
        source = "markers"
        if own.mutated_file_groups - groups:
            # a pending replace's plan, or stats an inflight file already carries
            groups |= own.mutated_file_groups
            source = "markers+plan"
    current = ConcurrentOperation.for_current(inst, own.operation_type, groups)
    last, pending_at_start, _completed, exact = reconstruct_snapshot(timeline, t)
    findings = find_conflicts(timeline, current, strategy, last_successful=last,
                              pending_at_start=pending_at_start)
    candidates, reasons = [], []
    for f in findings:
        conflict = bool(f.file_groups) or f.would_abort
        row = {**f.other.to_json(), "conflicting_file_groups": file_group_names(f.file_groups),
               "conflict": conflict, "would_abort": f.would_abort}
        candidates.append(row)
        if f.would_abort:
            try:
                strategy.resolve_conflict(current, f.other)
                message = strategy.conflict_error(current, f.other).message
            except WriteConflictError as e:
                message = e.message
            reasons.append({"kind": "conflict", "other_instant": f.other.requested_time,
                            "other_action": f.other.action.value,
                            "file_groups": file_group_names(f.file_groups), "message": message})
    age = heartbeat_age_s(table, t, now=now)
    expired = is_expired(table, t, config.heartbeat, now=now)
    if expired:
        reasons.append({"kind": "heartbeat_expired", "other_instant": None, "file_groups": [],
                        "message": (f"the heartbeat of {t} is "
                                    + ("missing" if age is None else f"{age:.1f}s old")
                                    + f" (expiry {config.heartbeat.expiry_ms} ms): the writer "
                                      "refuses to commit and a clean will roll it back")})
    by = rollbacks_by_target(timeline).get(t)
    if by is not None:
        reasons.append({"kind": "being_rolled_back", "other_instant": by, "file_groups": [],
                        "message": f"rollback {by} is removing {t}; it can no longer commit"})
    return {
        "table": table.base_uri, "instant": t, "action": inst.action.value,
        "state": inst.state.value, "operation_type": current.operation_type,
        "strategy": strategy.name or type(strategy).__name__,
        "file_groups": file_group_names(groups), "file_groups_source": source,
        "snapshot": {"last_completed": last.requested_time if last else None,
                     "pending_at_start": sorted(pending_at_start), "exact": exact},
        "heartbeat": {"age_s": None if age is None else round(age, 3), "alive": not expired,
                      **heartbeat_doc(config)},
        "candidates": candidates,
        "conflicts": [c for c in candidates if c["conflict"]],
        "would_abort": bool(reasons),
        "reasons": reasons,
    }


def diagnose_early_check(table, timeline, config: WriteConfig, instant_time: str, partition: str,
                         file_id: str, *, now: float | None = None) -> dict[str, Any]:
    """Would early conflict detection stop the writer of ``instant_time`` before it creates the
    marker of ``partition/file_id``? Asks the real detector, as that writer would have asked it.

    The instant need not be on the timeline any more: a write stopped by an early conflict is
    usually rolled back by the time someone asks why."""
    now = time.time() if now is None else now
    t = instant_time
    cls = get_detection_strategy(config.early_conflict.strategy, config)  # unknown name: error first
    inst = timeline.get(t)
    rolled_back_by = rollbacks_by_target(timeline).get(t) if inst is None else None
    _last, _pending, completed_at_start, _exact = reconstruct_snapshot(timeline, t)
    detector = create_detector(table, t, config, completed_at_start=completed_at_start,
                               clock=lambda: now)
    candidates = detector.view.candidates()
    conflict: EarlyConflictError | None = None
    try:
        if hasattr(detector, "run_check_once"):
            # The async checkers judge the whole write in the background and stop its next
            # marker, whichever file that is; announce F and run one round as the checker would.
            detector.add_pending(partition, file_id)
            conflict = detector.run_check_once()
        else:
            detector.check(partition, file_id)
    except EarlyConflictError as e:
        conflict = e
    finally:
        detector.stop()
    other = timeline.get(conflict.other_instant) if conflict is not None else None
    return {
        "table": table.base_uri, "instant": t, "on_timeline": inst is not None,
        "state": inst.state.value if inst is not None else None, "rolled_back_by": rolled_back_by,
        "partition": partition, "file_id": file_id, "file_group": str(FileGroupId(partition, file_id)),
        "strategy": cls.name or cls.__name__,
        "early_detection_enabled": config.early_conflict.enabled,
        "check_commit_conflict": config.early_conflict.check_commit_conflict,
        "heartbeat": heartbeat_doc(config),
        "candidates": candidates,
        "stopped": conflict is not None,
        "other_instant": conflict.other_instant if conflict else None,
        "other_action": conflict.other_action if conflict else None,
        "kind": None if conflict is None else (
            "completed_commit" if other is not None and other.is_completed else "markers"),
        "conflicting_file_groups": list(conflict.file_groups) if conflict else [],
        "message": conflict.message if conflict else None,
        "remedy": conflict.remedy if conflict else None,
    }


__all__ = ["reconstruct_snapshot", "strategy_for", "diagnose_conflicts", "diagnose_early_check",
           "heartbeat_doc"]
