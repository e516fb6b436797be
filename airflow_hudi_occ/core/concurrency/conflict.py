"""Commit-time conflict resolution: may this instant complete, given what others did meanwhile?

This is step 4 of a write transaction (``concurrency-semantics.md`` section 2), run under the
table lock on a timeline reloaded under that lock. It is an ordered chain::

    candidates = strategy.candidate_instants(timeline, current, last_successful, pending_at_start)
    for other in candidates (completed ones first, in completion order):
        op = ConcurrentOperation.from_timeline(timeline, other)
        if strategy.has_conflict(current, op):
            strategy.resolve_conflict(current, op)     # returns, or raises WriteConflictError

A strategy only *chooses* candidates and *judges* pairs; reading what an instant mutated is
done once, by :class:`ConcurrentOperation`, for every strategy alike.

Errors and what to do with them:

- :class:`~.errors.WriteConflictError` (retryable): this instant lost. The caller must not
  complete it, must release the lock, and may retry the batch with a *fresh* instant time
  (the data it read is stale). The error names both instants, the file groups and the strategy.
- :class:`~.errors.PendingClusteringConflictError` (retryable, raised by
  :func:`check_not_in_pending_clustering` before any data is written): wait for the clustering.
- :class:`~.errors.UnknownStrategyError` (not retryable): a configuration mistake.
- :class:`~.errors.CorruptMetadataError` from reading another instant's metadata is passed
  through: guessing "empty" for an unreadable commit could let a conflicting write through.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Any, Callable, Iterable, NamedTuple

from airflow_hudi_occ.core.config import (CLUSTERING_FAIL_ON_PENDING_INGESTION,
                                          CONFLICT_RESOLUTION_STRATEGY, HeartbeatConfig, WriteConfig)
from airflow_hudi_occ.core.plugins import Registry
from airflow_hudi_occ.core.errors import (ConfigError, UnknownStrategyError,
                     WriteConflictError)
from airflow_hudi_occ.core.format.layout import FileGroupId, bucket_id_of
from airflow_hudi_occ.core.concurrency.heartbeat import is_expired
from airflow_hudi_occ.core.concurrency.operation import ConcurrentOperation
from airflow_hudi_occ.core.format.instant import Action, Instant, State

# Which instants may be candidates is this module's judgement (operation.py only reads what
# an instant mutated), so the two action sets that make it live here.

#: Completed actions that make up Hudi's "commits timeline" (compaction completes as commit,
#: log compaction as deltacommit, clustering as replacecommit).
_COMPLETED_WRITE_ACTIONS = frozenset({Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT})

#: Pending actions that are ingestion, for prefer-writer (Hudi: commit and deltacommit only).
_INGESTION_ACTIONS = frozenset({Action.COMMIT, Action.DELTA_COMMIT})

# --- strategies ---------------------------------------------------------------------------------


def _window(timeline, since: str | None):
    window = getattr(timeline, "window", None)
    return window(since) if window is not None else list(timeline)


def _candidate_pool(timeline, current: "ConcurrentOperation", last_successful: Instant | None):
    """Instants that can be candidates at all: requested after the base snapshot or still
    pending, other than the current one, and, if completed, a write."""
    since = last_successful.requested_time if last_successful is not None else None
    for inst in _window(timeline, since):
        if inst.requested_time == current.requested_time:
            continue
        if inst.is_completed and (inst.action not in _COMPLETED_WRITE_ACTIONS or
                                  (since is not None and inst.requested_time <= since)):
            continue
        yield inst


def _completion_order(instant: Instant) -> tuple:
    # Completed instants first, by when they completed (v6 has no completion time: requested
    # time stands in); pending ones after, by requested time.
    if instant.is_completed:
        return (0, instant.completion_time or instant.requested_time, instant.requested_time)
    return (1, instant.requested_time, "")


class ConflictResolutionStrategy(ABC):
    """Chooses the candidate instants and judges each pair (Hudi's ConflictResolutionStrategy).

    Subclasses implement :meth:`strategy_candidates`, :meth:`has_conflict` and
    :meth:`resolve_conflict`. :meth:`candidate_instants` adds, for every strategy, the instants
    that were pending when the write began and have completed since: a requested-time window
    alone misses a writer that started *before* our base snapshot but finished after it.
    """

    name: str = ""
    hudi_class: str | None = None

    def __init__(self, *, table=None, heartbeat_config: HeartbeatConfig | None = None,
                 clock: Callable[[], float] = time.time):
        self.table = table
        self.heartbeat_config = heartbeat_config or HeartbeatConfig()
        self.clock = clock

    # -- candidates ----------------------------------------------------------------------------

    @abstractmethod
    def strategy_candidates(self, timeline, current: ConcurrentOperation,
                            last_successful: Instant | None) -> Iterable[Instant]:
        """The instants this strategy wants checked (before the pending-at-start rule)."""

    def candidate_instants(self, timeline, current: ConcurrentOperation,
                           last_successful: Instant | None = None,
                           pending_at_start: Iterable[str] = ()) -> list[Instant]:
        pending = set(pending_at_start)
        found: dict[str, Instant] = {}
        for inst in self.strategy_candidates(timeline, current, last_successful):
            found.setdefault(inst.requested_time, inst)
        for t in pending:
            inst = timeline.get(t)
            if (inst is not None and inst.is_completed
                    and inst.action in _COMPLETED_WRITE_ACTIONS):
                found.setdefault(inst.requested_time, inst)
        found.pop(current.requested_time, None)
        return sorted(found.values(), key=_completion_order)

    # -- judging -------------------------------------------------------------------------------

    def conflicting_file_groups(self, current: ConcurrentOperation,
                                other: ConcurrentOperation) -> frozenset[FileGroupId]:
        """The file groups that make the pair conflict (for the error and the CLI)."""
        return current.mutated_file_groups & other.mutated_file_groups

    @abstractmethod
    def has_conflict(self, current: ConcurrentOperation, other: ConcurrentOperation) -> bool:
        ...

    @abstractmethod
    def resolve_conflict(self, current: ConcurrentOperation, other: ConcurrentOperation) -> None:
        """Return to let ``current`` commit despite the conflict; raise WriteConflictError to abort."""

    def conflict_error(self, current: ConcurrentOperation, other: ConcurrentOperation,
                       reason: str | None = None) -> WriteConflictError:
        groups = sorted(self.conflicting_file_groups(current, other))
        shown = ", ".join(f"{p}/{f}" if p else f for p, f in groups[:5])
        if len(groups) > 5:
            shown += f" ... ({len(groups)} in all)"
        when = (f"completed at {other.completion_time}" if other.completion_time
                else other.state.value)
        message = (f"write conflict ({self.name}): {current.action.value} {current.requested_time} "
                   f"overlaps {other.operation_type} {other.action.value} {other.requested_time} "
                   f"({when})")
        message += f": {reason}" if reason else f" on file groups [{shown}]"
        return WriteConflictError(message, instant=current.requested_time,
                                  other_instant=other.requested_time, file_groups=groups,
                                  other_action=other.action.value, strategy=self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class SimpleConcurrentFileWritesConflictResolutionStrategy(ConflictResolutionStrategy):
    """Hudi's default: two writes conflict when they touch the same ``(partition, fileId)``."""

    name = "simple"
    hudi_class = "org.apache.hudi.client.transaction.SimpleConcurrentFileWritesConflictResolutionStrategy"

    def strategy_candidates(self, timeline, current, last_successful):
        is_mor = getattr(timeline.table.config, "table_type", "") == "MERGE_ON_READ"
        version = getattr(timeline.table.config, "version", 8)
        for inst in _candidate_pool(timeline, current, last_successful):
            if inst.is_completed:
                # On v8 a MOR table's completed "commit" is a compaction: it rewrote file
                # slices that writers append to, so it is not a conflict for them.
                if is_mor and version >= 8 and inst.action is Action.COMMIT:
                    continue
                yield inst
            elif inst.action in (Action.REPLACE_COMMIT, Action.CLUSTERING):
                # A pending clustering plan conflicts whenever it was scheduled: it will replace
                # the file groups this write is updating. Other pending replaces (insert_overwrite)
                # count only if they started after us: older ones are the earlier writer.
                if timeline.is_clustering(inst) or (
                        inst.action is not Action.CLUSTERING
                        and inst.requested_time > current.requested_time):
                    yield inst
            elif (version < 8 and inst.action in (Action.COMPACTION, Action.LOG_COMPACTION)
                  and inst.requested_time > current.requested_time):
                yield inst

    def has_conflict(self, current, other):
        return bool(self.conflicting_file_groups(current, other))

    def resolve_conflict(self, current, other):
        # A compaction scheduled before this write has already fixed which file slice it
        # compacts; this write's new version sits on top of it (Hudi's rule).
        if other.is_compaction:
            if other.requested_time < current.requested_time:
                return None
        elif current.is_log_compaction:
            # Log compaction only rewrites log blocks; readers order them by instant.
            return None
        elif current.is_compaction and other.action is Action.DELTA_COMMIT:
            # A compaction merges exactly the log files its plan fixed under the lock; a
            # deltacommit completing after that plan is in the slice the compaction starts
            # (completion-time slicing, table version 8), so neither undoes the other. Java's
            # completeCompaction runs no conflict resolution at all.
            return None
        raise self.conflict_error(current, other)


class BucketIndexConcurrentFileWritesConflictResolutionStrategy(
        SimpleConcurrentFileWritesConflictResolutionStrategy):
    """Bucket index: a bucket may get a new fileId, so compare ``(partition, bucket)`` instead.

    Two writers inserting into the same bucket each create a *different* fileId, which the
    simple strategy would let through, leaving two file groups for one bucket.
    """

    name = "bucket"
    hudi_class = ("org.apache.hudi.client.transaction."
                  "BucketIndexConcurrentFileWritesConflictResolutionStrategy")

    @staticmethod
    def _key(fg: FileGroupId) -> tuple[str, str, str]:
        bucket = bucket_id_of(fg[1])
        return (fg[0], "bucket", bucket) if bucket is not None else (fg[0], "file", fg[1])

    def conflicting_file_groups(self, current, other):
        shared = ({self._key(g) for g in current.mutated_file_groups}
                  & {self._key(g) for g in other.mutated_file_groups})
        if not shared:
            return frozenset()
        both = current.mutated_file_groups | other.mutated_file_groups
        return frozenset(g for g in both if self._key(g) in shared)


class PreferWriterConflictResolutionStrategy(SimpleConcurrentFileWritesConflictResolutionStrategy):
    """Ingestion wins over table services: when they overlap, clustering/compaction aborts.

    An ingestion commit checks only instants that *completed* after it was requested (by
    completion time, so one requested earlier but finished later is included) and never a
    pending table service. A table-service commit additionally checks pending ingestion, so it
    is the one that yields. With ``clustering_blocks_on_live_ingestion`` a clustering commit
    also yields to any pending ingestion whose heartbeat is alive, whatever its file groups:
    a running writer's file groups are not known until it completes. This checks the pending
    state (requested *or* inflight), a superset of "requested", because an inflight writer's
    file is only a plan.
    """

    name = "prefer-writer"
    hudi_class = "org.apache.hudi.client.transaction.PreferWriterConflictResolutionStrategy"

    def __init__(self, *, table=None, heartbeat_config: HeartbeatConfig | None = None,
                 clock: Callable[[], float] = time.time,
                 clustering_blocks_on_live_ingestion: bool = False):
        super().__init__(table=table, heartbeat_config=heartbeat_config, clock=clock)
        if clustering_blocks_on_live_ingestion and table is None:
            raise ConfigError(
                f"{CLUSTERING_FAIL_ON_PENDING_INGESTION.key} needs the table to read heartbeats",
                key=CLUSTERING_FAIL_ON_PENDING_INGESTION.key, value=True,
                remedy="pass table= (and heartbeat_config=) when creating the strategy")
        self.clustering_blocks_on_live_ingestion = clustering_blocks_on_live_ingestion

    def strategy_candidates(self, timeline, current, last_successful):
        # Hudi's rule (getCandidateInstantsForNonTableServicesCommits): every completed write
        # whose completion time is after this instant's requested time, whatever the base
        # snapshot was; so the last successful instant plays no part here.
        for inst in timeline:
            if inst.requested_time == current.requested_time:
                continue
            if inst.is_completed:
                done_at = inst.completion_time or inst.requested_time
                if inst.action in _COMPLETED_WRITE_ACTIONS and done_at > current.requested_time:
                    yield inst
            elif current.is_table_service and inst.action in _INGESTION_ACTIONS:
                yield inst

    def _blocks_on_live_ingestion(self, current, other) -> bool:
        # Requested only, as Hudi: an inflight ingestion has recorded its planned file groups,
        # which the file-group check judges.
        return (self.clustering_blocks_on_live_ingestion and current.is_clustering
                and other.is_ingestion and other.state is State.REQUESTED
                and not is_expired(self.table, other.requested_time, self.heartbeat_config,
                                   now=self.clock()))

    def has_conflict(self, current, other):
        return super().has_conflict(current, other) or self._blocks_on_live_ingestion(current, other)

    def resolve_conflict(self, current, other):
        if self._blocks_on_live_ingestion(current, other) and not super().has_conflict(current, other):
            raise self.conflict_error(
                current, other,
                reason=f"clustering yields to live ingestion ({CLUSTERING_FAIL_ON_PENDING_INGESTION.key})")
        return super().resolve_conflict(current, other)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(clustering_blocks_on_live_ingestion="
                f"{self.clustering_blocks_on_live_ingestion})")


# --- registry -------------------------------------------------------------------------------------

_BUILTINS: tuple[type[ConflictResolutionStrategy], ...] = (
    SimpleConcurrentFileWritesConflictResolutionStrategy,
    BucketIndexConcurrentFileWritesConflictResolutionStrategy,
    PreferWriterConflictResolutionStrategy,
)


def strategy_names() -> list[str]:
    """Valid names, short first, for help texts and errors."""
    return [c.name for c in _BUILTINS] + [c.hudi_class for c in _BUILTINS if c.hudi_class]


def _unknown(value: str, why: str = "") -> UnknownStrategyError:
    return UnknownStrategyError(
        f"unknown conflict resolution strategy {value!r}{why}",
        key=CONFLICT_RESOLUTION_STRATEGY.key, value=value,
        remedy="use one of " + ", ".join(strategy_names())
               + ", or a Python path 'package.module:Class' to a ConflictResolutionStrategy")


def get_conflict_resolution_strategy(name: str | ConflictResolutionStrategy,
                                     **kwargs: Any) -> ConflictResolutionStrategy:
    """A strategy by short name, Hudi class name or ``pkg.mod:Class`` (imported lazily).

    ``kwargs`` go to the constructor (``table``, ``heartbeat_config``, ``clock`` for every
    built-in; ``clustering_blocks_on_live_ingestion`` for prefer-writer).
    """
    if isinstance(name, ConflictResolutionStrategy):
        return name
    return strategy_class(name)(**kwargs)


_REGISTRY = Registry(ConflictResolutionStrategy, lambda value, why: _unknown(value, f" ({why})"))
for _cls in _BUILTINS:
    _REGISTRY.add(_cls, _cls.name, _cls.name.replace("-", "_"), _cls.hudi_class,
                  _cls.hudi_class.rsplit(".", 1)[-1] if _cls.hudi_class else None)


def strategy_class(name: str) -> type[ConflictResolutionStrategy]:
    """The class a name stands for, without constructing it."""
    return _REGISTRY.resolve((name or "").strip())  # errors name the stripped value


def check_strategy(name: str) -> None:
    """Raise :class:`UnknownStrategyError` if ``name`` names no strategy (a built-in is not
    constructed; a user's dotted path is imported)."""
    _REGISTRY.check((name or "").strip())


def strategy_from_config(config: WriteConfig, *, table=None, name: str | None = None,
                         clock: Callable[[], float] = time.time) -> ConflictResolutionStrategy:
    """The strategy a writer's config asks for (``name`` instead, when given): as in Hudi, an
    unset strategy on a bucket-index table (``hoodie.index.type=BUCKET``) means the bucket
    strategy (:attr:`WriteConfig.conflict_strategy`)."""
    kwargs: dict[str, Any] = {"table": table, "heartbeat_config": config.heartbeat, "clock": clock}
    cls = strategy_class(name or config.conflict_strategy)
    if issubclass(cls, PreferWriterConflictResolutionStrategy):
        kwargs["clustering_blocks_on_live_ingestion"] = config.clustering_fail_on_pending_ingestion
    return cls(**kwargs)


# --- the chain ------------------------------------------------------------------------------------


class ConflictFinding(NamedTuple):
    """One candidate's verdict, without raising: what ``hudi-occ conflicts`` prints."""

    other: ConcurrentOperation
    file_groups: frozenset[FileGroupId]
    would_abort: bool


def resolve_write_conflicts(timeline, current: ConcurrentOperation,
                            strategy: ConflictResolutionStrategy, *,
                            last_successful: Instant | None,
                            pending_at_start: Iterable[str]) -> list[ConcurrentOperation]:
    """Run the chain; raise the first WriteConflictError, else return the operations checked.

    ``timeline`` must have been reloaded under the table lock, or an instant completing between
    the reload and our commit would go unchecked.
    """
    checked = []
    for inst in strategy.candidate_instants(timeline, current, last_successful, pending_at_start):
        other = ConcurrentOperation.from_timeline(timeline, inst)
        checked.append(other)
        if strategy.has_conflict(current, other):
            strategy.resolve_conflict(current, other)
    return checked


def find_conflicts(timeline, current: ConcurrentOperation, strategy: ConflictResolutionStrategy,
                   *, last_successful: Instant | None = None,
                   pending_at_start: Iterable[str] = ()) -> list[ConflictFinding]:
    """Every candidate with its conflicting file groups and whether it would abort ``current``."""
    out = []
    for inst in strategy.candidate_instants(timeline, current, last_successful, pending_at_start):
        other = ConcurrentOperation.from_timeline(timeline, inst)
        groups = strategy.conflicting_file_groups(current, other)
        aborts = False
        if strategy.has_conflict(current, other):
            try:
                strategy.resolve_conflict(current, other)
            except WriteConflictError:
                aborts = True
        out.append(ConflictFinding(other, groups, aborts))
    return out


