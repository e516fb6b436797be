"""Merge-on-read against copy-on-write: the write cost MOR saves, and the compaction that pays it.

The claim under test (issue 15): an upsert of a small fraction of a table is much cheaper on
a MOR table, because it appends the changed records to log files instead of rewriting every
file group they touch; the deferred cost is compaction. Both sides use the core writers in
this process (``MergeOnReadWriter``, ``ArrowTableWriter``), the same data, the same options
(file lock, simple index), on the same storage.

One table of each type holds the same ``rows`` rows (4 partitions, one file group each with
the default 120 MB file size). Each round upserts a fresh random 1% of the keys (new values,
a later ordering value) into both tables, in alternating order, then schedules and executes a
compaction of the MOR table (forced: the trigger's five deltacommits are a policy, not a
cost). The first round warms up and is not counted; medians of the rest (>= 3).

Figures (all ratios of this run): MOR upsert / COW upsert (target <= 0.5, "much cheaper"),
compaction / COW upsert, and MOR upsert + compaction / COW upsert (what a MOR table pays per
round when compacted after every write, the worst schedule).

Size: 200,000 rows; 2,000 with ``--quick``; ``HUDI_OCC_BENCH_MOR_ROWS`` overrides (the
issue's 2 M-row figure: ``HUDI_OCC_BENCH_MOR_ROWS=2000000 python -m bench --only mor``).
"""

from __future__ import annotations

import os
import time

import numpy as np
import pyarrow as pa

from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.services.compaction import execute_compaction, schedule_compaction
from airflow_hudi_occ.core.table.table import COPY_ON_WRITE, MERGE_ON_READ, Table

from .common import Figure, Samples, work_dir

NAME = "mor"
FRACTION = 0.01
PARTITIONS = 4
OPTS = {"hoodie.write.lock.provider": "filesystem",
        "hoodie.time.generator.max_expected_clock_skew_ms": "2",
        # no automatic archival or clean inside the measured writes: both tables alike
        "hoodie.archive.automatic": "false", "hoodie.clean.automatic": "false"}


def sizes(quick: bool) -> dict:
    rows = int(os.environ.get("HUDI_OCC_BENCH_MOR_ROWS", 2_000 if quick else 200_000))
    return {"rows": rows, "rounds": 3}


def figure_names(quick: bool = False) -> list[str]:
    return ["mor.upsert_1pct.vs_cow", "mor.compaction.vs_cow_upsert",
            "mor.upsert_plus_compaction.vs_cow_upsert"]


def _data(ids: np.ndarray, ts: int, rng: np.random.Generator) -> pa.Table:
    n = len(ids)
    return pa.table({"id": pa.array(ids, pa.int64()),
                     "p": pa.array([f"p{i % PARTITIONS}" for i in ids.tolist()]),
                     "ts": pa.array(np.full(n, ts, dtype=np.int64)),
                     "v": pa.array(rng.random(n)),
                     "s": pa.array(["payload-" + "x" * 24] * n)})


def _create(path: str, table_type: str) -> Table:
    return Table.create(path, "bench", record_key_fields=["id"], partition_fields=["p"],
                        precombine_field="ts", table_type=table_type)


def run(ctx) -> list[Figure]:
    size = sizes(ctx.quick)
    n, rounds = size["rows"], size["rounds"]
    cfg = WriteConfig.from_options(OPTS)
    rng = np.random.default_rng(15)
    with work_dir(ctx.base_dir, NAME) as work:
        cow = _create(os.path.join(work, "cow"), COPY_ON_WRITE)
        mor = _create(os.path.join(work, "mor"), MERGE_ON_READ)
        seed = _data(np.arange(n, dtype=np.int64), 0, rng)
        ctx.log(f"mor: loading {n} rows into a COW and a MOR table")
        ArrowTableWriter(cow, cfg).write(seed, "bulk_insert")
        MergeOnReadWriter(mor, cfg).write(seed, "bulk_insert")
        cow_w, mor_w = ArrowTableWriter(cow, cfg), MergeOnReadWriter(mor, cfg)
        t_cow, t_mor, t_compact = [], [], []
        log_bytes, compacted = [], []
        for r in range(rounds + 1):  # round 0 warms caches and imports up
            batch = _data(rng.choice(n, size=max(1, int(n * FRACTION)), replace=False), r + 1, rng)
            ctx.log(f"mor: round {r}: upsert {batch.num_rows} rows into both, then compact")
            pair = [("cow", cow_w), ("mor", mor_w)]
            if r % 2:
                pair.reverse()
            took = {}
            for kind, w in pair:
                t0 = time.perf_counter()
                res = w.write(batch, "upsert")
                took[kind] = time.perf_counter() - t0
                if kind == "mor":
                    stats = res.metadata.write_stats()
                    log_bytes.append(sum(s.file_size_in_bytes for s in stats))
            t0 = time.perf_counter()
            plan = schedule_compaction(mor, cfg, force=True)
            out = execute_compaction(mor, cfg, plan)
            took["compact"] = time.perf_counter() - t0
            compacted.append(out.to_json()["rows_written"])
            if r > 0:
                t_cow.append(took["cow"])
                t_mor.append(took["mor"])
                t_compact.append(took["compact"])
        c, m, k = Samples(t_cow), Samples(t_mor), Samples(t_compact)
        both = Samples([a + b for a, b in zip(t_mor, t_compact)])
        common = {"rows": n, "upsert_rows": max(1, int(n * FRACTION)), "rounds": rounds,
                  "partitions": PARTITIONS, "cow_upsert": c.summary(), "mor_upsert": m.summary(),
                  "compaction": k.summary(), "log_bytes_per_upsert": log_bytes,
                  "rows_rewritten_by_compaction": compacted}
    what = f"upsert of 1% of a {n}-row table"
    return [
        Figure("mor.upsert_1pct.vs_cow", NAME, f"{what}: MOR (log files) vs COW (rewritten file groups)",
               m.median_ms, "ms", "the same upsert on a COW table", c.median_ms, target=0.5,
               details=common),
        Figure("mor.compaction.vs_cow_upsert", NAME,
               f"compaction of the MOR table after each upsert ({n} rows rewritten) vs the COW upsert",
               k.median_ms, "ms", "the COW upsert", c.median_ms, details=common),
        Figure("mor.upsert_plus_compaction.vs_cow_upsert", NAME,
               "MOR upsert + compaction after every upsert (the worst schedule) vs the COW upsert",
               both.median_ms, "ms", "the COW upsert", c.median_ms, details=common),
    ]
