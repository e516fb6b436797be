"""Listing a table's files through Hudi's metadata table against listing the storage, on S3
(issue 32, item 5).

The point of the metadata table's ``files`` partition on an object store: a reader learns
every partition's files from one folder of the metadata table (its timeline, a base HFile and
a few log files) instead of listing the whole table and then every partition folder. This
measures what that is worth to our readers (core/table/file_listing.py) on the loopback S3
server (moto in its own process, :mod:`airflow_hudi_occ.testing.s3`), where every list call
is an HTTP round trip as on S3, if a much shorter one.

The table: Java Hudi 1.2's v9 fixture (written with its metadata table; reduced to the
``files`` partition, which is what this project keeps), into which our core writer
bulk-inserts one row into each of N new partitions with ``hoodie.occ.metadata.files.maintain
=true``, so the metadata table lists them all (its deltacommit written by our writer, as Java
writes its own). Java writing 1,000 partitions itself took over 10 minutes on this machine
(``bench/java_metadata_table.py``). The table is then copied to the S3 server.

- ``mdt_listing.<N>p.s3.with_mdt.vs_storage`` (information): the file-system view of the
  table built by a reader with ``hoodie.metadata.enable`` at its default (true: listed through
  the metadata table) against the same view with it false (the storage listed), each from a
  freshly opened table (``hoodie.properties`` and the timeline read too, as a reader does).
  Medians of 3 rounds that alternate the two, after one untimed warm-up of each; the two views
  must name the same file slices (a mismatch fails the benchmark). ``details`` has the
  ListObjects requests each made (from the server's request log) and the samples.

N: 10 and 1,000 (``--quick``: 10); ``HUDI_OCC_BENCH_LISTING_PARTITIONS`` (e.g. ``1000``,
comma-separated) narrows the full run.
"""

from __future__ import annotations

import json
import os
import statistics
import time

import pyarrow as pa

from .common import Figure, work_dir

NAME = "metadata_listing"
ROUNDS = 3
V9 = "v9_txns_simple_overwrite"


def sizes(quick: bool) -> dict:
    parts = [10] if quick else [10, 1000]
    if os.environ.get("HUDI_OCC_BENCH_LISTING_PARTITIONS"):
        parts = [int(n) for n in os.environ["HUDI_OCC_BENCH_LISTING_PARTITIONS"].split(",")]
    return {"partitions": parts, "rounds": ROUNDS}


def figure_names(quick: bool = False) -> list[str]:
    return [f"mdt_listing.{n}p.s3.with_mdt.vs_storage" for n in sizes(quick)["partitions"]]


def _build(ctx, work: str, n_parts: int) -> str:
    """The local table: the Java v9 fixture, files-only, plus N partitions of ours."""
    from pathlib import Path

    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.table.metadata_listing import read_metadata_listing
    from airflow_hudi_occ.core.table.metadata_table import PARTITIONS_KEY
    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.testing.tables import java_fixture

    path = java_fixture(V9, Path(work) / f"local-{n_parts}")
    table = Table.open(str(path))
    table.update_properties({PARTITIONS_KEY: "files"})
    schema = read_table(table).drop_columns(
        [c for c in read_table(table).column_names if c.startswith("_hoodie_")]).schema
    rows = []
    for i in range(n_parts):
        r = {n: None for n in schema.names}
        r.update({"txn_id": f"B{i:05d}", "region": f"r{i:04d}", "txn_ts": 1})
        rows.append(r)
    ctx.log(f"{NAME}: {n_parts} partitions: our bulk_insert keeps the metadata table's listing")
    ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options({
        "hoodie.write.lock.provider": "filesystem", "hoodie.occ.metadata.files.maintain": "true",
        "hoodie.archive.automatic": "false", "hoodie.clean.automatic": "false",
    })).write(pa.Table.from_pylist(rows, schema=schema), "bulk_insert")
    listed = read_metadata_listing(Table.open(str(path)))
    if len(listed.partitions) != n_parts + 3:
        raise AssertionError(f"the metadata table lists {len(listed.partitions)} partitions, "
                             f"expected {n_parts + 3}")
    return str(path)


def _list_requests(log_path: str, since: int) -> tuple[int, int]:
    """(ListObjects requests in the server's log after line ``since``, lines now)."""
    with open(log_path) as f:
        lines = f.read().splitlines()
    n = 0
    for line in lines[since:]:
        rec = json.loads(line)
        if rec.get("m") == "GET" and "list-type" in (rec.get("q") or ""):
            n += 1
    return n, len(lines)


def _measure(ctx, s3, work: str, n_parts: int, rounds: int) -> Figure:
    from airflow_hudi_occ.core.format.storage import Storage
    from airflow_hudi_occ.core.table.file_system_view import FileSystemView
    from airflow_hudi_occ.core.table.table import Table

    local = _build(ctx, work, n_parts)
    url = f"s3://bench/t{n_parts}"
    opts = s3.storage_options
    ctx.log(f"{NAME}: {n_parts} partitions: copying the table to the S3 server")
    t0 = time.perf_counter()
    Storage(url, opts).fs.put(local + "/", f"bench/t{n_parts}", recursive=True)
    copy_s = time.perf_counter() - t0

    def view(metadata_enable: bool):
        v = FileSystemView(Table.open(url, opts), metadata_enable=metadata_enable)
        return v.listing.source, {str(s.file_group): s.instant_time for s in v.latest_file_slices()}

    samples: dict[bool, list[float]] = {True: [], False: []}
    requests: dict[bool, list[int]] = {True: [], False: []}
    seen = {}
    _, mark = _list_requests(s3.request_log, 0)
    for r in range(rounds + 1):
        for mdt in ((True, False) if r % 2 == 0 else (False, True)):
            t0 = time.perf_counter()
            source, slices = view(mdt)
            dt = time.perf_counter() - t0
            n, mark = _list_requests(s3.request_log, mark)
            if r == 0:
                seen[mdt] = (source, slices)  # the warm-up round: checked, not counted
                continue
            samples[mdt].append(dt)
            requests[mdt].append(n)
    if seen[True][0] != "metadata_table" or seen[False][0] != "storage":
        raise AssertionError(f"listing sources {seen[True][0]} / {seen[False][0]}")
    if seen[True][1] != seen[False][1] or len(seen[True][1]) < n_parts:
        raise AssertionError(f"the two views differ ({len(seen[True][1])} and {len(seen[False][1])} slices)")
    value, base = statistics.median(samples[True]), statistics.median(samples[False])
    ctx.log(f"{NAME}: {n_parts} partitions on S3: the view took {value * 1000:.0f} ms through the metadata "
            f"table, {base * 1000:.0f} ms listing the storage (ratio {value / base:.3f}); ListObjects "
            f"{requests[True]} against {requests[False]}")
    return Figure(
        name=f"mdt_listing.{n_parts}p.s3.with_mdt.vs_storage", benchmark=NAME,
        description=f"file-system view of a {n_parts + 3}-partition table on the loopback S3 server, "
                    "files listed through the metadata table, against listing the storage",
        value=value * 1000.0, unit="ms", baseline="the same view, hoodie.metadata.enable=false",
        baseline_value=base * 1000.0,
        details={"rounds": rounds, "file_slices": len(seen[True][1]), "with_mdt_s": samples[True],
                 "storage_s": samples[False], "list_requests_with_mdt": requests[True],
                 "list_requests_storage": requests[False], "copy_to_s3_s": round(copy_s, 1)})


def run(ctx) -> list[Figure]:
    from airflow_hudi_occ.testing.s3 import S3Server
    s = sizes(ctx.quick)
    figures = []
    with work_dir(ctx.base_dir, NAME) as work:
        with S3Server(request_log=os.path.join(work, "s3-requests.jsonl")) as s3:
            s3.create_bucket("bench")
            for n_parts in s["partitions"]:
                figures.append(_measure(ctx, s3, work, n_parts, s["rounds"]))
    return figures
