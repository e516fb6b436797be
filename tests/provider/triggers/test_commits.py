"""``HudiCommitTrigger`` against real tables: its ``run()`` yields one event per completed
commit, oldest first, whoever made it (our core writer in this process, the ``hudi-occ`` CLI in
another); after a restart it resumes at the cursor kept in the asset state store (a dict stands
in for Airflow's store, the one seam here), so nothing is reported twice and nothing made while
it was down is lost. ``test_commit_watcher_e2e.py`` (slow) runs it in a real triggerer."""

import asyncio
import os
import subprocess
import sys

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider.assets import table_uri
from airflow_hudi_occ.provider.triggers.commits import CURSOR_KEY, HudiCommitTrigger

from ..conftest import REPO

WAIT_S = 60  # bound on every wait for an event (a loaded machine); never asserted as a time


class DictStore:
    """The asset state store's async accessors (Airflow's lives in the metadata database)."""

    def __init__(self):
        self.values: dict = {}

    async def aget(self, key, default=None):
        return self.values.get(key, default)

    async def aset(self, key, value):
        self.values[key] = value


def _write(table, opts, ids):
    ArrowTableWriter(table, WriteConfig.from_options(opts)).write(
        pa.Table.from_pylist([{"id": i, "p": "a", "ts": i, "v": str(i)} for i in ids]), "insert")


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "airflow_hudi_occ.cli.app", *args], capture_output=True,
                          text=True, timeout=300, check=True,
                          env={**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")})


class Watch:
    """The trigger's run() drained into a queue by a task, as the triggerer drains it."""

    def __init__(self, trigger):
        self.trigger = trigger
        self.events: asyncio.Queue = asyncio.Queue()
        self.task = asyncio.create_task(self._drain())

    async def _drain(self):
        async for ev in self.trigger.run():
            await self.events.put(ev.payload)

    async def next(self):
        return await asyncio.wait_for(self.events.get(), WAIT_S)

    async def started(self, store):
        for _ in range(WAIT_S * 20):  # the first poll stores where it starts
            if CURSOR_KEY in store.values or self.task.done():
                break
            await asyncio.sleep(0.05)
        assert not self.task.done(), self.task.exception()

    async def stop(self):
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task


def test_every_commit_once_across_a_restart_including_the_clis(table, fast_options):
    async def scenario():
        _write(table, fast_options, [1])  # before the watcher: not reported (start="latest")
        store = DictStore()
        trig = HudiCommitTrigger(table.base_uri, poll_interval=0.05)
        trig.asset_state_store = store
        w = Watch(trig)
        await w.started(store)
        await asyncio.to_thread(_write, table, fast_options, [2, 3])
        await asyncio.to_thread(_write, table, fast_options, [4])
        first, second = await w.next(), await w.next()
        await w.stop()
        assert w.events.empty()
        # the triggerer is down: a plain writer and the CLI (another process) commit
        await asyncio.to_thread(_write, table, fast_options, [5])
        opts = [a for k, v in fast_options.items() for a in ("--option", f"{k}={v}")]
        await asyncio.to_thread(_cli, "cluster", "schedule", table.base_uri, *opts)
        await asyncio.to_thread(_cli, "cluster", "run", table.base_uri, *opts)
        restarted = HudiCommitTrigger(table.base_uri, poll_interval=0.05)
        restarted.asset_state_store = store
        w2 = Watch(restarted)
        third, fourth = await w2.next(), await w2.next()
        await asyncio.sleep(0.5)  # ten more polls: nothing else
        await w2.stop()
        assert w2.events.empty()
        return first, second, third, fourth, store

    first, second, third, fourth, store = asyncio.run(scenario())
    done = [i for i in Table.open(table.base_uri).timeline().completed_by_completion_time()
            if i.action.value in ("commit", "replacecommit")]
    assert len(done) == 5
    assert [e["instant"] for e in (first, second, third, fourth)] == [i.requested_time for i in done[1:]]
    assert first["table_uri"] == table_uri(table.base_uri) and first["action"] == "commit"
    assert first["operation"] == "insert" and first["rows_written"] == 2 and second["rows_written"] == 1
    assert first["completion_time"] == done[1].completion_time
    assert fourth["action"] == "replacecommit" and fourth["operation"] == "cluster"
    assert store.values[CURSOR_KEY] == fourth["cursor"]


def test_a_table_created_after_the_watcher_started_reports_its_first_commit(tmp_path, fast_options):
    path = str(tmp_path / "later")

    async def scenario():
        store = DictStore()
        trig = HudiCommitTrigger(path, poll_interval=0.05)
        trig.asset_state_store = store
        w = Watch(trig)
        await w.started(store)
        # kept before the table exists: a restart now still reports the table's first commit
        assert store.values[CURSOR_KEY] == ""
        t = await asyncio.to_thread(Table.create, path, "later", record_key_fields=["id"],
                                    partition_fields=["p"], precombine_field="ts")
        await asyncio.to_thread(_write, t, fast_options, [1])
        ev = await w.next()
        await w.stop()
        return t, ev

    t, ev = asyncio.run(scenario())
    assert ev["instant"] == t.timeline().completed_writes()[0].requested_time


def test_arguments_are_checked_and_serialised():
    trig = HudiCommitTrigger("/data/orders", poll_interval=5, start="earliest", limit=10)
    path, kwargs = trig.serialize()
    assert path == "airflow_hudi_occ.provider.triggers.commits.HudiCommitTrigger"
    again = HudiCommitTrigger(**kwargs)
    assert again.serialize() == (path, kwargs) and again.table_uri == "hudi://file/data/orders"
    for bad in ({"start": "now"}, {"poll_interval": 0}, {"limit": 0}):
        with pytest.raises(ValueError):
            HudiCommitTrigger("/data/orders", **bad)
