"""How many storage requests a commit makes, and how many while it holds the table lock (issue 43).

On an object store every request costs 20 to 50 ms, and the requests made under the table lock
set the ceiling of the whole table: whatever the number of writers, one commit's hold is paid
by every other writer. The target is at most 6 under the lock per single-row commit; the
figures here are what the code reaches, so a change that puts a request back under the lock
(or adds one to the commit) fails here. The requests are counted by the latency proxy in front
of the loopback S3 server (``testing/latency_proxy.py``: each request with its arrival time),
the lock's hold windows by the lock manager the writer is given; a request is under the lock
when it arrived inside a hold window.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.concurrency.locks import get_lock_provider
from airflow_hudi_occ.core.concurrency.locks.base import LockManager
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.latency_proxy import LatencyProxy
from airflow_hudi_occ.testing.s3 import S3Server, hudi_read_s3

#: issue 43's target: storage requests under the table lock per commit (p50)
UNDER_LOCK_TARGET = 6
#: what a single-row upsert into an existing partition makes in all today (issue 43 asks for
#: 15: docs/benchmarks.md "Scale" says where the other requests go and why they stay)
TOTAL_REACHED = 27


class HoldTimes(LockManager):
    """The table's lock manager, recording when each hold began and ended (wall clock, as the
    proxy stamps arrivals)."""

    def __init__(self, provider, config):
        super().__init__(provider, config)
        self.holds: list[tuple[float, float]] = []
        self._since = None

    def acquire(self) -> None:
        super().acquire()
        self._since = time.time()

    def release(self) -> None:
        self.holds.append((self._since, time.time()))
        super().release()


def _row(i: int) -> pa.Table:
    return pa.table({"id": pa.array([i], pa.int64()), "p": pa.array(["p0"]), "v": pa.array([f"v{i}"])})


def measure_commits(delay_ms: int, commits: int, warmup: int = 2) -> list[dict]:
    """Single-row upserts of new keys into one partition on the storage lock (RFC-91),
    metadata table as by default; per commit: requests in all, under the lock, per hold."""
    out = []
    with S3Server() as s3, LatencyProxy(s3.endpoint, delay_ms=delay_ms) as proxy:
        s3.create_bucket("tables")
        options = proxy.storage_options(s3.storage_options)
        table = Table.create("s3://tables/t", "t", record_key_fields=["id"], partition_fields=["p"],
                             storage_options=options)
        config = WriteConfig.from_options({"hoodie.write.lock.provider": "storage"})
        lock = HoldTimes(get_lock_provider(config.lock, base_path=table.base_uri, table_name=table.name,
                                           storage=table.storage), config.lock)
        writer = ArrowTableWriter(table, config, writer_id="requests", lock_manager=lock)
        for i in range(warmup + commits):
            proxy.events(reset=True)
            lock.holds.clear()
            writer.write(_row(i), "upsert")
            events = proxy.events(reset=True)
            if i < warmup:
                continue
            per_hold = [[e for e in events if a <= e["t"] <= b] for a, b in lock.holds]
            out.append({"requests": len(events), "holds": len(lock.holds),
                        "under_lock": sum(len(h) for h in per_hold),
                        "per_hold": [Counter(e["kind"] for e in h) for h in per_hold]})
        proxy.set_delay(0)
        assert hudi_read_s3(table.base_uri, options).num_rows == warmup + commits
    return out


def _check(rows: list[dict]) -> None:
    under = statistics.median(r["under_lock"] for r in rows)
    assert under <= UNDER_LOCK_TARGET, rows
    for r in rows:
        assert r["holds"] == 2, r  # begin and completion: the protocol's two holds
        begin, completion = r["per_hold"]
        # begin: the timeline (the new time's floor, the snapshot), the requested file, the heartbeat
        assert begin == {"list": 1, "put.if_none_match": 1, "put": 1}, r
        # completion: the timeline, hoodie.properties confirmed unchanged, the completed file
        assert completion == {"list": 1, "head": 1, "put.if_none_match": 1}, r
        assert r["requests"] <= TOTAL_REACHED, r


def test_a_single_row_commit_makes_six_requests_under_the_lock():
    _check(measure_commits(delay_ms=0, commits=3, warmup=1))


@pytest.mark.slow
def test_request_counts_hold_at_20_ms_a_request():
    """The bench's setting (bench/scale.py): 20 ms a request, 10 commits after 2 warm-up."""
    _check(measure_commits(delay_ms=20, commits=10))
