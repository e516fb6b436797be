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

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterable, Iterator

from .errors import CorruptMetadataError, InstantStateError
from .instant import Action, Instant, State, parse_file_name
from .metadata import CommitMetadata, RequestedReplaceMetadata

_STATE_RANK = {State.REQUESTED: 0, State.INFLIGHT: 1, State.COMPLETED: 2}

_CACHE_LOCK = threading.Lock()
_META_CACHE: "OrderedDict[tuple[str, str], CommitMetadata]" = OrderedDict()
_META_CACHE_SIZE = 4096


@dataclass(frozen=True)
class TimelineEntry:
    """An instant with every file it has on the timeline folder."""

    instant: Instant
    files: tuple[str, ...]


class Timeline:
    def __init__(self, table, entries: list[TimelineEntry]):
        self.table = table
        self._entries = entries
        self._by_time = {e.instant.requested_time: e for e in entries}

    @classmethod
    def load(cls, table) -> "Timeline":
        names = table.storage.list_names(table.timeline_dir)
        by_time: dict[str, list[tuple[Instant, str]]] = {}
        for name in names:
            inst = parse_file_name(name)
            if inst is None:
                continue
            by_time.setdefault(inst.requested_time, []).append((inst, name))
        entries = []
        for t, items in by_time.items():
            items.sort(key=lambda x: _STATE_RANK[x[0].state])
            latest = items[-1][0]
            if latest.state is not State.COMPLETED:
                # a pending commit's inflight file has no action; take it from the requested file
                actions = [i.action for i, _ in items if i.state is State.REQUESTED]
                if actions and latest.action is Action.COMMIT and actions[0] is not Action.COMMIT:
                    latest = Instant(t, actions[0], latest.state)
            entries.append(TimelineEntry(latest, tuple(n for _, n in items)))
        entries.sort(key=lambda e: e.instant.requested_time)
        return cls(table, entries)

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
        return [i for i in self if i.is_pending]

    def completed_writes(self) -> list[Instant]:
        return [i for i in self if i.is_completed and i.is_write]

    def pending_writes(self) -> list[Instant]:
        return [i for i in self if i.is_pending and i.is_write]

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
        best = None
        for e in self._entries:
            for t in (e.instant.requested_time, e.instant.completion_time):
                if t and len(t) == 17 and (best is None or t > best):
                    best = t
        return best

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


# --- writing the state machine ---------------------------------------------------------------


def _timeline_path(table, instant: Instant) -> str:
    return table.storage.path(table.config.timeline_folder, instant.file_name(table.config.layout_version))


def create_requested(table, instant: Instant, data: bytes = b"") -> None:
    table.require_writable()
    req = Instant(instant.requested_time, instant.action, State.REQUESTED)
    try:
        table.storage.create_if_absent(_timeline_path(table, req), data)
    except FileExistsError:
        raise InstantStateError(f"instant {instant.requested_time} already exists on the timeline",
                                instant=instant.requested_time,
                                remedy="instant times must be unique: generate a new one under "
                                       "the table lock") from None


def transition_to_inflight(table, instant: Instant, data: bytes = b"") -> Instant:
    inflight = Instant(instant.requested_time, instant.action, State.INFLIGHT)
    try:
        table.storage.create_if_absent(_timeline_path(table, inflight), data)
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
        timeline = Timeline.load(table)
    current = timeline.get(instant.requested_time)
    if current is not None and current.is_completed:
        raise InstantStateError(f"instant {instant.requested_time} is already completed",
                                instant=instant.requested_time)
    try:
        table.storage.create_if_absent(_timeline_path(table, done), data)
    except FileExistsError:
        raise InstantStateError(f"instant {instant.requested_time} is already completed",
                                instant=instant.requested_time) from None
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
