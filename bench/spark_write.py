"""The Spark engine's write path: what the transaction costs, and what early detection saves.

Two questions, each answered against baselines measured in the same run, on one local[2]
session (so JVM start-up is paid once and never measured):

- ``spark.bulk_insert.vs_bare_arrow`` (target <= 1.05, the 5% overhead Alibaba reports for
  their exactly-once commit): ``SparkHudiWriter.write(df, "bulk_insert")`` of N rows (2 M in the
  full run) into a new table, against a *bare write* of the same rows: the same one job, its
  input tasks checking their rows and writing the same files with the five meta columns
  (spark/pair_write.py), moved to their Hudi names, but no lock, instant, heartbeat, markers,
  early-detection check or commit. The difference is the transactional machinery.
- ``spark.bulk_insert.vs_df_write_parquet`` (target <= 1.5): the same write against Spark's
  own ``df.write.partitionBy("p").parquet`` of the same DataFrame.
- ``spark.bulk_insert.vs_spark_writer_with_meta_columns`` (information): the same write against
  Spark's own writer writing the same rows plus Hudi's five meta columns (:func:`spark_sql_meta_columns`,
  Spark at its best: :data:`META_WRITE_OPTIONS`), without planning file groups or a transaction:
  what Hudi's layout costs any writer. Its details carry that cost over ``df.write.parquet``.
- ``spark.bulk_insert.vs_minimal_arrow_route`` (information): the same write against the
  least any write through Python can do with these rows (:func:`minimal_arrow_write`: Arrow
  batches to a Python worker, pyarrow writing the user columns per partition). Its details
  carry that floor over ``df.write.parquet``: the part of the previous figure that comes with
  handing rows to Python at all, whatever the writer does with them.
- ``spark.upsert.vs_plain_spark`` (target <= 1.3): an upsert of N/10 rows (half updates spread
  over every partition, half new keys) into the N-row table, against what a plain Spark job
  does for the same change to a plain parquet table: read the touched partitions, full-join
  them with the batch on (id, p), the batch's values winning, and write the result
  (``df.write.partitionBy("p").parquet``, to a new folder: Spark cannot overwrite what it
  reads). Each round starts from a fresh copy of both tables.
- ``spark.upsert.vs_spark_writer_with_meta_columns`` (information): the same upsert against
  that plain job run on the table the like-for-like bulk baseline wrote, keeping the meta
  columns as a Hudi merge keeps them (:func:`spark_sql_meta_upsert`). Its details carry that
  baseline over the plain one.

Every Hudi table the benchmark writes is read back by hudi-rs, which must see exactly the
expected number of rows. ``HUDI_OCC_BENCH_SPARK_ROWS`` overrides N (e.g. 500000 while
iterating on a shared machine).
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
        out = {"rows": 20_000, "reps": 1, "rfc_parts": 4, "rfc_rows": 2_000, "rfc_reps": 1}
    else:
        out = {"rows": 2_000_000, "reps": 3, "rfc_parts": 8, "rfc_rows": 50_000, "rfc_reps": 3}
    if os.environ.get("HUDI_OCC_BENCH_SPARK_ROWS"):
        out["rows"] = int(os.environ["HUDI_OCC_BENCH_SPARK_ROWS"])
    return out


def figure_names(quick: bool = False) -> list[str]:
    return ["spark.bulk_insert.vs_bare_arrow", "spark.bulk_insert.vs_df_write_parquet",
            "spark.bulk_insert.vs_minimal_arrow_route", "spark.bulk_insert.vs_spark_writer_with_meta_columns",
            "spark.upsert.vs_plain_spark", "spark.upsert.vs_spark_writer_with_meta_columns",
            "spark.rfc56.time_to_stop"]


def source_df(spark, rows: int, parts: int = 4):
    return spark.range(rows).selectExpr(
        "id", f"concat('p', cast(id % {parts} as string)) as p", "id % 7 as ts",
        "concat('value-', cast(id as string)) as v", "cast(id * 1.5 as double) as amount")


# --- the bare write -------------------------------------------------------------------------------


def bare_write(spark, df, out_dir: str) -> int:
    """Everything of the Hudi bulk_insert but the transaction (see the module docstring): the
    writer's route for this input, its input tasks checking and writing their rows in one job
    (spark/pair_write.py), the files moved to their Hudi names."""
    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.spark import pair_write
    from airflow_hudi_occ.spark.file_group_plan import plan_in_tasks
    from airflow_hudi_occ.spark.submit.options import SparkWriteOptions
    from airflow_hudi_occ.spark.writer import arrow_schema_of

    opts = SparkWriteOptions.from_options(BASE_OPTS)
    instant = time.strftime("%Y%m%d%H%M%S000", time.gmtime())
    # an empty table to size by (Hudi's record estimate, as the first write of ours)
    table = Table.create(os.path.join(out_dir, ".sizing"), "bare", record_key_fields=["id"],
                         partition_fields=["p"], precombine_field="ts")
    staging = os.path.join(out_dir, ".staging")
    plan = plan_in_tasks(df, opts, table).in_tasks
    rows = pair_write.write_job(spark, df, user_columns=list(df.columns), target_schema=arrow_schema_of(df),
                                instant=instant, plan=plan, out_dir=staging)()
    if pair_write.refusal(plan, rows) is not None:
        raise pair_write.refusal(plan, rows)
    written = 0
    for r in rows:
        os.makedirs(os.path.join(out_dir, r["partition"]), exist_ok=True)
        os.rename(os.path.join(staging, r["name"]), os.path.join(out_dir, r["partition"], r["name"]))
        written += r["rows"]
    shutil.rmtree(staging)
    return written


# --- the Arrow route's floor ----------------------------------------------------------------------


def minimal_arrow_write(spark, df, out_dir: str) -> int:
    """The least a write through Python can do: each input task gets its rows in Arrow batches
    (``mapInArrow``, the engine's batch size) and writes the user columns of each partition
    with one pyarrow ``ParquetWriter`` (snappy, 131,072-row row groups). No key, no meta
    column, no plan, no transaction. Rows written."""
    from airflow_hudi_occ.spark.pair_write import CHUNK_ROWS
    from airflow_hudi_occ.spark.session import arrow_batches

    def write(batches):  # nested: pickled by value, so workers need not import bench
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
        from pyspark import TaskContext

        task, writers, n = TaskContext.get().partitionId(), {}, 0
        for b in batches:
            t = pa.Table.from_batches([b])
            for p in pc.unique(t.column("p")).to_pylist():
                rows = t.filter(pc.equal(t.column("p"), p))
                if p not in writers:
                    os.makedirs(os.path.join(out_dir, f"p={p}"), exist_ok=True)
                    writers[p] = pq.ParquetWriter(os.path.join(out_dir, f"p={p}", f"part-{task}.parquet"),
                                                  rows.schema, compression="snappy")
                writers[p].write_table(rows, row_group_size=CHUNK_ROWS)
                n += rows.num_rows
        for w in writers.values():
            w.close()
        yield pa.RecordBatch.from_pydict({"n": [n]})
    with arrow_batches(spark, CHUNK_ROWS):
        return sum(r.n for r in df.mapInArrow(write, "n long").collect())


def spark_sql_meta_columns(df, instant: str):
    """``df`` with Hudi's five meta columns spelled in Spark SQL, as Spark's own writer would
    have to write them: the commit time and a file name as literals, the sequence number and
    the record key per row, the partition path from ``p``."""
    from pyspark.sql import functions as F
    return df.select(F.lit(instant).alias("_hoodie_commit_time"), _seqno(instant),
                     F.col("id").cast("string").alias("_hoodie_record_key"),
                     F.col("p").alias("_hoodie_partition_path"), _file_name(instant), *df.columns)


def _seqno(instant: str):
    """The per-row sequence number, ``<instant>_<task>_<n>``, in Spark SQL."""
    from pyspark.sql import functions as F
    return F.concat(F.lit(f"{instant}_"), F.spark_partition_id().cast("string"), F.lit("_"),
                    F.monotonically_increasing_id().cast("string")).alias("_hoodie_commit_seqno")


def _file_name(instant: str):
    """A new base file's name, one literal for every row (Spark writes no Hudi names)."""
    from pyspark.sql import functions as F
    return F.lit(f"{uuid.uuid4()}-0_0-0-0_{instant}.parquet").alias("_hoodie_file_name")


def write_with_meta_columns(df, out_dir: str) -> None:
    """Spark's own writer on rows that carry the meta columns, at its best for them."""
    df.write.options(**META_WRITE_OPTIONS).mode("overwrite").partitionBy("p").parquet(out_dir)


#: Spark's writer at its best for those columns: no dictionary tried on the unique ones, no
#: statistics where no reader filters (as base_file.py writes them)
META_WRITE_OPTIONS = {
    "parquet.enable.dictionary#_hoodie_commit_seqno": "false",
    "parquet.enable.dictionary#_hoodie_record_key": "false",
    **{f"parquet.column.statistics.enabled#{c}": "false"
       for c in ("_hoodie_commit_seqno", "_hoodie_partition_path", "_hoodie_file_name")}}


# --- upsert against a plain Spark merge ----------------------------------------------------------


def upsert_df(spark, rows: int, parts: int = 4):
    """N/10 rows: half of them updates of existing keys spread over every partition, half new."""
    half = max(1, rows // 20)
    step = max(1, rows // half)
    upd = spark.range(half).selectExpr(f"(id * {step} + id % {parts}) % {rows} as id").selectExpr(
        "id", f"concat('p', cast(id % {parts} as string)) as p", "cast(100 as bigint) as ts",
        "concat('updated-', cast(id as string)) as v", "cast(id * 2.5 as double) as amount")
    return upd.unionByName(source_df(spark, half, parts).selectExpr(f"id + {rows} as id", "p", "ts", "v", "amount")
                           .selectExpr("id", f"concat('p', cast(id % {parts} as string)) as p",
                                       "ts", "v", "amount"))


def _joined(spark, table_dir: str, up):
    """The touched partitions of the table full-joined with the batch on (id, p), as ``o`` and
    ``u``; and the batch's columns, its values winning."""
    from pyspark.sql import functions as F
    touched = [r[0] for r in up.select("p").distinct().collect()]
    old = spark.read.parquet(table_dir).where(F.col("p").isin(touched))
    o, u = old.alias("o"), up.alias("u")
    merged = o.join(u, (F.col("o.id") == F.col("u.id")) & (F.col("o.p") == F.col("u.p")), "full_outer")
    return merged, [F.coalesce(F.col(f"u.{c}"), F.col(f"o.{c}")).alias(c) for c in up.columns]


def plain_upsert(spark, table_dir: str, up, out_dir: str) -> None:
    """Read the touched partitions, full-join with the batch (its values win), write them."""
    merged, cols = _joined(spark, table_dir, up)
    merged.select(*cols).write.mode("overwrite").partitionBy("p").parquet(out_dir)


def spark_sql_meta_upsert(spark, table_dir: str, up, out_dir: str, instant: str) -> None:
    """:func:`plain_upsert` on a table written by :func:`spark_sql_meta_columns`, keeping its meta
    columns as a Hudi merge does: the batch's rows get this instant's commit time and their key,
    the untouched rows keep theirs; every row gets a new sequence number, its partition path and
    the new file's name (base_file.REWRITTEN_META_COLUMNS). The like-for-like upsert baseline."""
    from pyspark.sql import functions as F
    merged, cols = _joined(spark, table_dir, up)
    from_batch = F.col("u.id").isNotNull()
    meta = [F.when(from_batch, F.lit(instant)).otherwise(F.col("o._hoodie_commit_time")).alias("_hoodie_commit_time"),
            _seqno(instant),
            F.when(from_batch, F.col("u.id").cast("string")).otherwise(F.col("o._hoodie_record_key"))
            .alias("_hoodie_record_key"),
            F.coalesce(F.col("u.p"), F.col("o.p")).alias("_hoodie_partition_path"),
            _file_name(instant)]
    write_with_meta_columns(merged.select(*meta, *cols), out_dir)


def hudi_rows(path: str) -> int:
    from airflow_hudi_occ.testing.tables import hudi_read
    t = hudi_read(path)
    ids = t.column("id")
    if len(set(ids.to_pylist())) != t.num_rows:
        raise RuntimeError(f"hudi-rs sees duplicate keys in {path}")
    return t.num_rows


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
        ours, bare, plain, floor, meta = [], [], [], [], []
        # the first round warms the JVM and workers up (not in the quick smoke run)
        for rep in range(1 if ctx.quick else 0, size["reps"] + 1):
            ctx.log(f"spark_write: bulk_insert {n} rows, round {rep}")
            t0 = time.perf_counter()
            res = SparkHudiWriter(spark, os.path.join(work, f"hudi-{rep}"), BASE_OPTS).write(df, "bulk_insert")
            t1 = time.perf_counter()
            written = bare_write(spark, df, os.path.join(work, f"bare-{rep}"))
            t2 = time.perf_counter()
            df.write.mode("overwrite").partitionBy("p").parquet(os.path.join(work, f"plain-{rep}"))
            t3 = time.perf_counter()
            floor_rows = minimal_arrow_write(spark, df, os.path.join(work, f"floor-{rep}"))
            t4 = time.perf_counter()
            write_with_meta_columns(spark_sql_meta_columns(df, res.instant), os.path.join(work, f"meta-{rep}"))
            t5 = time.perf_counter()
            assert res.summary()["rows_written"] == n == written == floor_rows, (res.summary(), written, floor_rows)
            if rep > 0:
                ours.append(t1 - t0)
                bare.append(t2 - t1)
                plain.append(t3 - t2)
                floor.append(t4 - t3)
                meta.append(t5 - t4)
            if rep == size["reps"]:
                got = hudi_rows(os.path.join(work, f"hudi-{rep}"))
                assert got == n, f"hudi-rs read {got} rows of the bulk_insert, expected {n}"
            shutil.rmtree(os.path.join(work, f"floor-{rep}"), ignore_errors=True)
            for d in ("hudi", "bare", "plain", "meta"):
                if rep < size["reps"]:
                    shutil.rmtree(os.path.join(work, f"{d}-{rep}"), ignore_errors=True)
        o, b, p = Samples(ours), Samples(bare), Samples(plain)
        common = {"rows": n, "ours": o.summary(), "files": res.summary()["files"]}
        figures.append(Figure(
            "spark.bulk_insert.vs_bare_arrow", NAME,
            f"bulk_insert of {n} rows through the transaction vs the same Spark write without "
            "lock, instant, heartbeat, markers or commit", o.median_ms, "ms",
            "bare write (same tagging and files)", b.median_ms, target=1.05,
            details={**common, "bare": b.summary()}))
        figures.append(Figure(
            "spark.bulk_insert.vs_df_write_parquet", NAME,
            f"bulk_insert of {n} rows vs Spark's df.write.partitionBy('p').parquet of the same "
            "DataFrame (no keys, no meta columns)", o.median_ms, "ms",
            "df.write.parquet", p.median_ms, target=1.5, details={**common, "plain": p.summary()}))
        # information: two baselines that say what the ratio to df.write.parquet is made of
        for name, what, baseline, key, samples in (
                ("vs_minimal_arrow_route", "the least a write through Python does with the same rows "
                 "(mapInArrow, pyarrow writes each partition's user columns; minimal_arrow_write): "
                 "what the engine adds to its route", "minimal pyarrow writer behind mapInArrow",
                 "floor", Samples(floor)),
                ("vs_spark_writer_with_meta_columns", "Spark's own writer writing the same rows with "
                 "Hudi's five meta columns spelled in Spark SQL (spark_sql_meta_columns; no plan, no "
                 "transaction): the like-for-like baseline", "df.write.parquet of the rows and their "
                 "meta columns", "spark_with_meta", Samples(meta))):
            figures.append(Figure(
                f"spark.bulk_insert.{name}", NAME,
                f"bulk_insert of {n} rows vs {what}; that baseline over df.write.parquet is in details",
                o.median_ms, "ms", baseline, samples.median_ms,
                details={**common, key: samples.summary(),
                         f"{key}_vs_df_write_parquet": round(samples.median_ms / p.median_ms, 3)}))

        # upsert N/10 into the N-row tables left by the last round
        seed_hudi, seed_plain, seed_meta = (os.path.join(work, f"{d}-{size['reps']}") for d in ("hudi", "plain", "meta"))
        shutil.rmtree(os.path.join(work, f"bare-{size['reps']}"), ignore_errors=True)
        up = upsert_df(spark, n)
        n_up = up.count()
        n_new = up.where(f"id >= {n}").count()
        ups, plains, metas = [], [], []
        for rep in range(1 if ctx.quick else 0, size["reps"] + 1):
            ctx.log(f"spark_write: upsert {n_up} rows into {n}, round {rep}")
            h, pl, out, me, me_out = (os.path.join(work, f"up-{d}-{rep}")
                                      for d in ("hudi", "plain", "plain-out", "meta", "meta-out"))
            shutil.copytree(seed_hudi, h)
            shutil.copytree(seed_plain, pl)
            shutil.copytree(seed_meta, me)
            t0 = time.perf_counter()
            ures = SparkHudiWriter(spark, h, BASE_OPTS).write(up, "upsert")
            t1 = time.perf_counter()
            plain_upsert(spark, pl, up, out)
            t2 = time.perf_counter()
            spark_sql_meta_upsert(spark, me, up, me_out, ures.instant)
            t3 = time.perf_counter()
            if rep > 0:
                ups.append(t1 - t0)
                plains.append(t2 - t1)
                metas.append(t3 - t2)
            if rep == size["reps"]:
                got = hudi_rows(h)
                assert got == n + n_new, f"hudi-rs read {got} rows after the upsert, expected {n + n_new}"
                got = spark.read.parquet(me_out).where(f"_hoodie_commit_time = '{ures.instant}'").count()
                assert got == n_up, f"the like-for-like upsert wrote {got} rows of the batch, expected {n_up}"
            for d in (h, pl, out, me, me_out):
                shutil.rmtree(d, ignore_errors=True)
        u, pu, mu = Samples(ups), Samples(plains), Samples(metas)
        figures.append(Figure(
            "spark.upsert.vs_plain_spark", NAME,
            f"upsert of {n_up} rows ({n_new} new) into {n} rows vs plain Spark reading the touched "
            "partitions, joining and rewriting them", u.median_ms, "ms",
            "plain Spark read+join+write", pu.median_ms, target=1.3,
            details={"rows": n, "upsert_rows": n_up, "new_rows": n_new, "ours": u.summary(),
                     "plain": pu.summary(), "files": ures.summary()["files"]}))
        figures.append(Figure(
            "spark.upsert.vs_spark_writer_with_meta_columns", NAME,
            f"upsert of {n_up} rows ({n_new} new) into {n} rows vs the same read+join+write by plain "
            "Spark on a table with Hudi's five meta columns, kept as a Hudi merge keeps them "
            "(spark_sql_meta_upsert): the like-for-like baseline; over the plain one in details",
            u.median_ms, "ms", "plain Spark read+join+write with meta columns", mu.median_ms,
            details={"rows": n, "upsert_rows": n_up, "ours": u.summary(), "spark_with_meta": mu.summary(),
                     "spark_with_meta_vs_plain": round(mu.median_ms / pu.median_ms, 3)}))
        for d in (seed_hudi, seed_plain, seed_meta):
            shutil.rmtree(d, ignore_errors=True)

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
