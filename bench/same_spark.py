"""Our Spark engine against Java Hudi and Delta Lake, on the same Spark, same data, same run.

Issue 31, item 2. The baseline a user weighs is the writer they would use instead: Java Hudi's
Spark datasource, or Delta Lake on Spark. Java Hudi's newest bundle that this project's Maven
Central serves is built for Spark 3.5 (``scripts/install-java-hudi.sh``), so the comparison
runs on PySpark 3.5.5: ``scripts/install-spark35-bench.sh`` makes a venv with it and this
package's runtime dependencies, and fetches Delta Lake 3.3.2 for Spark 3.5. Our engine runs
there through ``spark/compat.py`` (Spark 3.5 has no ``applyInArrow``). ONE local[2] session
holds all three writers (Hudi's and Delta's jars and session extensions, Kryo as Hudi asks):
one JVM, started once and never measured; one heavy thing at a time; each figure the median
of ``--reps`` rounds (3), the writers interleaved within a round, after one untimed warm-up
round.

Figures (ratio = ours / baseline; target <= 1.0 against Java Hudi, "at or below"):

- ``same_spark.bulk_insert.vs_java_hudi``: ``SparkHudiWriter.write(df, "bulk_insert")`` of
  ``--rows`` rows (2 M) into a new table against Java Hudi's ``bulk_insert`` (row writer,
  Hudi's default sort mode, the same five meta columns, the same file sizing
  (``hoodie.parquet.max.file.size``), OCC with the file-system lock, no metadata table: the
  same work as ours). Also against ``df.write.format("delta")`` and
  ``df.write.partitionBy("p").parquet`` (``.vs_delta``, ``.vs_df_write_parquet``).
- ``same_spark.upsert.vs_java_hudi_default_index`` / ``.vs_java_hudi_simple_index`` (or
  ``_bloom_index`` when the bundle's default is already the simple index, as Hudi 1.x's is) /
  ``.vs_delta_merge``: an upsert of N/10 rows (half updates spread over every partition, half
  new keys; bench/spark_write.py's ``upsert_df``) into each writer's N-row table, each round
  from a fresh copy of the tables.
- ``same_spark.small_commits.*``: the median latency of ``--commits`` small upserts (10 rows
  each) in a row into one table: ours through the core ``ArrowTableWriter``, ours through
  the Spark engine, Java Hudi's OCC upsert (clean and archival at Hudi's defaults on both).
- ``same_spark.doomed.time_to_stop.vs_java_hudi`` (issue 31 item 2, target <= 1.0): a rival
  writer (our core writer, another process) has begun, written a file in each of the table's
  file groups and waits to commit, its heartbeat alive; then an upsert of ``--rows``/10 rows
  over the same file groups is started with early conflict detection on: ours
  (``SparkHudiWriter``, ``hoodie.write.concurrency.early.conflict.detection.enable=true``)
  against Java Hudi's (the same key, direct markers, its simple direct-marker strategy). The
  figure is the seconds from the write call until it fails with its conflict; the files each
  wrote before stopping are in the details (Hudi rolls them back lazily).
- ``same_spark.virtual_keys.bulk_insert.vs_df_write_parquet`` (issue 31 item 3, target 1.2):
  the bulk_insert into a table with ``hoodie.populate.meta.fields=false`` against
  ``df.write.partitionBy("p").parquet`` of the same rows; ``...virtual_keys.bulk_insert.vs_delta``
  against Delta's write of them, the like-for-like comparison with Delta (target <= 1.0).

Java Hudi's default parquet codec is gzip, this project's snappy (docs/configuration.md): each
Java figure is at Java's defaults, and ``...vs_java_hudi_same_codec`` gives Java our codec too
(issue 43, item 6: "same codec, and at its defaults").

Memory: every timed write runs under :class:`PeakMemory`: the JVM heap's peak (its pools'
peaks reset before the write; in local mode the JVM is driver and executor), the Python
workers' resident set (sampled), and the JVM's resident set (the session's peak so far: a JVM
keeps what it took). Each figure carries ``peak_memory_mb``: per writer, the largest of its
timed rounds.

Each writer's timeline stages (``planning`` ... ``committing``, the engine's progress lines)
are timed in every round of ours, so the JSON carries where our time went (``profile``).
Every table is read back exactly (the row count and every key once) by hudi-rs and by Java
Hudi in the same session; Delta by Delta.

Run: ``scripts/install-spark35-bench.sh``, then ``.venv/bin/python -m bench.same_spark
[--rows N] [--reps R] [--commits C] [--only bulk,upsert,commits,virtual,doomed] [--json PATH]``
(re-executed under the bench venv's Python when started elsewhere).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETUP_DIR = Path(os.environ.get("HUDI_OCC_SPARK35_BENCH_DIR") or ROOT / ".work" / "spark35-bench")
INSTALL = "scripts/install-spark35-bench.sh"
SECTIONS = ("bulk", "upsert", "commits", "virtual", "doomed")

KEYS = {"hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.metadata.enable": "false",
        "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
        "hoodie.cleaner.policy.failed.writes": "LAZY"}
#: our engine: the table version Java Hudi 1.2 writes by default, the file-system lock
OURS = {**KEYS, "hoodie.datasource.write.table.name": "bench", "hoodie.write.table.version": "9",
        "hoodie.write.lock.provider": "filesystem",
        "hoodie.time.generator.max_expected_clock_skew_ms": "2"}
#: Java Hudi: the same keys, OCC under its file-system lock, no metadata table (ours keeps none)
JAVA = {**KEYS, "hoodie.table.name": "bench", "hoodie.write.table.version": "9",
        "hoodie.datasource.write.hive_style_partitioning": "false",
        "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider",
        "hoodie.datasource.write.row.writer.enable": "true"}


ECD_KEY = "hoodie.write.concurrency.early.conflict.detection.enable"
#: Java Hudi's early conflict detection: direct markers (its simple direct-marker strategy is
#: the default for them), checked at every write handle it creates
JAVA_EARLY_DETECTION = {ECD_KEY: "true", "hoodie.write.markers.type": "DIRECT"}


class SetupMissing(RuntimeError):
    pass


def load_setup() -> dict:
    f = SETUP_DIR / "setup.json"
    if not f.is_file():
        raise SetupMissing(f"{f} is missing: run {INSTALL} (after scripts/install-java-hudi.sh)")
    setup = json.loads(f.read_text())
    setup["java"] = json.loads(Path(setup["java_hudi_setup"]).read_text())
    return setup


def session(setup: dict, driver_memory: str | None = None):
    """One local[2] session with Hudi's and Delta's jars. ``driver_memory`` (the driver is the
    executor in local mode) for large batches: the project's 2 GB default suits 2 M rows."""
    from airflow_hudi_occ.spark.session import local_session
    conf = {"spark.jars": ",".join([setup["java"]["hudi_jar"], *setup["delta_jars"]]),
            "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
            "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
            "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension,"
                                    "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"}
    if driver_memory:
        conf["spark.driver.memory"] = driver_memory
    return local_session("local[2]", "airflow_hudi_occ-same-spark", conf)


# --- timing ----------------------------------------------------------------------------------------

class Stages:
    """``on_progress`` for our writer: the seconds from each stage line to the next, under the
    name of the line that opens them. So ``validate`` is everything before the ``planning``
    line (options, table, schema, the batch check's Spark job); ``planning`` the lock and
    instant; ``begin`` the early check before tagging and the file-group plan (its Spark
    count job); ``tagging`` the inflight transition and markers; ``writing`` the write job;
    ``committing`` the commit under the lock."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.last, self.stage, self.spent = self.t0, "validate", {}

    def __call__(self, stage: str, text: str) -> None:
        now = time.perf_counter()
        if stage != self.stage:
            self.spent[self.stage] = self.spent.get(self.stage, 0.0) + now - self.last
            self.stage, self.last = stage, now

    def close(self) -> dict:
        self("end", "")
        return {k: round(v, 3) for k, v in self.spent.items()}


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


class PeakMemory:
    """The peak memory of one write, in three parts. ``jvm_heap``: the JVM heap's peak from
    its memory pools (reset when the write begins), the one per-writer figure of the JVM (in
    local mode the executor is the driver's JVM). ``python_workers_rss``: the resident set of
    the session's Python workers (our engine's Arrow tasks, Delta's merge has none), sampled
    every ``interval`` seconds by a thread. ``jvm_rss``: the JVM process's resident set, for
    scale only: a JVM does not give memory back, so it is the session's peak so far, not this
    writer's."""

    def __init__(self, spark, interval: float = 0.1):
        import psutil
        self.spark, self.interval, self.me = spark, interval, psutil.Process()
        self.peak = {"jvm_rss": 0, "python_workers_rss": 0}
        self.peak_heap = 0
        self._stop = None

    def _pools(self):
        mf = self.spark._jvm.java.lang.management.ManagementFactory
        heap = self.spark._jvm.java.lang.management.MemoryType.HEAP
        return [p for p in mf.getMemoryPoolMXBeans() if p.getType().equals(heap)]

    def _sample(self) -> None:
        import psutil
        now = {"jvm_rss": 0, "python_workers_rss": 0}
        for c in self.me.children(recursive=True):
            try:
                kind = "jvm_rss" if c.name() == "java" else "python_workers_rss"
                now[kind] += c.memory_info().rss
            except psutil.Error:
                pass  # a worker that ended between the listing and the read
        self.peak = {k: max(v, now[k]) for k, v in self.peak.items()}

    def __enter__(self) -> "PeakMemory":
        import threading
        for pool in self._pools():
            pool.resetPeakUsage()
        self._stop = threading.Event()

        def sample():
            while not self._stop.is_set():
                self._sample()
                self._stop.wait(self.interval)
        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
        self.peak_heap = sum(p.getPeakUsage().getUsed() for p in self._pools())

    def mb(self) -> dict:
        return {"jvm_heap": round(self.peak_heap / 2**20),
                **{k: round(v / 2**20) for k, v in self.peak.items()}}


class Rounds:
    """The timed rounds of one section: seconds per writer, and each writer's peak memory (the
    largest of its rounds)."""

    def __init__(self, spark, writers):
        self.spark = spark
        self.runs: dict[str, list[float]] = {k: [] for k in writers}
        self.memory: dict[str, dict] = {}

    def time(self, writer: str, fn, keep: bool) -> None:
        with PeakMemory(self.spark) as mem:
            secs = timed(fn)
        if keep:
            self.runs[writer].append(secs)
            m = mem.mb()
            old = self.memory.get(writer, {})
            self.memory[writer] = {k: max(v, old.get(k, 0)) for k, v in m.items()}


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def figure(name: str, what: str, ours: list[float], base: list[float], baseline: str,
           target: float | None, **details) -> dict:
    v, b = median(ours) * 1000, median(base) * 1000
    return {"name": name, "description": what, "value_ms": round(v, 1), "baseline": baseline,
            "baseline_ms": round(b, 1), "ratio": round(v / b, 3), "target": target,
            "verdict": "info" if target is None else ("ok" if v / b <= target else "MISS"),
            "ours_s": [round(x, 3) for x in ours], "baseline_s": [round(x, 3) for x in base],
            **details}


# --- checks: every table read back exactly ---------------------------------------------------------

def check_hudi(spark, path: str, expected: int) -> dict:
    """hudi-rs and Java Hudi (this session) each see ``expected`` rows, every key once."""
    from pyspark.sql import functions as F

    from airflow_hudi_occ.testing.tables import hudi_read
    rs = hudi_read(path)
    rs_keys = len(set(rs.column("id").to_pylist()))
    jdf = spark.read.format("hudi").load(path)
    j = jdf.agg(F.count("*").alias("n"), F.countDistinct("id").alias("k")).collect()[0]
    got = {"hudi_rs_rows": rs.num_rows, "hudi_rs_keys": rs_keys, "java_rows": j.n, "java_keys": j.k}
    if set(got.values()) != {expected}:
        raise RuntimeError(f"{path}: expected {expected} rows, one per key; read {got}")
    return got


def check_delta(spark, path: str, expected: int) -> dict:
    from pyspark.sql import functions as F
    r = spark.read.format("delta").load(path).agg(F.count("*").alias("n"), F.countDistinct("id").alias("k")).collect()[0]
    if (r.n, r.k) != (expected, expected):
        raise RuntimeError(f"{path}: Delta read {r.n} rows, {r.k} keys; expected {expected}")
    return {"delta_rows": r.n}


def file_count(path: str) -> int:
    return sum(1 for d, _, fs in os.walk(path) if "/.hoodie" not in d and "_delta_log" not in d
               for f in fs if f.endswith(".parquet"))


# --- the writers -----------------------------------------------------------------------------------

def ours_write(spark, path: str, df, operation: str, options: dict | None = None) -> dict:
    from airflow_hudi_occ.spark.writer import SparkHudiWriter
    stages = Stages()
    SparkHudiWriter(spark, path, {**OURS, **(options or {})}, on_progress=stages).write(df, operation)
    return stages.close()


def java_write(df, path: str, operation: str, options: dict | None = None) -> None:
    df.write.format("hudi").options(**{**JAVA, "hoodie.datasource.write.operation": operation,
                                       **(options or {})}).mode("append").save(path)


def delta_merge(spark, path: str, up) -> None:
    from delta.tables import DeltaTable
    (DeltaTable.forPath(spark, path).alias("t").merge(up.alias("s"), "t.id = s.id AND t.p = s.p")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())


#: the codec our writers use by default (core/config: ``hoodie.parquet.compression.codec``)
OUR_CODEC = "snappy"


def java_default_codec(spark) -> str:
    """The parquet codec Java Hudi writes when none is set, asked of the running bundle."""
    jvm = spark._jvm
    return str(jvm.org.apache.hudi.common.config.HoodieStorageConfig.PARQUET_COMPRESSION_CODEC_NAME
               .defaultValue())


def java_default_index(spark) -> str:
    """The index Java Hudi's Spark writer uses when none is set (decided per engine: SIMPLE
    in Hudi 1.x, BLOOM before), asked of the running bundle."""
    jvm = spark._jvm
    cfg = (jvm.org.apache.hudi.config.HoodieIndexConfig.newBuilder()
           .withEngineType(jvm.org.apache.hudi.common.engine.EngineType.SPARK).build())
    return str(cfg.getString("hoodie.index.type"))


# --- sections --------------------------------------------------------------------------------------

def bench_bulk(spark, work: str, n: int, reps: int, log) -> tuple[list[dict], dict]:
    from bench.spark_write import source_df
    df = source_df(spark, n)
    java_codec = java_default_codec(spark)
    same_codec = {"hoodie.parquet.compression.codec": OUR_CODEC}
    r = Rounds(spark, ["ours", "java", "java_same_codec", "delta", "parquet"])
    profile = []
    for rep in range(reps + 1):  # round 0: the warm-up
        log(f"bulk_insert of {n} rows, round {rep}")
        d = {k: os.path.join(work, f"bulk-{k}-{rep}") for k in r.runs}
        spent = {}
        r.time("ours", lambda: spent.update(ours_write(spark, d["ours"], df, "bulk_insert")), rep > 0)
        r.time("java", lambda: java_write(df, d["java"], "bulk_insert"), rep > 0)
        r.time("java_same_codec", lambda: java_write(df, d["java_same_codec"], "bulk_insert", same_codec), rep > 0)
        r.time("delta", lambda: df.write.format("delta").partitionBy("p").save(d["delta"]), rep > 0)
        r.time("parquet", lambda: df.write.partitionBy("p").parquet(d["parquet"]), rep > 0)
        if rep:
            profile.append(spent)
        if rep < reps:
            for p in d.values():
                shutil.rmtree(p, ignore_errors=True)
    runs = r.runs
    last = {k: os.path.join(work, f"bulk-{k}-{reps}") for k in runs}
    checks = {"ours": check_hudi(spark, last["ours"], n), "java": check_hudi(spark, last["java"], n),
              "java_same_codec": check_hudi(spark, last["java_same_codec"], n),
              "delta": check_delta(spark, last["delta"], n)}
    shutil.rmtree(last.pop("java_same_codec"), ignore_errors=True)  # the upsert starts from the others
    files = {k: file_count(p) for k, p in last.items()}
    common = {"rows": n, "files": files, "reads": checks, "profile_ours_s": profile,
              "java_default_codec": java_codec, "our_codec": OUR_CODEC, "peak_memory_mb": r.memory}
    what = f"bulk_insert of {n} rows into a new table"
    figs = [figure("same_spark.bulk_insert.vs_java_hudi", f"{what} vs Java Hudi bulk_insert (row writer, "
                   f"same meta columns and file sizing, OCC, no metadata table; its default codec, {java_codec})",
                   runs["ours"], runs["java"], "Java Hudi bulk_insert", 1.0, **common),
            figure("same_spark.bulk_insert.vs_java_hudi_same_codec", f"{what} vs Java Hudi bulk_insert as "
                   f"above with our codec ({OUR_CODEC})", runs["ours"], runs["java_same_codec"],
                   f"Java Hudi bulk_insert ({OUR_CODEC})", 1.0, **common),
            figure("same_spark.bulk_insert.vs_delta", f"{what} vs df.write.format('delta')",
                   runs["ours"], runs["delta"], "Delta write", 1.0, **common),
            figure("same_spark.bulk_insert.vs_df_write_parquet", f"{what} vs df.write.partitionBy('p').parquet",
                   runs["ours"], runs["parquet"], "df.write.parquet", None, **common),
            figure("same_spark.bulk_insert.java_hudi_vs_df_write_parquet", "Java Hudi's bulk_insert over "
                   "df.write.parquet (information)", runs["java"], runs["parquet"], "df.write.parquet", None),
            figure("same_spark.bulk_insert.delta_vs_df_write_parquet", "Delta's write over "
                   "df.write.parquet (information)", runs["delta"], runs["parquet"], "df.write.parquet", None)]
    return figs, last


def bench_upsert(spark, work: str, n: int, reps: int, seeds: dict, log) -> list[dict]:
    from bench.spark_write import upsert_df
    up = upsert_df(spark, n).cache()
    n_up = up.count()
    n_new = up.where(f"id >= {n}").count()
    default_index = java_default_index(spark)
    # the second Java variant: the simple index, or Bloom when the default is already simple
    other = "BLOOM" if default_index == "SIMPLE" else "SIMPLE"
    same_codec = {"hoodie.parquet.compression.codec": OUR_CODEC}
    r = Rounds(spark, ["ours", "java_default", "java_simple", "java_same_codec", "delta"])
    seed_of = {"ours": seeds["ours"], "java_default": seeds["java"], "java_simple": seeds["java"],
               "java_same_codec": seeds["java"], "delta": seeds["delta"]}
    profile = []
    for rep in range(reps + 1):
        log(f"upsert of {n_up} rows into {n}, round {rep}")
        d = {k: os.path.join(work, f"up-{k}-{rep}") for k in r.runs}
        for k, p in d.items():
            shutil.copytree(seed_of[k], p)
        spent = {}
        r.time("ours", lambda: spent.update(ours_write(spark, d["ours"], up, "upsert")), rep > 0)
        r.time("java_default", lambda: java_write(up, d["java_default"], "upsert"), rep > 0)
        r.time("java_simple", lambda: java_write(up, d["java_simple"], "upsert", {"hoodie.index.type": other}),
               rep > 0)
        r.time("java_same_codec", lambda: java_write(up, d["java_same_codec"], "upsert", same_codec), rep > 0)
        r.time("delta", lambda: delta_merge(spark, d["delta"], up), rep > 0)
        if rep:
            profile.append(spent)
        if rep == reps:
            checks = {k: check_hudi(spark, d[k], n + n_new)
                      for k in ("ours", "java_default", "java_simple", "java_same_codec")}
            checks["delta"] = check_delta(spark, d["delta"], n + n_new)
        for p in d.values():
            shutil.rmtree(p, ignore_errors=True)
    up.unpersist()
    runs = r.runs
    common = {"rows": n, "upsert_rows": n_up, "new_rows": n_new, "reads": checks,
              "java_default_index": default_index, "profile_ours_s": profile,
              "java_default_codec": java_default_codec(spark), "our_codec": OUR_CODEC,
              "peak_memory_mb": r.memory}
    what = f"upsert of {n_up} rows ({n_new} new) into {n}"
    return [figure("same_spark.upsert.vs_java_hudi_default_index", f"{what} vs Java Hudi upsert, its "
                   f"default index ({default_index})", runs["ours"], runs["java_default"],
                   f"Java Hudi upsert ({default_index})", 1.0, **common),
            figure("same_spark.upsert.vs_java_hudi_same_codec", f"{what} vs Java Hudi upsert, its default "
                   f"index, our codec ({OUR_CODEC})", runs["ours"], runs["java_same_codec"],
                   f"Java Hudi upsert ({default_index}, {OUR_CODEC})", 1.0, **common),
            figure(f"same_spark.upsert.vs_java_hudi_{other.lower()}_index", f"{what} vs Java Hudi "
                   f"upsert, hoodie.index.type={other}", runs["ours"], runs["java_simple"],
                   f"Java Hudi upsert ({other})", 1.0, **common),
            figure("same_spark.upsert.vs_delta_merge", f"{what} vs Delta MERGE on (id, p)",
                   runs["ours"], runs["delta"], "Delta MERGE", 1.0, **common)]


def bench_commits(spark, work: str, commits: int, log) -> list[dict]:
    """``commits`` small upserts (10 rows, 5 updates and 5 new keys) in a row per writer."""
    import pyarrow as pa

    from airflow_hudi_occ.core import ArrowTableWriter, Table, WriteConfig
    from airflow_hudi_occ.spark.writer import SparkHudiWriter

    def rows(i: int) -> pa.Table:
        ids = [i * 5 + k for k in range(5)] + [max(0, (i - 1) * 5) + k for k in range(5)]
        return pa.table({"id": pa.array(ids, pa.int64()), "p": [f"p{x % 4}" for x in ids],
                         "ts": pa.array([i] * 10, pa.int64()), "v": [f"c{i}"] * 10,
                         "amount": pa.array([float(x) for x in ids])})

    paths = {k: os.path.join(work, f"commits-{k}") for k in ("core", "spark", "java")}
    core_table = Table.create(paths["core"], "bench", record_key_fields=["id"], partition_fields=["p"],
                              precombine_field="ts", version=9)
    core = ArrowTableWriter(core_table, WriteConfig.from_options(OURS))
    spark_w = SparkHudiWriter(spark, paths["spark"], OURS)
    lat = {k: [] for k in paths}
    stages: list[dict] = []
    batches = [rows(i) for i in range(commits + 1)]
    for i, b in enumerate(batches):  # commit 0 creates each table: not counted
        if i % 25 == 0:
            log(f"small commits: {i} of {commits}")
        df = spark.createDataFrame(b.to_pandas())
        spent: dict = {}

        def spark_once():
            st = spark_w.on_progress = Stages()
            spark_w.write(df, "upsert")
            spent.update(st.close())
        t = {"core": timed(lambda: core.write(b, "upsert")),
             "spark": timed(spark_once),
             "java": timed(lambda: java_write(df, paths["java"], "upsert"))}
        if i:
            for k, v in t.items():
                lat[k].append(v)
            stages.append(spent)
    expected = len({x for b in batches for x in b.column("id").to_pylist()})
    checks = {k: check_hudi(spark, p, expected) for k, p in paths.items()}
    # where the Spark engine's median commit goes, stage by stage (Stages' names)
    profile = {k: round(median([st.get(k, 0.0) for st in stages]), 4) for k in sorted({k for st in stages for k in st})}
    common = {"commits": commits, "reads": checks}
    return [figure("same_spark.small_commits.core_vs_java_hudi", f"median latency of {commits} "
                   "10-row upserts in a row: ours (core ArrowTableWriter) vs Java Hudi OCC upsert",
                   lat["core"], lat["java"], "Java Hudi OCC upsert", 1.0, **common),
            figure("same_spark.small_commits.spark_vs_java_hudi", f"median latency of {commits} "
                   "10-row upserts in a row: ours (Spark engine) vs Java Hudi OCC upsert",
                   lat["spark"], lat["java"], "Java Hudi OCC upsert", 1.0, profile_spark_median_s=profile,
                   **common)]


def bench_virtual(spark, work: str, n: int, reps: int, log) -> list[dict]:
    """Virtual keys: no meta columns to write, so the work is the same as Delta's write and
    ``df.write.parquet``'s: the like-for-like comparison with Delta (bulk_insert with meta
    columns writes five more columns than Delta does)."""
    from bench.spark_write import source_df
    df = source_df(spark, n)
    runs = {"ours": [], "delta": [], "parquet": []}
    profile = []
    virtual = {"hoodie.populate.meta.fields": "false"}
    for rep in range(reps + 1):
        log(f"virtual keys: bulk_insert of {n} rows, round {rep}")
        d = {k: os.path.join(work, f"vk-{k}-{rep}") for k in runs}
        spent = {}
        t = {"ours": timed(lambda: spent.update(ours_write(spark, d["ours"], df, "bulk_insert", virtual))),
             "delta": timed(lambda: df.write.format("delta").partitionBy("p").save(d["delta"])),
             "parquet": timed(lambda: df.write.partitionBy("p").parquet(d["parquet"]))}
        if rep:
            for k, v in t.items():
                runs[k].append(v)
            profile.append(spent)
        if rep == reps:
            checks = {"ours": check_hudi(spark, d["ours"], n), "delta": check_delta(spark, d["delta"], n)}
            from airflow_hudi_occ.core import Table
            if Table.open(d["ours"]).config.populates_meta_fields:
                raise RuntimeError(f"{d['ours']} was not written with virtual keys")
        for p in d.values():
            shutil.rmtree(p, ignore_errors=True)
    what = f"bulk_insert of {n} rows into a table with hoodie.populate.meta.fields=false"
    return [figure("same_spark.virtual_keys.bulk_insert.vs_df_write_parquet",
                   f"{what} vs df.write.partitionBy('p').parquet of the same rows", runs["ours"],
                   runs["parquet"], "df.write.parquet", 1.2, rows=n, reads=checks, profile_ours_s=profile),
            figure("same_spark.virtual_keys.bulk_insert.vs_delta", f"{what} vs df.write.format('delta') "
                   "of the same rows (the same work: no meta columns)", runs["ours"], runs["delta"],
                   "Delta write", 1.0, rows=n, reads=checks)]


def _rival_at_its_commit(path: str, parts: int):
    """Start our core writer on ``path`` in another process with one row in each of the
    ``parts`` file groups; return once it has written every file (markers included) and waits
    at its barrier to commit, its heartbeat alive. The caller releases it with
    ``barrier.wait()`` and reads its outcome from the queue."""
    import multiprocessing

    from airflow_hudi_occ.testing.workers import commit_after_barrier
    mp = multiprocessing.get_context("spawn")
    barrier, results = mp.Barrier(2), mp.Queue()
    rows = [{"id": p, "p": f"p{p}", "ts": 100, "v": "rival", "amount": 0.0} for p in range(parts)]
    # the rival waits up to 15 min at its barrier: Java's doomed write reaches its first check
    # only after tagging, minutes at 2 M rows on a busy machine (a rival gone by then would
    # make the write no conflict at all)
    proc = mp.Process(target=commit_after_barrier, args=(path, OURS, rows, barrier, results, "rival", 900))
    proc.start()
    deadline = time.time() + 300
    while barrier.n_waiting < 1:
        if not proc.is_alive() or time.time() > deadline:
            proc.terminate()
            raise RuntimeError(f"the rival writer on {path} did not reach its commit within 300 s")
        time.sleep(0.02)
    return proc, barrier, results


def _release(proc, barrier, results) -> dict:
    barrier.wait(timeout=120)
    out = results.get(timeout=300)
    proc.join(timeout=120)
    if out["outcome"] != "committed":
        raise RuntimeError(f"the rival writer did not commit: {out}")
    return out


def _doomed_once(spark, seed: str, path: str, up, parts: int, who: str) -> dict:
    """One doomed write by ``who`` ("ours" or "java") on a fresh copy of ``seed`` while the
    rival waits at its commit: the seconds until it fails with its conflict."""
    from airflow_hudi_occ.core.errors import RetryableError
    shutil.copytree(seed, path)
    proc, barrier, results = _rival_at_its_commit(path, parts)
    err = None
    try:
        t0 = time.perf_counter()
        try:
            if who == "ours":
                ours_write(spark, path, up, "upsert", {ECD_KEY: "true"})
            else:
                java_write(up, path, "upsert", JAVA_EARLY_DETECTION)
        except RetryableError as e:
            err = e
        except Exception as e:  # Java's: a Py4JJavaError around HoodieEarlyConflictDetectionException
            if "EarlyConflictDetection" not in str(e) and "ConflictException" not in str(e):
                raise
            err = e
        seconds = time.perf_counter() - t0
    finally:
        rival = _release(proc, barrier, results) if proc.is_alive() else None
    if err is None:
        raise RuntimeError(f"{who}'s write committed beside a rival holding every file group (rival: "
                           f"{rival}): not a conflict")
    # data files the doomed writer left (Hudi rolls them back lazily): all but the seed's and
    # the rival's one new version of each file group
    return {"seconds": round(seconds, 3), "error": type(err).__name__,
            "files_written": file_count(path) - file_count(seed) - parts, "rival": rival and rival["instant"]}


def bench_doomed(spark, work: str, n: int, reps: int, log) -> list[dict]:
    from bench.spark_write import source_df, upsert_df
    parts = 4
    seed = os.path.join(work, "doomed-seed")
    ours_write(spark, seed, source_df(spark, n, parts), "bulk_insert", {"hoodie.parquet.small.file.limit": "0"})
    up = upsert_df(spark, n, parts).cache()
    up.count()
    runs = {"ours": [], "java": []}
    for rep in range(reps + 1):
        for who in runs:
            log(f"doomed writer: {who}, round {rep}")
            path = os.path.join(work, f"doomed-{who}-{rep}")
            r = _doomed_once(spark, seed, path, up, parts, who)
            if rep:
                runs[who].append(r)
            shutil.rmtree(path, ignore_errors=True)
    up.unpersist()
    return [figure("same_spark.doomed.time_to_stop.vs_java_hudi",
                   f"an upsert of {n // 10} rows over {parts} file groups a live rival has written and "
                   "waits to commit: seconds until the doomed writer fails, early conflict detection on; "
                   "ours vs Java Hudi's", [r["seconds"] for r in runs["ours"]],
                   [r["seconds"] for r in runs["java"]], "Java Hudi, early conflict detection", 1.0,
                   rows=n, ours_runs=runs["ours"], java_runs=runs["java"])]


# --- main ------------------------------------------------------------------------------------------

def run(rows: int, reps: int, commits: int, only: list[str], base_dir: str, log, save=None,
        driver_memory: str | None = None) -> dict:
    """Every section asked for, in order; ``save(result)`` after each (a long run keeps what
    it measured if a later section fails)."""
    setup = load_setup()
    spark = session(setup, driver_memory)
    log(f"Spark {spark.version}, Java Hudi {setup['java']['hudi_version']}, Delta {setup['delta_version']}")
    work = os.path.join(base_dir, f"same-spark-{os.getpid()}")
    os.makedirs(work)
    figs: list[dict] = []
    t0 = time.perf_counter()

    def result() -> dict:
        return {"run": {"spark": spark.version, "java_hudi": setup["java"]["hudi_version"],
                        "delta": setup["delta_version"], "rows": rows, "reps": reps, "commits": commits,
                        "cpus": os.cpu_count(), "load_average": os.getloadavg(),
                        "driver_memory": spark.conf.get("spark.driver.memory"),
                        "duration_s": round(time.perf_counter() - t0, 1), "sections": only},
                "figures": figs}

    def done(section_figs: list[dict]) -> None:
        figs.extend(section_figs)
        if save is not None:
            save(result())
    try:
        seeds = None
        if "bulk" in only or "upsert" in only:
            f, seeds = bench_bulk(spark, work, rows, reps, log)
            done(f if "bulk" in only else [])
        if "upsert" in only:
            done(bench_upsert(spark, work, rows, reps, seeds, log))
        if "doomed" in only:
            done(bench_doomed(spark, work, rows, reps, log))
        if "virtual" in only:
            done(bench_virtual(spark, work, rows, reps, log))
        if "commits" in only and commits > 0:
            done(bench_commits(spark, work, commits, log))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result()


def format_table(figs: list[dict]) -> str:
    out = [f"{'figure':58} {'ours':>10} {'baseline':>10} {'ratio':>7} {'target':>7} verdict"]
    for f in figs:
        out.append(f"{f['name']:58} {f['value_ms'] / 1000:9.2f}s {f['baseline_ms'] / 1000:9.2f}s "
                   f"{f['ratio']:7.3f} {('<= ' + str(f['target'])) if f['target'] else '':>7} {f['verdict']}")
    return "\n".join(out)


def _reexec_under_spark35(argv: list[str]) -> int | None:
    """Started by a Python whose PySpark is not 3.5: run again under the bench venv's."""
    try:
        import pyspark
        if pyspark.__version__.startswith("3.5"):
            return None
    except ImportError:
        pass
    python = load_setup()["python"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python}
    env.pop("SPARK_HOME", None)
    return subprocess.call([python, "-m", "bench.same_spark", *argv], cwd=str(ROOT), env=env)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m bench.same_spark", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--reps", type=int, default=3, help="timed rounds per figure (median), after a warm-up")
    ap.add_argument("--commits", type=int, default=200, help="small commits per writer")
    ap.add_argument("--only", default=",".join(SECTIONS), help="comma-separated: " + ",".join(SECTIONS))
    ap.add_argument("--json", default=str(ROOT / "bench" / "out" / "same_spark.json"))
    ap.add_argument("--driver-memory", help="spark.driver.memory of the session (the executor in "
                    "local mode), e.g. 8g for 10 M rows; default the project's (2g)")
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    args = ap.parse_args(argv)
    try:
        code = _reexec_under_spark35(argv)
    except SetupMissing as e:
        print(f"same_spark: {e}", file=sys.stderr)
        return 2
    if code is not None:
        return code
    import logging
    logging.basicConfig(level=logging.ERROR)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(only) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown section(s) {sorted(unknown)}; known: {', '.join(SECTIONS)}")
    t0 = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

    import tempfile
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)

    def save(result: dict) -> None:
        Path(args.json).write_text(json.dumps(result, indent=1))
    result = run(args.rows, args.reps, args.commits, only, args.dir or tempfile.gettempdir(), log, save,
                 args.driver_memory)
    print(format_table(result["figures"]))
    save(result)
    print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
