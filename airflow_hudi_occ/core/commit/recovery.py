"""Crash recovery by re-commit: a batch whose files were all written is completed, not rewritten.

The two-phase exactly-once pattern (see ``docs/recovery.md`` and the seed on Flink + Hudi):

*pre-commit*   when an engine has written every data file of an instant of a batch that has a
               batch key, :func:`stage_commit` writes the complete commit metadata (write
               stats, schema, extra metadata) plus the snapshot the write was based on to
               ``.hoodie/.aux/occ/staged/<instant>.commit`` (create-if-absent), *before* the
               table lock is taken;
*commit*       the normal commit under the lock (conflict resolution, completed file).

If the writer dies between the two, the instant stays pending with a staged commit. A later
attempt for the same batch key calls ``recommit`` first (the write pipeline's first stage,
``core/commit/pipeline.prepare_batch``, which drives the transaction; this module finds and
judges): it finds the newest pending
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

from airflow_hudi_occ.core.commit.staging import StagedCommit, read_staged, staged_instants
from airflow_hudi_occ.core.commit.transaction import ALREADY_COMMITTED, CommitResult, commit_metadata_anywhere
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import CorruptMetadataError
from airflow_hudi_occ.core.concurrency.heartbeat import is_expired
from airflow_hudi_occ.core.format.instant import Instant
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


def committed_batch_result(table: Table, instant: Instant, *,
                           attempted_instant: str | None = None) -> CommitResult:
    """The result an engine returns for a batch that was already committed as ``instant``."""
    return CommitResult(instant, commit_metadata_anywhere(table, instant),
                        outcome=ALREADY_COMMITTED, attempted_instant=attempted_instant)


__all__ = ["find_recoverable", "committed_batch_result"]
