"""Admission: a write starts only when no live writer may touch a file group its batch may
touch (or it waited long enough), and among writers waiting on the same file groups, ingestion
goes first.

Why: OCC lets two overlapping writers both run and then throws one away; with Spark that is a
minute of a cluster's time per lost attempt. A footprint is declared at begin
(``footprint.py``), so a writer about to be submitted can see every live rival and wait,
holding nothing, instead of starting a doomed job. Waiting is never needed for correctness:
OCC still decides every commit; admission only avoids work that is likely to be lost.

The protocol (files beside the timeline, ``.hoodie/.aux/occ/admission/<id>.json``, so that
any writer can take part):

1. A writer that must wait files a *request*: its footprint (partitions, the file groups its
   batch can reach in them where known, kind, owner) and a creation time. It rewrites the
   file at every look (``refreshed_at``); a waiting request not refreshed for ``ttl_s`` is
   dead (its waiter died) and ignored.
2. It is *admitted* when nothing blocks it: no live write instant (heartbeat alive; of the
   table services, a clustering being executed) and no admitted request of another owner
   *meets* it, and no waiting request that meets it comes before it. Two footprints meet
   where they may touch a common file group (``footprint.meeting``: by bucket under the
   bucket index; a partition whose file groups either side does not know counts whole).
   Order among waiting requests: kind (ingestion, then backfill, then table services:
   :data:`footprint.KIND_RANK`), then age; a request waiting longer than ``starvation_s``
   comes first whatever its kind, so no writer starves.
3. Admitted, it writes ``admitted`` and reads the others again: if another overlapping
   request is admitted too (two writers decided at the same moment, each before seeing the
   other's decision), it goes back to waiting. Of two such writers at least the later reader
   sees the other, so at most one goes; a double back-off costs one more look.
4. Once the write's instant exists the request is *linked* to it (:func:`link`): from then
   on the instant is what blocks (while its heartbeat lives), judged by the request's reach
   until its inflight file declares the file groups exactly (the instant names its request
   in its footprint, so the reach is found even before the link is written). The request is
   withdrawn when the attempt ends; an admitted request not withdrawn expires after
   ``admitted_ttl_s``.

Errors: none of its own; storage errors pass through. The caller bounds the wait and says
what it waited for (``Verdict.describe``).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Iterable

from airflow_hudi_occ.core.concurrency.footprint import (BUCKET_PREFIX, EVERY_PARTITION, KIND_RANK,
                                                        UNKNOWN_WRITER, Footprint, live_writers, meeting)
from airflow_hudi_occ.core.concurrency.request_folder import RequestFolder
from airflow_hudi_occ.core.config import HeartbeatConfig

WAITING = "waiting"
ADMITTED = "admitted"

#: the policies of a write that overlaps a live writer
WAIT, GO, FAIL = "wait", "go", "fail"
POLICIES = (WAIT, GO, FAIL)


@dataclass
class AdmissionRequest:
    request_id: str
    partitions: list[str] | None  # None: unknown (every partition)
    kind: str
    owner: str                    # for people: dag.task
    owner_key: dict = field(default_factory=dict)  # dag_id/run_id/task_id: one owner's requests
    created_at: float = 0.0
    refreshed_at: float = 0.0
    state: str = WAITING
    admitted_at: float | None = None
    ttl_s: float = 120.0
    admitted_ttl_s: float = 900.0
    #: partition -> the file groups the batch can touch there (fileIds or ``bucket:<n>``);
    #: a partition left out: any of its file groups
    reach: dict[str, list[str]] = field(default_factory=dict)
    #: the table as the reach was computed against: the last completion time then (a write
    #: completed since may have moved keys: the reach is stale, see :func:`reach_is_current`)
    reach_as_of: str | None = None
    #: how to compute the reach again (source, format, operation, index options; never
    #: credentials): a waiter's reach is refreshed once stale (``provider/admission.py``)
    reach_source: dict = field(default_factory=dict)
    #: the instant the admitted write began (set by :func:`link`): it blocks as that instant
    instant: str | None = None
    #: (not a field: never written) False for a request :func:`new_request` did not file yet:
    #: its first look (:func:`try_admit`) files it while it reads the others
    filed = True

    @property
    def footprint(self) -> Footprint:
        """Its footprint with its reach as filed (:meth:`footprint_on` drops a stale one)."""
        return Footprint.of(None if self.partitions is None else self.partitions,
                            owner=self.owner, kind=self.kind, reach=self.reach,
                            request=self.request_id)

    def footprint_on(self, timeline) -> Footprint:
        """Its footprint judged on ``timeline``: partitions only when its reach is stale."""
        fp = self.footprint
        return fp if reach_is_current(self, timeline) else fp.with_reach({})

    def alive(self, now: float) -> bool:
        if self.state == ADMITTED:
            return now - (self.admitted_at or self.refreshed_at) <= self.admitted_ttl_s
        return now - self.refreshed_at <= self.ttl_s

    def order(self, now: float, starvation_s: float) -> tuple:
        starving = now - self.created_at >= starvation_s
        return (0 if starving else 1, KIND_RANK.get(self.kind, 1), self.created_at, self.request_id)

    def same_owner(self, other: "AdmissionRequest") -> bool:
        return bool(self.owner_key) and all(self.owner_key.get(k) == other.owner_key.get(k)
                                            for k in ("dag_id", "run_id", "task_id", "map_index"))


@dataclass(frozen=True)
class Blocker:
    """Why a request waits: a live write instant, or another request (admitted, or ahead)."""

    what: str        # "writer" | "admitted request" | "request ahead"
    ident: str       # the instant or the request id
    owner: str
    partitions: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.ident} ({self.owner}) on partitions {', '.join(self.partitions)}"


@dataclass
class Verdict:
    admitted: bool
    blockers: list[Blocker] = field(default_factory=list)

    def describe(self) -> str:
        return "; ".join(b.describe() for b in self.blockers) or "nothing"

    def to_json(self) -> dict:
        return {"admitted": self.admitted, "blockers": [asdict(b) for b in self.blockers]}


def last_completion(timeline) -> str:
    """The latest completion time of a write on ``timeline`` ("" when none): what a reach is
    computed as of."""
    return max((i.completion_time or i.requested_time for i in timeline.completed() if i.is_write),
               default="")


def reach_is_current(req: AdmissionRequest, timeline) -> bool:
    """Whether no write completed between the reach's computation and the write's begin (its
    snapshot; now, before it began): a completed write may have added the file group a new key
    of the batch now lives in, or moved keys (a clustering). A reach of buckets alone is always
    current."""
    if not req.reach:
        return True
    groups = [g for gs in req.reach.values() for g in gs]
    if all(g.startswith(BUCKET_PREFIX) for g in groups):
        return True  # under the bucket index a key's file group is a function of the key: no write moves it
    if req.reach_as_of is None:
        return False
    until = req.instant or "~"
    return not any(req.reach_as_of < (i.completion_time or i.requested_time) < until
                   for i in timeline.completed() if i.is_write)


#: the requests beside the timeline: ``.hoodie/.aux/occ/admission/<id>.json``
FOLDER = RequestFolder("admission", AdmissionRequest)


def save(table, req: AdmissionRequest) -> None:
    FOLDER.save(table, req)


def load(table, request_id: str) -> AdmissionRequest | None:
    return FOLDER.load(table, request_id)


def requests(table, *, now: float | None = None, known: AdmissionRequest | None = None) -> list[AdmissionRequest]:
    """The live requests (dead ones are ignored, and deleted by whoever sees them); ``known``:
    the caller's own, not read back (``RequestFolder.all``)."""
    now = time.time() if now is None else now
    out = []
    for r in FOLDER.all(table, known=known):
        if r.alive(now):
            out.append(r)
        else:
            withdraw(table, r.request_id)
    return out


def withdraw(table, request_id: str) -> None:
    """Delete the request; the admission folder too once it is empty, so a write refused
    after admission (bad input) leaves the table as it found it."""
    FOLDER.withdraw(table, request_id)


def new_request(table, footprint: Footprint, *, owner_key: dict | None = None,
                ttl_s: float = 120.0, admitted_ttl_s: float = 900.0,
                now: float | None = None, reach_as_of: str | None = None,
                reach_source: dict | None = None, with_first_look: bool = False) -> AdmissionRequest:
    """File a waiting request for ``footprint`` (announced before it is ever judged).
    ``with_first_look``: filed by the first :func:`try_admit` instead, in the same round trip
    as its look (a lone library writer's admission was four round trips in a row: issue 43).
    Filing first is not what makes admission safe: a writer that misses a request filed while
    it looked can at worst be admitted before it, which the order allows for a request it never
    saw; two writers admitted at once are caught by step 3's second look, which comes after the
    "admitted" file is written."""
    now = time.time() if now is None else now
    req = AdmissionRequest(FOLDER.new_id(now),
                           None if footprint.partitions is None else sorted(footprint.partitions),
                           footprint.kind, footprint.owner or UNKNOWN_WRITER, dict(owner_key or {}),
                           now, now, WAITING, None, ttl_s, admitted_ttl_s,
                           {p: sorted(g) for p, g in sorted(footprint.reach.items())},
                           reach_as_of, dict(reach_source or {}))
    if with_first_look:
        req.filed = False
    else:
        save(table, req)
    return req


def link(table, request_id: str | None, instant: str | None) -> None:
    """The admitted write began ``instant``: its request now only lends the instant its reach
    (the instant blocks, while its heartbeat lives)."""
    req = load(table, request_id) if request_id and instant else None
    if req is not None and req.instant != instant:
        req.instant = instant
        save(table, req)


def _with_request_reach(w, by_id: dict[str, AdmissionRequest], timeline) -> Footprint | None:
    """A live instant's footprint, given the reach of the request it was admitted by (if
    current as of the instant's begin): its file groups until its own inflight file says
    exactly which it touches, its new keys until it ends (no file says which they are).

    An instant that declares its partitions unknown (the Spark engine's bulk_insert written by
    its input tasks learns them only in its write job: ``footprint.py``) takes its request's
    partitions: the operator read them from the same source before admitting it, so an
    admitted backfill still blocks only where its batch goes, not the whole table."""
    fp = w.footprint
    if fp is None or not fp.request:
        return fp
    req = by_id.get(fp.request)
    if req is None:
        return fp
    if fp.partitions is None and req.partitions is not None:
        fp = replace(fp, partitions=frozenset(req.partitions))
    if not req.reach:
        return fp
    as_begun = replace(req, instant=w.requested_time)  # linked or not yet: its snapshot's time
    return fp.with_reach(req.reach) if reach_is_current(as_begun, timeline) else fp


def live_blockers(table, footprint: Footprint, heartbeat: HeartbeatConfig, *,
                  now: float | None = None, others: list[AdmissionRequest] | None = None,
                  timeline=None) -> list[Blocker]:
    """The live write instants that may touch a file group ``footprint`` may touch
    (``footprint.meeting``; what ``on_overlap`` judges, without filing anything). A
    clustering being executed counts (its plan's file groups): a write admitted into them now
    would be refused by the clustering gate, or make the clustering lose at its commit;
    either way work is lost."""
    by_id = {r.request_id: r for r in (others if others is not None else requests(table, now=now))}
    tl = timeline if timeline is not None else table.timeline()
    out = []
    for w in live_writers(table, heartbeat, now=now, include_clustering=True, timeline=tl):
        shared = meeting(footprint, _with_request_reach(w, by_id, tl))
        if shared:
            out.append(Blocker("writer", w.requested_time, w.owner, tuple(shared)))
    return out


def blockers(table, req: AdmissionRequest, heartbeat: HeartbeatConfig, *, now: float | None = None,
             starvation_s: float = 600.0, others: list[AdmissionRequest] | None = None) -> list[Blocker]:
    now = time.time() if now is None else now
    if others is None:
        tl, others = _look(table, req, now)
    else:
        tl = table.timeline()
    mine = req.footprint_on(tl)
    out = live_blockers(table, mine, heartbeat, now=now, others=others, timeline=tl)
    me = req.order(now, starvation_s)
    for r in others:
        if r.request_id == req.request_id or req.same_owner(r) or r.instant:
            continue  # a linked request: its instant blocks (judged by its heartbeat)
        shared = meeting(mine, r.footprint_on(tl))
        if not shared:
            continue
        if r.state == ADMITTED:
            out.append(Blocker("admitted request", r.request_id, r.owner, tuple(shared)))
        elif r.order(now, starvation_s) < me:
            out.append(Blocker("request ahead", r.request_id, r.owner, tuple(shared)))
    return out


def _look(table, req: AdmissionRequest, now: float) -> tuple:
    """``(timeline, live requests)`` read together: two listings that do not depend on each
    other, overlapping on an object store (a lone writer's admission was 9 requests one after
    the other, issue 43); ``req`` is taken as this process last saved it."""
    tl, others = table.storage.concurrently([table.timeline, lambda: requests(table, now=now, known=req)])
    return tl, others


def try_admit(table, req: AdmissionRequest, heartbeat: HeartbeatConfig, *, now: float | None = None,
              starvation_s: float = 600.0) -> Verdict:
    """One look: refresh the request; admit it if nothing blocks it (step 2), then re-read
    the others (step 3). The request stays filed either way (``withdraw`` it when done)."""
    now = time.time() if now is None else now
    req.refreshed_at = now
    if req.state == ADMITTED:
        return Verdict(True)
    if not req.filed:  # its first look: filed (waiting) while the others are read
        req.filed = True
        _, why = table.storage.concurrently([
            lambda: save(table, req), lambda: blockers(table, req, heartbeat, now=now, starvation_s=starvation_s)])
        if why:
            return Verdict(False, why)
    else:
        why = blockers(table, req, heartbeat, now=now, starvation_s=starvation_s)
        if why:
            save(table, req)
            return Verdict(False, why)
    req.state, req.admitted_at = ADMITTED, now
    save(table, req)
    tl, others = _look(table, req, now)
    mine = req.footprint_on(tl)
    rivals = [Blocker("admitted request", r.request_id, r.owner, tuple(meeting(mine, r.footprint_on(tl))))
              for r in others
              if r.request_id != req.request_id and r.state == ADMITTED and not req.same_owner(r)
              and not r.instant and meeting(mine, r.footprint_on(tl))]
    if rivals:  # admitted at the same moment as another: back to waiting, look again
        req.state, req.admitted_at = WAITING, None
        save(table, req)
        return Verdict(False, rivals)
    return Verdict(True)


@dataclass
class AdmissionWait:
    """How a library writer waits to be admitted (``core/commit/retry.run_admitted``): looks
    from ``poll_s`` apart, doubling to ``max_poll_s`` (a look reads the requests and the live
    instants: at 32 waiters a fixed short poll would cost more than the writes), at most
    ``timeout_s`` (then it goes anyway: OCC still decides the commit)."""

    timeout_s: float = 300.0
    poll_s: float = 0.05
    max_poll_s: float = 0.5
    starvation_s: float = 600.0


@dataclass
class WaitOutcome:
    seconds: float = 0.0
    waited_for: list[str] = field(default_factory=list)
    timed_out: bool = False


def wait_admitted(table, req: AdmissionRequest, heartbeat: HeartbeatConfig, wait: AdmissionWait, *,
                  sleep=time.sleep, clock=time.time,
                  judge: Callable[[], Verdict] | None = None,
                  on_blocked: Callable[[Verdict, float], None] | None = None,
                  stop: Callable[[], bool] = lambda: False) -> WaitOutcome:
    """Look (:func:`try_admit`) until ``req`` is admitted or ``wait.timeout_s`` passed: the one
    admission wait, for library writers and for the operators' workers.

    ``judge`` replaces the look (a worker refreshes its request's reach first and names the
    blockers from the attempt log); ``on_blocked(verdict, seconds_so_far)`` sees every look
    that found blockers, to log them or to raise (``on_overlap='fail'``); ``stop()`` true ends
    the wait as timed out (a task being killed goes on to its own end)."""
    t0 = clock()
    out = WaitOutcome()
    delay = wait.poll_s
    while True:
        verdict = judge() if judge is not None else try_admit(table, req, heartbeat,
                                                             starvation_s=wait.starvation_s)
        if verdict.admitted:
            break
        if on_blocked is not None:
            on_blocked(verdict, clock() - t0)
        for b in verdict.blockers:
            if b.describe() not in out.waited_for:
                out.waited_for.append(b.describe())
        if clock() - t0 >= wait.timeout_s or stop():
            out.timed_out = True
            break
        sleep(delay)
        delay = min(delay * 2, wait.max_poll_s)
    out.seconds = clock() - t0
    return out


def requeue(table, req: AdmissionRequest) -> None:
    """An attempt of ``req`` lost (a conflict): its request waits again, its age kept. Its
    ``created_at`` is the batch's first look, so among the waiting requests it meets it comes
    before every batch that asked later (:meth:`AdmissionRequest.order`): a loser's claim ages,
    and the oldest claim is admitted first at the next round."""
    req.state, req.admitted_at, req.instant = WAITING, None, None
    save(table, req)


#: the attempt-log labels of an attempt's admission wait (kept by the attempt log; read by
#: the trends and the timeline page): its seconds, and whom it waited for (a JSON list of
#: ``Blocker.describe`` texts: "<instant> (<dag>.<task>) on partitions ...")
WAIT_SECONDS_LABEL = "admission_wait_s"
WAITED_FOR_LABEL = "admission_waited_for"


def wait_labels(seconds: float, waited_for: Iterable[str]) -> dict[str, str]:
    """The labels recording one attempt's wait (labels are strings)."""
    return {WAIT_SECONDS_LABEL: f"{float(seconds):.3f}", WAITED_FOR_LABEL: json.dumps(list(waited_for))}


def wait_from_labels(labels: dict | None) -> dict | None:
    """``{"seconds": s, "waited_for": [...]}`` from an attempt's labels; None if it did not
    wait. Unreadable values read as no wait (labels are free text written by other
    processes)."""
    labels = labels or {}
    try:
        seconds = float(labels.get(WAIT_SECONDS_LABEL) or 0.0)
    except (TypeError, ValueError):
        return None
    try:
        whom = json.loads(labels.get(WAITED_FOR_LABEL) or "[]")
    except ValueError:
        whom = []
    whom = [str(w) for w in whom] if isinstance(whom, list) else []
    if seconds <= 0 and not whom:
        return None
    return {"seconds": round(max(seconds, 0.0), 3), "waited_for": whom}


def shown_partitions(partitions: Iterable[str] | None) -> str:
    return EVERY_PARTITION if partitions is None else ", ".join(sorted(partitions)) or "-"


__all__ = ["AdmissionRequest", "Blocker", "Verdict", "WAIT", "GO", "FAIL", "POLICIES", "WAITING",
           "ADMITTED", "new_request", "requests", "withdraw", "link", "last_completion",
           "reach_is_current", "load", "save", "live_blockers",
           "blockers", "try_admit", "shown_partitions", "WAIT_SECONDS_LABEL", "WAITED_FOR_LABEL",
           "wait_labels", "wait_from_labels", "AdmissionWait", "WaitOutcome", "wait_admitted", "requeue"]
