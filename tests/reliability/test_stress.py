"""Many writer processes, random upserts to a few shared file groups, checked for serializability.

Writers use the bucket index (2 buckets x 2 partitions = 4 file groups for the whole table), so
nearly every pair of concurrent transactions overlaps; each conflict is retried with core.retry's
full-jitter backoff until the batch commits. The history checker (``history.check_history``)
then proves: every batch committed exactly once (no starvation), no two overlapping
transactions both committed while concurrent, every loser lost to a real committed winner on a
shared file group, no instant time repeated, and the table equals a one-at-a-time replay of
the committed batches in completion order (0 lost, 0 exposed rows).

Default run: 4 processes x 10 transactions (file lock). Slow (HUDI_OCC_SLOW=1): 8 x 50 with
the file lock and with ZooKeeper.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter

from .conftest import lock_options
from .history import check_history, seed_rows, start_workers, wait_workers, write_figures

BUCKETS = {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2",
           # commit-time OCC only: each conflict then has exactly one (committed) winner
           "hoodie.write.concurrency.early.conflict.detection.enable": "false"}


def run_stress(tmp_path, options, n_workers, n_tx, *, table=None, storage_options=None, name="stress"):
    table = table or Table.create(str(tmp_path / "tbl"), "stress", record_key_fields=["id"],
                                  partition_fields=["p"], precombine_field="ts")
    seed = seed_rows()
    ArrowTableWriter(table, WriteConfig.from_options(options)).write(pa.Table.from_pylist(seed))
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    procs = start_workers(table, options, n_workers, n_tx, log_dir, storage_options=storage_options)
    wait_workers(procs)
    figures = check_history(table, procs, str(tmp_path / "replay"), storage_options=storage_options,
                            seed=seed)
    assert figures["transactions"] == n_workers * n_tx
    write_figures(name, {"provider": options["hoodie.write.lock.provider"], "writers": n_workers,
                         "tx_per_writer": n_tx, **figures})
    return figures


def test_stress_slice_filesystem(tmp_path):
    figures = run_stress(tmp_path, lock_options("filesystem", **BUCKETS), 4, 10)
    assert figures["conflicts"] > 0, "no conflict happened: the test exercised nothing"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["filesystem", "zookeeper"])
def test_stress_full(tmp_path, kind, request):
    hosts = request.getfixturevalue("zk_server").hosts if kind == "zookeeper" else None
    figures = run_stress(tmp_path, lock_options(kind, hosts, **BUCKETS), 8, 50, name="stress-full")
    assert figures["conflicts"] > 0
