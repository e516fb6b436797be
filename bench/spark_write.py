"""The Spark engine's write path: what the transaction costs, and what early detection saves.

Two questions, each answered against baselines measured in the same run, on one local[2]
session (so JVM start-up is paid once and never measured):

- ``spark.bulk_insert.vs_bare_arrow`` (target <= 1.05, the 5% overhead Alibaba reports for
  their exactly-once commit): ``SparkHudiWriter.write(df, "bulk_insert")`` of N rows (2 M in the
  full run) into a new table, against a *bare Arrow write* of the same rows: the same tagging
  (keys, dedupe, file-group planning) and the same ``groupBy(partition, fileId).applyInArrow``
  job writing the same parquet files with the five meta columns, but no lock, instant,
  heartbeat, markers, early-detection check or commit. The difference is the transactional
  machinery. ``spark.bulk_insert.vs_df_write_parquet`` (informational): the same write
  against Spark's own ``df.write.partitionBy("p").parquet`` of the same DataFrame.
- ``spark.rfc56.time_to_stop`` (target <= 0.1): RFC-56's test plan. Writer A (another
  process, core's Arrow writer) has written every file group of the table and waits to
  commit; writer B (this process, the Spark engine) upserts every row of the same file groups.
  With early detection on, B stops at its first check; with it off, B writes every file and
  loses at commit (A is let commit first). Value: B's seconds until it stopped with detection
  on; baseline: the same with detection off (its wait for A's commit excluded). ``details``
  carries the files B wrote in both cases and the file groups it planned.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import time
import uuid

from .common import Figure, Samples, work_dir

NAME = "spark_write"

BASE_OPTS = {"hoodie.datasource.write.recordkey.field": "id",
             "hoodie.datasource.write.partitionpath.field": "p",
             "hoodie.datasource.write.precombine.field": "ts",
             "hoodie.datasource.write.table.name": "bench",
             "hoodie.write.lock.provider": "filesystem",
             "hoodie.time.generator.max_expected_clock_skew_ms": "2"}
ECD = "hoodie.write.concurrency.early.conflict.detection.enable"


def sizes(quick: bool) -> dict:
    if quick:
        return {"rows": 20_000, "reps": 1, "rfc_parts": 4, "rfc_rows": 2_000, "rfc_reps": 1}
    return {"rows": 2_000_000, "reps": 3, "rfc_parts": 8, "rfc_rows": 50_000, "rfc_reps": 2}


def figure_names(quick: bool = False) -> list[str]:
    return ["spark.bulk_insert.vs_bare_arrow", "spark.bulk_insert.vs_df_write_parquet",
            "spark.rfc56.time_to_stop"]


def source_df(spark, rows: int, parts: int = 4):
    return spark.range(rows).selectExpr(
        "id", f"concat('p', cast(id % {parts} as string)) as p", "id % 7 as ts",
        "concat('value-', cast(id as string)) as v", "cast(id * 1.5 as double) as amount")


# --- the bare Arrow write -------------------------------------------------------------------------


def bare_arrow_write(spark, df, out_dir: str) -> int:
    """Everything of the Hudi write but the transaction (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from typing import Iterator, Tuple

    from airflow_hudi_occ.core.table.file_system_view import base_file_name
    from airflow_hudi_occ.spark import tagging
    from airflow_hudi_occ.core.commit.merge import conform
    from airflow_hudi_occ.core.format.base_file import with_meta_columns
    from airflow_hudi_occ.spark.executor import STAT_DDL, STAT_SCHEMA, _normalize
    from airflow_hudi_occ.spark.options import SparkWriteOptions
    from airflow_hudi_occ.spark.writer import arrow_schema_of

    opts = SparkWriteOptions.from_options(BASE_OPTS)
    schema = arrow_schema_of(df)
    cols = list(df.columns)
    instant = time.strftime("%Y%m%d%H%M%S000", time.gmtime())
    prepared = tagging.prepare(df, opts.record_key_fields, opts.partition_fields, False,
                               opts.precombine_field)
    counts = {r[0]: r[1] for r in prepared.groupBy(tagging.PART).count().collect()}
    plan = tagging.plan_new_file_groups(counts, {}, max_file_size=opts.max_file_size,
                                        record_size=opts.record_size_estimate)
    tagged = tagging.assign_new(spark, prepared, plan)

    def fn(key, batches):
        part, fid = key[0].as_py(), key[1].as_py()
        t = pa.concat_tables([_normalize(b) for b in batches])
        name = base_file_name(fid, "0-0-0", instant)
        full = with_meta_columns(conform(t, schema), instant_time=instant, partition=part,
                                 file_name=name, keys=t.column(tagging.KEY).combine_chunks(),
                                 seq_prefix=f"{instant}_0_")
        d = os.path.join(out_dir, part)
        os.makedirs(d, exist_ok=True)
        pq.write_table(full, os.path.join(d, name), compression="snappy")
        yield from pa.Table.from_pylist([{"partition": part, "file_id": fid, "num_writes": full.num_rows}],
                                        schema=STAT_SCHEMA).to_batches()

    fn.__annotations__ = {"key": Tuple[pa.Scalar, ...], "batches": Iterator[pa.RecordBatch],
                          "return": Iterator[pa.RecordBatch]}
    rows = tagged.select(*cols, tagging.KEY, tagging.PART, tagging.FID) \
                 .groupBy(tagging.PART, tagging.FID).applyInArrow(fn, STAT_DDL).collect()
    return sum(r.num_writes for r in rows)


# --- RFC-56: two writers --------------------------------------------------------------------------


def _rfc56_once(spark, seeded: str, work: str, parts: int, rows_per_part: int, ecd: bool) -> dict:
    from airflow_hudi_occ.testing.workers import commit_after_barrier

    path = os.path.join(work, f"rfc56-{uuid.uuid4().hex[:6]}")
    shutil.copytree(seeded, path)
    mp = multiprocessing.get_context("spawn")
    barrier, results = mp.Barrier(2), mp.Queue()
    # A: one row in each file group, so it holds a marker on every one of them
    a_rows = [{"id": p, "p": f"p{p}", "ts": 100, "v": "A", "amount": 0.0} for p in range(parts)]
    a = mp.Process(target=commit_after_barrier,
                   args=(path, BASE_OPTS, a_rows, barrier, results, "A"))
    a.start()
    try:
        return _rfc56_b(spark, path, a, barrier, results, parts, rows_per_part, ecd)
    finally:
        if a.is_alive():  # B failed unexpectedly: A would wait at its barrier for minutes
            a.terminate()
            a.join(timeout=30)
        shutil.rmtree(path, ignore_errors=True)


def _rfc56_b(spark, path, a, barrier, results, parts, rows_per_part, ecd) -> dict:
    from airflow_hudi_occ.core.errors import RetryableError
    from airflow_hudi_occ.spark.writer import SparkHudiWriter
    deadline = time.time() + 300
    while barrier.n_waiting < 1:  # A has written every file and waits to commit
        if not a.is_alive() or time.time() > deadline:
            raise RuntimeError("writer A did not reach its commit")
        time.sleep(0.02)
    waited = {}

    def before_commit(tx):  # only reached with detection off: let A win first
        t0 = time.time()
        waited["at"] = t0
        barrier.wait(timeout=300)
        waited["a"] = results.get(timeout=300)
        waited["s"] = time.time() - t0

    w = SparkHudiWriter(spark, path, {**BASE_OPTS, ECD: str(ecd).lower()})
    df = source_df(spark, parts * rows_per_part, parts).selectExpr("id", "p", "cast(200 as bigint) as ts", "v", "amount")
    t0 = time.time()
    err = None
    try:
        w.write(df, "upsert", before_commit=before_commit)
    except RetryableError as e:
        err = e
    stopped = time.time() - t0 - waited.get("s", 0.0)
    if not waited:
        barrier.wait(timeout=300)
        waited["a"] = results.get(timeout=300)
    a.join(timeout=300)
    if err is None:
        raise RuntimeError(f"writer B committed (early detection {'on' if ecd else 'off'}): the "
                           "set-up is not a conflict")
    if waited["a"]["outcome"] != "committed":
        raise RuntimeError(f"writer A did not commit: {waited['a']}")
    return {"seconds": stopped, "error": type(err).__name__,
            "files_written": getattr(err, "files_written", None),
            "file_groups_planned": getattr(err, "file_groups_planned", None),
            "job_cancelled": getattr(err, "job_cancelled", None)}


# --- the benchmark ---------------------------------------------------------------------------------


def run(ctx) -> list[Figure]:
    from airflow_hudi_occ.spark.session import local_session
    from airflow_hudi_occ.spark.writer import SparkHudiWriter

    size = sizes(ctx.quick)
    spark = local_session("local[2]", "airflow_hudi_occ-bench")
    figures: list[Figure] = []
    with work_dir(ctx.base_dir, NAME) as work:
        n = size["rows"]
        df = source_df(spark, n)
        ours, bare, plain = [], [], []
        for rep in range(size["reps"] + 1):  # the first round warms the JVM and workers up
            ctx.log(f"spark_write: bulk_insert {n} rows, round {rep}")
            t0 = time.perf_counter()
            res = SparkHudiWriter(spark, os.path.join(work, f"hudi-{rep}"), BASE_OPTS).write(df, "bulk_insert")
            t1 = time.perf_counter()
            written = bare_arrow_write(spark, df, os.path.join(work, f"bare-{rep}"))
            t2 = time.perf_counter()
            df.write.mode("overwrite").partitionBy("p").parquet(os.path.join(work, f"plain-{rep}"))
            t3 = time.perf_counter()
            assert res.summary()["rows_written"] == n == written, (res.summary(), written)
            if rep > 0:
                ours.append(t1 - t0)
                bare.append(t2 - t1)
                plain.append(t3 - t2)
            for d in ("hudi", "bare", "plain"):
                shutil.rmtree(os.path.join(work, f"{d}-{rep}"), ignore_errors=True)
        o, b, p = Samples(ours), Samples(bare), Samples(plain)
        common = {"rows": n, "ours": o.summary(), "files": res.summary()["files"]}
        figures.append(Figure(
            "spark.bulk_insert.vs_bare_arrow", NAME,
            f"bulk_insert of {n} rows through the transaction vs the same Arrow write without "
            "lock, instant, heartbeat, markers or commit", o.median_ms, "ms",
            "bare Arrow write (same tagging and files)", b.median_ms, target=1.05,
            details={**common, "bare": b.summary()}))
        figures.append(Figure(
            "spark.bulk_insert.vs_df_write_parquet", NAME,
            f"bulk_insert of {n} rows vs Spark's df.write.partitionBy('p').parquet of the same "
            "DataFrame (no keys, no dedupe, no meta columns)", o.median_ms, "ms",
            "df.write.parquet", p.median_ms, details={**common, "plain": p.summary()}))

        parts, per = size["rfc_parts"], size["rfc_rows"]
        seeded = os.path.join(work, "rfc56-seed")
        SparkHudiWriter(spark, seeded, {**BASE_OPTS, "hoodie.parquet.small.file.limit": "0"}).write(
            source_df(spark, parts * per, parts), "bulk_insert")
        runs = {True: [], False: []}
        for rep in range(size["rfc_reps"]):
            for ecd in (False, True):
                ctx.log(f"spark_write: RFC-56 round {rep}, early detection {'on' if ecd else 'off'}")
                runs[ecd].append(_rfc56_once(spark, seeded, work, parts, per, ecd))
        on, off = Samples([r["seconds"] for r in runs[True]]), Samples([r["seconds"] for r in runs[False]])
        figures.append(Figure(
            "spark.rfc56.time_to_stop", NAME,
            f"RFC-56 plan, two writers on {parts} file groups x {per} rows: seconds until the doomed "
            "writer stops, early detection on vs off", on.median_ms, "ms",
            "early detection off (writes every file, loses at commit)", off.median_ms, target=0.1,
            details={"on": runs[True], "off": runs[False], "file_groups": parts,
                     "files_written_on": [r["files_written"] for r in runs[True]],
                     "files_written_off": [r["files_written"] for r in runs[False]]}))
    return figures
