"""The table's completed commits after a cursor, in the order they completed: what a watcher
polls to react to every writer (ours, Java Hudi's, the CLI's), not only to the ones it runs.

One poll costs one listing of the timeline folder (``Timeline.load`` parses only the names that
changed since the previous poll in this process); no instant's metadata is read here. A page is
bounded (``limit``): a watcher that was away while hundreds of commits landed catches up page by
page instead of reading them all at once.

The cursor is the last reported commit's ``<completion time>_<requested time>`` (the stem of its
completed file's name under table versions 8 and 9), so it orders the way commits completed
(every writer takes its completion time under the table lock) and names one commit exactly.
Version-6 timelines have no completion time: their requested time stands in for it.
:data:`BEGINNING` reports every commit on the active timeline.

What it cannot see: a commit archived (moved to the LSM history) before a poll found it, which
takes a watcher away for longer than the archival keeps (``hoodie.keep.min.commits``, default 20
commits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from airflow_hudi_occ.core.errors import TableNotFoundError
from airflow_hudi_occ.core.format.instant import Action, Instant
from airflow_hudi_occ.core.table.timeline import Timeline

#: the completed actions that change rows: writes, clustering and insert_overwrite
#: (replacecommit), and compaction (which completes as a commit)
COMMIT_ACTIONS: frozenset[str] = frozenset({Action.COMMIT.value, Action.DELTA_COMMIT.value,
                                            Action.REPLACE_COMMIT.value})
#: a cursor before every commit
BEGINNING = ""
#: the largest page a poll returns by default
DEFAULT_LIMIT = 100


@dataclass(frozen=True)
class CommitNotice:
    """One completed commit, as named on the timeline."""

    requested_time: str
    completion_time: str | None
    action: str

    @property
    def cursor(self) -> str:
        return f"{self.completion_time or self.requested_time}_{self.requested_time}"

    def to_json(self) -> dict:
        return {"instant": self.requested_time, "completion_time": self.completion_time,
                "action": self.action, "cursor": self.cursor}


@dataclass(frozen=True)
class CommitPage:
    """The commits after a cursor (at most ``limit``), the cursor after them, and whether more
    are waiting (poll again at once)."""

    commits: list[CommitNotice]
    cursor: str
    more: bool


def _key(cursor: str) -> tuple[str, str]:
    done, _, requested = cursor.partition("_")
    return done, requested


def _notice(inst: Instant) -> CommitNotice:
    return CommitNotice(inst.requested_time, inst.completion_time, inst.action.value)


def _commits(table, actions: Iterable[str]) -> list[CommitNotice]:
    wanted = set(actions)
    done = [i for i in Timeline.load(table) if i.is_completed and i.action.value in wanted]
    return sorted((_notice(i) for i in done), key=lambda n: _key(n.cursor))


def latest_cursor(table, actions: Iterable[str] = COMMIT_ACTIONS) -> str:
    """The cursor after the last completed commit (:data:`BEGINNING` on a table without one):
    where a watcher that should report only what comes next starts."""
    commits = _commits(table, actions)
    return commits[-1].cursor if commits else BEGINNING


def commits_after(table, cursor: str, *, limit: int = DEFAULT_LIMIT,
                  actions: Iterable[str] = COMMIT_ACTIONS) -> CommitPage:
    """The completed commits after ``cursor``, oldest first, at most ``limit`` of them."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")
    after = _key(cursor)
    new = [n for n in _commits(table, actions) if _key(n.cursor) > after]
    page = new[:limit]
    return CommitPage(page, page[-1].cursor if page else cursor, len(new) > limit)


def open_table(base_path: str, storage_options: dict | None = None):
    """The table at ``base_path``, or None while it does not exist yet (a watcher may start
    before the first writer creates it)."""
    from airflow_hudi_occ.core.table.table import Table

    try:
        return Table.open(base_path, storage_options or None)
    except TableNotFoundError:
        return None
