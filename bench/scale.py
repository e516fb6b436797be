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

import json
import math
import multiprocessing as mp
import os
import statistics
import sys
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import pyarrow as pa

from .common import Figure, exit_on_sigterm

NAME = "scale"
DELAY_MS = 20
BUCKET = "tables"
#: the files whose frames are "the storage layer": a request is named by the frame that entered it
STORAGE_FILES = (os.path.join("core", "format", "storage.py"),
                 os.path.join("core", "format", "versioned.py"),
                 os.path.join("core", "format", "object_store.py"))
PACKAGE_DIR = "airflow_hudi_occ" + os.sep


def sizes(quick: bool) -> dict:
    if quick:
        return {"commits": 1, "warmup": 1, "store_clients": 4, "store_seconds": 1.0,
                "store_rounds": 1}
    return {"commits": 10, "warmup": 2, "store_clients": 8, "store_seconds": 4.0,
            "store_rounds": 2}


def figure_names(quick: bool = False) -> list[str]:
    multi = []
    for pt in multi_points(quick):
        base = f"scale.{pt.writers}w.{pt.delay_ms}ms"
        if pt.variant == "storage":
            multi += [f"{base}.ms_per_commit.vs_deltalake", f"{base}.p99.vs_deltalake",
                      f"{base}.requests_under_lock.vs_target"]
        elif pt.engine == "ours":
            multi.append(f"{base}.{pt.variant}.ms_per_commit.vs_storage")
    from .scale_partitions import figure_names as partition_figures
    return multi + ["scale.1w.commit.vs_deltalake", "scale.1w.requests.vs_deltalake",
                    "scale.1w.round_trips.vs_deltalake",
                    "scale.1w.requests_under_lock.vs_target", "scale.store.capacity_used",
                    "scale.proxy.overhead"] + partition_figures(quick)


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

    Wraps ``ObjectStore._call`` (every request of ``format/object_store``), ``fsspec.asyn.sync``
    (and s3fs's reference to it: every blocking s3fs call goes through it) and
    ``LockManager.acquire`` / ``release`` in this process while installed;
    ``trace_calls=False`` wraps only the lock (the writer processes of the multi-writer points,
    where walking frames on every storage call would cost CPU the 2 cores do not have).
    """

    def __init__(self, *, trace_calls: bool = True):
        self.trace_calls = trace_calls
        self.calls: list[tuple[float, float, str]] = []
        self.holds: list[tuple[float, float]] = []
        self.acquires: list[tuple[float, float]] = []
        self.releases: list[tuple[float, float]] = []
        #: CPU seconds of this process during each hold: a hold far longer than its CPU and its
        #: requests waited for a core
        self.hold_cpu: list[float] = []
        self._held_since: float | None = None
        self._cpu_since = 0.0
        self._lock = threading.Lock()

    @contextmanager
    def installed(self):
        import fsspec.asyn
        import s3fs.core
        from airflow_hudi_occ.core.concurrency.locks.base import LockManager
        from airflow_hudi_occ.core.format.object_store import ObjectStore
        tracer = self
        raw_sync = fsspec.asyn.sync
        raw_acquire, raw_release = LockManager.acquire, LockManager.release

        def traced(raw):
            """``raw`` recording each call's window and its caller's code path (s3fs's blocking
            calls, obstore's requests: every storage request of this process)."""
            def call(*args, **kwargs):
                where = code_path(sys._getframe(1))
                t0 = time.time()
                try:
                    return raw(*args, **kwargs)
                finally:
                    with tracer._lock:
                        tracer.calls.append((t0, time.time(), where))
            return call

        def acquire(self_, while_waiting=None):
            t0 = time.time()
            try:
                raw_acquire(self_, while_waiting)
            finally:  # a timed-out wait is a wait too
                tracer.acquires.append((t0, time.time()))
            tracer._held_since = tracer.acquires[-1][1]
            tracer._cpu_since = time.process_time()

        def release(self_):
            t0 = time.time()
            if tracer._held_since is not None:
                tracer.holds.append((tracer._held_since, t0))
                tracer.hold_cpu.append(time.process_time() - tracer._cpu_since)
                tracer._held_since = None
            try:
                raw_release(self_)
            finally:
                tracer.releases.append((t0, time.time()))

        saved = [(LockManager, "acquire", raw_acquire), (LockManager, "release", raw_release)]
        raw_call = ObjectStore._call
        if self.trace_calls:
            saved += [(fsspec.asyn, "sync", raw_sync), (s3fs.core, "sync", s3fs.core.sync),
                      (ObjectStore, "_call", raw_call)]
            fsspec.asyn.sync = s3fs.core.sync = traced(raw_sync)
            ObjectStore._call = traced(raw_call)
        LockManager.acquire, LockManager.release = acquire, release
        try:
            yield self
        finally:
            for owner, attr, raw in saved:
                setattr(owner, attr, raw)

    def reset(self) -> None:
        self.calls, self.holds, self.acquires, self.releases, self.hold_cpu = [], [], [], [], []

    def attribute(self, event: dict) -> str:
        """The code path of the innermost storage call whose window holds the event's arrival."""
        best = None
        for t0, t1, where in self.calls:
            if t0 <= event["t"] <= t1 and (best is None or t0 > best[0]):
                best = (t0, where)
        return best[1] if best else "unattributed (another thread or process)"


def handoffs(commits: list[dict]) -> list[float]:
    """The gaps between consecutive lock holds of all writers of a point, where the next hold's
    writer had been waiting since before the previous hold ended (its acquire's window): how
    long the lock lay free with a writer waiting for it."""
    windows = sorted((a, b, c.get("waits", [])) for c in commits for a, b in c["holds"])
    out = []
    for (a0, b0, _w0), (a1, _b1, waits1) in zip(windows, windows[1:]):
        waited_from = [w0 for w0, w1 in waits1 if abs(w1 - a1) < 0.05]  # the acquire that ended in it
        if a1 >= b0 and waited_from and waited_from[0] < b0:
            out.append(a1 - b0)
    return out


def union_length(windows: list[tuple[float, float]]) -> float:
    """The time covered by at least one of ``windows``."""
    total, end = 0.0, None
    for a, b in sorted(windows):
        if end is None or a > end:
            total, end = total + (b - a), b
        elif b > end:
            total, end = total + (b - end), b
    return total


def split_by_window(events: list[dict], windows: list[tuple[float, float]]) -> list[dict]:
    return [e for e in events if any(a <= e["t"] <= b for a, b in windows)]


# --- the store's own ceiling -------------------------------------------------------------------


def _warm_client(_i: int) -> int:  # pragma: no cover - runs in a pool process
    """Imports done in a pool process before the start line is set (on a busy machine a spawned
    process can take longer to import than the start line's margin, and then counts nothing)."""
    import boto3  # noqa: F401
    import airflow_hudi_occ.testing.s3  # noqa: F401
    time.sleep(0.2)  # hold this process so the next item goes to another one
    return os.getpid()


def _store_client(args) -> tuple[int, list[float], float, float]:  # pragma: no cover - pool process
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
    begin = time.time()  # the start line, or later if this process was late to it
    end = begin + seconds
    while time.time() < end:
        t0 = time.perf_counter()
        key = f"load/{index}/{n % 16}"
        client.put_object(Bucket=BUCKET, Key=key, Body=b"x" * 200)
        client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        pairs.append(time.perf_counter() - t0)
        n += 2
    return n, pairs, begin, time.time()


def store_throughput(pool: ProcessPoolExecutor, endpoint: str, clients: int,
                     seconds: float) -> dict:
    """Requests per second of ``clients`` processes each PUT-then-GET in a loop for ``seconds``
    (over the span from the first client's start to the last one's end: a client late to the
    start line on a busy machine runs its full time after it, and the span counts it)."""
    list(pool.map(_warm_client, range(clients)))
    start_at = time.time() + 3.0  # every process imported (above) and connected first
    results = list(pool.map(_store_client, [(endpoint, seconds, i, start_at)
                                            for i in range(clients)]))
    total = sum(r[0] for r in results)
    span = max(r[3] for r in results) - min(r[2] for r in results)
    per_request = sorted(p / 2 for r in results for p in r[1])
    return {"clients": clients, "seconds": round(span, 3), "requests": total,
            "requests_per_s": round(total / span, 1),
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


def _per_commit(proxy, tracer: RequestTracer, commit, delay_ms: float = 0) -> dict:
    """One commit's requests (counted and named by the proxy and the tracer); ``delay_ms``: the
    proxy's delay, for the round trips the commit waited for one after another."""
    from airflow_hudi_occ.testing.latency_proxy import round_trips
    proxy.events(reset=True)
    tracer.reset()
    t0 = time.perf_counter()
    commit()
    elapsed = time.perf_counter() - t0
    events = proxy.events(reset=True)
    under = split_by_window(events, tracer.holds)
    return {"seconds": elapsed, "requests": len(events), "round_trips": round_trips(events, delay_ms),
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
    import tempfile
    from deltalake import DeltaTable, write_deltalake
    from airflow_hudi_occ.testing.latency_proxy import LatencyProxy
    from airflow_hudi_occ.testing.s3 import S3Server, hudi_read_s3

    sz = sizes(ctx.quick)
    ours: list[dict] = []
    theirs: list[dict] = []
    with ExitStack() as cleanup, tempfile.TemporaryDirectory(prefix="scale-") as workdir, \
            S3Server() as s3, LatencyProxy(s3.endpoint, delay_ms=0) as proxy:
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
        points = multi_points(ctx.quick)
        early = start_pools(points, workdir) if ctx.quick else None
        for pool_ in (early or {}).values():
            cleanup.callback(pool_.close)  # if anything fails before run_multi takes them
        proxy.set_delay(DELAY_MS)
        table, writer, options = our_writer(s3, proxy)
        delta_uri = f"s3://{BUCKET}/delta"
        dopts = delta_options(proxy.endpoint)
        tracer = RequestTracer()
        ctx.log(f"scale: {sz['commits']} single-row commits each, ours and delta-rs, "
                f"{DELAY_MS} ms a request")
        with tracer.installed():
            for i in range(sz["warmup"] + sz["commits"]):
                a = _per_commit(proxy, tracer, lambda: writer.write(_row(i), "upsert"), DELAY_MS)
                b = _per_commit(proxy, tracer, lambda: write_deltalake(
                    delta_uri, _row(i), mode="append", partition_by=["p"], storage_options=dopts), DELAY_MS)
                if i >= sz["warmup"]:
                    ours.append(a)
                    theirs.append(b)
        proxy.set_delay(0)
        expected = sz["warmup"] + sz["commits"]
        rows = {"ours": hudi_read_s3(table.storage.base_uri, options).num_rows,
                "delta": DeltaTable(delta_uri, storage_options=dopts).to_pyarrow_table().num_rows}
        if rows != {"ours": expected, "delta": expected}:
            raise AssertionError(f"rows read back {rows}, expected {expected} in each table")
        multi = run_multi(points, ctx.log, s3=s3, proxy=proxy, pools=early, workdir=workdir,
                          budget_s=None if ctx.quick else FULL_BUDGET_S)
        from .scale_partitions import run_sizes, sizes_of
        partition_figs, _ = run_sizes(s3, proxy, workdir, QUICK_DELAY_MS if ctx.quick else DELAY_MS,
                                      sizes_of(ctx.quick), ctx.log)

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
    for line in summary_table(multi, direct["requests_per_s"]).splitlines():
        ctx.log(line)
    if not ctx.quick:
        write_svg(multi, PLOT_PATH)
        ctx.log(f"scale: plot written to {os.path.relpath(PLOT_PATH)}")
    return multi_figures(multi, direct) + partition_figs + [
        Figure("scale.1w.commit.vs_deltalake", NAME,
               f"one writer, single-row commit at {DELAY_MS} ms a request: core writer "
               "(storage lock) vs delta-rs append (conditional put)",
               med(ours, "seconds") * 1000, "ms", "delta-rs append, same proxy and store",
               med(theirs, "seconds") * 1000, target=1.0, details=details),
        Figure("scale.1w.requests.vs_deltalake", NAME,
               "storage requests per single-row commit: core writer vs delta-rs",
               med(ours, "requests"), "requests", "delta-rs append", med(theirs, "requests"),
               target=1.0),
        Figure("scale.1w.round_trips.vs_deltalake", NAME,
               "round trips a single-row commit waits for one after another (requests sent "
               "together count once): core writer vs delta-rs",
               med(ours, "round_trips"), "round trips", "delta-rs append", med(theirs, "round_trips"),
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


# --- many writers (issue 43, item 2) ------------------------------------------------------------

WRITER_COUNTS = (1, 8, 16, 32)
DELAYS_MS = (20, 50)
#: the quick run's delay (the smoke test checks structure; every 20 ms under the lock costs it)
QUICK_DELAY_MS = 5
#: the share of writers that overlap (write the shared key 0 of one shared partition)
OVERLAP_SHARE = 0.25


@dataclass(frozen=True)
class Point:
    """One point of the multi-writer matrix: ``engine`` ours or delta, ``lock`` storage or
    zookeeper (delta: its conditional puts), ``overlap`` 25% of the writers on one shared key."""

    engine: str
    writers: int
    delay_ms: int
    commits: int
    lock: str = "storage"
    overlap: bool = False

    @property
    def variant(self) -> str:
        if self.engine == "delta":
            return "delta"
        return ("zk" if self.lock == "zookeeper" else "storage") + (".overlap" if self.overlap else "")

    @property
    def label(self) -> str:
        return f"{self.writers}w.{self.delay_ms}ms.{self.variant}"

    @property
    def overlapping(self) -> int:
        return int(self.writers * OVERLAP_SHARE) if self.overlap else 0


def commits_per_writer(writers: int, quick: bool) -> int:
    """Commits each writer makes. The issue asks 20; the table lock serialises every commit
    (about 0.4 s held at 20 ms and 0.7 s at 50 ms with the metadata table kept), so the table,
    not the writers, sets a point's time: 20 commits by 32 writers at 50 ms alone would take
    about 10 minutes of the two cores. The full run makes 20 at 1 writer, 5 at 8, 3 at 16 and 2
    at 32 (docs/benchmarks.md says so beside the figures): at least 40 commits a point."""
    if quick:
        return 1
    return {1: 20, 8: 5, 16: 3}.get(writers, 2)


def point_of(label: str) -> Point:
    """The point a label names (``Point.label``: ``<N>w.<D>ms.<variant>``)."""
    try:
        w, d, variant = label.strip().split(".", 2)
        n, delay = int(w.removesuffix("w")), int(d.removesuffix("ms"))
    except ValueError:
        raise SystemExit(f"not a point label: {label!r} (e.g. 8w.20ms.zk)") from None
    kinds = {"storage": ("ours", "storage", False), "zk": ("ours", "zookeeper", False),
             "storage.overlap": ("ours", "storage", True), "zk.overlap": ("ours", "zookeeper", True),
             "delta": ("delta", "storage", False)}
    if variant not in kinds:
        raise SystemExit(f"unknown variant {variant!r} in {label!r}: one of {', '.join(kinds)}")
    engine, lock, overlap = kinds[variant]
    return Point(engine, n, delay, commits_per_writer(n, False), lock=lock, overlap=overlap)


def multi_points(quick: bool) -> list[Point]:
    """The matrix, in the order it runs: at each delay, for each writer count, ours (storage
    lock, disjoint) then delta-rs back to back, at 8 writers then ZooKeeper and 25% overlap;
    last, ZooKeeper and overlap at 32 writers and 50 ms while the time budget lasts."""
    if quick:
        return [Point("ours", 2, QUICK_DELAY_MS, 1), Point("delta", 2, QUICK_DELAY_MS, 1)]
    out = []
    for d in DELAYS_MS:
        for n in WRITER_COUNTS:
            c = commits_per_writer(n, quick)
            out += [Point("ours", n, d, c), Point("delta", n, d, c)]
            if n == 8:  # right after their reference point, before the budget is spent
                out += [Point("ours", 8, d, c, lock="zookeeper"), Point("ours", 8, d, c, overlap=True)]
    c = commits_per_writer(32, quick)
    out += [Point("ours", 32, 50, c, lock="zookeeper"), Point("ours", 32, 50, c, overlap=True)]
    return out


#: the multi-writer points of the full run start a ZooKeeper or overlap point only while this
#: many seconds have not passed (the storage-lock and delta-rs points always run): the 8-writer
#: ones come early and always fit; the 32-writer ones at 50 ms last, only if time is left (the
#: whole bench took about 40 minutes on 2 cores)
FULL_BUDGET_S = 1500.0
PLOT_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "out",
                         "scale.svg")


class WriterPool:
    """Writer processes of one engine (``python -m bench.scale_workers ENGINE``), started once
    and given every point of that engine: 32 imports of pyarrow and the engine on 2 cores take
    a minute, and would be paid again at every point."""

    def __init__(self, engine: str, workdir: str):
        self.engine, self.workdir = engine, workdir
        self.procs: list = []
        self.pending: list = []  # started, not yet answered ready

    def grow(self, n: int) -> None:
        self.spawn(n)
        self.wait_ready()

    def wait_ready(self) -> None:
        """Wait for every started process to have imported its engine."""
        while self.pending:
            self.answer(self.pending.pop(0))

    def spawn(self, n: int) -> list:
        """Start processes until there are ``n``; returns the new ones (not yet ready)."""
        import subprocess
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
        new = []
        while len(self.procs) < n:
            err = open(os.path.join(self.workdir, f"{self.engine}-{len(self.procs)}.stderr"), "w")
            p = subprocess.Popen([sys.executable, "-m", "bench.scale_workers", self.engine], cwd=root,
                                 env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                 text=True, bufsize=1)
            self.procs.append(p)
            new.append(p)
        self.pending += new
        return new

    def answer(self, proc) -> dict:
        from .scale_workers import RESULT
        while True:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{self.engine} writer process exited ({proc.poll()}); its stderr "
                                   f"is in {self.workdir}")
            if line.startswith(RESULT):
                return json.loads(line[len(RESULT):])

    def close(self) -> None:
        """Stop this pool's processes (each by its own handle): idle between points, they hold
        nothing, and an interpreter's teardown per process costs seconds on a busy machine."""
        for p in self.procs:
            try:
                p.stdin.close()
            except OSError:
                pass
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except Exception:  # noqa: BLE001 - a stuck writer is killed, by its own handle
                p.kill()
        self.procs = []


class StoreProbe:
    """The store's own answer time during a point: a HEAD of the bucket straight to the store
    (not through the proxy) every 100 ms from a thread of the bench process. If the store were
    the bottleneck, this is where it would show."""

    def __init__(self, endpoint: str):
        self.endpoint = endpoint
        self.seconds: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        import boto3
        from airflow_hudi_occ.testing.s3 import ACCESS_KEY, REGION, SECRET_KEY
        client = boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                              aws_secret_access_key=SECRET_KEY, region_name=REGION)
        client.head_bucket(Bucket=BUCKET)
        while not self._stop.wait(0.1):
            t0 = time.perf_counter()
            client.head_bucket(Bucket=BUCKET)
            self.seconds.append(time.perf_counter() - t0)

    def __enter__(self) -> "StoreProbe":
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100); None for no values."""
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100.0 * len(s)) - 1))]


def _r(x, nd=3):
    return None if x is None else round(x, nd)


#: the Java-written fixture every point of ours starts from: it has a metadata table (our
#: writer keeps one, it does not create one), reduced to Java 1.2's default partitions
V9 = "v9_txns_simple_overwrite"
MDT_PARTITIONS = "files,column_stats,partition_stats"
#: the writer number of the fixture's preparing commits (its keys meet no bench writer's)
PREP_WRITER = 9999


def fixture_table(workdir: str) -> tuple[str, pa.Schema, set]:
    """The local copy of Java's v9 fixture with ``files``, ``column_stats`` and
    ``partition_stats`` in its metadata table: ``(path, data schema, its keys)``."""
    from pathlib import Path
    from airflow_hudi_occ.core.commit.writer import read_table
    from airflow_hudi_occ.core.table.metadata_table import PARTITIONS_KEY
    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.testing.tables import java_fixture
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.config import WriteConfig
    from .scale_workers import row
    path = java_fixture(V9, Path(workdir) / "fixture")
    table = Table.open(str(path))
    table.update_properties({PARTITIONS_KEY: MDT_PARTITIONS})
    data = read_table(table)
    schema = data.drop_columns([c for c in data.column_names if c.startswith("_hoodie_")]).schema
    # Three commits here, on local disk, bring the metadata table to its compaction (due
    # every 10 deltacommits; Java left 8): every point then starts just after one, and its
    # commits meet compactions at the rate a live table does, not the fixture's backlog.
    writer = ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(
        {"hoodie.write.lock.provider": "filesystem"}), writer_id="scale-prep")
    for i in range(3):
        writer.write(row(PREP_WRITER, i, "prep", False, schema), "upsert")
    keys = set(read_table(Table.open(str(path))).column("txn_id").to_pylist())
    return str(path), schema, keys


def _setup_table(pt: Point, s3, proxy, zk_hosts: str | None, fixture) -> tuple[str, dict]:
    """The point's table, made at 0 ms: ours a copy of the fixture (with the shared
    partition's key 0 for overlap), delta-rs's made by its first writer."""
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.format.storage import Storage
    from airflow_hudi_occ.core.table.table import Table
    from .scale_workers import row
    name = "scale_" + pt.label.replace(".", "_")
    # a bucket of its own: moto lists a folder by walking every key of its bucket (one LIST:
    # 6 ms with 10 keys, 15 ms with 10,000, 44 ms with 30,000, of the store's one core), so
    # the points run before would slow this one's listings; S3's do not grow so
    bucket = "scale-" + pt.label.replace(".", "-").lower()
    s3.create_bucket(bucket)
    uri = f"s3://{bucket}/{name}"
    options = {"hoodie.write.lock.provider": pt.lock}
    if pt.lock == "zookeeper":
        options["hoodie.write.lock.zookeeper.url"] = zk_hosts
    if pt.engine == "ours":
        setup = proxy.storage_options(s3.storage_options)
        Storage(uri, setup).fs.put(fixture[0] + "/", f"{bucket}/{name}", recursive=True)
        if pt.overlap:
            writer = ArrowTableWriter(Table.open(uri, storage_options=setup),
                                      WriteConfig.from_options(options), writer_id="scale-setup")
            writer.write(row(0, 0, "shared", True, fixture[1]).slice(0, 1), "upsert")
    return uri, options


def run_point(pt: Point, pool: WriterPool, s3, proxy, zk_hosts: str | None, workdir: str,
              fixture) -> dict:
    """One point: every writer starts together, makes its commits; the figures of the table."""
    from airflow_hudi_occ.testing.s3 import hudi_read_s3
    proxy.set_delay(0)
    import base64
    from .scale_workers import key_of
    uri, options = _setup_table(pt, s3, proxy, zk_hosts, fixture)
    pool.grow(pt.writers)
    start = os.path.join(workdir, f"start-{pt.label}")
    keys = {}
    for w in range(pt.writers):
        key = f"w{w}"
        keys[key] = w
        overlapping = w < pt.overlapping
        spec = {"engine": pt.engine, "uri": uri, "worker": w, "commits": pt.commits,
                "partition": "shared" if overlapping else f"p{w}", "overlapping": overlapping,
                "write_options": options, "start": start,
                "schema_b64": (base64.b64encode(fixture[1].serialize().to_pybytes()).decode()
                               if pt.engine == "ours" else None),
                "storage_options": {**proxy.storage_options(s3.storage_options), "key": key},
                "delta_options": {**delta_options(proxy.endpoint), "AWS_ACCESS_KEY_ID": key}}
        pool.procs[w].stdin.write(json.dumps(spec) + "\n")
        pool.procs[w].stdin.flush()
    deadline = time.time() + 300
    while not all(os.path.exists(f"{start}.ready.{w}") for w in range(pt.writers)):
        if time.time() > deadline:
            raise RuntimeError(f"{pt.label}: writers not ready in 300 s")
        time.sleep(0.02)
    proxy.set_delay(pt.delay_ms)
    proxy.events(reset=True)
    with StoreProbe(s3.endpoint) as probe:
        t_start = time.time()
        open(start, "w").close()
        results = [pool.answer(pool.procs[w]) for w in range(pt.writers)]
        t_all = time.time()
    events = proxy.events(reset=True)
    proxy.set_delay(0)
    failed = [r["failed"] for r in results if "failed" in r]
    commits = [dict(c, worker=r["worker"]) for r in results for c in r["commits"]]
    ok = [c for c in commits if not c["error"]]
    end = max((c["t1"] for c in commits), default=t_all)
    wall = max(1e-9, end - t_start)
    lat = [c["t1"] - c["t0"] for c in ok]
    by_who: dict[str, list[float]] = defaultdict(list)
    for e in events:
        by_who[e.get("who", "")].append(e["t"])
    out = {"label": pt.label, "engine": pt.engine, "variant": pt.variant, "writers": pt.writers,
           "delay_ms": pt.delay_ms, "commits_per_writer": pt.commits, "overlapping_writers": pt.overlapping,
           "commits": len(ok), "failed_commits": len(commits) - len(ok) + len(failed) * pt.commits,
           "errors": sorted({c["error"] for c in commits if c["error"]} | set(failed))[:5],
           "seconds": round(wall, 3), "commits_per_s": round(len(ok) / wall, 3),
           "p50_s": _r(percentile(lat, 50)), "p99_s": _r(percentile(lat, 99)),
           "conflicts": sum(c["conflicts"] for c in commits),
           "requests": len(events), "requests_per_commit": _r(len(events) / max(1, len(ok)), 1),
           "requests_by_kind": dict(Counter(e["kind"] for e in events).most_common()),
           "store_load_requests_per_s": round(len(events) / wall, 1),
           "store_probe_ms_p50": _r(1000 * (percentile(probe.seconds, 50) or 0), 2),
           "store_probe_ms_p99": _r(1000 * (percentile(probe.seconds, 99) or 0), 2),
           "peak_rss_mb_max": max((r["peak_rss_mb"] for r in results), default=None),
           "peak_rss_mb_p50": percentile([r["peak_rss_mb"] for r in results], 50),
           "cpu_s_per_commit": _r(sum(r.get("cpu_s", 0.0) for r in results) / max(1, len(ok)))}
    if pt.engine == "ours":
        gaps = handoffs(ok)
        under, holds, split = [], [], Counter()
        for c in ok:
            mine = by_who.get(f"w{c['worker']}", [])
            under.append(sum(1 for t in mine if any(a <= t <= b for a, b in c["holds"])))
            holds.append(sum(b - a for a, b in c["holds"]))
            split.update(c["hold_split_s"])
        n = max(1, len(ok))
        out.update({
            "lock_timeouts": sum(c["lock_timeouts"] for c in commits),
            "requests_under_lock_p50": percentile(under, 50), "requests_under_lock_max": max(under, default=None),
            "lock_hold_s_mean": _r(sum(holds) / n, 4), "lock_hold_s_p50": _r(percentile(holds, 50), 4),
            "lock_hold_cpu_s_mean": _r(sum(c.get("hold_cpu_s", 0.0) for c in ok) / n, 4),
            "lock_hold_split_s_mean": {k: round(v / n, 4) for k, v in split.most_common()},
            "lock_wait_s_p50": _r(percentile([c["lock_wait_s"] for c in ok], 50)),
            "lock_wait_s_p99": _r(percentile([c["lock_wait_s"] for c in ok], 99)),
            "admission_wait_s_p50": _r(percentile([c["admission_wait_s"] for c in ok], 50)),
            "admission_wait_s_max": _r(max((c["admission_wait_s"] for c in ok), default=None)),
            "table_time_locked_share": _r(sum(holds) / wall, 3),
            # from one hold's end to the next hold's start, between two holds with a writer
            # waiting (its wait began before the gap): the time the lock took to change hands
            "lock_handoff_s_p50": _r(percentile(gaps, 50), 4),
            "lock_handoff_s_mean": _r(sum(gaps) / max(1, len(gaps)), 4),
            "lock_handoff_share": _r(sum(gaps) / wall, 3),
            **({"raw_commits": ok} if os.environ.get("HUDI_OCC_BENCH_RAW") else {}),
            "lock_demand_share": _r(union_length([w for c in ok for w in [*c["holds"], *c.get("waits", [])]]) / wall, 3)})
        got = hudi_read_s3(uri, s3.storage_options)
        ids = sorted(k for k in got.column("txn_id").to_pylist() if k not in fixture[2])
        expected = {f"K{key_of(r['worker'], i)}" for r in results
                    for i, c in enumerate(r["commits"]) if not c["error"]} | ({"K0"} if pt.overlap else set())
        out["rows_read_back"] = got.num_rows
    else:
        from deltalake import DeltaTable
        ids = sorted(DeltaTable(uri, storage_options=delta_options(s3.endpoint)).to_pyarrow_table()
                     .column("id").to_pylist())
        expected = {key_of(r["worker"], i) for r in results
                    for i, c in enumerate(r["commits"]) if not c["error"]}
    out["read_back_exact"] = ids == sorted(expected)
    if not out["read_back_exact"]:
        out["read_back"] = {"rows": len(ids), "expected": len(expected)}
    return out


def start_pools(points: list[Point], workdir: str) -> dict[str, WriterPool]:
    """Every writer process the points need, both engines started at once (their imports
    overlap), not waited for: :func:`run_multi` waits. The quick run starts them before its
    single-writer commits, whose time is spent waiting on the proxy."""
    pools = {e: WriterPool(e, workdir) for e in sorted({p.engine for p in points})}
    for e, pool in pools.items():
        pool.spawn(max(p.writers for p in points if p.engine == e))
    return pools


def run_multi(points: list[Point], log=lambda msg: None, *, s3=None, proxy=None,
              budget_s: float | None = None, pools: dict | None = None,
              workdir: str | None = None) -> dict:
    """Every point on one store and proxy (started here unless given), the writer processes of
    each engine started once (``pools`` from :func:`start_pools`, with the ``workdir`` they
    were given, or started here), ZooKeeper started if a point needs it: ``{label: figures}``.
    ``budget_s``: a ZooKeeper or overlap point is skipped (``{"skipped": ...}``) once this
    many seconds have passed."""
    started = time.perf_counter()
    import tempfile
    from airflow_hudi_occ.testing.latency_proxy import LatencyProxy
    from airflow_hudi_occ.testing.s3 import S3Server
    results: dict[str, dict] = {}
    with ExitStack() as stack:
        if workdir is None:
            workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="scale-"))
        if s3 is None:
            s3 = stack.enter_context(S3Server())
            s3.create_bucket(BUCKET)
        if proxy is None:
            proxy = stack.enter_context(LatencyProxy(s3.endpoint, delay_ms=0))
        zk_hosts = None
        if any(p.lock == "zookeeper" for p in points):
            from airflow_hudi_occ.testing.zookeeper import ZooKeeperServer
            zk_hosts = stack.enter_context(ZooKeeperServer(os.path.join(workdir, "zk"))).hosts
        pools_t0 = time.perf_counter()
        pools = pools if pools is not None else start_pools(points, workdir)
        for pool in pools.values():
            stack.callback(pool.close)
        fixture = fixture_table(workdir)
        for pool in pools.values():
            pool.wait_ready()
        log(f"scale: {sum(len(p.procs) for p in pools.values())} writer processes ready "
            f"({time.perf_counter() - pools_t0:.0f} s after this part began)")
        for pt in points:
            t0 = time.perf_counter()
            if budget_s is not None and pt.variant not in ("storage", "delta") and t0 - started > budget_s:
                results[pt.label] = {"label": pt.label, "skipped": f"time budget of {budget_s:.0f} s spent"}
                log(f"scale: {pt.label} skipped (time budget)")
                continue
            res = run_point(pt, pools[pt.engine], s3, proxy, zk_hosts, workdir, fixture)
            results[pt.label] = res
            extra = (f", lock hold {res['lock_hold_s_mean']:.2f} s, {res['requests_under_lock_p50']} "
                     f"requests under it, {res['conflicts']} conflicts, {res['lock_timeouts']} lock "
                     f"timeouts" if pt.engine == "ours" else "")
            log(f"scale: {pt.label}: {res['commits']} commits in {res['seconds']:.1f} s, "
                f"{res['commits_per_s']:.2f}/s, p50 {res['p50_s']} s, p99 {res['p99_s']} s{extra}; "
                f"store {res['store_load_requests_per_s']} req/s, probe p99 {res['store_probe_ms_p99']} ms "
                f"({time.perf_counter() - t0:.0f} s)")
    return results


def _ms_per_commit(res: dict) -> float:
    """The table's milliseconds per commit (the inverse of its commits per second); a point
    where nothing committed counts its whole time as one commit (a lower bound, never zero)."""
    return 1000.0 * res["seconds"] / max(1, res["commits"])


def multi_figures(multi: dict, store: dict | None = None) -> list[Figure]:
    """Per writer count and delay: the table's time per commit and the p99 commit latency
    against delta-rs's (targets of issue 43, item 3: commits/s at least 1.0x delta-rs, p99 at
    most 1.5x), and the requests under the lock against 6; ZooKeeper and overlap as
    information against the storage-lock point. Every point's figures are in the details."""
    figs = []
    for label, res in multi.items():
        if "skipped" in res or res["engine"] != "ours":
            continue
        n, d = res["writers"], res["delay_ms"]
        base = f"scale.{n}w.{d}ms"
        details = {"ours": res, "store_ceiling": store}
        if res["variant"] == "storage":
            peer = multi.get(f"{n}w.{d}ms.delta")
            if peer is None or "skipped" in peer:
                continue
            details["delta"] = peer
            figs += [
                Figure(f"{base}.ms_per_commit.vs_deltalake", NAME,
                       f"{n} writer processes, {d} ms a request, single-row commits into disjoint "
                       "partitions: the table's ms per commit (1 / commits per second), core writer "
                       "(storage lock, metadata table kept) vs delta-rs appends",
                       _ms_per_commit(res), "ms", "delta-rs, same writers, proxy and store",
                       _ms_per_commit(peer), target=1.0, details=details),
                Figure(f"{base}.p99.vs_deltalake", NAME,
                       f"{n} writers, {d} ms: p99 commit latency (admission, lock wait, retries "
                       "included), ours vs delta-rs", 1000.0 * (res["p99_s"] or res["seconds"]), "ms",
                       "delta-rs p99", 1000.0 * (peer["p99_s"] or peer["seconds"]), target=1.5),
                Figure(f"{base}.requests_under_lock.vs_target", NAME,
                       f"{n} writers, {d} ms: storage requests a writer made while it held the "
                       "table lock, per commit (p50), against issue 43's target of 6",
                       float(res["requests_under_lock_p50"] or 0), "requests", "issue 43 target", 6.0,
                       target=1.0),
            ]
        else:
            ref = multi.get(f"{n}w.{d}ms.storage")
            if ref is None or "skipped" in ref:
                continue
            figs.append(Figure(f"{base}.{res['variant']}.ms_per_commit.vs_storage", NAME,
                               f"{n} writers, {d} ms, {res['variant']}: the table's ms per commit vs "
                               "the storage lock's disjoint point", _ms_per_commit(res), "ms",
                               "storage lock, disjoint", _ms_per_commit(ref), details=details))
    return figs


def summary_table(multi: dict, store_ceiling_rps: float | None = None) -> str:
    """The scale table (markdown), every point of the run: what docs/benchmarks.md shows."""
    head = ("| writers | ms | variant | commits | commits/s | p50 / p99 s | vs delta-rs: commits/s, p99 "
            "| lock hold s (mean) | CPU s a commit (in the hold) | hold split s: MDT write / MDT services / timeline / other "
            "| requests/commit (under lock p50) | conflicts | lock timeouts | admission wait p50 / max s "
            "| peak RSS MiB | store req/s (probe p99 ms) | exact |")
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for label, r in multi.items():
        if "skipped" in r:
            rows.append(f"| {label} | | skipped: {r['skipped']} |" + " |" * 13)
            continue
        peer = multi.get(f"{r['writers']}w.{r['delay_ms']}ms.delta", {})
        vs = "–"
        if r["engine"] == "ours" and peer and "skipped" not in peer and peer["commits_per_s"]:
            vs = (f"{r['commits_per_s'] / peer['commits_per_s']:.2f}x, "
                  f"{(r['p99_s'] or 0) / (peer['p99_s'] or 1):.1f}x")
        if r["engine"] == "ours":
            sp = r["lock_hold_split_s_mean"]
            mdt_w = sp.get("metadata-table write", 0.0)
            mdt_s = sum(v for k, v in sp.items() if k.startswith("metadata-table services"))
            tl = sp.get("timeline read", 0.0)
            other = r["lock_hold_s_mean"] - mdt_w - mdt_s - tl
            cpu = f"{r.get('cpu_s_per_commit') or 0:.2f} ({r.get('lock_hold_cpu_s_mean') or 0:.2f})"
            lock = (f"{r['lock_hold_s_mean']:.2f} | {cpu} | {mdt_w:.2f} / {mdt_s:.2f} / {tl:.2f} / {other:.2f} | "
                    f"{r['requests_per_commit']:.0f} ({r['requests_under_lock_p50']}) | {r['conflicts']} | "
                    f"{r['lock_timeouts']} | {r['admission_wait_s_p50']} / {r['admission_wait_s_max']}")
        else:
            lock = f"– | {r.get('cpu_s_per_commit') or 0:.2f} | – | {r['requests_per_commit']:.0f} (–) | {r['conflicts']} | – | –"
        rows.append(f"| {r['writers']} | {r['delay_ms']} | {r['variant']} | {r['commits']}"
                    f"{' (' + str(r['failed_commits']) + ' failed)' if r['failed_commits'] else ''} | "
                    f"{r['commits_per_s']:.2f} | {r['p50_s']} / {r['p99_s']} | {vs} | {lock} | "
                    f"{r['peak_rss_mb_max']:.0f} | {r['store_load_requests_per_s']:.0f} "
                    f"({r['store_probe_ms_p99']}) | {'yes' if r['read_back_exact'] else 'NO'} |")
    if store_ceiling_rps:
        rows.append(f"\nstore ceiling (PUT+GET clients, no delay): {store_ceiling_rps:.0f} requests/s")
    return "\n".join(rows)


def write_svg(multi: dict, path: str) -> None:
    """Commits per second and lock hold time against writers, ours and delta-rs, at each
    delay: a plain SVG (no plotting library in the venv), two panels."""
    colours = {("ours", 20): "#1f77b4", ("ours", 50): "#0b3d66", ("delta", 20): "#ff7f0e",
               ("delta", 50): "#a04000"}
    xs = {n: i for i, n in enumerate(WRITER_COUNTS)}
    panels = [("commits per second (the table)", "commits_per_s", ("ours", "delta")),
              ("lock hold per commit, s (mean)", "lock_hold_s_mean", ("ours",))]
    w, h, pad = 420, 300, 50
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * w}" height="{h + 40}" '
             'font-family="sans-serif" font-size="11">', '<rect width="100%" height="100%" fill="white"/>']
    for k, (title, key, engines) in enumerate(panels):
        ox = k * w
        series = {}
        for (engine, d) in colours:
            if engine not in engines:
                continue
            pts = [(xs[r["writers"]], r[key]) for r in multi.values()
                   if "skipped" not in r and r["engine"] == engine and r["delay_ms"] == d
                   and r["variant"] in ("storage", "delta") and r["writers"] in xs and r.get(key) is not None]
            if pts:
                series[(engine, d)] = sorted(pts)
        top = max([v for s in series.values() for _, v in s] + [1e-9]) * 1.15

        def X(i):
            return ox + pad + i * (w - 2 * pad) / max(1, len(WRITER_COUNTS) - 1)

        def Y(v):
            return 20 + (h - pad - 20) * (1 - v / top)
        parts.append(f'<text x="{ox + w / 2}" y="14" text-anchor="middle" font-weight="bold">{title}</text>')
        parts.append(f'<line x1="{ox + pad}" y1="{Y(0)}" x2="{ox + w - pad}" y2="{Y(0)}" stroke="black"/>')
        parts.append(f'<line x1="{ox + pad}" y1="20" x2="{ox + pad}" y2="{Y(0)}" stroke="black"/>')
        for n, i in xs.items():
            parts.append(f'<text x="{X(i)}" y="{Y(0) + 14}" text-anchor="middle">{n}</text>')
        parts.append(f'<text x="{ox + w / 2}" y="{Y(0) + 28}" text-anchor="middle">writer processes</text>')
        for j in range(5):
            v = top * j / 5
            parts.append(f'<text x="{ox + pad - 4}" y="{Y(v) + 4}" text-anchor="end">{v:.2g}</text>')
        for ly, ((engine, d), pts) in enumerate(series.items()):
            c = colours[(engine, d)]
            name = ("ours" if engine == "ours" else "delta-rs") + f", {d} ms"
            parts.append('<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>'.format(
                c, " ".join(f"{X(i):.1f},{Y(v):.1f}" for i, v in pts)))
            parts += [f'<circle cx="{X(i):.1f}" cy="{Y(v):.1f}" r="3" fill="{c}"/>' for i, v in pts]
            parts.append(f'<text x="{ox + pad + 90 * ly}" y="{Y(0) + 46}" fill="{c}">{name}</text>')
    parts.append("</svg>")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


# --- the single-writer point alone (before/after comparisons of the lock's requests) -----------


def single_writer_point(commits: int = 10, delay_ms: int = DELAY_MS, warmup: int = 2, *,
                        mdt: bool = False) -> dict:
    """The core writer's commits of :func:`run` without the store's ceiling or delta-rs: light
    enough to run on a busy machine, and the same counts (docs/benchmarks.md, item 3).
    ``mdt``: on the multi-writer points' table instead (Java's fixture, its metadata table
    kept), to name the requests its deltacommit and services make under the lock."""
    import tempfile
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.format.storage import Storage
    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.testing.latency_proxy import LatencyProxy
    from airflow_hudi_occ.testing.s3 import S3Server, hudi_read_s3
    from .scale_workers import row as fixture_row

    ours: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="scale-") as workdir, S3Server() as s3, \
            LatencyProxy(s3.endpoint, delay_ms=0) as proxy:
        s3.create_bucket(BUCKET)
        if mdt:
            path, schema, initial = fixture_table(workdir)
            options = proxy.storage_options(s3.storage_options)
            Storage(f"s3://{BUCKET}/mdt", options).fs.put(path + "/", f"{BUCKET}/mdt", recursive=True)
            table = Table.open(f"s3://{BUCKET}/mdt", storage_options=options)
            writer = ArrowTableWriter(table, WriteConfig.from_options(
                {"hoodie.write.lock.provider": "storage"}), writer_id="scale-0")

            def batch(i):
                return fixture_row(0, i, "p0", False, schema)
        else:
            table, writer, options = our_writer(s3, proxy)
            initial = set()
            batch = _row
        proxy.set_delay(delay_ms)
        tracer = RequestTracer()
        with tracer.installed():
            for i in range(warmup + commits):
                r = _per_commit(proxy, tracer, lambda: writer.write(batch(i), "upsert"), delay_ms)
                if i >= warmup:
                    ours.append(r)
        proxy.set_delay(0)
        rows = hudi_read_s3(table.storage.base_uri, options).num_rows
        if rows != warmup + commits + len(initial):
            raise AssertionError(f"rows read back {rows}, expected {warmup + commits + len(initial)}")

    def med(key):
        return statistics.median(r[key] for r in ours)

    paths = Counter()
    for r in ours:
        paths.update(r["by_path"])
    under_paths = Counter()
    for r in ours:
        under_paths.update(r["under_lock_by_path"])
    return {"delay_ms": delay_ms, "commits": commits, "metadata_table": mdt,
            "seconds_p50": round(med("seconds"), 3),
            "requests_p50": med("requests"), "round_trips_p50": med("round_trips"),
            "under_lock_p50": med("under_lock"),
            "under_lock_per_hold": [r["under_lock_per_hold"] for r in ours],
            "lock_hold_s_p50": round(med("hold_s"), 4), "acquire_requests_p50": med("acquire"),
            "release_requests_p50": med("release"),
            "requests_by_kind_median": _median_counter([r["by_kind"] for r in ours]),
            "under_lock_by_kind_median": _median_counter([r["under_lock_by_kind"] for r in ours]),
            "requests_by_code_path_per_commit": {k: v / commits for k, v in paths.most_common()},
            "under_lock_by_code_path_per_commit": {k: v / commits for k, v in under_paths.most_common()}}


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.scale [--commits N] [--delay-ms MS] [--mdt] [--json PATH]``: the
    single-writer point (``--mdt``: on Java's fixture, its metadata table kept)."""
    import argparse
    import json
    ap = argparse.ArgumentParser(prog="python -m bench.scale", description=main.__doc__)
    ap.add_argument("--commits", type=int, default=10)
    ap.add_argument("--delay-ms", type=int, default=DELAY_MS)
    ap.add_argument("--mdt", action="store_true", help="the table of the multi-writer points: "
                    "Java's fixture with its metadata table, kept by the writer")
    ap.add_argument("--json", default=None, help="write every figure here")
    ap.add_argument("--points", default=None,
                    help="instead, these multi-writer points of the full run (labels such as 8w.20ms.zk, "
                         "8w.50ms.storage.overlap, 32w.20ms.delta, comma-separated), each with the full run's "
                         "commits per writer and no time budget; prints the scale table")
    args = ap.parse_args(argv)
    exit_on_sigterm()
    if args.points:
        points = [point_of(label) for label in args.points.split(",")]
        multi = run_multi(points, lambda m: print(m, flush=True))
        print(summary_table(multi))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(multi, f, indent=1)
        return 0
    out = single_writer_point(args.commits, args.delay_ms, mdt=args.mdt)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    print(json.dumps({k: out[k] for k in ("delay_ms", "seconds_p50", "requests_p50", "round_trips_p50",
                                          "under_lock_p50",
                                          "lock_hold_s_p50", "acquire_requests_p50",
                                          "release_requests_p50")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
