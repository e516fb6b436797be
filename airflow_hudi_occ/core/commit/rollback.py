"""Rollback of failed writes, driven by markers, recorded as rollback instants.

A failed write (aborted, crashed, or presumed dead because its heartbeat expired) leaves
base files that readers already ignore (their instant is not completed). They must still go:
a stray file older than the earliest instant on the timeline would be taken as *archived*,
i.e. committed, by every reader. Rollback therefore:

1. under the table lock: re-reads the timeline, refuses completed instants, and writes
   ``<r>.rollback.requested`` holding a plan (the files named by the failed instant's markers;
   if its marker folder is gone, the partitions are scanned for files of that instant);
2. ``<r>.rollback.inflight``; deletes the files, the marker folder, the heartbeat, and the
   failed instant's inflight then requested files; when Hudi's metadata table holds a
   deltacommit of the failed instant (a writer that died between the two completions, or a
   Java writer's), that deltacommit is rolled back on the metadata table as its rollback
   ``<r>`` (core/table/metadata_commit.py), as Java's metadata writer does;
3. ``<r>_<c>.rollback`` with the rollback metadata.

All three steps run under the table lock, so a committer (which reloads the timeline under the
same lock) either completes before the plan exists or sees its instant gone; and it also
refuses to complete while a pending rollback names it (see ``transaction``). A rollback
interrupted half-way is re-executed by the next rollback of the same instant: its plan is
reused and deletions are idempotent.

LAZY policy (:func:`rollback_failed_writes`): pending non-table-service writes whose heartbeat
expired, re-checked under the lock, newest first. A slow but live writer keeps beating and is
never picked. A dead write whose commit was *staged* for a batch (all its files written, see
``recovery``) is left alone for ``hoodie.occ.recovery.grace_period_ms`` after its last sign of
life, also re-checked under the lock, so the batch's retry can re-commit it; after that it is
rolled back like any other. A rollback also deletes the instant's staged commit.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from airflow_hudi_occ.core.commit import attempt_log, staging
from airflow_hudi_occ.core.commit.staging import in_grace, prune_staged
from airflow_hudi_occ.core.concurrency.locks import table_lock_manager
from airflow_hudi_occ.core.concurrency.markers.write_markers import markers_for
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.format.storage import delete_planned_files
from airflow_hudi_occ.core.errors import CorruptMetadataError, InstantStateError
from airflow_hudi_occ.core.format.layout import join_partition
from airflow_hudi_occ.core.table.file_system_view import list_base_files, list_partitions
from airflow_hudi_occ.core.table.mor_reader import list_log_files
from airflow_hudi_occ.core.concurrency.heartbeat import delete_heartbeat, is_expired
from airflow_hudi_occ.core.format.instant import Action, Instant, State
from airflow_hudi_occ.core.format.instant_time import InstantTimeGenerator, process_generator
from airflow_hudi_occ.core.format.metadata import RollbackMetadata, RollbackPlan
from airflow_hudi_occ.core.table.metadata_commit import rollback_metadata_deltacommit
from airflow_hudi_occ.core.table.timeline import (complete, create_requested, delete_pending_files,
                                                  pending_rollback_for, transition_to_inflight)

log = logging.getLogger(__name__)


@dataclass
class RollbackResult:
    rolled_back: str
    rollback_instant: str | None
    deleted_files: list[str] = field(default_factory=list)
    skipped_reason: str | None = None

    def to_json(self) -> dict:
        return {"rolled_back": self.rolled_back, "rollback_instant": self.rollback_instant,
                "deleted_files": self.deleted_files, "skipped": self.skipped_reason}


def files_of_instant(table, instant_time: str) -> dict[str, list[str]]:
    """Data files of a failed instant: from its markers, else by scanning partitions."""
    files: dict[str, list[str]] = {}
    temp = table.storage.path(".hoodie", ".temp", instant_time)
    if table.storage.exists(temp):
        for rel in markers_for(table, instant_time).data_files():
            part = rel.rsplit("/", 1)[0] if "/" in rel else ""
            files.setdefault(part, []).append(rel)
    # Markers are written before files, so they are complete; the scan covers a marker folder
    # that was lost (or a writer with markers disabled) so no stray file can survive.
    if not files:
        for part in list_partitions(table):
            for bf in list_base_files(table, part):
                if bf.instant_time == instant_time:
                    files.setdefault(part, []).append(bf.relative_path)
            # merge-on-read: a deltacommit's log files carry its instant in their name
            for lf in list_log_files(table, part):
                if lf.instant_time == instant_time:
                    files.setdefault(part, []).append(join_partition(part, lf.name))
    return files


def rollback_instant(table, instant_time: str, config: WriteConfig | None = None, *,
                     lock_manager=None, reason: str = "", only_if_expired: bool = False,
                     respect_grace: bool = False, now: float | None = None,
                     time_generator: InstantTimeGenerator | None = None) -> RollbackResult:
    """Roll back one pending (failed) instant as its own rollback instant.

    ``only_if_expired``: decide under the lock that the writer is still pending *and* dead,
    so a writer that completed, or beat again (or was taken over by a re-commit), in the
    meantime is left alone. ``respect_grace``: also leave a staged instant of a batch alone
    while its recovery grace period lasts (the LAZY policy). ``time_generator``: the aborting
    writer's own, so a writer with an injected clock rolls back on the same clock.
    """
    config = config or WriteConfig()
    table.require_writable()
    lm = lock_manager or table_lock_manager(table, config)
    gen = time_generator or process_generator(config.skew_wait_ms)
    with lm.locked():
        timeline = table.timeline()
        target = timeline.get(instant_time)
        if target is None:
            return RollbackResult(instant_time, None, skipped_reason="not on the timeline")
        if only_if_expired and (target.is_completed or not is_expired(
                table, instant_time, config.heartbeat, now=now)):
            return RollbackResult(instant_time, None, skipped_reason="completed or alive")
        if respect_grace and staging.in_grace(table, instant_time, config, now=now):
            return RollbackResult(instant_time, None, skipped_reason="staged, within recovery grace")
        if target.is_completed:
            raise InstantStateError(
                f"instant {instant_time} is completed; rollback only removes failed writes",
                instant=instant_time, remedy="to undo a completed commit, restore from a savepoint")
        t0 = time.time()
        existing = pending_rollback_for(timeline, instant_time)
        if existing is not None:
            rb = existing
            path = timeline.file_path(Instant(rb.requested_time, Action.ROLLBACK, State.REQUESTED))
            plan = RollbackPlan.decode(table.storage.read(path), path, table.base_uri)
        else:
            rb_time = gen.new_time(floor=timeline.latest_time())
            plan = RollbackPlan(instant_time, target.action.value, files_of_instant(table, instant_time))
            rb = Instant(rb_time, Action.ROLLBACK, State.REQUESTED)
            create_requested(table, rb, plan.encode(table.base_uri))
        deleted = _execute(table, timeline, rb, plan, target.action.value, gen, lm, t0)
    log.info("rolled back %s as %s (%s): %d files", instant_time, rb.requested_time, reason,
             sum(len(v) for v in deleted.values()))
    return RollbackResult(instant_time, rb.requested_time,
                          sorted(f for v in deleted.values() for f in v))


def _execute(table, timeline, rb: Instant, plan: RollbackPlan, action: str, gen, lm,
             t0: float) -> dict[str, list[str]]:
    """Carry out a rollback from its plan, under the lock: every step may be repeated, so a
    rollback interrupted anywhere is finished by running this again with the same plan."""
    instant_time = plan.instant_time
    if rb.state is not State.INFLIGHT:
        rb = transition_to_inflight(table, rb)
    # a writer killed mid-file leaves the hidden temp copy of the atomic create: it goes too
    deleted, failed = delete_planned_files(table.storage, plan.files_by_partition,
                                           with_temp_copies=True)
    if failed:
        raise InstantStateError(
            f"rollback {rb.requested_time} of {instant_time} could not delete "
            f"{sum(len(v) for v in failed.values())} files; it stays pending and will be "
            "re-run", instant=instant_time, remedy="check storage permissions and re-run clean")
    table.storage.delete_dir(table.storage.path(".hoodie", ".temp", instant_time))
    delete_heartbeat(table, instant_time)
    staging.delete_staged(table, instant_time)
    names = timeline.files_of(instant_time)
    if action == Action.COMPACTION.value:
        # Hudi never abandons a compaction plan: its rollback returns it to requested, to be
        # executed again (the plan's slices are still the right input)
        names = [n for n in names if n.endswith(".inflight")]
    delete_pending_files(table, instant_time, names)
    meta = RollbackMetadata(rb.requested_time, [(instant_time, action)], deleted,
                            time_taken_ms=int((time.time() - t0) * 1000))
    floor = max(rb.requested_time, timeline.latest_time() or "")
    # the metadata table's deltacommit of the same instant goes first (Java's order): once this
    # rollback completes, Java's metadata reader would take that deltacommit's records as valid
    lm.check_held()
    mdt_done = rollback_metadata_deltacommit(table, instant_time, rb.requested_time,
                                             lambda: gen.new_time(floor=floor))
    if mdt_done is not None:
        floor = max(floor, mdt_done.completion_time or "")
    completion = gen.new_time(floor=floor)
    lm.check_held()
    complete(table, rb, completion, meta.encode(), timeline=timeline)
    attempt_log.mark_rolled_back(table, instant_time, rb.requested_time)
    return deleted


def finish_interrupted_rollbacks(table, config: WriteConfig | None = None, *,
                                 lock_manager=None) -> list[RollbackResult]:
    """Complete the rollbacks whose executor died after it removed its target from the
    timeline but before it completed the rollback instant.

    Such a rollback is found by nobody else: its target is no longer a pending write, so the
    failed-writes policy never visits it, and ``<t>.rollback.requested`` / ``.inflight`` stay
    pending for good. Hudi re-executes a pending rollback from its plan; so does this, under
    the table lock. Every rollback of this project runs start to end under that lock, so one
    seen pending by the lock holder has no live executor. (A rollback whose target is still
    pending is re-run by :func:`rollback_instant` itself, from the same plan, once the
    target's heartbeat is gone: the first thing such a rollback deleted.)
    """
    config = config or WriteConfig()
    table.require_writable()
    lm = lock_manager or table_lock_manager(table, config)
    gen = process_generator(config.skew_wait_ms)
    results = []
    with lm.locked():
        timeline = table.timeline()
        for rb in sorted(timeline.pending(), key=lambda i: i.requested_time):
            if rb.action is not Action.ROLLBACK:
                continue
            path = timeline.file_path(Instant(rb.requested_time, Action.ROLLBACK, State.REQUESTED))
            try:
                plan = RollbackPlan.decode(table.storage.read(path), path, table.base_uri)
            except (CorruptMetadataError, FileNotFoundError) as e:
                log.warning("pending rollback %s has no readable plan (%s): left for an operator",
                            rb.requested_time, e)
                continue
            if not plan.instant_time or timeline.get(plan.instant_time) is not None:
                continue  # the target is still on the timeline: rollback_instant re-runs it
            deleted = _execute(table, timeline, rb, plan, plan.action or "commit", gen, lm, time.time())
            log.info("finished the interrupted rollback %s of %s: %d files", rb.requested_time,
                     plan.instant_time, sum(len(v) for v in deleted.values()))
            results.append(RollbackResult(plan.instant_time, rb.requested_time,
                                          sorted(f for v in deleted.values() for f in v)))
            timeline = table.timeline()
    return results


def expired_pending_writes(table, config: WriteConfig, timeline=None, *, now: float | None = None) -> list[Instant]:
    """Pending non-table-service writes whose heartbeat expired, newest first."""
    timeline = timeline or table.timeline()
    out = []
    for inst in timeline.pending():
        if not inst.is_write or inst.is_table_service or timeline.is_clustering(inst):
            continue
        if is_expired(table, inst.requested_time, config.heartbeat, now=now):
            out.append(inst)
    return sorted(out, key=lambda i: i.requested_time, reverse=True)


def rollback_failed_writes(table, config: WriteConfig | None = None, *, lock_manager=None,
                           now: float | None = None) -> list[RollbackResult]:
    """The LAZY failed-writes policy: roll back dead writers, newest first."""
    config = config or WriteConfig()
    lm = lock_manager or table_lock_manager(table, config)
    results = finish_interrupted_rollbacks(table, config, lock_manager=lm)
    for inst in expired_pending_writes(table, config, now=now):
        if in_grace(table, inst.requested_time, config, now=now):
            log.info("leaving %s for its batch's retry to re-commit (staged, within the recovery "
                     "grace period)", inst.requested_time)
            continue
        # Re-checked under the lock: the writer may have completed, or beaten again, since.
        res = rollback_instant(table, inst.requested_time, config, lock_manager=lm,
                               reason="heartbeat expired", only_if_expired=True,
                               respect_grace=True, now=now)
        if res.rollback_instant is not None:
            results.append(res)
    prune_staged(table)
    return results


def rollback_pending_writes(table, config: WriteConfig, *, lock_manager=None) -> list[RollbackResult]:
    """The EAGER policy (single writer only): every pending write is someone's failed attempt."""
    results = []
    for inst in sorted(table.timeline().pending_writes(), key=lambda i: i.requested_time, reverse=True):
        if inst.action is Action.COMPACTION:
            continue  # a plan, not a failed write (Hudi's EAGER rollback skips compactions too)
        results.append(rollback_instant(table, inst.requested_time, config,
                                        lock_manager=lock_manager, reason="eager rollback"))
    return results
