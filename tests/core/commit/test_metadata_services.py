"""The metadata table's services after a commit (core/commit/metadata_services.py): run under
the commit's lock in Java's order, and a failure among them never fails the commit."""

from __future__ import annotations

import logging

from airflow_hudi_occ.core.commit import metadata_services
from airflow_hudi_occ.core.commit.metadata_services import run_metadata_table_services
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.concurrency.locks import table_lock_manager
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.format.instant_time import InstantTimeGenerator
from airflow_hudi_occ.core.table.metadata_compaction import deltacommits_since_compaction, open_metadata_table
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import hudi_read
from tests.core.table.test_metadata_commit import MAINTAIN, files_only_v9
from tests.core.table.test_metadata_compaction import our_base_files
from tests.core.table.test_metadata_table import _v9_rows


def test_a_failing_service_leaves_the_commit_standing_and_the_next_commit_runs_it(tmp_path, fast_options,
                                                                                 monkeypatch, caplog):
    path = files_only_v9(tmp_path)
    before = hudi_read(str(path))
    trigger = deltacommits_since_compaction(open_metadata_table(Table.open(str(path))).timeline()) + 1
    opts = {**fast_options, **MAINTAIN, "hoodie.metadata.compact.max.delta.commits": str(trigger)}

    def broken(*a, **kw):
        raise OSError("the store went away mid-compaction")
    monkeypatch.setattr(metadata_services, "compact_if_needed", broken)  # the unit seam
    with caplog.at_level(logging.WARNING):
        ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(opts)).write(_v9_rows(before, [("A", "us")]))
    assert "the store went away" in caplog.text and "the commit stands" in caplog.text
    assert "A" in hudi_read(str(path)).column("txn_id").to_pylist()
    assert our_base_files(path) == [] and not Table.open(str(path)).timeline().pending()

    monkeypatch.undo()
    ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(opts)).write(_v9_rows(before, [("B", "us")]))
    assert len(our_base_files(path)) == 1  # the trigger still held: compacted now
    assert {"A", "B"} <= set(hudi_read(str(path)).column("txn_id").to_pylist())


def test_the_services_report_what_they_did_under_the_lock(tmp_path, fast_options):
    path = files_only_v9(tmp_path)
    table = Table.open(str(path))
    config = WriteConfig.from_options({**fast_options, **MAINTAIN, "hoodie.metadata.compact.max.delta.commits": "1"})
    gen = InstantTimeGenerator(0)
    lm = table_lock_manager(table, config)
    with lm.locked():
        floor = max(table.timeline().latest_time(), open_metadata_table(table).timeline().latest_time())
        result = run_metadata_table_services(table, config, lm, lambda: gen.new_time(floor=floor))
    assert result.compacted and result.finished == [] and result.cleaned is None
    assert our_base_files(path) == [f"files-0000-0_0-0-0_{result.compacted}.hfile"]
    with lm.locked():  # nothing new since: nothing to do
        again = run_metadata_table_services(table, config, lm, lambda: gen.new_time(floor=floor))
    assert again.to_json() == {"finished": [], "cleaned": None, "compacted": None, "archived": []}


def _services_while_another_writer_waits(table, config, waiting: bool):
    """Run the services under the table lock (in-process), with another writer of the same
    lock blocked behind the holder when ``waiting``."""
    import threading
    import time
    gen = InstantTimeGenerator(0)
    lm, other = table_lock_manager(table, config), table_lock_manager(table, config)
    with lm.locked():
        if waiting:
            queued = threading.Thread(target=lambda: (other.acquire(), other.release()))
            queued.start()
            deadline = time.monotonic() + 10
            while lm.others_waiting() != 1:
                assert time.monotonic() < deadline, "the other writer never queued"
                time.sleep(0.01)
        floor = max(table.timeline().latest_time(), open_metadata_table(table).timeline().latest_time())
        result = run_metadata_table_services(table, config, lm, lambda: gen.new_time(floor=floor))
    if waiting:
        queued.join(10)
    return result


def test_a_due_compaction_is_put_off_while_writers_queue_for_the_lock_up_to_twice_the_trigger(
        tmp_path, fast_options, caplog):
    """Issue 43: the metadata table's compaction is the longest hold of the table (7.45 s at
    10,000 partitions), so while another writer waits for the lock a due compaction waits for a
    commit nobody queues behind; once twice the trigger's deltacommits piled up, it runs anyway."""
    path = files_only_v9(tmp_path)
    table = Table.open(str(path))
    piled = deltacommits_since_compaction(open_metadata_table(table).timeline())
    assert piled >= 2, piled
    due = {**fast_options, **MAINTAIN, "hoodie.write.lock.provider": "inprocess"}
    config = WriteConfig.from_options({**due, "hoodie.metadata.compact.max.delta.commits": str(piled)})
    with caplog.at_level(logging.INFO):
        put_off = _services_while_another_writer_waits(table, config, waiting=True)
    assert put_off.compacted is None and our_base_files(path) == []
    assert "put off: other writers wait for the lock" in caplog.text
    quiet = _services_while_another_writer_waits(table, config, waiting=False)
    assert quiet.compacted and our_base_files(path) == [f"files-0000-0_0-0-0_{quiet.compacted}.hfile"]

    path = files_only_v9(tmp_path / "limit")
    table = Table.open(str(path))
    config = WriteConfig.from_options({**due, "hoodie.metadata.compact.max.delta.commits": str(piled // 2)})
    at_limit = _services_while_another_writer_waits(table, config, waiting=True)
    assert at_limit.compacted, "at twice the trigger the compaction runs whoever waits"
