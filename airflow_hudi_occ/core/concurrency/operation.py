"""What a concurrent operation mutated, read once from the timeline for every strategy.

:class:`ConcurrentOperation` is one instant as conflict resolution sees it: its action and
Hudi operation type, its state and completion time, and the file groups it wrote (commit
metadata), will write (a pending replace or compaction plan) or is writing (markers are the
caller's to add).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from airflow_hudi_occ.core.format.instant import Action, Instant, State
from airflow_hudi_occ.core.format.metadata import decode_record
from airflow_hudi_occ.core.format.layout import FileGroupId


# --- operation types (Hudi's WriteOperationType names) ----------------------------------------

CLUSTER = "CLUSTER"
COMPACT = "COMPACT"
LOG_COMPACT = "LOG_COMPACT"
UNKNOWN = "UNKNOWN"

_TABLE_SERVICE_OPERATIONS = frozenset({CLUSTER, COMPACT, LOG_COMPACT})
_TABLE_SERVICE_ACTIONS = frozenset({Action.CLUSTERING, Action.COMPACTION, Action.LOG_COMPACTION})

# --- what an operation mutated ------------------------------------------------------------------


@dataclass(frozen=True)
class ConcurrentOperation:
    """One instant as conflict resolution sees it: which file groups it writes or replaces.

    Built from the timeline for other writers (:meth:`from_timeline`) and from the engine's own
    write stats for the committing writer (:meth:`for_current`), because the committing
    writer's metadata is not on the timeline yet.
    """

    instant: Instant
    action: Action
    operation_type: str
    mutated_file_groups: frozenset[FileGroupId] = field(default_factory=frozenset)
    is_table_service: bool = False

    @property
    def requested_time(self) -> str:
        return self.instant.requested_time

    @property
    def state(self) -> State:
        return self.instant.state

    @property
    def completion_time(self) -> str | None:
        return self.instant.completion_time

    @property
    def is_clustering(self) -> bool:
        return self.operation_type == CLUSTER or self.action is Action.CLUSTERING

    @property
    def is_compaction(self) -> bool:
        return self.operation_type == COMPACT or self.action is Action.COMPACTION

    @property
    def is_log_compaction(self) -> bool:
        return self.operation_type == LOG_COMPACT or self.action is Action.LOG_COMPACTION

    @property
    def is_ingestion(self) -> bool:
        return not self.is_table_service

    @classmethod
    def for_current(cls, instant: Instant, operation_type: str,
                    file_groups: Iterable[FileGroupId], *,
                    is_table_service: bool | None = None) -> "ConcurrentOperation":
        """The committing writer. ``is_table_service`` defaults to what action/type imply."""
        op_type = (operation_type or UNKNOWN).upper()
        if is_table_service is None:
            is_table_service = _implies_table_service(instant.action, op_type)
        return cls(instant, instant.action, op_type, frozenset(file_groups), is_table_service)

    @classmethod
    def from_timeline(cls, timeline, instant: Instant) -> "ConcurrentOperation":
        """Another instant, read from the timeline (section 2, "mutated file groups")."""
        action = instant.action
        if action in (Action.COMPACTION, Action.LOG_COMPACTION) and instant.is_pending:
            op_type = COMPACT if action is Action.COMPACTION else LOG_COMPACT
            groups = _compaction_plan_file_groups(timeline, instant)
        elif action in (Action.REPLACE_COMMIT, Action.CLUSTERING) and instant.is_pending:
            op_type, groups = _pending_replace(timeline, instant)
        elif action in (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT):
            # Completed commits and replacecommits carry stats (+ replaced ids); a pending
            # commit's inflight file may carry the planned stats (Hudi's workload profile).
            meta = timeline.commit_metadata(instant)
            op_type = meta.operation_type.upper() if meta.operation_type else UNKNOWN
            groups = meta.mutated_file_groups()
        else:
            # clean, rollback, savepoint, ...: they never write base files.
            op_type, groups = UNKNOWN, set()
        return cls(instant, action, op_type, frozenset(groups),
                   _implies_table_service(action, op_type))

    def to_json(self) -> dict:
        return {"instant": self.requested_time, "action": self.action.value,
                "state": self.state.value, "completion_time": self.completion_time,
                "operation_type": self.operation_type, "is_table_service": self.is_table_service,
                "file_groups": sorted(f"{p}/{f}" if p else f for p, f in self.mutated_file_groups)}

    def __str__(self) -> str:
        return f"{self.operation_type} {self.action.value} {self.requested_time} ({self.state.value})"


def _implies_table_service(action: Action, operation_type: str) -> bool:
    return action in _TABLE_SERVICE_ACTIONS or operation_type in _TABLE_SERVICE_OPERATIONS


def _pending_replace(timeline, instant: Instant) -> tuple[str, set[FileGroupId]]:
    plan = timeline.requested_replace_metadata(instant)
    plan_groups = plan.input_file_groups() if plan is not None and plan.has_plan else set()
    plan_type = (plan.operation_type.upper() if plan is not None else UNKNOWN) or UNKNOWN
    if plan_groups and plan_type == UNKNOWN:
        plan_type = CLUSTER
    if instant.state is State.INFLIGHT:
        # insert_overwrite writes its stats into the inflight file; clustering leaves it empty
        # and is then described by its plan.
        inflight = timeline.commit_metadata(instant)
        groups = inflight.mutated_file_groups()
        if groups:
            op_type = inflight.operation_type.upper() if inflight.operation_type != UNKNOWN else plan_type
            return op_type, groups
    return plan_type, set(plan_groups)


def _compaction_plan_file_groups(timeline, instant: Instant) -> set[FileGroupId]:
    """File groups of a compaction plan, read from the requested file (inflight has no plan).

    A COW table never schedules compaction; this reads Hudi's HoodieCompactionPlan with the
    schema embedded in the Avro file, so a plan written by Java Hudi is still understood.
    """
    table = timeline.table
    path = table.storage.path(table.config.timeline_folder,
                              Instant(instant.requested_time, instant.action, State.REQUESTED).file_name())
    try:
        rec = decode_record(table.storage.read(path), path)
    except FileNotFoundError:
        return set()
    out: set[FileGroupId] = set()
    for op in (rec or {}).get("operations") or []:
        if isinstance(op, dict) and op.get("fileId"):
            out.add((op.get("partitionPath") or "", op["fileId"]))
    return out
