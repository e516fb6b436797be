"""Write windows: let a long writer (a backfill) get a turn on partitions that short writers
(frequent ingestion) keep busy, without stopping either for ever.

The problem: OCC lets the first committer win. A backfill that rewrites a month of partitions
for an hour loses every time an ingestion run commits to one of those partitions in that hour,
and retrying does not help: it is starved. Airflow pools cannot help, they know nothing of
partitions or of writers outside Airflow.

The protocol (files beside the timeline, ``.hoodie/.aux/occ/windows/``, so writers outside
Airflow can take part with the same few lines):

1. The waiting writer (``HudiWriteWindowSensor``) files a *request*: the partitions it will
   write, its owner (dag_id / run_id / task_id), and a creation time that orders requests.
   It rewrites the file at every poke; a request not refreshed for ``ttl_s`` is dead (its
   sensor died) and ignored by everyone.
2. From then on, every *new* write that honours windows (``HudiWriteOperator`` with
   ``write_windows=WriteWindows(...)``, the default) and may touch those partitions waits
   before launching its job: it yields to the older request. Writes already running finish normally.
3. The window opens when no live writer (pending write instant with a live heartbeat) has
   markers or planned file groups in the requested partitions, and no OLDER live request of
   another owner overlaps them (first come, first served among long writers). The request is
   then *granted* and held for ``hold_s`` (the time the long write needs); the long write
   releases it when it ends (its write operator deletes the requests of its own DAG run).

Fairness: the backfill is not starved because writers arriving after its request wait, and the
ones already running drain (they are short). Ingestion is not starved either: it waits at most
its ``WriteWindows.timeout_s`` and then writes anyway (OCC still keeps the table correct; the
backfill then retries that conflict with a fresh instant), and a dead or forgotten request
expires (``ttl_s`` while waiting, ``hold_s`` once granted). Unknown partitions (``None``) are
treated as "every partition", the conservative choice for both sides.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterable

from airflow_hudi_occ.core.concurrency.heartbeat import is_expired
from airflow_hudi_occ.core.concurrency.request_folder import RequestFolder
from airflow_hudi_occ.core.config import HeartbeatConfig

WAITING = "waiting"
GRANTED = "granted"


@dataclass
class WriteWindows:
    """How a write honours write windows (an operator's ``write_windows=``; None: it does not
    yield): before each attempt it waits, at most ``timeout_s`` (then writes anyway: OCC keeps
    the table correct), looking every ``poll_s``, while an older request of another DAG run
    covers ``partitions`` (None: unknown, so every partition; templated)."""

    partitions: list[str] | None = None
    timeout_s: float = 600.0
    poll_s: float = 2.0

    template_fields = ("partitions",)


@dataclass
class WindowRequest:
    request_id: str
    partitions: list[str] | None  # None: every partition
    owner: dict = field(default_factory=dict)
    created_at: float = 0.0
    refreshed_at: float = 0.0
    state: str = WAITING
    granted_at: float | None = None
    ttl_s: float = 300.0
    hold_s: float = 3600.0

    def alive(self, now: float) -> bool:
        if self.state == GRANTED:
            return now - (self.granted_at or self.refreshed_at) <= self.hold_s
        return now - self.refreshed_at <= self.ttl_s

    def overlaps(self, partitions: Iterable[str] | None) -> bool:
        if self.partitions is None or partitions is None:
            return True
        return bool(set(self.partitions) & set(partitions))

    def same_owner(self, owner: dict) -> bool:
        keys = ("dag_id", "run_id")
        return all(self.owner.get(k) == owner.get(k) for k in keys) and bool(owner)


#: the requests beside the timeline: ``.hoodie/.aux/occ/windows/<id>.json``
FOLDER = RequestFolder("windows", WindowRequest)


def save(table, req: WindowRequest) -> None:
    FOLDER.save(table, req)


def new_request(table, partitions: Iterable[str] | None, owner: dict, *, ttl_s: float = 300.0,
                hold_s: float = 3600.0, now: float | None = None) -> WindowRequest:
    now = time.time() if now is None else now
    req = WindowRequest(FOLDER.new_id(now),
                        None if partitions is None else sorted(set(partitions)), dict(owner),
                        now, now, WAITING, None, ttl_s, hold_s)
    save(table, req)
    return req


def load(table, request_id: str) -> WindowRequest | None:
    return FOLDER.load(table, request_id)


def requests(table, *, now: float | None = None, live_only: bool = True) -> list[WindowRequest]:
    now = time.time() if now is None else now
    out = [r for r in FOLDER.all(table) if not live_only or r.alive(now)]
    return sorted(out, key=lambda r: (r.created_at, r.request_id))


def release(table, request_id: str) -> None:
    FOLDER.withdraw(table, request_id)


def release_owned(table, owner: dict) -> list[str]:
    gone = []
    for r in requests(table, live_only=False):
        if r.same_owner(owner):
            release(table, r.request_id)
            gone.append(r.request_id)
    return gone


def live_writers(table, partitions: Iterable[str] | None, heartbeat: HeartbeatConfig,
                 *, now: float | None = None) -> dict[str, list[str]]:
    """Pending write instants with a live heartbeat -> the wanted partitions they hold
    (through markers, or the file groups planned in their inflight file)."""
    from airflow_hudi_occ.core.concurrency.markers.write_markers import markers_for
    wanted = None if partitions is None else set(partitions)
    tl = table.timeline()
    out: dict[str, list[str]] = {}
    for inst in tl.pending_writes():
        t = inst.requested_time
        if inst.is_table_service or is_expired(table, t, heartbeat, now=now):
            continue
        held: set[str] = set()
        try:
            held |= {p for p, _ in markers_for(table, t).file_groups()}
        except FileNotFoundError:
            pass
        try:
            held |= {p for p, _ in tl.commit_metadata(inst).mutated_file_groups()}
        except Exception:  # noqa: BLE001 - requested only, or an unreadable plan: markers decide
            pass
        if not held:
            held = {"*"}  # began but nothing known yet: may touch anything
        hit = held if wanted is None or "*" in held else held & wanted
        if hit:
            out[t] = sorted(hit)
    return out


def blockers(table, req: WindowRequest, heartbeat: HeartbeatConfig, *,
             now: float | None = None) -> dict:
    """Why ``req`` cannot be granted yet: live writers and older overlapping requests."""
    now = time.time() if now is None else now
    older = [r.request_id for r in requests(table, now=now)
             if r.request_id != req.request_id and (r.created_at, r.request_id) < (req.created_at, req.request_id)
             and not r.same_owner(req.owner) and r.overlaps(req.partitions)]
    return {"writers": live_writers(table, req.partitions, heartbeat, now=now), "older_requests": older}


def try_grant(table, req: WindowRequest, heartbeat: HeartbeatConfig, *,
              now: float | None = None) -> tuple[bool, dict]:
    """Refresh the request; grant it if nothing blocks it. Returns (granted, blockers)."""
    now = time.time() if now is None else now
    req.refreshed_at = now
    why = blockers(table, req, heartbeat, now=now)
    if not why["writers"] and not why["older_requests"]:
        req.state, req.granted_at = GRANTED, now
    save(table, req)
    return req.state == GRANTED, why


def yielding_to(table, partitions: Iterable[str] | None, owner: dict, *,
                now: float | None = None) -> list[WindowRequest]:
    """Live requests of other owners that a new write on ``partitions`` must wait for."""
    return [r for r in requests(table, now=now) if not r.same_owner(owner) and r.overlaps(partitions)]
