"""Conflict retries (core/commit/retry.py) and a library writer's batch admitted before each
attempt (run_admitted, issue 43 item 4): the batch waits while a live writer may touch its
buckets, a lost attempt waits again keeping its age, and its request is gone however it ends."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.attempt_log import LABELS_OPTION
from airflow_hudi_occ.core.commit.retry import RetriesExhaustedError, RetryPolicy, RetryRun, run_admitted
from airflow_hudi_occ.core.commit.transaction import WriteTransaction
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.concurrency import admission
from airflow_hudi_occ.core.concurrency.footprint import REQUEST_LABEL, batch_footprint, declared
from airflow_hudi_occ.core.config import HeartbeatConfig, WriteConfig
from airflow_hudi_occ.core.errors import WriteConflictError
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import hudi_read

OPTIONS = {"hoodie.write.lock.provider": "filesystem", "hoodie.index.type": "BUCKET",
           "hoodie.bucket.index.num.buckets": "8"}
HB = HeartbeatConfig(interval_ms=60_000, tolerable_misses=2)


@pytest.fixture
def table(tmp_path) -> Table:
    return Table.create(os.path.join(str(tmp_path), "t"), "t", record_key_fields=["id"],
                        partition_fields=["p"], precombine_field="ts")


def _batch(ids, value) -> pa.Table:
    return pa.table({"id": ids, "p": ["a"] * len(ids), "v": [value] * len(ids), "ts": [1] * len(ids)})


def _write(table, data, request_id, n):
    cfg = WriteConfig.from_options({**OPTIONS, LABELS_OPTION: json.dumps({REQUEST_LABEL: request_id})})
    return ArrowTableWriter(table, cfg).write(data, "upsert", attempt=n)


def test_batch_footprint_names_the_buckets_the_writer_writes(table):
    data = _batch(list(range(20)), "x")
    fp = batch_footprint(table, data, OPTIONS)
    res = ArrowTableWriter(table, WriteConfig.from_options(OPTIONS)).write(data, "upsert")
    written = {f"bucket:{fg.split('/')[-1][:8]}" for fg in res.to_json()["file_groups"]}
    assert fp.partitions == {"a"} and set(fp.reach["a"]) == written


def test_a_batch_waits_for_a_live_writer_on_its_buckets_then_commits(table):
    data = _batch([1, 2, 3], "admitted")
    fp = batch_footprint(table, data, OPTIONS)
    live = WriteTransaction(table, WriteConfig.from_options(OPTIONS), footprint=fp.with_reach({}))
    live.begin()  # declares partition a, buckets unknown: meets every bucket there
    seen = []

    def sleep(s):
        seen.append([r.state for r in admission.requests(table)])
        live.abort()

    calls = []

    def attempt(n, request_id):
        calls.append(n)
        assert admission.load(table, request_id).state == admission.ADMITTED
        res = _write(table, data, request_id, n)
        assert declared(table.timeline(), res.instant) is not None
        return res

    res = run_admitted(table, fp, attempt, RetryPolicy(sleep=sleep), heartbeat=HB)
    assert seen == [[admission.WAITING]] and calls == [1]
    assert admission.requests(table) == []  # withdrawn
    assert sorted(hudi_read(table.base_uri).column("id").to_pylist()) == [1, 2, 3]
    assert res.instant.is_completed


def test_a_lost_attempt_waits_again_with_its_age_and_the_request_goes_when_it_gives_up(table):
    fp = batch_footprint(table, _batch([1], "x"), OPTIONS)
    created = []

    def attempt(n, request_id):
        r = admission.load(table, request_id)
        created.append((r.state, r.created_at))
        raise WriteConflictError("lost", instant=f"2026000000000{n}", other_instant="x", file_groups=[])

    run = RetryRun()
    with pytest.raises(RetriesExhaustedError):
        run_admitted(table, fp, attempt, RetryPolicy(max_conflict_retries=2, sleep=lambda s: None),
                     heartbeat=HB, run=run)
    assert [s for s, _ in created] == [admission.ADMITTED] * 3
    assert len({c for _, c in created}) == 1  # one request, its age kept across attempts
    assert [a.outcome for a in run.attempts] == ["conflict"] * 3
    assert admission.requests(table) == []
