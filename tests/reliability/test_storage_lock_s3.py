"""Hudi's storage-based lock as the only lock, on the loopback S3 server (moto, through s3fs).

Three claims, each checked independently of the writers' own word:
- N writer processes x M transactions commit with 0 lost rows and a serial replay equal to the
  table (run_stress's history check, as for the other locks);
- no two writers ever held the lease at once: the bucket is versioned, so every write of
  ``.hoodie/.locks/table_lock.json`` is kept, and the whole sequence is checked (a lease passes
  to another owner only after it was released or ran out, by the acquirer's own clock plus
  Hudi's drift buffer);
- a holder SIGKILLed inside the commit keeps others out until its lease runs out, then the
  next writer takes it over and commits (the crash matrix's recovery checks).
"""

from __future__ import annotations

import json
import uuid

import boto3
import pytest

from airflow_hudi_occ.core.concurrency.locks.storage_based import CLOCK_DRIFT_MS
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Server

from .conftest import lock_options
from .test_crash_matrix import crash_and_recover
from .test_stress import BUCKETS, run_stress

BUCKET = "leased"
VALIDITY_S = 10  # Hudi's minimum, so that a dead holder's lease runs out within the test
STORAGE_LOCK = {"hoodie.write.lock.storage.validity.timeout.secs": str(VALIDITY_S),
                "hoodie.write.lock.storage.renew.interval.secs": "1",
                # S3 modification times have one-second resolution: heartbeats must be coarser
                "hoodie.client.heartbeat.interval_in_ms": "1500"}


def _client(s3):
    return boto3.client("s3", endpoint_url=s3.endpoint, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY, region_name=REGION)


@pytest.fixture(scope="module")
def s3():
    with S3Server() as server:
        server.create_bucket(BUCKET)
        _client(server).put_bucket_versioning(Bucket=BUCKET,
                                              VersioningConfiguration={"Status": "Enabled"})
        yield server


def _table(s3, name):
    return Table.create(f"s3://{BUCKET}/{name}-{uuid.uuid4().hex[:8]}", "t", record_key_fields=["id"],
                        partition_fields=["p"], precombine_field="ts", storage_options=s3.storage_options)


def lease_history(s3, table) -> list[dict]:
    """Every version of the table's lease file, oldest first."""
    key = table.storage.path(".hoodie", ".locks", "table_lock.json").split("/", 1)[1]
    client = _client(s3)
    versions = []
    for page in client.get_paginator("list_object_versions").paginate(Bucket=BUCKET, Prefix=key):
        versions += [v for v in page.get("Versions", []) if v["Key"] == key]
    # S3 lists a key's versions newest first
    return [json.loads(client.get_object(Bucket=BUCKET, Key=key, VersionId=v["VersionId"])["Body"].read())
            for v in reversed(versions)]


def assert_one_holder_at_a_time(history: list[dict], validity_ms: int) -> int:
    """Walk the lease's writes in order; returns the number of acquisitions."""
    acquisitions, previous = 0, None
    for lease in history:
        new_holder = previous is None or previous["expired"] or lease["owner"] != previous["owner"]
        if new_holder and not lease["expired"]:
            acquisitions += 1
            if previous is not None and not previous["expired"]:
                # taken over from a live-looking lease: only after it ran out
                acquired_at = lease["validUntil"] - validity_ms
                assert acquired_at > previous["validUntil"] + CLOCK_DRIFT_MS, (previous, lease)
        if lease["expired"]:
            assert previous is not None and lease["owner"] == previous["owner"], \
                f"{lease['owner']} released a lease it did not hold: {previous} -> {lease}"
        previous = lease
    return acquisitions


def test_storage_lock_alone_keeps_concurrent_writers_correct_on_s3(s3, tmp_path):
    table = _table(s3, "stress")
    options = lock_options("storage", **BUCKETS, **STORAGE_LOCK)
    n_workers, n_tx = 3, 5
    figures = run_stress(tmp_path, options, n_workers, n_tx, table=table,
                         storage_options=s3.storage_options, name=f"stress-s3-storage-lock-{n_workers}x{n_tx}")
    assert figures["conflicts"] > 0, "no conflict happened: the test exercised nothing"
    history = lease_history(s3, table)
    acquisitions = assert_one_holder_at_a_time(history, VALIDITY_S * 1000)
    # every transaction took the lease at least once (instant time, then the commit)
    print(f"lease history: {len(history)} writes, {acquisitions} acquisitions")
    assert acquisitions >= n_workers * n_tx, (acquisitions, len(history))
    assert len({lease["owner"].split(":")[1] for lease in history}) >= n_workers  # several pids
    assert history[-1]["expired"] is True  # the last holder released it


def test_the_history_check_catches_two_holders():
    """The checker above is not vacuous: an overlap in a lease history fails it."""
    history = [{"expired": False, "validUntil": 100_000, "owner": "a"},
               {"expired": False, "validUntil": 95_000, "owner": "b"}]  # acquired at 85 s < 100 s
    with pytest.raises(AssertionError):
        assert_one_holder_at_a_time(history, 10_000)
    with pytest.raises(AssertionError, match="did not hold"):
        assert_one_holder_at_a_time([{"expired": False, "validUntil": 1, "owner": "a"},
                                     {"expired": True, "validUntil": 1, "owner": "b"}], 10_000)


@pytest.mark.parametrize("point", [pytest.param("commit_lock_held", marks=pytest.mark.slow), "after_first_marker"])
def test_killed_writer_with_the_storage_lock_on_s3(s3, point):
    """SIGKILLed holding the lease (inside the commit): others wait out its validity, then one
    takes it over and commits; killed without it: the lease is free at once."""
    table = _table(s3, f"crash-{point}")
    crash_and_recover(table, lock_options("storage", **STORAGE_LOCK), point,
                      storage_options=s3.storage_options)
    history = lease_history(s3, table)
    assert_one_holder_at_a_time(history, VALIDITY_S * 1000)
    if point == "commit_lock_held":
        # the dead writer's last lease was never released, only taken over after it ran out
        dead = [a for a, b in zip(history, history[1:])
                if not a["expired"] and b["owner"] != a["owner"]]
        assert dead, history
