"""Instants and the timeline's file-naming scheme, as a codec.

An instant is one action on the table, identified by its *requested time*. Its state lives
in the names of the files under the timeline folder; :func:`parse_file_name` and
:meth:`Instant.file_name` are inverse functions (tested as a round trip), for both timeline
layouts:

- layout 2 (table version 8 and 9): ``.hoodie/timeline/``; completed files are named
  ``<requested>_<completion>.<action>``;
- layout 1 (table version 6): ``.hoodie/``; completed files are ``<requested>.<action>`` and
  carry no completion time.

A pending commit's inflight file is ``<t>.inflight`` (no action), as Hudi writes it; every
other action writes ``<t>.<action>.inflight``. Compaction is requested and inflight as
``compaction`` and completes as ``commit``.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass


class Action(str, enum.Enum):
    COMMIT = "commit"
    DELTA_COMMIT = "deltacommit"
    REPLACE_COMMIT = "replacecommit"
    CLUSTERING = "clustering"
    COMPACTION = "compaction"
    LOG_COMPACTION = "logcompaction"
    CLEAN = "clean"
    ROLLBACK = "rollback"
    SAVEPOINT = "savepoint"
    RESTORE = "restore"
    INDEXING = "indexing"

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value


class State(str, enum.Enum):
    REQUESTED = "requested"
    INFLIGHT = "inflight"
    COMPLETED = "completed"

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value


#: Actions whose completed instants write data files (the "commits timeline").
WRITE_ACTIONS = frozenset({Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT,
                           Action.CLUSTERING, Action.COMPACTION, Action.LOG_COMPACTION})

#: Actions that complete under another action's name.
_COMPLETES_AS = {Action.COMPACTION: Action.COMMIT, Action.LOG_COMPACTION: Action.DELTA_COMMIT,
                 Action.CLUSTERING: Action.REPLACE_COMMIT}

_NAME_RE = re.compile(r"^(\d{14}|\d{17})(?:_(\d{14}|\d{17}))?\.([a-z]+)(?:\.([a-z]+))?$")


@dataclass(frozen=True, order=True)
class Instant:
    """An instant as the timeline shows it. Ordered by requested time, then action, state."""

    requested_time: str
    action: Action
    state: State
    completion_time: str | None = None

    # -- predicates -------------------------------------------------------------------------

    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED

    @property
    def is_pending(self) -> bool:
        return self.state is not State.COMPLETED

    @property
    def is_write(self) -> bool:
        return self.action in WRITE_ACTIONS

    @property
    def is_table_service(self) -> bool:
        """Clustering, compaction, clean and rollback: writers that yield under prefer-writer."""
        return self.action in (Action.CLUSTERING, Action.COMPACTION, Action.LOG_COMPACTION,
                               Action.CLEAN, Action.ROLLBACK)

    @property
    def completed_action(self) -> Action:
        return _COMPLETES_AS.get(self.action, self.action)

    # -- transitions ------------------------------------------------------------------------

    def to(self, state: State, completion_time: str | None = None) -> "Instant":
        action = self.completed_action if state is State.COMPLETED else self.action
        return Instant(self.requested_time, action, state, completion_time)

    # -- codec ------------------------------------------------------------------------------

    def file_name(self, layout_version: int = 2) -> str:
        t, a = self.requested_time, self.action.value
        if self.state is State.REQUESTED:
            return f"{t}.{a}.requested"
        if self.state is State.INFLIGHT:
            return f"{t}.inflight" if self.action is Action.COMMIT else f"{t}.{a}.inflight"
        if layout_version >= 2:
            if not self.completion_time:
                raise ValueError(f"completed instant {t} needs a completion time in layout 2")
            return f"{t}_{self.completion_time}.{self.completed_action.value}"
        return f"{t}.{self.completed_action.value}"

    def __str__(self) -> str:
        c = f"->{self.completion_time}" if self.completion_time else ""
        return f"{self.requested_time}.{self.action.value}.{self.state.value}{c}"


def parse_file_name(name: str) -> Instant | None:
    """The instant a timeline file name stands for, or None for anything else in the folder.

    Unknown actions (other engines' extensions, ``hoodie.properties``, temp files) are not an
    error: readers skip what they do not know, as Hudi does.
    """
    m = _NAME_RE.match(name)
    if not m:
        return None
    requested, completion, first, second = m.groups()
    if second is None:
        if first == "inflight":
            return Instant(requested, Action.COMMIT, State.INFLIGHT)
        try:
            action = Action(first)
        except ValueError:
            return None
        return Instant(requested, action, State.COMPLETED, completion)
    if completion is not None:
        return None
    try:
        action = Action(first)
        state = State(second)
    except ValueError:
        return None
    if state is State.COMPLETED:
        return None
    return Instant(requested, action, state)

