"""What the example DAGs share with the demo: where the table is, and the batches they write.

Settings come from Airflow Variables (templated, read at run time), then environment
variables, then embedded defaults, so the DAGs run on a laptop with nothing configured
(a local table under ``$AIRFLOW_HOME/hudi_occ``, the file-system lock, Spark ``local[*]``) and
in docker-compose with ZooKeeper and a Spark master (set through the same names).

The batches are deterministic per DAG run and kept as parquet files in a staging folder, so a
re-run writes the same rows (idempotence) and the demo can rebuild the expected table from
them: for every key, the row with the largest ``ts`` of any batch (the table's precombine
field decides, whatever order the commits landed in).
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import time

NUM_KEYS = 240
PARTITIONS = [f"2024-01-{d:02d}" for d in range(1, 7)]

#: Hudi options of the example table (bucket index: concurrent inserts of one key conflict
#: instead of duplicating). Early conflict detection is on, with the commit-conflict check:
#: a writer also stops early when a writer it overlaps has already *committed* (its markers
#: are gone by then), not only while the other is still writing; without it such a loser
#: learns only at its own commit, after writing everything.
TABLE_OPTIONS = {
    "hoodie.datasource.write.table.name": "orders",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "day",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.index.type": "BUCKET",
    "hoodie.bucket.index.num.buckets": "2",
    "hoodie.write.concurrency.early.conflict.detection.enable": "true",
    "hoodie.write.concurrency.early.conflict.check.commit.conflict": "true",
    "hoodie.write.lock.wait_time_ms": "60000",
    "hoodie.write.lock.client.wait_time_ms_between_retry": "200",
    "hoodie.client.heartbeat.interval_in_ms": "5000",
    "hoodie.time.generator.max_expected_clock_skew_ms": "20",
}


def airflow_home() -> str:
    return os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow"))


def default_table_path() -> str:
    return os.environ.get("HUDI_OCC_TABLE", os.path.join(airflow_home(), "hudi_occ", "orders"))


def table_asset():
    """The example table's ``hudi://`` asset, from the path known when the DAG is parsed
    (``HUDI_OCC_TABLE`` or the default): outlets are fixed at parse time, so an asset cannot
    follow the ``hudi_occ_table`` Variable, which is read at run time. With that Variable set
    to another table, the write task fails naming the mismatch: set ``HUDI_OCC_TABLE`` instead."""
    from airflow_hudi_occ.provider.assets import create_asset
    return create_asset(path=default_table_path())


def default_staging_dir() -> str:
    return os.environ.get("HUDI_OCC_STAGING", os.path.join(airflow_home(), "hudi_occ", "staging"))


def setting(variable: str, default: str) -> str:
    """A templated value: the Airflow Variable if set, else the embedded default."""
    return "{{ var.value.get('%s', '%s') }}" % (variable, default.replace("'", "\\'"))


def admission_policy() -> str | None:
    """The example writers' ``on_overlap``: ``HUDI_OCC_ADMISSION=off`` starts them at once
    (``go``: raw OCC contention, as the tests that force an overlap need); otherwise the
    connection's policy, by default ``wait`` (docs/concurrency.md)."""
    return "go" if os.environ.get("HUDI_OCC_ADMISSION", "on") == "off" else None


def partition_of(key: int) -> str:
    return PARTITIONS[key % len(PARTITIONS)]


def _safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", s)


def batch_rows(kind: str, run_id: str, ts: int) -> list[dict]:
    """Ingestion: a small random sample of keys; backfill: every key (a full rewrite)."""
    seed = int(hashlib.sha256(f"{kind}/{run_id}".encode()).hexdigest()[:12], 16)
    rnd = random.Random(seed)
    keys = range(NUM_KEYS) if kind == "backfill" else sorted(rnd.sample(range(NUM_KEYS), 24))
    return [{"id": k, "day": partition_of(k), "ts": ts, "v": f"{kind}:{run_id}", "amount": rnd.randint(1, 999)}
            for k in keys]


def make_batch(kind: str, run_id: str, staging_dir: str) -> str:
    """Write the run's batch once (a re-run finds and reuses it); returns its path."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    folder = os.path.join(staging_dir, kind)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, _safe(run_id) + ".parquet")
    if not os.path.exists(path):
        rows = batch_rows(kind, run_id, time.time_ns())
        tmp = path + f".tmp{os.getpid()}"
        pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema(
            [("id", pa.int64()), ("day", pa.string()), ("ts", pa.int64()), ("v", pa.string()),
             ("amount", pa.int64())])), tmp)
        os.replace(tmp, path)
    return path


def expected_table(batch_files: list[str]) -> dict[int, dict]:
    """The model: per key, the row of the batch with the largest ts."""
    import pyarrow.parquet as pq
    out: dict[int, dict] = {}
    for f in batch_files:
        for row in pq.read_table(f).to_pylist():
            cur = out.get(row["id"])
            if cur is None or row["ts"] > cur["ts"]:
                out[row["id"]] = row
    return out
