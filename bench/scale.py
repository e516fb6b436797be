"""Scale on an object store, first figures (issue 43): one writer on a store that costs 20 ms a request.

The claim under test (issue 43, item 3): under a table lock, the storage requests made while
holding it set the ceiling of the whole table (at 50 ms a request, 20 requests under the lock
cap it at one commit a second, whatever the number of writers). This first part measures the
single-writer point that every later figure builds on, on the loopback S3 server (moto, with
the harness's serialised mutations, :mod:`airflow_hudi_occ.testing.s3`) behind the latency
proxy (:mod:`airflow_hudi_occ.testing.latency_proxy`, ``DELAY_MS`` per request):

- ``scale.1w.commit``: seconds per single-row commit of the core writer (``ArrowTableWriter``,
  upsert of one new key into one partition, the storage lock of RFC-91, metadata table kept as
  by default) against delta-rs (``write_deltalake`` append of one row, conditional puts:
  ``conditional_put=etag``) on the same proxy and store, medians of alternating commits.
- ``scale.1w.requests``: storage requests per commit, ours against delta-rs's; the split by
  kind is in the details.
- ``scale.1w.requests_under_lock``: requests that reached the proxy between the return of
  ``LockManager.acquire`` and the call of ``LockManager.release`` (measured by wrapping those two
  methods in this process, never by editing them), against the issue's target of 6. The split
  by kind and by the code path that made each request is in the details: every storage call
  (fsspec's ``sync``) is wrapped to record its time window and the functions that made it
  (the outermost frame in ``core/format/storage.py`` or ``versioned.py`` and its two callers),
  and each request the proxy logged is given to the call whose window holds its arrival time.
- ``scale.store.capacity_used``: the single writer's request rate against the store's own
  ceiling (``STORE_CLIENTS`` processes each PUT-then-GET of a 200-byte object as fast as the
  store answers, no delay): the store is not the bottleneck while this stays well under 1.
- ``scale.proxy.overhead``: milliseconds per request through the proxy at 0 ms delay against
  the store directly, same load (what the proxy itself costs).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import sys
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager

import pyarrow as pa

from .common import Figure

NAME = "scale"
DELAY_MS = 20
BUCKET = "tables"
#: the files whose frames are "the storage layer": a request is named by the frame that entered it
STORAGE_FILES = (os.path.join("core", "format", "storage.py"),
                 os.path.join("core", "format", "versioned.py"))
PACKAGE_DIR = "airflow_hudi_occ" + os.sep


def sizes(quick: bool) -> dict:
    if quick:
        return {"commits": 3, "warmup": 1, "store_clients": 4, "store_seconds": 2.0,
                "store_rounds": 1}
    return {"commits": 10, "warmup": 2, "store_clients": 8, "store_seconds": 4.0,
            "store_rounds": 2}


def figure_names(quick: bool = False) -> list[str]:
    return ["scale.1w.commit.vs_deltalake", "scale.1w.requests.vs_deltalake",
            "scale.1w.requests_under_lock.vs_target", "scale.store.capacity_used",
            "scale.proxy.overhead"]


# --- which code made each request --------------------------------------------------------------


def _where(frame) -> str:
    code = frame.f_code
    path = code.co_filename
    rel = path[path.rfind(PACKAGE_DIR):] if PACKAGE_DIR in path else os.path.basename(path)
    method = frame.f_locals.get("method") if code.co_name == "wrapper" else None
    if callable(method):  # a decorator of storage.py around a Storage method: name the method
        return f"{method.__qualname__} ({rel})"
    return f"{getattr(code, 'co_qualname', code.co_name)} ({rel})"


def code_path(frame) -> str:
    """``entry <- caller <- caller's caller``: the outermost storage-layer frame the call went
    through and the two package functions above it (third-party frames skipped)."""
    entry, callers = None, []
    f = frame
    while f is not None and len(callers) < 2:
        path = f.f_code.co_filename
        if PACKAGE_DIR in path:
            if path.endswith(STORAGE_FILES) and not callers:
                entry = f
            else:
                callers.append(f)
        f = f.f_back
    parts = ([_where(entry)] if entry is not None else []) + [_where(c) for c in callers]
    return " <- ".join(parts) or "outside the package"


class RequestTracer:
    """Records every storage call's time window with its code path, and the lock's hold windows.

    Wraps ``fsspec.asyn.sync`` (and s3fs's reference to it: every blocking s3fs call goes
    through it) and ``LockManager.acquire`` / ``release`` in this process while installed.
    """

    def __init__(self):
        self.calls: list[tuple[float, float, str]] = []
        self.holds: list[tuple[float, float]] = []
        self.acquires: list[tuple[float, float]] = []
        self.releases: list[tuple[float, float]] = []
        self._held_since: float | None = None
        self._lock = threading.Lock()

    @contextmanager
    def installed(self):
        import fsspec.asyn
        import s3fs.core
        from airflow_hudi_occ.core.concurrency.locks.base import LockManager
        tracer = self
        raw_sync = fsspec.asyn.sync
        raw_acquire, raw_release = LockManager.acquire, LockManager.release

        def sync(loop, func, *args, **kwargs):
            where = code_path(sys._getframe(1))
            t0 = time.time()
            try:
                return raw_sync(loop, func, *args, **kwargs)
            finally:
                with tracer._lock:
                    tracer.calls.append((t0, time.time(), where))

        def acquire(self_):
            t0 = time.time()
            raw_acquire(self_)
            t1 = time.time()
            tracer.acquires.append((t0, t1))
            tracer._held_since = t1

        def release(self_):
            t0 = time.time()
            if tracer._held_since is not None:
                tracer.holds.append((tracer._held_since, t0))
                tracer._held_since = None
            try:
                raw_release(self_)
            finally:
                tracer.releases.append((t0, time.time()))

        saved = [(fsspec.asyn, "sync", raw_sync), (s3fs.core, "sync", s3fs.core.sync),
                 (LockManager, "acquire", raw_acquire), (LockManager, "release", raw_release)]
        fsspec.asyn.sync = s3fs.core.sync = sync
        LockManager.acquire, LockManager.release = acquire, release
        try:
            yield self
        finally:
            for owner, attr, raw in saved:
                setattr(owner, attr, raw)

    def reset(self) -> None:
        self.calls, self.holds, self.acquires, self.releases = [], [], [], []

    def attribute(self, event: dict) -> str:
        """The code path of the innermost storage call whose window holds the event's arrival."""
        best = None
        for t0, t1, where in self.calls:
            if t0 <= event["t"] <= t1 and (best is None or t0 > best[0]):
                best = (t0, where)
        return best[1] if best else "unattributed (another thread or process)"


def split_by_window(events: list[dict], windows: list[tuple[float, float]]) -> list[dict]:
    return [e for e in events if any(a <= e["t"] <= b for a, b in windows)]


# --- the store's own ceiling -------------------------------------------------------------------


def _store_client(args) -> tuple[int, list[float]]:  # pragma: no cover - runs in a pool process
    endpoint, seconds, index, start_at = args
    import boto3
    from botocore.config import Config
    from airflow_hudi_occ.testing.s3 import ACCESS_KEY, REGION, SECRET_KEY
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY,
                          aws_secret_access_key=SECRET_KEY, region_name=REGION,
                          config=Config(retries={"max_attempts": 1}))
    client.head_bucket(Bucket=BUCKET)  # connection and signing warmed before the start line
    while time.time() < start_at:
        time.sleep(0.002)
    n, pairs = 0, []
    end = start_at + seconds
    while time.time() < end:
        t0 = time.perf_counter()
        key = f"load/{index}/{n % 16}"
        client.put_object(Bucket=BUCKET, Key=key, Body=b"x" * 200)
        client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        pairs.append(time.perf_counter() - t0)
        n += 2
    return n, pairs


def store_throughput(pool: ProcessPoolExecutor, endpoint: str, clients: int,
                     seconds: float) -> dict:
    """Requests per second of ``clients`` processes each PUT-then-GET in a loop for ``seconds``."""
    start_at = time.time() + 3.0  # every process imported and connected first
    results = list(pool.map(_store_client, [(endpoint, seconds, i, start_at)
                                            for i in range(clients)]))
    total = sum(n for n, _ in results)
    per_request = sorted(p / 2 for _, pairs in results for p in pairs)
    return {"clients": clients, "seconds": seconds, "requests": total,
            "requests_per_s": round(total / seconds, 1),
            "p50_ms_per_request": round(1000 * per_request[len(per_request) // 2], 2)
            if per_request else None}


# --- the two writers ----------------------------------------------------------------------------


def _row(i: int) -> pa.Table:
    return pa.table({"id": pa.array([i], pa.int64()), "p": pa.array(["p0"]),
                     "v": pa.array([f"c{i}"])})


def delta_options(endpoint: str) -> dict:
    from airflow_hudi_occ.testing.s3 import ACCESS_KEY, REGION, SECRET_KEY
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION,
            # conditional puts (If-None-Match / If-Match): safe concurrent commits on S3 without
            # a DynamoDB lock, so AWS_S3_ALLOW_UNSAFE_RENAME is not needed
            "conditional_put": "etag"}


def our_writer(s3, proxy):
    """The table (one partition column, storage lock, metadata table as by default) and the
    core writer both points write with, through the proxy: ``(table, writer, options)``."""
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.table.table import Table
    options = proxy.storage_options(s3.storage_options)
    table = Table.create(f"s3://{BUCKET}/ours", "scale", record_key_fields=["id"],
                         partition_fields=["p"], storage_options=options)
    writer = ArrowTableWriter(table, WriteConfig.from_options(
        {"hoodie.write.lock.provider": "storage"}), writer_id="scale-0")
    return table, writer, options


def _per_commit(proxy, tracer: RequestTracer, commit) -> dict:
    proxy.events(reset=True)
    tracer.reset()
    t0 = time.perf_counter()
    commit()
    elapsed = time.perf_counter() - t0
    events = proxy.events(reset=True)
    under = split_by_window(events, tracer.holds)
    return {"seconds": elapsed, "requests": len(events),
            "by_kind": Counter(e["kind"] for e in events),
            "under_lock": len(under), "under_lock_by_kind": Counter(e["kind"] for e in under),
            "under_lock_per_hold": [len(split_by_window(events, [h])) for h in tracer.holds],
            "under_lock_by_path": Counter(f"{e['kind']}: {tracer.attribute(e)}" for e in under),
            "by_path": Counter(f"{e['kind']}: {tracer.attribute(e)}" for e in events),
            "acquire": len(split_by_window(events, tracer.acquires)),
            "release": len(split_by_window(events, tracer.releases)),
            "hold_s": sum(b - a for a, b in tracer.holds), "holds": len(tracer.holds)}


def _median_counter(rows: list[Counter]) -> dict:
    keys = sorted(set().union(*rows)) if rows else []
    return {k: statistics.median(r.get(k, 0) for r in rows) for k in keys}


def run(ctx) -> list[Figure]:
    from deltalake import DeltaTable, write_deltalake
    from airflow_hudi_occ.testing.latency_proxy import LatencyProxy
    from airflow_hudi_occ.testing.s3 import S3Server, hudi_read_s3

    sz = sizes(ctx.quick)
    ours: list[dict] = []
    theirs: list[dict] = []
    with S3Server() as s3, LatencyProxy(s3.endpoint, delay_ms=0) as proxy:
        s3.create_bucket(BUCKET)
        ctx.log(f"scale: store ceiling, {sz['store_clients']} clients, direct and through the proxy")
        with ProcessPoolExecutor(sz["store_clients"], mp_context=mp.get_context("spawn")) as pool:
            # alternating rounds, the best of each side: other processes on this small machine
            # come and go, and the ceiling is what the store can do, not what was left to it
            rounds = [(store_throughput(pool, s3.endpoint, sz["store_clients"], sz["store_seconds"]),
                       store_throughput(pool, proxy.endpoint, sz["store_clients"], sz["store_seconds"]))
                      for _ in range(sz["store_rounds"])]
        direct = max((r[0] for r in rounds), key=lambda r: r["requests_per_s"])
        proxied = max((r[1] for r in rounds), key=lambda r: r["requests_per_s"])
        proxy.set_delay(DELAY_MS)
        table, writer, options = our_writer(s3, proxy)
        delta_uri = f"s3://{BUCKET}/delta"
        dopts = delta_options(proxy.endpoint)
        tracer = RequestTracer()
        ctx.log(f"scale: {sz['commits']} single-row commits each, ours and delta-rs, "
                f"{DELAY_MS} ms a request")
        with tracer.installed():
            for i in range(sz["warmup"] + sz["commits"]):
                a = _per_commit(proxy, tracer, lambda: writer.write(_row(i), "upsert"))
                b = _per_commit(proxy, tracer, lambda: write_deltalake(
                    delta_uri, _row(i), mode="append", partition_by=["p"], storage_options=dopts))
                if i >= sz["warmup"]:
                    ours.append(a)
                    theirs.append(b)
        proxy.set_delay(0)
        expected = sz["warmup"] + sz["commits"]
        rows = {"ours": hudi_read_s3(table.storage.base_uri, options).num_rows,
                "delta": DeltaTable(delta_uri, storage_options=dopts).to_pyarrow_table().num_rows}
        if rows != {"ours": expected, "delta": expected}:
            raise AssertionError(f"rows read back {rows}, expected {expected} in each table")

    def med(rows_, key):
        return statistics.median(r[key] for r in rows_)

    load_rps = med(ours, "requests") / med(ours, "seconds")
    paths, all_paths = Counter(), Counter()
    for r in ours:
        paths.update(r["under_lock_by_path"])
        all_paths.update(r["by_path"])
    details = {
        "delay_ms": DELAY_MS, "store": "moto server, mutations serialised (testing/s3.py)",
        "lock": "storage (RFC-91)", "commits": sz["commits"], "warmup": sz["warmup"],
        "ours_seconds": [round(r["seconds"], 3) for r in ours],
        "delta_seconds": [round(r["seconds"], 3) for r in theirs],
        "ours_requests_by_kind_median": _median_counter([r["by_kind"] for r in ours]),
        "delta_requests_by_kind_median": _median_counter([r["by_kind"] for r in theirs]),
        "ours_under_lock_by_kind_median": _median_counter([r["under_lock_by_kind"] for r in ours]),
        "ours_under_lock_by_code_path_total": dict(paths.most_common()),
        "ours_requests_by_code_path_total": dict(all_paths.most_common()),
        "ours_acquire_requests_median": med(ours, "acquire"),
        "ours_release_requests_median": med(ours, "release"),
        "ours_lock_hold_s_median": round(med(ours, "hold_s"), 4),
        "ours_lock_holds_per_commit": sorted({r["holds"] for r in ours}),
        "ours_under_lock_per_hold": [r["under_lock_per_hold"] for r in ours],
        "rows_read_back": rows,
    }
    store = {"direct": direct, "proxied_0ms": proxied, "rounds": rounds, "writer_load_requests_per_s": round(load_rps, 1)}
    return [
        Figure("scale.1w.commit.vs_deltalake", NAME,
               f"one writer, single-row commit at {DELAY_MS} ms a request: core writer "
               "(storage lock) vs delta-rs append (conditional put)",
               med(ours, "seconds") * 1000, "ms", "delta-rs append, same proxy and store",
               med(theirs, "seconds") * 1000, target=1.0, details=details),
        Figure("scale.1w.requests.vs_deltalake", NAME,
               "storage requests per single-row commit: core writer vs delta-rs",
               med(ours, "requests"), "requests", "delta-rs append", med(theirs, "requests"),
               target=1.0),
        Figure("scale.1w.requests_under_lock.vs_target", NAME,
               "storage requests made while the table lock is held, per commit (p50), against "
               "issue 43's target of 6", med(ours, "under_lock"), "requests",
               "issue 43 target", 6, target=1.0),
        Figure("scale.store.capacity_used", NAME,
               f"the single writer's request rate as a share of the store's ceiling "
               f"({direct['clients']} clients, PUT+GET of 200 bytes, no delay): ms between the "
               "store's answers at its ceiling vs ms between the writer's requests",
               1000.0 / direct["requests_per_s"], "ms", "ms between the writer's requests",
               1000.0 / load_rps, target=0.5, details=store),
        Figure("scale.proxy.overhead", NAME,
               f"ms per request through the proxy at 0 ms delay vs the store directly "
               f"({direct['clients']} clients at the store's ceiling)",
               1000.0 / proxied["requests_per_s"], "ms", "the store directly",
               1000.0 / direct["requests_per_s"], details=store),
    ]


# --- the single-writer point alone (before/after comparisons of the lock's requests) -----------


def single_writer_point(commits: int = 10, delay_ms: int = DELAY_MS, warmup: int = 2) -> dict:
    """The core writer's commits of :func:`run` without the store's ceiling or delta-rs: light
    enough to run on a busy machine, and the same counts (docs/benchmarks.md, item 3)."""
    from airflow_hudi_occ.testing.latency_proxy import LatencyProxy
    from airflow_hudi_occ.testing.s3 import S3Server, hudi_read_s3

    ours: list[dict] = []
    with S3Server() as s3, LatencyProxy(s3.endpoint, delay_ms=delay_ms) as proxy:
        s3.create_bucket(BUCKET)
        table, writer, options = our_writer(s3, proxy)
        tracer = RequestTracer()
        with tracer.installed():
            for i in range(warmup + commits):
                row = _per_commit(proxy, tracer, lambda: writer.write(_row(i), "upsert"))
                if i >= warmup:
                    ours.append(row)
        proxy.set_delay(0)
        rows = hudi_read_s3(table.storage.base_uri, options).num_rows
        if rows != warmup + commits:
            raise AssertionError(f"rows read back {rows}, expected {warmup + commits}")

    def med(key):
        return statistics.median(r[key] for r in ours)

    paths = Counter()
    for r in ours:
        paths.update(r["by_path"])
    return {"delay_ms": delay_ms, "commits": commits, "seconds_p50": round(med("seconds"), 3),
            "requests_p50": med("requests"), "under_lock_p50": med("under_lock"),
            "under_lock_per_hold": [r["under_lock_per_hold"] for r in ours],
            "lock_hold_s_p50": round(med("hold_s"), 4), "acquire_requests_p50": med("acquire"),
            "release_requests_p50": med("release"),
            "requests_by_kind_median": _median_counter([r["by_kind"] for r in ours]),
            "under_lock_by_kind_median": _median_counter([r["under_lock_by_kind"] for r in ours]),
            "requests_by_code_path_per_commit": {k: v / commits for k, v in paths.most_common()}}


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.scale [--commits N] [--delay-ms MS] [--json PATH]``: the single-writer point."""
    import argparse
    import json
    ap = argparse.ArgumentParser(prog="python -m bench.scale", description=main.__doc__)
    ap.add_argument("--commits", type=int, default=10)
    ap.add_argument("--delay-ms", type=int, default=DELAY_MS)
    ap.add_argument("--json", default=None, help="write every figure here")
    args = ap.parse_args(argv)
    out = single_writer_point(args.commits, args.delay_ms)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    print(json.dumps({k: out[k] for k in ("delay_ms", "seconds_p50", "requests_p50", "under_lock_p50",
                                          "lock_hold_s_p50", "acquire_requests_p50",
                                          "release_requests_p50")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
