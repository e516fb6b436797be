"""core.inspection.diagnose on real tables: the verdicts the CLI renders, as data."""

from __future__ import annotations

import pyarrow as pa

from airflow_hudi_occ.core.commit.transaction import WriteTransaction
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.format.layout import FileGroupId
from airflow_hudi_occ.core.inspection.diagnose import (diagnose_conflicts, diagnose_early_check,
                                                      reconstruct_snapshot)
from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS

OPTS = FAST_WRITE_OPTIONS


def batch(ids, part, value="v", ts=1):
    return pa.table({"id": ids, "p": [part] * len(ids), "value": [value] * len(ids),
                     "ts": [ts] * len(ids)})


def only_file_id(table, partition):
    [fid] = {s.file_id for s in FileSystemView(table, table.timeline()).latest_file_slices()
             if s.partition == partition}
    return fid


def test_a_pending_write_overtaken_on_its_file_group_would_abort_and_a_disjoint_one_commit(table):
    cfg = WriteConfig.from_options(OPTS)
    w = ArrowTableWriter(table, cfg)
    w.write(batch([1], "a"), "upsert")
    fa = only_file_id(table, "a")
    doomed, fine = WriteTransaction(table, cfg), WriteTransaction(table, cfg)
    try:
        doomed.begin()
        doomed.create_marker("a", f"{fa}_0-0-0_{doomed.instant_time}.parquet", "MERGE")
        fine.begin()
        fine.create_marker("c", f"cccccccc-0000-0000-0000-000000000001-0_0-0-0_{fine.instant_time}.parquet")
        winner = w.write(batch([1], "a", value="new", ts=2), "upsert")
        tl = table.timeline()

        verdict = diagnose_conflicts(table, tl, cfg, tl.get(doomed.instant_time))
        assert verdict["would_abort"] is True
        assert [c["instant"] for c in verdict["conflicts"]] == [winner.instant.requested_time]
        assert verdict["reasons"][0]["file_groups"] == [str(FileGroupId("a", fa))]

        verdict = diagnose_conflicts(table, tl, cfg, tl.get(fine.instant_time))
        assert verdict["would_abort"] is False and verdict["reasons"] == []
        assert winner.instant.requested_time in [c["instant"] for c in verdict["candidates"]]

        # the same harmless write, judged for the file group it has not touched yet
        verdict = diagnose_conflicts(table, tl, cfg, tl.get(fine.instant_time),
                                     file_groups=[FileGroupId("a", fa)])
        assert verdict["would_abort"] is True and verdict["file_groups_source"] == "given"
    finally:
        for tx in (doomed, fine):
            tx.heartbeat.stop(delete=False)


def test_early_check_stops_only_the_later_of_two_live_writers(table):
    cfg = WriteConfig.from_options({**OPTS, "hoodie.write.concurrency.early.conflict.detection.enable": "true"})
    fid = "bbbbbbbb-0000-0000-0000-000000000001-0"
    early, late = WriteTransaction(table, cfg), WriteTransaction(table, cfg)
    try:
        early.begin()
        early.create_marker("a", f"{fid}_0-0-0_{early.instant_time}.parquet")
        late.begin()
        tl = table.timeline()
        stopped = diagnose_early_check(table, tl, cfg, late.instant_time, "a", fid)
        assert stopped["stopped"] is True and stopped["other_instant"] == early.instant_time
        assert stopped["kind"] == "markers" and stopped["conflicting_file_groups"] == [f"a/{fid}"]
        passes = diagnose_early_check(table, tl, cfg, early.instant_time, "a", fid)
        assert passes["stopped"] is False and passes["candidates"] == []
    finally:
        for tx in (early, late):
            tx.heartbeat.stop(delete=False)


def test_snapshot_rebuilt_from_completion_times(table):
    cfg = WriteConfig.from_options(OPTS)
    w = ArrowTableWriter(table, cfg)
    first = w.write(batch([1], "a"), "upsert")
    tx = WriteTransaction(table, cfg)
    try:
        tx.begin()
        second = w.write(batch([2], "b"), "upsert")  # completes after tx began
        last, pending, completed, exact = reconstruct_snapshot(table.timeline(), tx.instant_time)
        assert exact and last.requested_time == first.instant.requested_time
        assert completed == {first.instant.requested_time}
        assert second.instant.requested_time not in completed | pending
    finally:
        tx.heartbeat.stop(delete=False)
