"""Crash recovery by re-commit: a batch whose files were all written is completed, not rewritten.

The two-phase exactly-once pattern (see ``docs/recovery.md`` and the seed on Flink + Hudi):

*pre-commit*   when an engine has written every data file of an instant of a batch that has a
               batch key, :func:`stage_commit` writes the complete commit metadata (write
               stats, schema, extra metadata) plus the snapshot the write was based on to
               ``.hoodie/.aux/occ/staged/<instant>.commit`` (create-if-absent), *before* the
               table lock is taken;
*commit*       the normal commit under the lock (conflict resolution, completed file).

If the writer dies between the two, the instant stays pending with a staged commit. A later
attempt for the same batch key calls :func:`recommit` first: it finds the newest pending
instant of that batch whose staged commit exists and whose writer is dead (heartbeat expired
or absent), takes it over *under the table lock* (re-checks pending, not being rolled back,
still dead, then starts a fresh heartbeat for it before releasing the lock), verifies that
every staged data file exists with its recorded size, and completes it through the normal
commit with conflict resolution against the instant's *original* snapshot window (the staged
last-completed instant and pending set), so instants that completed after the staged instant
began are candidates. No data file is rewritten. If the conflict check fails, or a file is
missing, the staged instant is rolled back and the caller rewrites the batch with a fresh
instant (the normal retry).

The rule with LAZY rollback (the clean service's first step, :func:`~.rollback.rollback_failed_writes`):

1. Takeover and rollback both decide under the table lock: rollback re-checks that the
   heartbeat is expired, and a takeover beats the heartbeat before releasing the lock, so a
   rollback after it sees a live writer and skips; a takeover after a rollback sees the
   instant gone (or a pending rollback naming it) and gives up (the batch is rewritten).
2. A dead instant with a staged commit and a batch key is left alone by our LAZY rollback for
   a grace period (``hoodie.occ.recovery.grace_period_ms``, default 10 minutes, which covers
   Airflow's default ``retry_delay`` of 5 minutes) counted from its last sign of life (last
   heartbeat or staging, whichever is later), so the batch's retry can recover it. After the
   grace it is rolled back like any failed write (its staged file with it). Hudi's own Java
   LAZY rollback knows nothing of the grace and may roll it back as soon as the heartbeat
   expires: that is safe by rule 1, only the recovery is lost.

A zombie original writer that wakes up after a takeover refuses to commit (its heartbeat
lapsed) and its abort rolls the instant back; the recoverer then sees the instant gone (or
completed and refuses the rollback), so the worst case is a rewrite, never a duplicate.

Staged files of instants that are no longer pending are pruned by :func:`prune_staged` (run by
the LAZY rollback); the committer deletes its own after completing.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from dataclasses import asdict, dataclass, field

from .config import ConfigProperty, WriteConfig, parse_int
from .errors import (BatchAlreadyCommittedError, CorruptMetadataError, HudiOccError,
                     InstantRolledBackError, StagedCommitError, WriteConflictError)
from .heartbeat import is_expired, last_beat
from .instant import Action
from .metadata import CommitMetadata

log = logging.getLogger(__name__)

STAGED_DIR = (".hoodie", ".aux", "occ", "staged")
SUFFIX = ".commit"
FORMAT_VERSION = 1

#: extra metadata key naming the writer that re-committed a staged instant
EXTRA_RECOVERED_BY = "airflow_hudi_occ.recovered_by"

GRACE_PERIOD_MS = ConfigProperty(
    "hoodie.occ.recovery.grace_period_ms", 600_000, parse_int,
    doc="how long after its writer died a staged instant of a batch is left for the batch's "
        "retry to re-commit before LAZY rollback removes it (0: no grace)")


def staged_path(table, instant: str) -> str:
    return table.storage.path(*STAGED_DIR, f"{instant}{SUFFIX}")


@dataclass
class StagedCommit:
    """Everything needed to complete an instant without its writer."""

    instant: str
    action: str
    operation_type: str
    batch_key: str | None
    checkpoint: str | None
    writer_id: str
    attempt: int
    is_table_service: bool
    last_completed: str | None
    pending_at_start: list[str]
    files: list[dict]            # {"path": relative path, "size": bytes}
    metadata_b64: str            # the commit metadata exactly as it would be completed
    staged_at_ms: int = 0
    version: int = FORMAT_VERSION
    labels: dict = field(default_factory=dict)

    def commit_metadata(self) -> CommitMetadata:
        return CommitMetadata.decode(base64.b64decode(self.metadata_b64), f"staged {self.instant}")

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes, path: str | None = None) -> "StagedCommit":
        try:
            d = json.loads(data)
            known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
            out = cls(**known)
            base64.b64decode(out.metadata_b64, validate=True)
            return out
        except (ValueError, TypeError, KeyError) as e:
            raise CorruptMetadataError(f"staged commit {path or ''} is unreadable: {e}", path=path,
                                       remedy="delete it; the instant is then rolled back lazily "
                                              "and its batch rewritten") from e


# -- pre-commit ----------------------------------------------------------------------------------

def stage_commit(table, tx, metadata: CommitMetadata) -> StagedCommit:
    """Record ``tx``'s complete commit before the lock is taken (the pre-commit)."""
    files = []
    for s in metadata.write_stats():
        if s.path:
            files.append({"path": s.path, "size": int(s.file_size_in_bytes)})
    snap = tx.snapshot
    staged = StagedCommit(
        instant=tx.instant_time, action=tx.action.value, operation_type=tx.operation_type,
        batch_key=tx.batch_key, checkpoint=tx.checkpoint, writer_id=tx.writer_id,
        attempt=tx.attempt, is_table_service=tx.is_table_service,
        last_completed=snap.last_completed.requested_time if snap.last_completed else None,
        pending_at_start=sorted(snap.pending_at_start), files=files,
        metadata_b64=base64.b64encode(metadata.encode()).decode("ascii"),
        staged_at_ms=int(time.time() * 1000))
    table.storage.create_if_absent(staged_path(table, staged.instant), staged.encode())
    return staged


def read_staged(table, instant: str) -> StagedCommit | None:
    path = staged_path(table, instant)
    try:
        return StagedCommit.decode(table.storage.read(path), path)
    except FileNotFoundError:
        return None


def delete_staged(table, instant: str) -> None:
    table.storage.delete(staged_path(table, instant))


def staged_instants(table) -> list[str]:
    try:
        names = table.storage.list_names(table.storage.path(*STAGED_DIR))
    except FileNotFoundError:
        return []
    return sorted(n[: -len(SUFFIX)] for n in names if n.endswith(SUFFIX) and n[: -len(SUFFIX)].isdigit())


# -- finding what to recover ------------------------------------------------------------------------

def _last_sign_of_life(table, staged: StagedCommit) -> float:
    beat = last_beat(table, staged.instant)
    return max(beat or 0.0, staged.staged_at_ms / 1000.0)


def in_grace(table, instant: str, config: WriteConfig, *, now: float | None = None) -> bool:
    """True while a dead staged instant of a batch must be left for its retry to recover."""
    grace_ms = GRACE_PERIOD_MS.get(config.options)
    if grace_ms <= 0:
        return False
    try:
        staged = read_staged(table, instant)
    except CorruptMetadataError:
        return False
    if staged is None or not staged.batch_key:
        return False
    now = time.time() if now is None else now
    dead_for_ms = (now - _last_sign_of_life(table, staged)) * 1000 - config.heartbeat.expiry_ms
    return dead_for_ms < grace_ms


def find_recoverable(table, batch_key: str, config: WriteConfig, *, timeline=None,
                     now: float | None = None) -> StagedCommit | None:
    """The newest pending instant of ``batch_key`` with a staged commit and a dead writer."""
    from .rollback import pending_rollback_for
    names = staged_instants(table)  # listed before the timeline: see prune_staged
    if not names:
        return None
    timeline = timeline or table.timeline()
    for t in reversed(names):
        inst = timeline.get(t)
        if inst is None or inst.is_completed or pending_rollback_for(timeline, t) is not None:
            continue
        try:
            staged = read_staged(table, t)
        except CorruptMetadataError as e:
            log.warning("ignoring %s", e)
            continue
        if staged is None or staged.batch_key != batch_key:
            continue
        if is_expired(table, t, config.heartbeat, now=now):
            return staged
    return None


def verify_files(table, staged: StagedCommit) -> None:
    """Every staged data file exists with the size the writer recorded."""
    for f in staged.files:
        path = table.storage.path(f["path"])
        try:
            size = table.storage.size(path)
        except FileNotFoundError:
            raise StagedCommitError(f"staged instant {staged.instant} names {f['path']}, which is "
                                    "missing", instant=staged.instant, path=f["path"]) from None
        if size != int(f["size"]):
            raise StagedCommitError(f"staged instant {staged.instant}: {f['path']} has {size} bytes, "
                                    f"the commit recorded {f['size']}", instant=staged.instant,
                                    path=f["path"])


def prune_staged(table) -> list[str]:
    """Delete staged commits of instants that are no longer pending (completed, rolled back).

    The folder is listed *before* the timeline is loaded: an instant is on the timeline before
    its commit is staged, so a staged file seen first whose instant is absent from the later
    timeline was rolled back (or archived), never "not yet requested"."""
    names = staged_instants(table)
    if not names:
        return []
    tl = table.timeline()
    gone = []
    for t in names:
        inst = tl.get(t)
        if inst is None or inst.is_completed:
            delete_staged(table, t)
            gone.append(t)
    return gone


# -- re-commit ---------------------------------------------------------------------------------------

@dataclass
class RecoveryResult:
    """What :func:`recommit` did. ``outcome``: ``recommitted`` (``commit`` is set) or
    ``rolled_back`` (the staged instant could not be completed and is gone: rewrite the batch)."""

    outcome: str
    instant: str
    commit: object | None = None          # CommitResult
    recovered_from: str | None = None     # the dead writer's id
    error: HudiOccError | None = None

    def to_json(self) -> dict:
        out = {"recovery": self.outcome, "recovered_instant": self.instant,
               "recovered_from": self.recovered_from}
        if self.error is not None:
            out["recovery_error"] = self.error.to_dict()
        return out


def recommit(table, config: WriteConfig, batch_key: str, *, writer_id: str | None = None,
             attempt: int = 1, lock_manager=None, now: float | None = None) -> RecoveryResult | None:
    """Re-commit the staged instant of ``batch_key`` left by a dead writer, if there is one.

    Returns None when there is nothing to recover (or the instant was taken by someone else
    meanwhile); raises :class:`BatchAlreadyCommittedError` when the batch turns out to be
    committed already (the staged instant is then rolled back)."""
    from .transaction import WriteTransaction
    staged = find_recoverable(table, batch_key, config, now=now)
    if staged is None:
        return None
    tx = WriteTransaction(table, config, action=Action(staged.action),
                          operation_type=staged.operation_type, writer_id=writer_id,
                          attempt=attempt, checkpoint=staged.checkpoint, batch_key=batch_key,
                          lock_manager=lock_manager, is_table_service=staged.is_table_service)
    if not tx.take_over(staged, now=now):
        return None
    log.info("took over staged instant %s of batch %r (written by %s)", staged.instant, batch_key,
             staged.writer_id)
    try:
        verify_files(table, staged)
        meta = staged.commit_metadata()
        meta.extra_metadata[EXTRA_RECOVERED_BY] = tx.writer_id
        res = tx.commit_metadata(meta, recovered_from=staged.writer_id)
        return RecoveryResult("recommitted", staged.instant, res, staged.writer_id)
    except BatchAlreadyCommittedError:
        raise  # commit rolled the staged instant back already
    except (WriteConflictError, StagedCommitError, InstantRolledBackError) as e:
        log.warning("staged instant %s of batch %r cannot be re-committed (%s): rolling it back; "
                    "the batch is rewritten", staged.instant, batch_key, e)
        tx.abort(reason=f"re-commit refused: {type(e).__name__}", error=e)
        return RecoveryResult("rolled_back", staged.instant, None, staged.writer_id, e)
    except BaseException as e:
        # A lock timeout, a lost lock, storage trouble: leave the instant staged (its fresh
        # heartbeat stops and expires), so a later attempt or the LAZY rollback decides.
        tx.abort(rollback=False, reason=f"re-commit failed: {type(e).__name__}", error=e)
        raise


__all__ = ["StagedCommit", "RecoveryResult", "stage_commit", "read_staged", "delete_staged",
           "staged_instants", "find_recoverable", "verify_files", "prune_staged", "in_grace",
           "recommit", "GRACE_PERIOD_MS", "EXTRA_RECOVERED_BY", "staged_path"]
