"""Write windows and the early-conflict check, on real tables with real transactions, and
the table-service rollback. The Spark/Airflow end-to-end versions are in test_dags_e2e.py."""

import asyncio
import json

import pytest

from airflow_hudi_occ.core.concurrency import abort_signal
from airflow_hudi_occ.core.config import HeartbeatConfig, WriteConfig
from airflow_hudi_occ.core.errors import EarlyConflictError
from airflow_hudi_occ.core.format.metadata import WriteStat
from airflow_hudi_occ.core.commit.transaction import WriteTransaction
from airflow_hudi_occ.provider import write_window as ww
from airflow_hudi_occ.provider.triggers.hudi_occ import HudiEarlyConflictTrigger
from airflow_hudi_occ.provider.conflict_watch import check_instant

HB = HeartbeatConfig(1000, 2)


def begin(table, options, groups):
    tx = WriteTransaction(table, WriteConfig.from_options(options))
    tx.begin()
    tx.start_inflight(planned_file_groups=groups)
    for p, f in groups:
        tx.create_marker(p, f"{f}_0-1-0_{tx.instant_time}.parquet")
    return tx


def stats(groups, t):
    return [WriteStat(file_id=f, path=f"{p}/{f}_0-1-0_{t}.parquet", partition_path=p, num_writes=1)
            for p, f in groups]


def test_window_waits_for_live_writers_and_older_requests_then_newer_writers_yield(table, fast_options):
    tx = begin(table, fast_options, [("p1", "fg1")])
    backfill = {"dag_id": "backfill", "run_id": "r1", "task_id": "wait"}
    req = ww.new_request(table, ["p1", "p2"], backfill)
    granted, why = ww.try_grant(table, req, HB)
    assert not granted and tx.instant_time in why["writers"]
    # a newer request of another run waits behind the older one, even with no writers left
    other = ww.new_request(table, ["p2"], {"dag_id": "backfill2", "run_id": "r9", "task_id": "wait"})
    # new ingestion writes on those partitions yield to the waiting backfill; disjoint ones do not
    ingest = {"dag_id": "ingest", "run_id": "r2", "task_id": "upsert"}
    assert [r.request_id for r in ww.yielding_to(table, ["p1"], ingest)] == [req.request_id]
    assert ww.yielding_to(table, ["p3"], ingest) == []
    assert len(ww.yielding_to(table, None, ingest)) == 2  # unknown partitions: yield to all
    tx.commit(stats([("p1", "fg1")], tx.instant_time))
    granted, why = ww.try_grant(table, req, HB)
    assert granted, why
    assert not ww.try_grant(table, other, HB)[0]  # the older request holds p2
    assert ww.release_owned(table, {"dag_id": "backfill", "run_id": "r1"}) == [req.request_id]
    assert ww.try_grant(table, other, HB)[0]


def test_dead_requests_expire(table):
    req = ww.new_request(table, ["p1"], {"dag_id": "d", "run_id": "r", "task_id": "t"}, ttl_s=5, now=1000.0)
    assert ww.requests(table, now=1004.0) and not ww.requests(table, now=1006.0)
    assert req.alive(1004.0) and not req.alive(1006.0)


def test_trigger_aborts_a_write_that_a_completed_write_has_doomed(table, fast_options):
    slow = begin(table, fast_options, [("p1", "fg1"), ("p2", "fg2")])
    assert check_instant(table.base_uri, slow.instant_time, fast_options) is None
    fast = begin(table, fast_options, [("p2", "fg2")])
    fast.commit(stats([("p2", "fg2")], fast.instant_time))
    trig = HudiEarlyConflictTrigger(table.base_uri, slow.instant_time, fast_options, poll_interval=0.1)

    async def first():
        async for ev in trig.run():
            return ev
    ev = asyncio.run(asyncio.wait_for(first(), 30)).payload
    assert ev["status"] == "conflict" and ev["other_instant"] == fast.instant_time
    assert len(ev["file_groups"]) == 1 and "fg2" in str(ev["file_groups"])  # not fg1: no overlap there
    reason = json.loads(abort_signal.abort_reason(table, slow.instant_time)["reason"])
    assert reason["error"] == "EarlyConflictError" and reason["other_instant"] == fast.instant_time
    with pytest.raises(EarlyConflictError) as stopped:  # the writer stops, naming the winner
        slow.create_marker("p1", f"fg3_0-1-0_{slow.instant_time}.parquet")
    assert stopped.value.other_instant == fast.instant_time
    slow.abort(reason="test")
    assert check_instant(table.base_uri, slow.instant_time, fast_options)["status"] == "gone"


def test_trigger_leaves_a_write_alone_when_only_a_later_writer_overlaps(table, fast_options):
    first = begin(table, fast_options, [("p1", "fg1")])
    later = begin(table, fast_options, [("p1", "fg1")])
    assert check_instant(table.base_uri, first.instant_time, fast_options) is None  # later loses, not first
    assert check_instant(table.base_uri, later.instant_time, fast_options)["status"] == "conflict"
    first.commit(stats([("p1", "fg1")], first.instant_time))
    assert check_instant(table.base_uri, first.instant_time, fast_options)["status"] == "completed"
    later.abort()


def test_trigger_serializes_to_itself():
    t = HudiEarlyConflictTrigger("/t", "20240101000000000", {"a": "1"}, poll_interval=3)
    path, kwargs = t.serialize()
    assert path == "airflow_hudi_occ.provider.triggers.hudi_occ.HudiEarlyConflictTrigger"
    assert HudiEarlyConflictTrigger(**kwargs).serialize() == (path, kwargs)
