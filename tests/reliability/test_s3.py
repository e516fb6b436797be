"""The protocol on object storage: moto's S3 server on loopback, through s3fs.

create-if-absent is a conditional PUT (If-None-Match: *). The crash and stress checks of the
local suite run here too (a slice by default), and a store that cannot create atomically is
refused unless the caller declares that a lock covers every create.
"""

from __future__ import annotations

import threading
import uuid

import pytest

from airflow_hudi_occ.core.storage import Storage
from airflow_hudi_occ.core.table import Table
from airflow_hudi_occ.testing.s3 import S3Server

from .conftest import lock_options
from .test_crash_matrix import crash_and_recover
from .test_stress import BUCKETS, run_stress

# S3 modification times have one-second resolution: heartbeats must be coarser than that.
S3_OPTS = {"hoodie.client.heartbeat.interval_in_ms": "1500"}


@pytest.fixture(scope="module")
def s3():
    with S3Server() as server:
        server.create_bucket("tables")
        yield server


def _table(s3, name="t"):
    return Table.create(f"s3://tables/{name}-{uuid.uuid4().hex[:8]}", "t", record_key_fields=["id"],
                        partition_fields=["p"], precombine_field="ts", storage_options=s3.storage_options)


def test_conditional_put_is_create_if_absent(s3):
    """Racing creates of one key through separate clients: exactly one wins, every round."""
    rounds, n = 20, 6
    for r in range(rounds):
        stores = [Storage("s3://tables/race", s3.storage_options) for _ in range(n)]
        barrier, wins, lost = threading.Barrier(n), [], []

        def go(s, i):
            barrier.wait()
            try:
                s.create_if_absent(s.path(f"k{r}"), f"{i}".encode())
                wins.append(i)
            except FileExistsError:
                lost.append(i)
        threads = [threading.Thread(target=go, args=(s, i)) for i, s in enumerate(stores)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(wins) == 1 and len(lost) == n - 1
        assert stores[0].read(stores[0].path(f"k{r}")) == str(wins[0]).encode()  # never overwritten


# Slow only: after a SIGKILLed client, hudi-rs's reads of the moto server sometimes hang until
# its 180 s retry timeout (seen at commit_lock_held and mid_file; not yet explained). The
# writer-side checks passed; see docs/reliability.md, known gaps.
@pytest.mark.slow
@pytest.mark.parametrize("point", ["after_first_marker", "mid_file", "commit_lock_held", "after_completed"])
def test_crash_on_s3(s3, point, zk_server):
    """ZooKeeper lock, table on S3 (the lock-held points need a lock that frees itself)."""
    options = lock_options("zookeeper", zk_server.hosts, **S3_OPTS)
    crash_and_recover(_table(s3), options, point, zk_hosts=zk_server.hosts,
                      storage_options=s3.storage_options)


@pytest.mark.slow
@pytest.mark.parametrize("point", ["after_requested", "torn_file", "after_all_files"])
def test_crash_on_s3_more(s3, point, zk_server):
    options = lock_options("zookeeper", zk_server.hosts, **S3_OPTS)
    crash_and_recover(_table(s3), options, point, zk_hosts=zk_server.hosts,
                      storage_options=s3.storage_options)


@pytest.mark.slow  # hangs like the crash slice (reads stall against moto); known gap
@pytest.mark.parametrize("n_workers,n_tx", [pytest.param(3, 5), pytest.param(8, 20)])
def test_stress_on_s3_with_file_lock_on_s3(s3, tmp_path, n_workers, n_tx):
    """The lock file itself lives on S3, created by conditional PUT."""
    options = lock_options("filesystem", **BUCKETS, **S3_OPTS)
    run_stress(tmp_path, options, n_workers, n_tx, table=_table(s3, "stress"),
               storage_options=s3.storage_options, name="stress-s3")
