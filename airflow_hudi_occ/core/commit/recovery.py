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

import logging
from dataclasses import dataclass

from airflow_hudi_occ.core.commit.staging import (EXTRA_RECOVERED_BY, StagedCommit, read_staged,
                                                  staged_instants, verify_files)
from airflow_hudi_occ.core.commit.transaction import (ALREADY_COMMITTED, RECOMMITTED, CommitResult,
                                                      WriteTransaction, commit_metadata_anywhere,
                                                      find_committed_batch)
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import (BatchAlreadyCommittedError, CorruptMetadataError, HudiOccError,
                     InstantRolledBackError, StagedCommitError, WriteConflictError)
from airflow_hudi_occ.core.concurrency.heartbeat import is_expired
from airflow_hudi_occ.core.format.instant import Action, Instant
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.table.timeline import pending_rollback_for

log = logging.getLogger(__name__)


def find_recoverable(table, batch_key: str, config: WriteConfig, *, timeline=None,
                     now: float | None = None) -> StagedCommit | None:
    """The newest pending instant of ``batch_key`` with a staged commit and a dead writer."""
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


def committed_batch_result(table: Table, instant: Instant, *,
                           attempted_instant: str | None = None) -> CommitResult:
    """The result an engine returns for a batch that was already committed as ``instant``."""
    return CommitResult(instant, commit_metadata_anywhere(table, instant),
                        outcome=ALREADY_COMMITTED, attempted_instant=attempted_instant)


def prepare_batch(table: Table, config: WriteConfig, batch_key: str | None, *,
                  writer_id: str | None = None, attempt: int = 1,
                  lock_manager=None, committed_checked: bool = False) -> CommitResult | None:
    """What every engine does first for a keyed batch, before reading its source: the batch
    already committed -> its result (``already_committed``); a dead writer's staged instant of
    it -> re-commit it (``recommitted``); else None: write the batch (a staged instant that
    could not be re-committed has been rolled back).

    ``committed_checked``: the caller looked the key up among the completed instants just
    before (the operator does, before it pays for a spark-submit), so only the staged
    instants are searched here. Skipping the second look loses nothing: a batch committed in
    between is found again under the commit lock (``WriteTransaction.commit``), which is the
    look that decides; so an attempt reads the timeline's commit metadata once outside the
    lock and once under it."""
    if batch_key is None:
        return None
    done = None if committed_checked else find_committed_batch(table, batch_key)
    if done is not None:
        return committed_batch_result(table, done)
    try:
        rec = recommit(table, config, batch_key, writer_id=writer_id, attempt=attempt,
                       lock_manager=lock_manager)
    except BatchAlreadyCommittedError as e:
        return committed_batch_result(table, table.timeline().get(e.committed_instant),
                                      attempted_instant=e.instant)
    if rec is None or rec.commit is None:
        return None
    res = rec.commit
    res.outcome = RECOMMITTED
    res.recovered_from = rec.recovered_from
    return res


__all__ = ["RecoveryResult", "find_recoverable", "recommit", "prepare_batch",
           "committed_batch_result"]
