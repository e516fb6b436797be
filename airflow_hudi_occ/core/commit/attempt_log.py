"""The attempt log: one small JSON record per write attempt, kept beside the timeline.

Why: a loser of OCC is rolled back, and Hudi's rollback metadata keeps only *that* an instant
went away, not *why*. Operators and the timeline page need the why: which other instant won,
on which file groups, how many seconds and files of work were thrown away, and which Airflow
task (or other writer) made the attempt. Each attempt writes ``.hoodie/.aux/occ/attempts/
<instant>.json`` when it begins (running) and again when it ends (committed, conflict,
aborted, error); a record left "running" by a writer that died is told apart by its heartbeat. Hudi readers ignore
``.aux``; the clean service prunes records of instants no longer on the active timeline.

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

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping) -> "AttemptRecord":
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


def parse_labels(options: Mapping[str, str] | None) -> dict:
    raw = (options or {}).get(LABELS_OPTION)
    if not raw:
        return {}
    if isinstance(raw, Mapping):
        return {str(k): str(v) for k, v in raw.items()}
    try:
        d = json.loads(raw)
    except ValueError:
        return {"label": str(raw)}
    return {str(k): str(v) for k, v in d.items()} if isinstance(d, dict) else {"label": str(raw)}


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


def mark_rolled_back(table, instant: str, rollback_instant: str) -> None:
    """A record left "running" by a writer that died is closed by the rollback that removed it,
    so history shows the attempt as rolled back instead of forever running."""
    path = table.storage.path(*_DIR, f"{instant}.json")
    try:
        rec = AttemptRecord.from_json(json.loads(table.storage.read(path)))
    except (FileNotFoundError, ValueError, TypeError):
        return
    if rec.outcome != RUNNING:
        return
    rec.outcome = ROLLED_BACK
    rec.message = f"writer died; rolled back by {rollback_instant}"
    rec.ended_at_ms = int(time.time() * 1000)
    write_record(table, rec)
