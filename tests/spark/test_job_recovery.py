"""The spark job with --batch-key: a job killed after staging its commit is re-committed by the
retry (same instant, same files, Spark not even started), and a re-run says already committed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.concurrency.heartbeat import is_expired
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.job_protocol import EXIT_OK, last_payload
from airflow_hudi_occ.testing.crash import CRASH_ENV, MARK
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS

OPTS = {**FAST_WRITE_OPTIONS, "hoodie.client.heartbeat.interval_in_ms": "400",
        "hoodie.client.heartbeat.tolerable.misses": "2"}
SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("ts", pa.int64()), ("value", pa.string())])
KEY = "ingest/scheduled__2024-01-01/upsert"


def job(table, src, *, crash_at=None, writer_id="job"):
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    env.pop(CRASH_ENV, None)
    if crash_at:
        env[CRASH_ENV] = crash_at
    cmd = [sys.executable, "-m", "airflow_hudi_occ.testing.spark_job", "--table", table, "--operation", "upsert",
           "--source", src, "--batch-key", KEY, "--master", "local[1]", "--writer-id", writer_id]
    for k, v in OPTS.items():
        cmd += ["--option", f"{k}={v}"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def data_files(root, instant):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            if "/.hoodie" not in d and f.endswith(".parquet") and f"_{instant}." in f:
                out[os.path.relpath(os.path.join(d, f), root)] = os.stat(os.path.join(d, f)).st_mtime_ns
    return out


@pytest.mark.slow  # ~40 s; the default run keeps the operator reporting recommitted and already_committed
def test_killed_job_is_recommitted_by_its_retry_then_already_committed(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    cfg = WriteConfig.from_options(OPTS)
    seed = [{"id": i, "p": f"p{i % 2}", "ts": 0, "value": "seed"} for i in range(6)]
    ArrowTableWriter(table, cfg).write(pa.Table.from_pylist(seed, schema=SCHEMA))
    batch = [{"id": 0, "p": "p0", "ts": 1, "value": "job"}, {"id": 7, "p": "p1", "ts": 1, "value": "job"}]
    src = str(tmp_path / "batch.parquet")
    pq.write_table(pa.Table.from_pylist(batch, schema=SCHEMA), src)

    crashed = job(table.base_uri, src, crash_at="after_staged", writer_id="try1")
    assert crashed.returncode == -9, crashed.stderr[-3000:]
    line = next(ln for ln in crashed.stdout.splitlines() if ln.startswith(MARK + " "))
    dead = json.loads(line[len(MARK) + 1:])["instant"]
    files = data_files(table.base_uri, dead)
    assert len(files) == 2 and table.timeline().get(dead).is_pending

    deadline = time.monotonic() + 10
    while not is_expired(table, dead, cfg.heartbeat):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    retry = job(table.base_uri, src + ".gone", writer_id="try2")  # the source is not even read
    res = last_payload(retry.stdout)
    assert retry.returncode == EXIT_OK, retry.stdout[-2000:] + retry.stderr[-3000:]
    assert (res["outcome"], res["instant"], res["recovered_from"]) == ("recommitted", dead, "try1")
    assert "re-committed" in retry.stdout
    assert table.timeline().get(dead).is_completed
    assert data_files(table.base_uri, dead) == files  # same files, untouched
    got = {k: v["value"] for k, v in rows_by_key(hudi_read(table.base_uri)).items()}
    assert got == {**{r["id"]: "seed" for r in seed}, 0: "job", 7: "job"}

    rerun = job(table.base_uri, src, writer_id="try3")
    res = last_payload(rerun.stdout)
    assert rerun.returncode == EXIT_OK
    assert (res["outcome"], res["instant"], res["batch_key"]) == ("already_committed", dead, KEY)
    assert len(table.timeline().completed_writes()) == 2
