"""A table of 1,000 and of 10,000 partitions on the proxied store (issue 43, item 2's last part,
and item 3's target that commit latency stays flat from 1,000 to 10,000 partitions).

Why it matters: a year of daily partitions by a few keys is thousands of partitions, and every
part of a commit that grows with the partition count (the metadata table's ``files`` records,
its column and partition stats, its compaction, a listing) would make each commit slower as the
backfill fills the table, on every writer, under the table lock.

The table of each size: Java Hudi 1.2's v9 fixture with its metadata table kept (``files``,
``column_stats``, ``partition_stats``, as the multi-writer points of :mod:`bench.scale`),
into which the core writer bulk-inserts one row into each of N new partitions on local disk
(so the metadata table lists them all and holds their stats); the table is then copied to the
S3 server. Through the latency proxy at ``DELAY_MS`` a request, with the storage lock:

- **commit latency**: single-row upserts into existing partitions spread over the table, one
  writer; the seconds, storage requests and requests under the lock per commit (p50), as
  :func:`bench.scale._per_commit` counts them. Figure
  ``scale.partitions.commit.<N>p.vs_1000p``: the p50 at N against the p50 at 1,000 in the
  same run (target 1.3x: flat).
- **the metadata table's compaction**: the measured commits cross one (every 10 deltacommits
  by default); the lock hold of the commit that compacts against the median hold, and the time
  of the metadata-table services inside it. Figure ``scale.partitions.<N>p.compaction_hold``.
- **listing through the metadata table**: a freshly opened table's every partition and every
  partition's file names from the metadata table (``core/table/file_listing``), against one
  recursive listing of the table's folder on the store (the cheapest a flat object store can
  do; Java's storage listing lists each partition folder instead). Seconds and requests.
  Figure ``scale.partitions.<N>p.listing.mdt.vs_walk`` (information).

Quick: 10 and 100 partitions.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pyarrow as pa

from .common import Figure, exit_on_sigterm

SIZES = (1_000, 10_000)
QUICK_SIZES = (10, 100)
#: measured commits per size after the warm-up; with the 1 bulk commit and the warm-up they
#: cross one metadata-table compaction (due every 10 deltacommits)
COMMITS = 10
WARMUP = 2
#: the multi-writer points' partition-key value of the prefilled partitions
PART = "d{:05d}"


def figure_names(quick: bool = False) -> list[str]:
    sizes = sizes_of(quick)
    out = [f"scale.partitions.commit.{n}p.vs_{sizes[0]}p" for n in sizes[1:]]
    for n in sizes:
        out += [f"scale.partitions.{n}p.compaction_hold", f"scale.partitions.{n}p.listing.mdt.vs_walk"]
    return out


def _rows(schema: pa.Schema, keys: list[str], parts: list[str], note: str) -> pa.Table:
    return pa.Table.from_pylist(
        [{**{c: None for c in schema.names}, "txn_id": k, "region": p, "txn_ts": 1, "txn_metadata": note}
         for k, p in zip(keys, parts)], schema=schema)


def prepared_table(workdir: str, n: int) -> tuple[str, pa.Schema, int]:
    """Java's fixture with ``n`` more partitions of one row each, written by the core writer on
    local disk: ``(path, data schema, rows)``."""
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.table.table import Table
    from .scale import fixture_table
    path, schema, keys = fixture_table(str(Path(workdir) / f"p{n}"))
    writer = ArrowTableWriter(Table.open(path), WriteConfig.from_options(
        {"hoodie.write.lock.provider": "filesystem"}), writer_id="scale-partitions-prep")
    writer.write(_rows(schema, [f"P{i}" for i in range(n)], [PART.format(i) for i in range(n)], "prep"),
                 "bulk_insert")
    return path, schema, len(keys) + n


def _mdt_compactions(uri: str, options: dict) -> int:
    """Completed compactions on the metadata table's timeline (a ``commit`` action there)."""
    from airflow_hudi_occ.core.table.table import Table
    mdt = Table.open(uri, storage_options=options).metadata_table()
    return sum(1 for i in mdt.timeline().completed() if str(getattr(i.action, "value", i.action)) == "commit")


def listing_point(uri: str, options: dict, proxy) -> dict:
    """Every partition and its file names through the metadata table, then one recursive
    listing of the table folder: seconds and requests of each, from a freshly opened table."""
    from airflow_hudi_occ.core.table.file_listing import file_listing
    from airflow_hudi_occ.core.table.table import Table
    proxy.events(reset=True)
    t0 = time.perf_counter()
    table = Table.open(uri, storage_options=options)
    listing = file_listing(table)
    parts = listing.partitions()
    files = sum(len(listing.names(p)) for p in parts)
    mdt_s = time.perf_counter() - t0
    mdt_requests = len(proxy.events(reset=True))
    t0 = time.perf_counter()
    walked = table.storage.walk_files(table.storage.root)
    walk_s = time.perf_counter() - t0
    walk_requests = len(proxy.events(reset=True))
    data = [f for f in walked if not f.startswith(".hoodie/") and not f.endswith(".hoodie_partition_metadata")]
    return {"source": listing.source, "partitions": len(parts), "files": files, "mdt_s": round(mdt_s, 3),
            "mdt_requests": mdt_requests, "walk_s": round(walk_s, 3), "walk_requests": walk_requests,
            "walk_data_files": len(data)}


def size_point(n: int, s3, proxy, workdir: str, delay_ms: int, log, *, commits: int = COMMITS,
               warmup: int = WARMUP, pad_keys: int = 0) -> dict:
    """One size: the table prepared at 0 ms, then its commits and its listing at ``delay_ms``."""
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.format.storage import Storage
    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.testing.s3 import hudi_read_s3
    from .scale import RequestTracer, _per_commit
    from airflow_hudi_occ.core.table.file_listing import SOURCE_METADATA_TABLE
    from .scale_workers import PhaseTimer, split_holds

    t0 = time.perf_counter()
    path, schema, rows = prepared_table(workdir, n)
    prep_s = time.perf_counter() - t0
    proxy.set_delay(0)
    options = proxy.storage_options(s3.storage_options)
    # a bucket of its own (moto lists a folder by walking every key of its bucket: the other
    # size's table would slow this one's listings), with ``pad_keys`` unrelated keys beside it
    bucket = f"partitions-{n}" + (f"-pad{pad_keys}" if pad_keys else "")
    s3.create_bucket(bucket)
    if pad_keys:
        pad_bucket(s3, bucket, pad_keys)
    uri = f"s3://{bucket}/partitions_{n}"
    t0 = time.perf_counter()
    Storage(uri, s3.storage_options).fs.put(path + "/", f"{bucket}/partitions_{n}", recursive=True)
    log(f"scale: {n} partitions written in {prep_s:.0f} s on local disk, copied to the store in "
        f"{time.perf_counter() - t0:.0f} s")
    writer = ArrowTableWriter(Table.open(uri, storage_options=options), WriteConfig.from_options(
        {"hoodie.write.lock.provider": "storage"}), writer_id="scale-partitions")
    proxy.set_delay(delay_ms)
    tracer, phases = RequestTracer(), PhaseTimer()
    per: list[dict] = []
    written: dict[str, set[str]] = {}
    compactions = _mdt_compactions(uri, options)
    with tracer.installed(), phases.installed():
        for i in range(warmup + commits):
            part = PART.format((i * 7919) % n)  # spread over the table
            phases.windows.clear()
            r = _per_commit(proxy, tracer, lambda: writer.write(
                _rows(schema, [f"N{i}"], [part], "commit"), "upsert"))
            r["split"] = split_holds(tracer.holds, phases.windows)
            now = _mdt_compactions(uri, options)
            r["compacted"], compactions = now > compactions, now
            if i >= warmup:
                per.append(r)
            written.setdefault(part, {f"P{(i * 7919) % n}"}).add(f"N{i}")
        listing = listing_point(uri, options, proxy)
    proxy.set_delay(0)
    # exact in every partition the commits wrote (hudi-rs, those partitions only: reading all
    # 10,000 through the store takes longer than the rest of the point)
    got = hudi_read_s3(uri, options, [("region", "IN", ",".join(sorted(written)))])
    keys = sorted(got.column("txn_id").to_pylist())
    if keys != sorted(k for ks in written.values() for k in ks):
        raise AssertionError(f"{n} partitions: read back {keys} in the partitions written, expected {written}")
    if listing["partitions"] < n or listing["source"] != SOURCE_METADATA_TABLE:
        raise AssertionError(f"{n} partitions: the listing gave {listing}")

    def med(key, rows_=per):
        return statistics.median(r[key] for r in rows_)

    compacting = [r for r in per if r["compacted"]]
    if not compacting:  # the fixture starts just after one and a compaction is due every 10
        raise AssertionError(f"{n} partitions: none of the {commits} measured commits compacted the "
                             "metadata table, so its hold at this size is not measured")
    services = "metadata-table services (compaction, clean, archival)"
    return {"partitions": n, "delay_ms": delay_ms, "commits": commits, "rows_read_back": len(keys),
            "table_rows": rows + warmup + commits,
            "seconds": [round(r["seconds"], 3) for r in per], "seconds_p50": round(med("seconds"), 3),
            "requests_p50": med("requests"), "under_lock_p50": med("under_lock"),
            "lock_hold_s_p50": round(med("hold_s"), 4),
            "compacting_commits": len(compacting),
            "compaction_hold_s": [round(r["hold_s"], 3) for r in compacting],
            "compaction_services_s": [round(r["split"].get(services, 0.0), 3) for r in compacting],
            "compaction_requests_under_lock": [r["under_lock"] for r in compacting],
            "listing": listing}


def sizes_of(quick: bool) -> tuple[int, ...]:
    return QUICK_SIZES if quick else SIZES


def pad_bucket(s3, bucket: str, keys: int) -> None:
    """``keys`` empty objects under ``padding/`` in ``bucket``: what moto's listings cost beside
    another table's keys (``--pad-keys``)."""
    from concurrent.futures import ThreadPoolExecutor
    import boto3
    from airflow_hudi_occ.testing.s3 import ACCESS_KEY, REGION, SECRET_KEY
    client = boto3.client("s3", endpoint_url=s3.endpoint, aws_access_key_id=ACCESS_KEY,
                          aws_secret_access_key=SECRET_KEY, region_name=REGION)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: client.put_object(Bucket=bucket, Key=f"padding/{i:06d}", Body=b""), range(keys)))


def run_sizes(s3, proxy, workdir: str, delay_ms: int, sizes, log, pad_keys: int = 0) -> tuple[list[Figure], dict]:
    """Each size measured in turn (one table at a time on the store), then the figures."""
    got = {}
    for n in sizes:
        got[n] = size_point(n, s3, proxy, workdir, delay_ms, log, pad_keys=pad_keys)
        p = got[n]
        log(f"scale: {n} partitions, {delay_ms} ms: commit p50 {p['seconds_p50']} s, {p['requests_p50']} "
            f"requests ({p['under_lock_p50']} under the lock, held {p['lock_hold_s_p50']} s); compaction held "
            f"{p['compaction_hold_s']} s; listing through the metadata table {p['listing']['mdt_s']} s "
            f"({p['listing']['mdt_requests']} requests), one walk {p['listing']['walk_s']} s "
            f"({p['listing']['walk_requests']} requests)")
    return figures_of(got, delay_ms), got


def figures_of(got: dict[int, dict], delay_ms: int) -> list[Figure]:
    """The figures of the sizes measured (``got``: :func:`size_point`'s answer by size)."""
    sizes = sorted(got)
    first = sizes[0]
    figures = [Figure(f"scale.partitions.commit.{n}p.vs_{first}p", "scale",
                      f"single-row commit (p50) on a table of {n} partitions against {first}, metadata "
                      f"table kept, storage lock, {delay_ms} ms a request (issue 43: flat, within 1.3x)",
                      got[n]["seconds_p50"] * 1000, "ms", f"the same commit at {first} partitions",
                      got[first]["seconds_p50"] * 1000, target=1.3, details=got[n]) for n in sizes[1:]]
    for n in sizes:
        p = got[n]
        figures.append(Figure(
            f"scale.partitions.{n}p.compaction_hold", "scale",
            f"lock held by the commit that compacts the metadata table, {n} partitions, against the "
            "median commit's hold", max(p["compaction_hold_s"]) * 1000, "ms",
            "the median commit's lock hold", p["lock_hold_s_p50"] * 1000, details=p))
        figures.append(Figure(
            f"scale.partitions.{n}p.listing.mdt.vs_walk", "scale",
            f"every partition's files through the metadata table, {n} partitions, {delay_ms} ms a "
            "request, against one recursive listing of the table folder",
            p["listing"]["mdt_s"] * 1000, "ms", "one recursive listing of the store",
            p["listing"]["walk_s"] * 1000, details=p["listing"]))
    return figures


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.scale_partitions [--sizes 1000,10000] [--delay-ms 20] [--json PATH]``:
    this part of ``python -m bench --only scale`` alone."""
    import argparse
    import json
    import tempfile
    from airflow_hudi_occ.testing.latency_proxy import LatencyProxy
    from airflow_hudi_occ.testing.s3 import S3Server
    from .scale import DELAY_MS
    ap = argparse.ArgumentParser(prog="python -m bench.scale_partitions", description=main.__doc__)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--delay-ms", type=int, default=DELAY_MS)
    ap.add_argument("--json", default=None, help="write every figure here")
    ap.add_argument("--pad-keys", type=int, default=0,
                    help="this many unrelated keys in each table's bucket (moto's listings walk the bucket)")
    args = ap.parse_args(argv)
    exit_on_sigterm()
    with tempfile.TemporaryDirectory(prefix="scale-partitions-") as workdir, S3Server() as s3, \
            LatencyProxy(s3.endpoint, delay_ms=0) as proxy:
        figures, got = run_sizes(s3, proxy, workdir, args.delay_ms, [int(x) for x in args.sizes.split(",")],
                                 lambda m: print(m, flush=True), pad_keys=args.pad_keys)
    for f in figures:
        print(f"{f.name}: {f.value:.0f} {f.unit} vs {f.baseline_value:.0f} ({f.ratio:.2f}x, {f.verdict})")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({str(k): v for k, v in got.items()}, fh, indent=1)
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(main())
