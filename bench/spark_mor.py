"""Spark engine, merge-on-read vs copy-on-write: ``python -m bench.spark_mor`` (standalone,
not in ``python -m bench``'s list, which another change is reworking).

One table of each type, ``HUDI_OCC_BENCH_SPARK_MOR_ROWS`` rows (default 200,000) in 4
partitions, bulk-inserted by ``SparkHudiWriter`` on a local[2] session; then three 1% upserts
(every 100th key, a later ordering value) into each: the median is printed, and their ratio.
Then a forced compaction of the MOR table, executed once by the Spark executor and once, on a
copy of the same table and plan, by core's Arrow executor. Tables under /dev/shm if present.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time


def main() -> None:
    from airflow_hudi_occ.core.services.compaction import execute_compaction, schedule_compaction
    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.spark.compaction import SparkCompactionExecutor
    from airflow_hudi_occ.spark.session import local_session
    from airflow_hudi_occ.spark.writer import SparkHudiWriter

    n = int(os.environ.get("HUDI_OCC_BENCH_SPARK_MOR_ROWS", "200000"))
    spark = local_session("local[2]", "bench-spark-mor")
    base = {"hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "p",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.write.lock.provider": "filesystem",
            "hoodie.time.generator.max_expected_clock_skew_ms": "1"}
    seed = spark.range(n).selectExpr("id", "concat('p', cast(id % 4 as string)) as p", "1L as ts",
                                     "concat('v', cast(id as string)) as v")
    up = spark.range(0, n, 100).selectExpr("id", "concat('p', cast(id % 4 as string)) as p", "'upd' as v")
    out: dict[str, float] = {}
    root = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        for tt in ("COPY_ON_WRITE", "MERGE_ON_READ"):
            w = SparkHudiWriter(spark, f"{root}/{tt}", {**base, "hoodie.datasource.write.table.type": tt})
            w.write(seed, "bulk_insert")
            times = []
            for r in range(3):
                t0 = time.time()
                w.write(up.selectExpr("id", "p", f"{r + 2}L as ts", "v"), "upsert")
                times.append(time.time() - t0)
            out[f"upsert_1pct.{tt}"] = sorted(times)[1]
        mor = f"{root}/MERGE_ON_READ"
        plan = schedule_compaction(Table.open(mor), base, force=True)
        shutil.copytree(mor, mor + "_arrow")
        t0 = time.time()
        SparkCompactionExecutor(spark, mor, base).execute(plan)
        out["compact.spark"] = time.time() - t0
        t0 = time.time()
        execute_compaction(Table.open(mor + "_arrow"), base, plan)
        out["compact.arrow"] = time.time() - t0
    finally:
        shutil.rmtree(root, ignore_errors=True)
        spark.stop()
    for k, v in out.items():
        print(f"{k:28s} {v:8.3f} s")
    print(f"{'upsert_1pct MOR / COW':28s} {out['upsert_1pct.MERGE_ON_READ'] / out['upsert_1pct.COPY_ON_WRITE']:8.3f}")


if __name__ == "__main__":
    main()
