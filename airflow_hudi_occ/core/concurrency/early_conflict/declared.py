"""Early checks against the other writers' *declared* footprints, not only their markers.

Why: markers come late. A Spark writer declares its partitions at begin and its file groups
once tagging is done (its inflight file, core/concurrency/footprint.py), but writes its
first marker only when its write job starts, tens of seconds later. A rival that began a
moment after it used to find no marker at its own checks and ran its whole tagging before
the first marker appeared. Declared footprints close that gap.

The rule (docs/concurrency.md, "Footprints and admission"), chosen so that nothing becomes
a conflict that Hudi's rules would let through:

- candidates are the ECD candidates: live (heartbeat) write instants strictly *earlier* than
  this one, not table services (the later of two overlapping writers is the one that stops);
- a shared **file group** (by bucket under the bucket index, as the commit-time strategy
  compares) between this write's planned groups and a candidate's declared ones is an early
  conflict (:class:`EarlyConflictError`), exactly as if the candidate's marker were there
  already: it will write that group unless it fails, and then one of the two must lose;
- a shared **partition** alone is never a conflict (two upserts of one partition commit
  together when their file groups differ). It is reported, and it is what admission waits
  on before a job is submitted (core/concurrency/admission.py).
"""

from __future__ import annotations

from typing import Iterable

from airflow_hudi_occ.core.concurrency.footprint import Footprint, LiveWriter, live_writers, overlapping
from airflow_hudi_occ.core.concurrency.early_conflict.marker_view import FileGroup, conflict_key
from airflow_hudi_occ.core.format.layout import FileGroupId

_REMEDY = ("an earlier, still running writer declared the same file group in its footprint; "
           "this write was stopped before wasting more work: retry with a fresh instant time "
           "(with admission, after that writer ends)")


def earlier_rivals(table, instant_time: str, footprint: Footprint | None, heartbeat, *,
                   now: float | None = None) -> list[tuple[LiveWriter, list[str]]]:
    """Live write instants earlier than ``instant_time`` whose footprint shares a partition
    with ``footprint`` (all of them when it is unknown), each with the shared partitions."""
    writers = [w for w in live_writers(table, heartbeat, now=now) if w.requested_time < instant_time]
    return overlapping(footprint, writers)


def declared_groups(rivals: Iterable[tuple[LiveWriter, list[str]]]) -> dict[FileGroup, str]:
    """The file groups the rivals declared (in the shared partitions), each with its instant
    (the earliest rival that declared it)."""
    out: dict[FileGroup, str] = {}
    for w, shared in rivals:
        if w.footprint is None:
            continue
        every = "*" in shared
        for g in sorted(w.footprint.file_groups):
            if every or g[0] in shared:
                out.setdefault((g[0], g[1]), w.requested_time)
    return out


def declared_conflict(instant_time: str, rivals: list[tuple[LiveWriter, list[str]]],
                      planned: Iterable[FileGroup], *, by_bucket: bool, strategy: str) -> dict | None:
    """The :class:`EarlyConflictError` arguments for the first rival whose declared file
    groups meet ``planned``, or None."""
    mine = {conflict_key((p, f), by_bucket) for p, f in planned}
    if not mine:
        return None
    for w, _shared in rivals:
        if w.footprint is None:
            continue
        hit = sorted(g for g in w.footprint.file_groups if conflict_key(g, by_bucket) in mine)
        if hit:
            shown = ", ".join(str(FileGroupId.of(g)) for g in hit[:5]) + (" ..." if len(hit) > 5 else "")
            action = w.instant.action.value
            return dict(message=(f"early conflict: {action} {w.requested_time} ({w.owner}; an "
                                 f"earlier writer, still running) declared file group(s) [{shown}] "
                                 f"that instant {instant_time} is about to write"),
                        instant=instant_time, other_instant=w.requested_time, file_groups=hit,
                        other_action=action, strategy=strategy, remedy=_REMEDY)
    return None
