"""An event trigger that fires for every completed commit of a Hudi table, whoever wrote it.

The operators' ``hudi://`` outlet events (``provider/assets.py``) only tell of commits made by
Airflow tasks. A table is also written by Java Hudi jobs, the ``hudi-occ`` CLI (clustering,
compaction) and plain Python writers; :class:`HudiCommitTrigger` watches the table itself, so a
DAG scheduled on the asset reacts to any writer::

    orders = Asset(uri="hudi://s3/lake/orders", name="hudi://s3/lake/orders", watchers=[
        AssetWatcher(name="orders_commits", trigger=HudiCommitTrigger("s3://lake/orders"))])
    with DAG("after_any_commit", schedule=[orders]): ...

or, the same, ``schedule=[watched_table_asset("s3://lake/orders")]`` (``examples/on_any_commit.py``).

How: the triggerer runs :meth:`HudiCommitTrigger.run`, which polls
``core/table/commit_feed`` (one listing of the timeline folder per poll, in a thread so the
event loop never waits on storage) and yields one ``TriggerEvent`` per completed commit, oldest
first; Airflow records it as an event of every asset the trigger watches, with extra
``{"from_trigger": true, "payload": <the commit>}``. The payload names the table, the instant,
its completion time and action, and the counts of its metadata (rows, bytes, files, the
operation), as the operators' own events do.

The cursor (the last commit reported) is kept in the watched asset's state store (Airflow 3.3),
so a triggerer restart resumes after it: no commit is reported twice, and none made while the
triggerer was down is lost (unless archived meanwhile, ``commit_feed``). The cursor is saved once
the triggerer has taken the event; an event taken but not yet stored in the database when the
triggerer dies is not reported again. A new watcher starts after the latest commit
(``start="latest"``), or at the beginning of the active timeline (``start="earliest"``).

The trigger's arguments are stored in Airflow's database: pass no credentials in
``storage_options`` (the triggerer's environment provides them, as for any fsspec client).
A commit of an operator is also an outlet event of the operator's task: a DAG scheduled on an
asset that both an operator writes and this trigger watches sees such a commit twice (read the
``instant`` of each event, as ``examples/on_any_commit.py`` does).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, AsyncIterator, Iterable

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_hudi_occ.core.errors import StorageUnavailableError
from airflow_hudi_occ.core.table.commit_feed import (BEGINNING, COMMIT_ACTIONS, DEFAULT_LIMIT, CommitNotice,
                                                     commits_after, latest_cursor, open_table)
from airflow_hudi_occ.provider.assets import base_path, metadata_summary, table_uri
from airflow_hudi_occ.provider.version_compat import Asset, AssetWatcher

log = logging.getLogger(__name__)

#: the key of the cursor in the watched asset's state store
CURSOR_KEY = "hudi_occ.commit_cursor"
STARTS = ("latest", "earliest")


class HudiCommitTrigger(BaseEventTrigger):
    """Fires once per completed commit of ``table_path`` (module docstring).

    :param table_path: the table's base path or ``hudi://`` URI (a table not created yet is
        waited for)
    :param storage_options: fsspec options of the table's store, without credentials
    :param poll_interval: seconds between two listings of the timeline
    :param start: ``"latest"`` (report commits after the newest one at the first poll) or
        ``"earliest"`` (every commit on the active timeline); a stored cursor wins over both
    :param limit: commits per poll at most (more are reported at the next poll, at once)
    :param actions: the completed actions reported (default: commit, deltacommit, replacecommit)
    :param with_stats: read each commit's metadata for the payload's counts (one read each)
    """

    def __init__(self, table_path: str, *, storage_options: dict | None = None,
                 poll_interval: float = 30.0, start: str = "latest", limit: int = DEFAULT_LIMIT,
                 actions: Iterable[str] | None = None, with_stats: bool = True, **kwargs):
        super().__init__(**kwargs)
        if start not in STARTS:
            raise ValueError(f"HudiCommitTrigger start={start!r} is not one of {STARTS}")
        if poll_interval <= 0 or limit < 1:
            raise ValueError("HudiCommitTrigger needs poll_interval > 0 and limit >= 1")
        self.table_path = table_path
        self.storage_options = dict(storage_options or {})
        self.poll_interval = float(poll_interval)
        self.start = start
        self.limit = int(limit)
        self.actions = sorted(actions) if actions is not None else sorted(COMMIT_ACTIONS)
        self.with_stats = with_stats
        self.table_uri = table_uri(table_path)  # a path that names no table fails the DAG's import
        self.cursor: str | None = None  # where this instance is: the last commit reported
        self._memory_only = False

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"table_path": self.table_path, "storage_options": self.storage_options,
                 "poll_interval": self.poll_interval, "start": self.start, "limit": self.limit,
                 "actions": self.actions, "with_stats": self.with_stats})

    # -- the cursor in the asset's state store ----------------------------------------------

    def _store(self):
        """The watched asset's state store, or None (before Airflow 3.3, outside a triggerer,
        or when the trigger watches several assets): the cursor then lives in memory only."""
        return None if self._memory_only else getattr(self, "asset_state_store", None)

    def _shared(self, e: ValueError) -> None:
        # the accessors refuse get/set without naming the asset when there are several
        self._memory_only = True
        log.warning("HudiCommitTrigger on %s: no cursor in the asset state store (%s); it is kept "
                    "in memory, and a triggerer restart starts at %r", self.table_path, e, self.start)

    async def _load_cursor(self) -> str | None:
        store = self._store()
        if store is None:
            return None
        try:
            value = await store.aget(CURSOR_KEY)
        except ValueError as e:
            self._shared(e)
            return None
        return value if isinstance(value, str) else None

    async def _save_cursor(self, cursor: str) -> None:
        self.cursor = cursor
        store = self._store()
        if store is None:
            return
        try:
            await store.aset(CURSOR_KEY, cursor)
        except ValueError as e:
            self._shared(e)

    # -- the poll loop ----------------------------------------------------------------------

    def _payload(self, table, notice: CommitNotice) -> dict:
        out: dict[str, Any] = {"table_uri": self.table_uri, "table_path": self.table_path,
                               **notice.to_json()}
        if self.with_stats:
            try:
                summary = metadata_summary(table, notice.requested_time)
            except Exception as e:  # noqa: BLE001 - the commit happened; only its counts are lost
                out["metadata_error"] = f"{type(e).__name__}: {e}"
            else:
                summary.pop("schema", None)
                if summary.get("operation_type"):
                    out["operation"] = str(summary["operation_type"]).lower()
                out.update({k: v for k, v in summary.items() if v is not None})
        return out

    def _poll(self, table, cursor: str | None):
        """One poll (in a thread): the table (opened once it exists), the cursor to start from
        and the page of commits after it."""
        if table is None:
            table = open_table(base_path(self.table_uri), self.storage_options)
            if table is None:
                # everything a writer commits once it creates the table is new
                return None, (BEGINNING if cursor is None else cursor), None
        if cursor is None:
            cursor = latest_cursor(table, self.actions) if self.start == "latest" else BEGINNING
        page = commits_after(table, cursor, limit=self.limit, actions=self.actions)
        payloads = [(n.cursor, self._payload(table, n)) for n in page.commits]
        return table, cursor, (payloads, page.more)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        cursor = self.cursor if self.cursor is not None else await self._load_cursor()
        table = None
        waiting_for_table = unavailable = False
        while True:
            try:
                table, cursor, result = await asyncio.to_thread(self._poll, table, cursor)
            except StorageUnavailableError as e:  # bounded by the store's timeouts; try again later
                if not unavailable:
                    log.warning("HudiCommitTrigger: the store of %s did not answer (%s); polling "
                                "again every %.0f s", self.table_path, e, self.poll_interval)
                unavailable = True
                await asyncio.sleep(self.poll_interval)
                continue
            unavailable = False
            if self.cursor != cursor:  # where a restart resumes, even before the first commit
                await self._save_cursor(cursor)
            if result is None:
                if not waiting_for_table:
                    log.info("HudiCommitTrigger: no table at %s yet; polling every %.0f s until a "
                             "writer creates it", self.table_path, self.poll_interval)
                waiting_for_table = True
                await asyncio.sleep(self.poll_interval)
                continue
            payloads, more = result
            for after, payload in payloads:
                yield TriggerEvent(payload)
                cursor = after
                await self._save_cursor(after)
            if not more:
                await asyncio.sleep(self.poll_interval)


def watched_table_asset(table_path: str, *, name: str | None = None, watcher_name: str | None = None,
                        **trigger_kwargs) -> Asset:
    """The ``hudi://`` asset of the table at ``table_path`` with a :class:`HudiCommitTrigger`
    watching it: ``schedule=[watched_table_asset("/data/lake/orders")]`` runs a DAG after every
    commit of any writer. ``trigger_kwargs`` go to the trigger (``poll_interval``, ``start``...).
    No I/O: the table may not exist yet when the DAG is parsed."""
    uri = table_uri(table_path)
    trigger = HudiCommitTrigger(table_path, **trigger_kwargs)
    return Asset(uri=uri, name=name or uri,
                 watchers=[AssetWatcher(name=watcher_name or f"hudi_occ_commits:{uri}", trigger=trigger)])
