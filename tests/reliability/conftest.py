"""Shared parts of the reliability suite: lock options per provider and the table checks."""

from __future__ import annotations

import json
import os
import time
import uuid

import pytest

from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS

HEARTBEAT_MS = 400  # expiry = 2 misses = 0.8 s: a dead writer is found quickly
ZK_SESSION_MS = 2000


def lock_options(kind: str, zk_hosts: str | None = None, **extra) -> dict:
    opts = {**FAST_WRITE_OPTIONS, "hoodie.write.lock.provider": kind,
            "hoodie.client.heartbeat.interval_in_ms": str(HEARTBEAT_MS),
            # a killed holder's lock file is taken over after a minute (Hudi's knob is minutes)
            "hoodie.write.lock.filesystem.expire": "1",
            "hoodie.write.concurrency.early.conflict.detection.enable": "true"}
    if kind == "zookeeper":
        opts.update({"hoodie.write.lock.zookeeper.url": zk_hosts,
                     "hoodie.write.lock.zookeeper.base_path": f"/rel-{uuid.uuid4().hex[:8]}",
                     "hoodie.write.lock.zookeeper.session_timeout_ms": str(ZK_SESSION_MS),
                     "hoodie.write.lock.zookeeper.connection_timeout_ms": "3000"})
    opts.update(extra)
    return opts


@pytest.fixture(params=["filesystem", "zookeeper"])
def lock_kind(request):
    if request.param == "zookeeper":
        request.getfixturevalue("zk_server")
    return request.param


@pytest.fixture
def make_options(lock_kind, request):
    def make(**extra):
        hosts = request.getfixturevalue("zk_server").hosts if lock_kind == "zookeeper" else None
        return lock_options(lock_kind, hosts, **extra)
    return make


def read_rows(table: Table, storage_options: dict | None = None) -> dict:
    """{id: row} as the independent hudi-rs reader sees the table (local or S3)."""
    if table.storage.is_local:
        t = hudi_read(table.base_uri)
    else:
        from airflow_hudi_occ.testing.s3 import hudi_read_s3
        t = hudi_read_s3(table.base_uri, storage_options or table.storage.storage_options)
    return {k: {"value": v["value"], "p": v["p"]} for k, v in rows_by_key(t).items()}


def all_files(table: Table) -> list[str]:
    """Every file under the base path (relative), metadata included."""
    return table.storage.walk_files(table.storage.root)


def files_naming(table: Table, instant: str) -> list[str]:
    """Files of the instant, except its attempt record: that is history (the timeline page shows
    the dead attempt) and must say it was rolled back; clean prunes it later."""
    from airflow_hudi_occ.core.commit import attempt_log
    found = [f for f in all_files(table) if instant in f]
    records = [f for f in found if "/.aux/occ/attempts/" in f.replace(os.sep, "/")]
    for rec in attempt_log.read_records(table):
        if rec.instant == instant:
            assert rec.outcome in ("rolled_back", "conflict", "aborted", "error"), rec
    return [f for f in found if f not in records]


def assert_unique_times(table: Table) -> list[str]:
    times = []
    for inst in table.timeline():
        times.append(inst.requested_time)
        if inst.completion_time:
            times.append(inst.completion_time)
    dup = sorted({t for t in times if times.count(t) > 1})
    assert not dup, f"instant times repeat: {dup}"
    return times


def wait_until(pred, timeout_s: float, what: str, poll_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def age_lock_file(path: str, seconds: float) -> dict:
    """Make a local lock file look ``seconds`` old (both clocks the provider consults), as if
    that much time had passed since its holder died; returns its content."""
    with open(path, "rb") as f:
        doc = json.loads(f.read())
    doc["acquired_at_ms"] = int(doc["acquired_at_ms"] - seconds * 1000)
    with open(path, "w") as f:
        json.dump(doc, f)
    t = time.time() - seconds
    os.utime(path, (t, t))
    return doc
