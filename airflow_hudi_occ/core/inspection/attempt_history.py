"""The attempt log as history a person can query: every write attempt, how it ended, whom it
lost to, what became of its instant, and which attempt retried it.

Why a read model of its own: a loser of OCC is rolled back, and after that the timeline says
only *that* a rollback removed it (until archival forgets even that). ``hudi-occ attempts``
lists the log, and ``hudi-occ conflicts --instant <loser>`` answers from it once the loser
left the timeline, so the CLI tells the same story the timeline page does (both read the same
records, and clean keeps them as long as the page's trends reach: ``attempt_log.RETAINED_MS``).

Pure Python over core; an unreadable record is skipped (the attempt log warns), so a damaged
log shortens the history, never fails the question.
"""

from __future__ import annotations

from typing import Any, Iterable

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.inspection.timeline_view import rollbacks_by_target

#: every outcome a record can carry, in the order a person reads them
OUTCOMES = (attempt_log.COMMITTED, attempt_log.CONFLICT, attempt_log.ABORTED, attempt_log.ERROR,
            attempt_log.RUNNING, attempt_log.ROLLED_BACK)


def _timeline_state(tl, rec: attempt_log.AttemptRecord, rolled_back_by: str | None) -> str:
    inst = tl.get(rec.instant)
    if inst is not None:
        return inst.state.value
    if rolled_back_by:
        return "rolled back"
    # committed and gone: archived (or removed by a restore); else its rollback was archived
    return "archived" if rec.outcome == attempt_log.COMMITTED else "gone"


def _row(tl, rec: attempt_log.AttemptRecord, rollbacks: dict[str, str]) -> dict[str, Any]:
    labels = rec.labels or {}
    by = rec.rolled_back_by or rollbacks.get(rec.instant)
    return {
        "instant": rec.instant, "action": rec.action, "operation": rec.operation or None,
        "outcome": rec.outcome, "writer_id": rec.writer_id or None,
        "dag_id": labels.get("dag_id"), "task_id": labels.get("task_id"),
        "run_id": labels.get("run_id"), "try_number": labels.get("try_number"),
        "labels": dict(labels), "attempt": rec.attempt, "batch_key": rec.batch_key,
        "batch": attempt_log.batch_of(rec),
        "other_instant": rec.other_instant, "file_groups": list(rec.file_groups or []),
        "seconds_discarded": rec.seconds_discarded, "files_discarded": rec.files_discarded,
        "started_at_ms": rec.started_at_ms or None, "ended_at_ms": rec.ended_at_ms or None,
        "completion_time": rec.completion_time, "error": rec.error, "message": rec.message,
        "recovered_from": rec.recovered_from,
        "timeline_state": _timeline_state(tl, rec, by), "rolled_back_by": by,
        "retry_of": None, "retried_by": None,
    }


def _link_retries(rows: list[dict[str, Any]]) -> None:
    """Consecutive attempts of one batch (oldest first) name each other."""
    batches: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r["batch"] is not None and r["outcome"] != attempt_log.RUNNING:
            batches.setdefault(r["batch"], []).append(r)
    for members in batches.values():
        for a, b in zip(members, members[1:]):
            a["retried_by"], b["retry_of"] = b["instant"], a["instant"]


def list_attempts(table, timeline, *, instant: str | None = None,
                  outcomes: Iterable[str] | None = None, dag_id: str | None = None,
                  limit: int | None = None,
                  records: Iterable[attempt_log.AttemptRecord] | None = None) -> dict[str, Any]:
    """The attempt log of ``table`` as rows, oldest first, with retries linked and each
    instant's fate on ``timeline``; filters apply after linking, so a listed conflict still
    names the retry a filter left out. ``limit`` keeps the newest rows."""
    recs = sorted(attempt_log.read_records(table) if records is None else records,
                  key=lambda r: r.instant)
    rollbacks = rollbacks_by_target(timeline)
    rows = [_row(timeline, r, rollbacks) for r in recs]
    _link_retries(rows)
    total = len(rows)
    if instant is not None:
        rows = [r for r in rows if r["instant"] == instant]
    wanted = set(outcomes or ())
    if wanted:
        rows = [r for r in rows if r["outcome"] in wanted]
    if dag_id is not None:
        rows = [r for r in rows if r["dag_id"] == dag_id]
    matched = len(rows)
    if limit is not None:
        rows = rows[-limit:] if limit > 0 else []
    return {"table": table.base_uri, "records": total, "matched": matched,
            "truncated": len(rows) < matched, "oldest": attempt_log.oldest_instant(table),
            "pruned": attempt_log.read_pruned_summary(table), "attempts": rows}


def attempt_of(table, timeline, instant: str) -> dict[str, Any] | None:
    """One attempt's row (retries linked, the winner's row beside it as ``winner``), or None
    when the log has no record of ``instant``."""
    doc = list_attempts(table, timeline)
    by = {r["instant"]: r for r in doc["attempts"]}
    row = by.get(instant)
    if row is None:
        return None
    winner = by.get(row["other_instant"]) if row["other_instant"] else None
    retry = by.get(row["retried_by"]) if row["retried_by"] else None
    return {**row, "winner": winner, "retry": retry, "pruned": doc["pruned"]}


__all__ = ["OUTCOMES", "list_attempts", "attempt_of"]
