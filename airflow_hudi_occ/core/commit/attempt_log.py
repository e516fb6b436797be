"""The attempt log: one small JSON record per write attempt, kept beside the timeline.

Why: a loser of OCC is rolled back, and Hudi's rollback metadata keeps only *that* an instant
went away, not *why*. Operators and the timeline page need the why: which other instant won,
on which file groups, how many seconds and files of work were thrown away, and which Airflow
task (or other writer) made the attempt. Each attempt writes ``.hoodie/.aux/occ/attempts/
<instant>.json`` when it begins (running) and again when it ends (committed, conflict,
aborted, error); a record left "running" by a writer that died is told apart by its heartbeat. Hudi readers ignore
``.aux``.

Retention: the clean service prunes a record only once its instant has left the active
timeline, is older than the commits clean retains, *and* is older than :data:`RETAINED_MS`:
the longest window the timeline page's trends offer plus the lookback they read before it.
A clean right after a retried write therefore never takes a conflict off the page while its
retry still counts. What clean did prune is kept as a compact summary
(:func:`read_pruned_summary`), so a reader can tell "pruned" from "never happened".

Writing a record is best effort: a failure to log never fails or un-commits a write.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Iterator, Mapping
from airflow_hudi_occ.core.config import WRITER_LABELS
from airflow_hudi_occ.core.errors import BatchAlreadyCommittedError, RetryableError, WriteConflictError
from airflow_hudi_occ.core.format.instant_time import parse_ms

log = logging.getLogger(__name__)

#: Write option carrying who the writer is (JSON object of strings), for example
#: ``{"dag_id": "ingest", "task_id": "upsert", "run_id": "...", "try_number": "1"}``.
LABELS_OPTION = WRITER_LABELS.key

RUNNING = "running"
ROLLED_BACK = "rolled_back"
COMMITTED = "committed"
CONFLICT = "conflict"
ABORTED = "aborted"
ERROR = "error"

_DIR = (".hoodie", ".aux", "occ", "attempts")
#: beside the records, not among them: ``read_records`` reads every ``*.json`` in ``_DIR``
_PRUNED = (".hoodie", ".aux", "occ", "attempts_pruned.json")

DAY_MS = 86_400_000
#: The longest window the timeline page's trends offer (``inspection/trends.WINDOWS``).
TRENDS_WINDOW_DAYS = 30
#: How far before a window the trends read records: the instant that beat a loser, and the
#: first attempt of a batch retried inside the window, usually started a little earlier.
TRENDS_LOOKBACK_DAYS = 1
#: Records younger than this are never pruned: the page and the CLI show the same history.
RETAINED_MS = (TRENDS_WINDOW_DAYS + TRENDS_LOOKBACK_DAYS) * DAY_MS


@dataclass
class AttemptRecord:
    instant: str
    action: str = "commit"
    operation: str = ""
    outcome: str = COMMITTED
    writer_id: str = ""
    attempt: int = 1
    batch_key: str | None = None
    checkpoint: str | None = None
    labels: dict = field(default_factory=dict)
    started_at_ms: int = 0
    ended_at_ms: int = 0
    completion_time: str | None = None
    error: str | None = None
    message: str | None = None
    other_instant: str | None = None
    file_groups: list = field(default_factory=list)
    seconds_discarded: float = 0.0
    files_discarded: int = 0
    #: set when this attempt re-committed a dead writer's staged instant (core/recovery.py):
    #: the writer id that wrote the files
    recovered_from: str | None = None
    #: the rollback instant that removed this attempt's instant, when the attempt knew it (its
    #: own abort) or a later rollback closed it; the timeline forgets it once archived
    rolled_back_by: str | None = None

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping) -> "AttemptRecord":
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


def task_run_of(labels: dict | None) -> str | None:
    """The Airflow task run an attempt's labels name (``dag/task/run``, with ``[i]`` for a
    mapped task's index), or None. The map index is part of it: the mapped tasks of one DAG run
    are different batches (a year's backfill is 365 writes, not one write retried 364 times)."""
    lb = labels or {}
    if not (lb.get("dag_id") and lb.get("task_id") and lb.get("run_id")):
        return None
    key = f"{lb['dag_id']}/{lb['task_id']}/{lb['run_id']}"
    mi = str(lb.get("map_index", "-1"))
    return key if mi in ("", "-1", "None") else f"{key}[{mi}]"


def task_label(labels: dict | None) -> str | None:
    """An Airflow task for people, ``dag.task`` (``dag.task[i]`` for a mapped task), or None:
    what admission's waits and blockers name, so two mapped tasks of one run are told apart."""
    lb = labels or {}
    if not (lb.get("dag_id") and lb.get("task_id")):
        return None
    mi = str(lb.get("map_index", "-1"))
    return f"{lb['dag_id']}.{lb['task_id']}" + ("" if mi in ("", "-1", "None") else f"[{mi}]")


def batch_of(rec: AttemptRecord) -> str | None:
    """Which batch an attempt wrote, so its retries can be found: the Airflow task run, else
    the batch key, else none (a writer id alone does not make two writes one batch)."""
    run = task_run_of(rec.labels)
    if run is not None:
        return run
    if rec.batch_key:
        return f"batch {rec.batch_key}"
    return None


def outcome_of(error: BaseException | None) -> str:
    if error is None:
        return ABORTED
    if isinstance(error, BatchAlreadyCommittedError):
        return ABORTED  # nothing wrong: the batch was already in the table (error names why)
    if isinstance(error, WriteConflictError):
        return CONFLICT
    if isinstance(error, RetryableError):  # WriteAbortedError included: a signalled conflict
        return ABORTED                      # arrives as EarlyConflictError (abort_signal.error_for)
    return ERROR


def record_from_error(base: AttemptRecord, error: BaseException | None) -> AttemptRecord:
    base.outcome = outcome_of(error)
    if error is not None:
        base.error = type(error).__name__
        base.message = str(error)[:2000]
        other = getattr(error, "other_instant", None)
        base.other_instant = other or None
        fgs = getattr(error, "file_groups", None) or []
        base.file_groups = [fg if isinstance(fg, str) else "/".join(map(str, fg)) for fg in fgs]
    return base


def write_record(table, record: AttemptRecord) -> None:
    if not record.ended_at_ms and record.outcome != RUNNING:
        record.ended_at_ms = int(time.time() * 1000)
    try:
        table.storage.write(table.storage.path(*_DIR, f"{record.instant}.json"),
                            json.dumps(record.to_json(), sort_keys=True).encode())
    except Exception as e:  # never let bookkeeping fail a write
        log.warning("could not record attempt %s: %s", record.instant, e)


def read_records(table, since: str | None = None) -> Iterator[AttemptRecord]:
    """Every readable record, oldest instant first; unreadable ones are skipped with a warning.

    ``since`` (an instant time) skips older records by file name, before reading them: a
    window over a long log then costs what the window holds."""
    d = table.storage.path(*_DIR)
    try:
        names = sorted(n for n in table.storage.list_names(d)
                       if n.endswith(".json") and (since is None or n[:-5] >= since))
    except FileNotFoundError:
        return
    for n in names:
        try:
            yield AttemptRecord.from_json(json.loads(table.storage.read(table.storage.path(*_DIR, n))))
        except (FileNotFoundError, ValueError, TypeError) as e:
            log.warning("skipping unreadable attempt record %s: %s", n, e)


def oldest_instant(table) -> str | None:
    """The instant of the oldest record kept (by name, nothing read): how far back the log
    reaches, since clean prunes records of instants that left the timeline."""
    try:
        names = [n[:-5] for n in table.storage.list_names(table.storage.path(*_DIR)) if n.endswith(".json")]
    except FileNotFoundError:
        return None
    return min(names, default=None)


def delete_record(table, instant: str) -> None:
    table.storage.delete(table.storage.path(*_DIR, f"{instant}.json"))


def read_record(table, instant: str) -> AttemptRecord | None:
    """The record of one instant, or None when there is none (never written, pruned) or it
    cannot be read (a damaged record is warned about, as :func:`read_records` does)."""
    try:
        return AttemptRecord.from_json(json.loads(table.storage.read(table.storage.path(*_DIR, f"{instant}.json"))))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as e:
        log.warning("skipping unreadable attempt record %s: %s", instant, e)
        return None


def mark_rolled_back(table, instant: str, rollback_instant: str) -> None:
    """Name the rollback in the record of the instant it removed: the timeline forgets the
    rollback once archived, and ``hudi-occ conflicts`` still has to say what became of the
    attempt. A record left "running" by a writer that died is closed as rolled back, so
    history shows the attempt as rolled back instead of forever running."""
    rec = read_record(table, instant)
    if rec is None or (rec.outcome != RUNNING and rec.rolled_back_by == rollback_instant):
        return
    rec.rolled_back_by = rollback_instant
    if rec.outcome == RUNNING:
        rec.outcome = ROLLED_BACK
        rec.message = f"writer died; rolled back by {rollback_instant}"
        rec.ended_at_ms = int(time.time() * 1000)
    write_record(table, rec)


def prunable(rec: AttemptRecord, now_ms: int) -> bool:
    """Old enough to prune (the caller checks the instant left the timeline): older than
    :data:`RETAINED_MS`, by its instant time (by its start when the name is no instant time)."""
    try:
        started = parse_ms(rec.instant)
    except ValueError:
        started = rec.started_at_ms or 0
    return started < now_ms - RETAINED_MS


def read_pruned_summary(table) -> dict | None:
    """What clean has pruned so far: ``{"count", "by_outcome", "newest_instant",
    "last_clean", "at_ms"}``, or None when it never pruned a record."""
    try:
        return json.loads(table.storage.read(table.storage.path(*_PRUNED)))
    except FileNotFoundError:
        return None
    except ValueError as e:
        log.warning("unreadable summary of pruned attempt records: %s", e)
        return None


def prune_records(table, records: list[AttemptRecord], *, clean_instant: str | None) -> list[str]:
    """Delete ``records`` and fold them into the pruned summary (written first: a crash in
    between leaves a summary that counts a record still there, never a record gone uncounted)."""
    if not records:
        return []
    summary = read_pruned_summary(table) or {"count": 0, "by_outcome": {}, "newest_instant": None}
    summary["count"] += len(records)
    for r in records:
        summary["by_outcome"][r.outcome] = summary["by_outcome"].get(r.outcome, 0) + 1
    summary["newest_instant"] = max([r.instant for r in records] + [summary.get("newest_instant") or ""])
    summary["last_clean"] = clean_instant
    summary["at_ms"] = int(time.time() * 1000)
    table.storage.write(table.storage.path(*_PRUNED), json.dumps(summary, sort_keys=True).encode())
    for r in records:
        delete_record(table, r.instant)
    return [r.instant for r in records]
