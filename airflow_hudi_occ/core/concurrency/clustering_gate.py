"""The clustering gate for writers: file groups that a pending clustering plan will replace.

A write into such a file group would be lost when the clustering replaces it. Hudi's updates
strategy (``hoodie.clustering.updates.strategy``) decides what happens: refuse the write before
any data is written (the default), or let it go on so that the clustering loses at its commit.
"""

from __future__ import annotations

from typing import Iterable

from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import PendingClusteringConflictError
from airflow_hudi_occ.core.format.instant import Action, Instant
from airflow_hudi_occ.core.format.layout import FileGroupId


def pending_clustering_file_groups(timeline) -> dict[FileGroupId, str]:
    """File groups that pending clustering plans will replace -> the plan's instant time."""
    out: dict[FileGroupId, str] = {}
    for inst in timeline.pending():
        if inst.action not in (Action.CLUSTERING, Action.REPLACE_COMMIT) or not timeline.is_clustering(inst):
            continue
        plan = timeline.requested_replace_metadata(inst)
        if plan is None:
            continue
        for fg in plan.input_file_groups():
            out.setdefault(fg, inst.requested_time)  # timeline is sorted: earliest plan wins
    return out


def check_not_in_pending_clustering(timeline, file_groups: Iterable[FileGroupId],
                                    instant: Instant | str) -> None:
    """Refuse, before any data is written, to update file groups a pending clustering covers.

    Clustering would replace them, dropping this write's new version; failing at commit
    instead would waste the whole write.
    """
    this = instant.requested_time if isinstance(instant, Instant) else str(instant)
    covered = pending_clustering_file_groups(timeline)
    by_plan: dict[str, list[FileGroupId]] = {}
    for fg in file_groups:
        plan_time = covered.get(fg)
        if plan_time is not None and plan_time != this:
            by_plan.setdefault(plan_time, []).append(fg)
    if not by_plan:
        return
    plan_time = min(by_plan)
    groups = sorted(by_plan[plan_time])
    plan_instant = timeline.get(plan_time)
    action = plan_instant.action.value if plan_instant is not None else Action.CLUSTERING.value
    shown = ", ".join(str(FileGroupId.of(g)) for g in groups[:5])
    raise PendingClusteringConflictError(
        f"instant {this} would write file groups [{shown}{' ...' if len(groups) > 5 else ''}] "
        f"that pending clustering {plan_time} is replacing",
        instant=this, other_instant=plan_time, file_groups=groups, other_action=action,
        strategy=None)


def check_write_against_pending_clustering(timeline, file_groups: Iterable[FileGroupId], instant,
                                           config: WriteConfig) -> None:
    """Refuse (before any data is written) a write into file groups of a pending clustering
    plan, unless the updates strategy allows it (then the clustering loses at its commit)."""
    if config.rejects_clustering_updates:
        check_not_in_pending_clustering(timeline, file_groups, instant)


__all__ = ["pending_clustering_file_groups", "check_not_in_pending_clustering",
           "check_write_against_pending_clustering"]
