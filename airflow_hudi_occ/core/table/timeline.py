"""The active timeline: which instants exist, in which state, and their metadata.

A :class:`Timeline` is an immutable snapshot taken by listing the timeline folder once; call
``table.timeline()`` again to see newer instants (the commit protocol reloads under the lock).
Metadata of *completed* instants is immutable, so it is cached per process by file name:
conflict resolution then reads only the few instants that completed since a write began, and
its cost follows those instants, not the timeline's length.

Writing: :func:`create_requested`, :func:`transition_to_inflight` and :func:`complete`
implement the state machine ``requested -> inflight -> completed``. The completed file is
created with create-if-absent and never overwritten: if it exists, the instant was already
completed by someone else and :class:`InstantStateError` is raised.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterable, Iterator

from airflow_hudi_occ.core.errors import CorruptMetadataError, InstantStateError
from airflow_hudi_occ.core.format.instant import Action, Instant, State, parse_file_name
from airflow_hudi_occ.core.table.history import TimelineHistory
from airflow_hudi_occ.core.format.metadata import (CommitMetadata, CompactionPlan, RequestedReplaceMetadata,
                                                   RollbackPlan)

_STATE_RANK = {State.REQUESTED: 0, State.INFLIGHT: 1, State.COMPLETED: 2}

_CACHE_LOCK = threading.Lock()
_META_CACHE: "OrderedDict[tuple[str, str], CommitMetadata]" = OrderedDict()
_META_CACHE_SIZE = 4096


@dataclass(frozen=True)
class TimelineEntry:
    """An instant with every file it has on the timeline folder."""

    instant: Instant
    files: tuple[str, ...]


def _entry(t: str, names: list[str]) -> TimelineEntry | None:
    items = [(parse_file_name(n), n) for n in names]
    items = [(i, n) for i, n in items if i is not None]
    if not items:
        return None
    items.sort(key=lambda x: _STATE_RANK[x[0].state])
    latest = items[-1][0]
    if latest.state is not State.COMPLETED:
        # a pending commit's inflight file has no action; take it from the requested file
        actions = [i.action for i, _ in items if i.state is State.REQUESTED]
        if actions and latest.action is Action.COMMIT and actions[0] is not Action.COMMIT:
            latest = Instant(t, actions[0], latest.state)
    return TimelineEntry(latest, tuple(n for _, n in items))


#: this thread's timeline listings started by :func:`listed_ahead`, by (base uri, folder)
_AHEAD = threading.local()


@contextmanager
def listed_ahead(*tables):
    """List the timelines of ``tables`` (None ones skipped) at once, in the background, as the
    section begins; inside it, on this thread, the first load of each takes that listing
    instead of making its own (a later load lists again). Why: outside the lock a commit lists
    two timelines and reads a file or two, each a 20 to 50 ms round trip on an object store
    that needs none of the others' answers, and a single writer's commit waited for them one
    after the other (issue 43). Only for a section where a listing made as it begins serves as
    well as one made later in it: before a lock, never around its acquisition (a listing under
    the lock must be made under it). What the section did not take is dropped at its end."""
    ahead = getattr(_AHEAD, "listings", None)
    outer = dict(ahead) if ahead else {}
    mine = {}
    for t in tables:
        if t is None:
            continue
        key = (t.base_uri, t.timeline_dir)
        if key not in mine and key not in outer:
            mine[key] = t.storage.ahead(lambda t=t: t.storage.list_names(t.timeline_dir))
    _AHEAD.listings = {**outer, **mine}
    try:
        yield
    finally:
        _AHEAD.listings = {k: v for k, v in (getattr(_AHEAD, "listings", None) or {}).items() if k in outer}


class _LoadedTimeline:
    """Per-process, per-timeline-folder state kept between loads.

    A reload lists the folder (unavoidable on a plain file system) but parses and rebuilds
    only the names that appeared or vanished since the previous load, so its cost follows the
    instants that changed, not the timeline's length (the commit path reloads under the lock).
    """

    def __init__(self):
        self.lock = threading.Lock()
        self.names: set[str] = set()
        self.names_by_time: dict[str, list[str]] = {}
        self.entries: dict[str, TimelineEntry] = {}
        self.times: list[str] = []          # sorted requested times
        self.sorted_entries: list[TimelineEntry] = []
        self.pending: set[str] = set()
        self.max_completion: str | None = None

    @staticmethod
    @contextmanager
    def listed(table):
        """The process's state of ``table``'s timeline, refreshed by one listing, held (its
        lock) while the caller reads it: a snapshot is of this listing, not another thread's.
        Inside :func:`listed_ahead` the listing is the one it started, if not taken yet."""
        folder = table.timeline_dir
        key = (table.base_uri, folder)
        ahead = getattr(_AHEAD, "listings", None)
        started = ahead.pop(key, None) if ahead else None
        names = set(started.result() if started is not None else table.storage.list_names(folder))
        with _LOADED_LOCK:
            state = _LOADED.get(key)
            if state is None:
                state = _LOADED[key] = _LoadedTimeline()
        with state.lock:
            state.refresh(names)
            yield state

    def copy(self) -> "_LoadedTimeline":
        """A private copy (the caller holds this state's lock)."""
        other = _LoadedTimeline()
        other.names = set(self.names)
        other.names_by_time = {t: list(v) for t, v in self.names_by_time.items()}
        other.entries = dict(self.entries)
        other.times = list(self.times)
        other.sorted_entries = list(self.sorted_entries)
        other.pending = set(self.pending)
        other.max_completion = self.max_completion
        return other

    def refresh(self, names: set[str]) -> None:
        added = names - self.names
        removed = self.names - names
        if not added and not removed:
            return
        touched: set[str] = set()
        for n in removed:
            inst = parse_file_name(n)
            if inst is None:
                continue
            lst = self.names_by_time.get(inst.requested_time)
            if lst and n in lst:
                lst.remove(n)
            touched.add(inst.requested_time)
        for n in added:
            inst = parse_file_name(n)
            if inst is None:
                continue
            self.names_by_time.setdefault(inst.requested_time, []).append(n)
            touched.add(inst.requested_time)
        for t in touched:
            e = _entry(t, self.names_by_time.get(t, []))
            had = t in self.entries
            if e is None:
                self.names_by_time.pop(t, None)
                if had:
                    del self.entries[t]
                    i = bisect.bisect_left(self.times, t)
                    del self.times[i]
                    del self.sorted_entries[i]
                self.pending.discard(t)
                continue
            i = bisect.bisect_left(self.times, t)
            if had:
                self.sorted_entries[i] = e
            else:
                self.times.insert(i, t)
                self.sorted_entries.insert(i, e)
            self.entries[t] = e
            if e.instant.is_pending:
                self.pending.add(t)
            else:
                self.pending.discard(t)
                c = e.instant.completion_time
                if c and len(c) == 17 and (self.max_completion is None or c > self.max_completion):
                    self.max_completion = c
        self.names = names


_LOADED: dict[tuple[str, str], _LoadedTimeline] = {}
_LOADED_LOCK = threading.Lock()


def _archived_metadata(table, instant: Instant) -> CommitMetadata | None:
    """The metadata of a completed write that archival moved to the history after this
    timeline was listed (another writer's archival, under the table lock, while this process
    read outside it: a 90-day scale backfill's mapped tasks met it in their already-committed
    check). Archival writes the history before it deletes the active files, so a completed
    instant gone from the folder is either there or truly lost (None: corrupt)."""
    for inst, meta in TimelineHistory(table).completed_writes():
        if inst.requested_time == instant.requested_time:
            return meta
    return None


class Timeline:
    def __init__(self, table, entries: list[TimelineEntry], *, times: list[str] | None = None,
                 by_time: dict[str, TimelineEntry] | None = None, pending: Iterable[str] | None = None,
                 max_completion: str | None = None):
        self.table = table
        self._entries = entries
        self._times = times if times is not None else [e.instant.requested_time for e in entries]
        self._by_time = by_time if by_time is not None else {e.instant.requested_time: e for e in entries}
        if pending is None:
            pending = [e.instant.requested_time for e in entries if e.instant.is_pending]
        self._pending = sorted(pending)
        if max_completion is None:
            done = [e.instant.completion_time for e in entries
                    if e.instant.completion_time and len(e.instant.completion_time) == 17]
            max_completion = max(done) if done else None
        self._max_completion = max_completion

    @classmethod
    def load(cls, table) -> "Timeline":
        with _LoadedTimeline.listed(table) as state:
            return cls._of(table, state)

    @classmethod
    def _of(cls, table, state: _LoadedTimeline) -> "Timeline":
        # Copies of references only: later refreshes must not change this snapshot.
        return cls(table, list(state.sorted_entries), times=list(state.times),
                   by_time=dict(state.entries), pending=set(state.pending),
                   max_completion=state.max_completion)

    # -- queries -----------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Instant]:
        return (e.instant for e in self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def instants(self) -> list[Instant]:
        return [e.instant for e in self._entries]

    def get(self, requested_time: str) -> Instant | None:
        e = self._by_time.get(requested_time)
        return e.instant if e else None

    def files_of(self, requested_time: str) -> tuple[str, ...]:
        e = self._by_time.get(requested_time)
        return e.files if e else ()

    def completed(self) -> list[Instant]:
        return [i for i in self if i.is_completed]

    def pending(self) -> list[Instant]:
        return [self._by_time[t].instant for t in self._pending]

    def window(self, since: str | None) -> list[Instant]:
        """Instants requested after ``since`` plus every pending instant, in requested order.

        Conflict candidates always lie here (a writer's candidates completed after its base
        snapshot or are still pending), so callers need not walk the whole timeline.
        """
        if since is None:
            return self.instants
        i = bisect.bisect_right(self._times, since)
        recent = [e.instant for e in self._entries[i:]]
        older_pending = [self._by_time[t].instant for t in self._pending if t <= since]
        return older_pending + recent

    def completed_writes(self) -> list[Instant]:
        return [i for i in self if i.is_completed and i.is_write]

    def pending_writes(self) -> list[Instant]:
        return [i for i in self.pending() if i.is_write]

    def last_completed_write(self) -> Instant | None:
        done = self.completed_writes()
        return done[-1] if done else None

    def completed_by_completion_time(self) -> list[Instant]:
        """Completed instants in the order they completed (v6 has no completion time: requested)."""
        return sorted(self.completed(), key=lambda i: (i.completion_time or i.requested_time,
                                                       i.requested_time))

    def earliest(self) -> Instant | None:
        return self._entries[0].instant if self._entries else None

    def latest_time(self) -> str | None:
        """The largest requested or completion time on the timeline (a floor for new times)."""
        cands = [t for t in (self._times[-1] if self._times else None, self._max_completion)
                 if t and len(t) == 17]
        return max(cands) if cands else None

    # -- metadata ----------------------------------------------------------------------------

    def file_path(self, instant: Instant) -> str:
        return self.table.storage.path(self.table.config.timeline_folder,
                                       instant.file_name(self.table.config.layout_version))

    def commit_metadata(self, instant: Instant) -> CommitMetadata:
        """Metadata of a completed write instant (cached), or of an inflight one (not cached)."""
        path = self.file_path(instant)
        if instant.is_completed:
            key = (self.table.base_uri, path)
            with _CACHE_LOCK:
                hit = _META_CACHE.get(key)
                if hit is not None:
                    _META_CACHE.move_to_end(key)
                    return hit
        try:
            data = self.table.storage.read(path)
        except FileNotFoundError:
            if instant.is_completed:
                archived = _archived_metadata(self.table, instant)
                if archived is not None:
                    return archived
                raise CorruptMetadataError(f"completed instant {instant} vanished from the timeline",
                                           path=path, base_path=self.table.base_uri) from None
            return CommitMetadata()
        meta = CommitMetadata.decode(data, path)
        if instant.is_completed:
            with _CACHE_LOCK:
                _META_CACHE[key] = meta
                if len(_META_CACHE) > _META_CACHE_SIZE:
                    _META_CACHE.popitem(last=False)
        return meta

    def requested_replace_metadata(self, instant: Instant) -> RequestedReplaceMetadata | None:
        """The plan in a replacecommit/clustering ``.requested`` file, if any."""
        req = Instant(instant.requested_time, instant.action if instant.is_pending else
                      Action.REPLACE_COMMIT, State.REQUESTED)
        for action in (req.action, Action.CLUSTERING, Action.REPLACE_COMMIT):
            path = self.table.storage.path(self.table.config.timeline_folder,
                                           Instant(instant.requested_time, action, State.REQUESTED).file_name())
            try:
                data = self.table.storage.read(path)
            except FileNotFoundError:
                continue
            return RequestedReplaceMetadata.decode(data, path)
        return None

    def compaction_plan(self, instant: Instant) -> CompactionPlan | None:
        """The plan in a compaction's ``.requested`` file (kept after it completes as a commit)."""
        path = self.table.storage.path(self.table.config.timeline_folder,
                                       Instant(instant.requested_time, Action.COMPACTION,
                                               State.REQUESTED).file_name())
        try:
            return CompactionPlan.decode(self.table.storage.read(path), path)
        except FileNotFoundError:
            return None

    def pending_compactions(self) -> list[Instant]:
        return [i for i in self.pending() if i.action is Action.COMPACTION]

    def pending_compaction_file_groups(self) -> dict:
        """``{(partition, fileId): compaction instant}`` for every pending compaction plan."""
        out = {}
        for inst in self.pending_compactions():
            for fg in (self.compaction_plan(inst) or CompactionPlan()).file_groups():
                out[fg] = inst.requested_time
        return out

    def is_clustering(self, instant: Instant) -> bool:
        if instant.action is Action.CLUSTERING:
            return True
        if instant.action is not Action.REPLACE_COMMIT:
            return False
        if instant.is_completed:
            return self.commit_metadata(instant).operation_type == "CLUSTER"
        plan = self.requested_replace_metadata(instant)
        return bool(plan and (plan.operation_type == "CLUSTER" or plan.has_plan))

    def to_json(self) -> list[dict]:
        return [{"requested_time": i.requested_time, "action": i.action.value,
                 "state": i.state.value, "completion_time": i.completion_time} for i in self]


class PinnedTimeline:
    """One listing of a timeline folder kept for a critical section, and the files this
    process writes or deletes there since (:meth:`note`), so that every step inside the section
    sees the timeline without listing it again.

    Why that is true: the section runs under the data table's lock. The metadata table's
    timeline is changed by every writer (ours and Java's) only under that lock (a metadata
    table is written by the data table's writer, inside its commit), so nothing but this
    process changes it while the section lasts, and this process says what it does. On the
    data table's own timeline instants are created, completed and removed only under the lock
    too; another writer may move its pending instant from requested to inflight meanwhile,
    which none of the steps after a commit's conflict check looks at (they ask which instants
    exist and which are completed). Used by
    :meth:`~airflow_hudi_occ.core.table.table.Table.timeline_pinned` (issue 43: a commit that
    keeps the metadata table listed the two timelines eleven times under the lock)."""

    def __init__(self, table):
        self.table = table
        with _LoadedTimeline.listed(table) as state:
            self._state = state.copy()

    def snapshot(self) -> Timeline:
        return Timeline._of(self.table, self._state)

    def note(self, name: str, present: bool) -> None:
        """A file of the timeline folder written (``present``) or deleted by this process."""
        names = set(self._state.names)
        names.add(name) if present else names.discard(name)
        self._state.refresh(names)


# --- writing the state machine ---------------------------------------------------------------


def _timeline_path(table, instant: Instant) -> str:
    return table.storage.path(table.config.timeline_folder, instant.file_name(table.config.layout_version))


def create_requested(table, instant: Instant, data: bytes = b"") -> None:
    table.require_writable()
    req = Instant(instant.requested_time, instant.action, State.REQUESTED)
    try:
        table.storage.create_if_absent(_timeline_path(table, req), data)
        table.note_timeline_file(req.file_name(table.config.layout_version), True)
    except FileExistsError:
        raise InstantStateError(f"instant {instant.requested_time} already exists on the timeline",
                                instant=instant.requested_time,
                                remedy="instant times must be unique: generate a new one under "
                                       "the table lock") from None


def cache_commit_metadata(table, instant: Instant, data: bytes) -> None:
    """Put a completed write's metadata (its file's bytes) in the process cache that
    :meth:`Timeline.commit_metadata` reads: the writer that completed it reads its own commit
    back at its next write (the schema, conflict candidates), and on an object store that is
    a request saved each time."""
    if not instant.is_completed:
        return
    path = _timeline_path(table, instant)
    meta = CommitMetadata.decode(data, path)
    with _CACHE_LOCK:
        _META_CACHE[(table.base_uri, path)] = meta
        if len(_META_CACHE) > _META_CACHE_SIZE:
            _META_CACHE.popitem(last=False)


def transition_to_inflight(table, instant: Instant, data: bytes = b"") -> Instant:
    inflight = Instant(instant.requested_time, instant.action, State.INFLIGHT)
    try:
        table.storage.create_if_absent(_timeline_path(table, inflight), data, durable=False)
        table.note_timeline_file(inflight.file_name(table.config.layout_version), True)
    except FileExistsError:
        pass  # a retried transition: inflight is only a marker of progress
    return inflight


def complete(table, instant: Instant, completion_time: str, data: bytes,
             timeline: "Timeline | None" = None) -> Instant:
    """Create the completed file (atomic, create-if-absent) and return the completed instant.

    The completed file's name carries the completion time, so create-if-absent alone cannot
    see an earlier completion under another completion time: the caller's timeline snapshot
    (taken under the table lock) is checked too, or the folder is listed when none is given.
    """
    done = instant.to(State.COMPLETED, completion_time)
    if timeline is None:
        timeline = table.timeline()
    current = timeline.get(instant.requested_time)
    if current is not None and current.is_completed:
        raise InstantStateError(f"instant {instant.requested_time} is already completed",
                                instant=instant.requested_time)
    try:
        table.storage.create_if_absent(_timeline_path(table, done), data)
    except FileExistsError:
        raise InstantStateError(f"instant {instant.requested_time} is already completed",
                                instant=instant.requested_time) from None
    table.note_timeline_file(done.file_name(table.config.layout_version), True)
    return done


def delete_pending_files(table, requested_time: str, names: Iterable[str]) -> None:
    """Remove a failed instant's requested/inflight files, inflight first (Hudi's order), so a
    crash in between leaves a requested-only instant that is still recognised as pending."""
    ordered = sorted(names, key=lambda n: 0 if n.endswith("inflight") else 1)
    for n in ordered:
        inst = parse_file_name(n)
        if inst is None or inst.requested_time != requested_time or inst.is_completed:
            continue
        table.storage.delete(table.storage.path(table.config.timeline_folder, n))
        table.note_timeline_file(n, False)


def pending_rollback_for(timeline, instant_time: str) -> Instant | None:
    """The pending rollback whose plan names ``instant_time``, if any: such an instant is
    presumed dead and must not be completed or taken over."""
    for inst in timeline.pending():
        if inst.action is not Action.ROLLBACK:
            continue
        path = timeline.table.storage.path(timeline.table.config.timeline_folder,
                                           Instant(inst.requested_time, Action.ROLLBACK,
                                                   State.REQUESTED).file_name())
        try:
            plan = RollbackPlan.decode(timeline.table.storage.read(path), path)
        except (CorruptMetadataError, FileNotFoundError):
            continue
        if plan.instant_time == instant_time:
            return inst
    return None
