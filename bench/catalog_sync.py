"""Catalog sync per commit, against a real Hive Metastore (PySpark's jars, Derby), at 10 and
10,000 partitions (``--quick``: 10 and 100).

- ours: the sync after a commit that upserts one row into an existing partition and one into a
  new partition: the commit metadata of the instants after ``last_commit_time_sync``, the one
  new partition added, the sync times moved (``core/catalog/sync``);
- baseline: the same sync with ``hoodie.meta.sync.incremental=false``, which lists every
  partition of the table and of the catalog and compares them (what Java's sync does on a first
  sync, and what a sync without the timeline's help would do each time).

The metastore calls of each are counted (``SyncReport.calls``) and reported in the details, with
the seconds of the commit itself and of the table's first sync (registration). Informational:
no target, the point is that the incremental cost does not grow with the partition count.
"""

from __future__ import annotations

import statistics
import time

import pyarrow as pa

from airflow_hudi_occ.core.catalog.sync import sync_table
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.hive_metastore import HiveMetastoreServer

from .common import Figure, work_dir

NAME = "catalog_sync"
SIZES = (10, 10_000)
QUICK_SIZES = (10, 100)
COMMITS = 3


def figure_names(quick: bool = False) -> list[str]:
    return [f"catalog_sync.per_commit.{n}_partitions.vs_full_listing" for n in (QUICK_SIZES if quick else SIZES)]


def _rows(ids, parts) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "p": pa.array(parts, pa.string()),
                     "ts": pa.array([1] * len(ids), pa.int64())})


def _one_size(root: str, uri: str, n: int, log) -> Figure:
    opts = {"hoodie.write.lock.provider": "filesystem", "hoodie.datasource.hive_sync.enable": "true",
            "hoodie.datasource.hive_sync.metastore.uris": uri,
            "hoodie.datasource.hive_sync.database": "bench", "hoodie.datasource.hive_sync.table": f"t{n}",
            "hoodie.metadata.enable": "false", "hoodie.datasource.hive_sync.batch_num": "1000"}
    table = Table.create(f"{root}/t{n}", f"t{n}", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    cfg = WriteConfig.from_options(opts)
    w = ArrowTableWriter(table, cfg)
    t0 = time.perf_counter()
    res = w.write(_rows(list(range(n)), [f"p{i:05d}" for i in range(n)]), "bulk_insert")
    first = res.catalog_sync
    log(f"{n} partitions: written and registered in {time.perf_counter() - t0:.1f}s "
        f"(first sync {first.seconds}s, {first.calls} calls)")
    off = WriteConfig.from_options({**opts, "hoodie.datasource.hive_sync.enable": "false"})
    full = WriteConfig.from_options({**opts, "hoodie.meta.sync.incremental": "false"})
    quiet = ArrowTableWriter(table, off)
    inc_s, inc_calls, full_s, full_calls, commit_s = [], [], [], [], []
    for k in range(COMMITS):
        for mode, times, calls in (("incremental", inc_s, inc_calls), ("full", full_s, full_calls)):
            new = n + 2 * k + (0 if mode == "incremental" else 1)
            t0 = time.perf_counter()
            quiet.write(_rows([0, new], ["p00000", f"p{new:05d}"]), "upsert")
            commit_s.append(time.perf_counter() - t0)
            rep = sync_table(table, cfg if mode == "incremental" else full)
            times.append(rep.seconds)
            calls.append(rep.calls)
    ours, base = statistics.median(inc_s), statistics.median(full_s)
    return Figure(
        name=f"catalog_sync.per_commit.{n}_partitions.vs_full_listing", benchmark=NAME,
        description=f"the Hive Metastore sync after one commit (1 new partition) on a table of {n} "
                    "partitions, against the same sync listing every partition",
        value=ours, unit="s", baseline="full listing", baseline_value=base,
        details={"partitions": n, "commits": COMMITS, "incremental_s": inc_s, "full_listing_s": full_s,
                 "incremental_metastore_calls": inc_calls, "full_listing_metastore_calls": full_calls,
                 "commit_s_median": round(statistics.median(commit_s), 3),
                 "first_sync_s": first.seconds, "first_sync_metastore_calls": first.calls})


def run(ctx) -> list[Figure]:
    sizes = QUICK_SIZES if ctx.quick else SIZES
    with work_dir(ctx.base_dir, "catalog-sync") as root:
        with HiveMetastoreServer(f"{root}/hms") as hms:
            return [_one_size(root, hms.uri, n, ctx.log) for n in sizes]
