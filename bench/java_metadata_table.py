"""What our write in between costs Java's next writer at its defaults (issue 30, item 7).

A Java table at Hudi 1.2's defaults has a metadata table (``files``, ``column_stats``,
``partition_stats``; ``record_index`` too when the record index is on). Our writer cannot update
it, so with ``hoodie.metadata.enable=false`` and ``hoodie.occ.metadata.delete.unmaintained=true``
it deletes it (docs/java-interop.md); Java's next writer then builds it again from the whole
table. This measures that price where it is paid, in Java's next commit:

- ``java_mdt.<N>p.<variant>.next_java_commit.vs_without_ours`` (information): Java's upsert of
  one row, right after one of ours (which deleted the metadata table), against the same upsert
  with only Java writes before it (the metadata table kept up to date by Java). Medians over
  rounds that alternate the two, on one table of N partitions (2 rows each, loaded by our
  writer, after which one untimed Java upsert builds the metadata table at Java's defaults):
  10 and 1,000 in the full run, 10 with ``--quick``. Variants: ``defaults`` (Java at its defaults),
  ``record_index`` (Java writers with the record-level index on: it is rebuilt too) and ``kept``
  (Java at its defaults, ours at its own, no metadata-table option: since issue 32 item 6 our
  commit keeps ``files``, ``column_stats`` and ``partition_stats``, so Java's next commit
  rebuilds nothing).

Each Java write runs in a JVM of its own (our write has to come between two of them), after an
untimed warm-up write to a scratch table in that JVM, so JVM start and class loading are never
measured: the value is the ``df.write`` call alone (the harness's step time). ``details`` says,
for every Java write, whether the metadata table was there before it and its partitions after
it, and every Java snapshot read (through the metadata table) is checked against the model: a
mismatch fails the benchmark.
"""

from __future__ import annotations

import os
import statistics
import time

import pyarrow as pa

from .common import Figure, work_dir

NAME = "java_metadata_table"
#: Java's options per variant
VARIANTS = {
    "defaults": {},
    "record_index": {"hoodie.metadata.record.index.enable": "true", "hoodie.index.type": "RECORD_INDEX"},
    "kept": {},
}
KEYS = dict(record_key="id", partition_fields="p", ordering_field="ts", table_name="t")
OURS = {"hoodie.write.lock.provider": "filesystem", "hoodie.metadata.enable": "false",
        "hoodie.occ.metadata.delete.unmaintained": "true"}
#: ours per variant: ``kept`` is our writer at its defaults, which keep Java's metadata table
#: (files, column_stats, partition_stats) in its commit instead of deleting it (issue 32: Java's
#: next commit must stay flat)
OURS_BY_VARIANT = {"kept": {"hoodie.write.lock.provider": "filesystem"}}


def sizes(quick: bool) -> dict:
    """``HUDI_OCC_BENCH_MDT_PARTITIONS`` (e.g. ``1000``) and ``HUDI_OCC_BENCH_MDT_VARIANTS``
    (e.g. ``defaults``), comma-separated, narrow the full run, one slow case at a time."""
    out = {"partitions": [10] if quick else [10, 1000], "rounds": 1 if quick else 3,
           "variants": ["defaults"] if quick else list(VARIANTS)}
    if os.environ.get("HUDI_OCC_BENCH_MDT_PARTITIONS"):
        out["partitions"] = [int(n) for n in os.environ["HUDI_OCC_BENCH_MDT_PARTITIONS"].split(",")]
    if os.environ.get("HUDI_OCC_BENCH_MDT_VARIANTS"):
        out["variants"] = [v for v in os.environ["HUDI_OCC_BENCH_MDT_VARIANTS"].split(",") if v in VARIANTS]
    return out


def figure_names(quick: bool = False) -> list[str]:
    s = sizes(quick)
    return [f"java_mdt.{n}p.{v}.next_java_commit.vs_without_ours"
            for n in s["partitions"] for v in s["variants"]]


def _batch(rows: list[tuple]) -> pa.Table:
    return pa.table({"id": pa.array([r[0] for r in rows], pa.int64()),
                     "p": pa.array([r[1] for r in rows], pa.string()),
                     "ts": pa.array([r[2] for r in rows], pa.int64()),
                     "v": pa.array([r[3] for r in rows], pa.string())})


def _partitions(path: str) -> list[str]:
    from airflow_hudi_occ.core.table.table import Table
    value = Table.open(path).config.get("hoodie.table.metadata.partitions") or ""
    return sorted(p for p in value.split(",") if p)


def _check(read, model: dict, what: str) -> None:
    got = {r["id"]: (r["p"], r["ts"], r["v"]) for r in read.rows.select(["id", "p", "ts", "v"]).to_pylist()}
    if got != model:
        missing = sorted(set(model) - set(got))[:5]
        wrong = sorted(k for k in set(model) & set(got) if model[k] != got[k])[:5]
        raise AssertionError(f"{what}: Java's snapshot read is not exact ({len(got)} rows, model "
                             f"{len(model)}; missing {missing}, wrong {wrong})")


def _measure(ctx, java, work: str, n_parts: int, variant: str, rounds: int) -> Figure:
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.testing.java_hudi import Read, Write

    opts = VARIANTS[variant]
    path = os.path.join(work, f"{variant}-{n_parts}")
    rows = [(i, f"p{i % n_parts:04d}", 1, f"java{i}") for i in range(2 * n_parts)]
    model = {r[0]: (r[1], r[2], r[3]) for r in rows}
    # Loaded by our writer (Java's insert of 2,000 rows into 1,000 partitions took over 10
    # minutes on the loaded 2-core machine, and its bulk insert ran out of driver memory), then
    # one untimed Java upsert at its defaults builds the metadata table from that listing.
    ctx.log(f"{NAME}: {variant}, {n_parts} partitions: ours loads {len(rows)} rows, Java builds its metadata table")
    Table.create(path, "t", record_key_fields=["id"], partition_fields=["p"], precombine_field="ts", version=9)
    ArrowTableWriter(Table.open(path), WriteConfig.from_options(
        {"hoodie.write.lock.provider": "filesystem"})).write(_batch(rows), "bulk_insert")
    _, built = java.run(Write(path, _batch([rows[0]]), options=opts, **KEYS), Read(path))
    _check(built, model, f"{variant}/{n_parts}p after Java built its metadata table")
    created = _partitions(path)
    scratch = iter(range(10 ** 6))
    ts = iter(range(2, 10 ** 6))
    log: list[dict] = []

    def java_upsert(kind: str) -> float:
        """One Java upsert of one row, timed alone, and its snapshot read checked."""
        t = next(ts)
        row = (t % (2 * n_parts), f"p{t % (2 * n_parts) % n_parts:04d}", t, f"java-{kind}-{t}")
        warm = os.path.join(work, f"scratch-{next(scratch)}")
        before = os.path.isdir(os.path.join(path, ".hoodie", "metadata"))
        _, step, read = java.run(Write(warm, _batch([(0, "p", 1, "w")]), operation="insert", options=opts, **KEYS),
                                 Write(path, _batch([row]), options=opts, **KEYS), Read(path))
        model[row[0]] = (row[1], row[2], row[3])
        _check(read, model, f"{variant}/{n_parts}p after Java's {kind} upsert")
        log.append({"java_write": kind, "metadata_table_before": before, "partitions_after": _partitions(path),
                    "seconds": step.seconds})
        return step.seconds

    def ours_upsert() -> None:
        t = next(ts)
        row = (t % (2 * n_parts), f"p{t % (2 * n_parts) % n_parts:04d}", t, f"ours-{t}")
        t0 = time.perf_counter()
        ours_opts = OURS_BY_VARIANT.get(variant, OURS)
        ArrowTableWriter(Table.open(path), WriteConfig.from_options(ours_opts)).write(_batch([row]), "upsert")
        model[row[0]] = (row[1], row[2], row[3])
        log.append({"ours": "upsert", "seconds": round(time.perf_counter() - t0, 3),
                    "partitions_after": _partitions(path)})

    without, after = [], []
    for r in range(rounds):
        ctx.log(f"{NAME}: {variant}, {n_parts} partitions, round {r + 1}/{rounds}")
        without.append(java_upsert("baseline"))  # only Java's writes since the last rebuild
        ours_upsert()
        after.append(java_upsert("after-ours"))
        ctx.log(f"{NAME}: {variant}, {n_parts} partitions, round {r + 1}: Java's upsert {without[-1]:.2f} s "
                f"without ours, {after[-1]:.2f} s after ours (partitions after: {log[-1]['partitions_after']})")
    value, base = statistics.median(after), statistics.median(without)
    # said at once, so a later case that fails (the runner then keeps no figure) loses nothing
    ctx.log(f"{NAME}: {variant}, {n_parts} partitions: Java's upsert took {value:.2f} s (median) after "
            f"ours, {base:.2f} s without; samples after {after}, without {without}; every read exact")
    return Figure(
        name=f"java_mdt.{n_parts}p.{variant}.next_java_commit.vs_without_ours", benchmark=NAME,
        description=f"Java's upsert of one row on a {n_parts}-partition table ({variant}) right after our "
                    + ("write kept its metadata table" if variant in OURS_BY_VARIANT else
                       "write deleted its metadata table") + ", against the same upsert with only Java writes before it",
        value=value * 1000.0, unit="ms", baseline="java upsert, no write of ours before it",
        baseline_value=base * 1000.0,
        details={"rounds": rounds, "rows": len(model), "partitions_created": created,
                 "after_ours_s": after, "without_ours_s": without, "log": log})


def run(ctx) -> list[Figure]:
    from airflow_hudi_occ.testing.java_hudi import JavaHudi
    s = sizes(ctx.quick)
    figures = []
    with work_dir(ctx.base_dir, NAME) as work:
        # a 1,000-partition table takes minutes per Java write on a loaded 2-core machine
        java = JavaHudi(os.path.join(work, "java"), timeout_s=3600.0)
        for n_parts in s["partitions"]:
            for variant in s["variants"]:
                figures.append(_measure(ctx, java, work, n_parts, variant, s["rounds"]))
    return figures
