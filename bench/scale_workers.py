"""Writer processes of the multi-writer points of ``bench/scale.py`` (issue 43, item 2).

``python -m bench.scale_workers ENGINE`` imports its engine once, then serves points: for each
writer spec read from stdin (one JSON a line) it opens the table, creates
``<start>.ready.<worker>``, waits for ``<start>`` to exist (every writer of a point starts
together), makes ``commits`` single-row commits into its partition, and prints one JSON line:
per commit its wall-clock start and end, attempts and conflicts, and
for ours the admission wait, the lock's wait and holds, and where each hold went; the process's
peak RSS during the point; the errors of commits that failed (a lock timeout is one).

Why its own process per writer, and its own access key: the figures are the table's, under a
lock shared by processes (no GIL in common), and the proxy names the key that signed each
request, so the requests a writer made while *it* held the lock are counted apart from the
others' polling (``testing/latency_proxy.request_signer``).

``engine`` is ``ours`` (``ArrowTableWriter``, each batch through
``core/commit/retry.run_admitted``: admission, then conflict retries) or ``delta``
(``write_deltalake`` append with conditional puts; a ``CommitFailedError`` is retried).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager

import pyarrow as pa

#: the prefix of this process's answers on stdout (anything else printed there is not one)
RESULT = "@@scale-result "

#: phases of a commit timed by wrapping the functions that do them (label, module, attribute);
#: the time of each inside the lock's holds is the split of the hold. Only the outermost wrapped
#: call is timed (a timeline read inside the metadata table's services counts as services).
PHASES = (
    ("timeline read", "airflow_hudi_occ.core.table.table", "Table.timeline"),
    ("requested instant", "airflow_hudi_occ.core.commit.transaction", "create_requested"),
    ("heartbeat start", "airflow_hudi_occ.core.concurrency.heartbeat", "Heartbeat.start"),
    ("conflict check", "airflow_hudi_occ.core.commit.transaction", "resolve_write_conflicts"),
    ("properties confirmed", "airflow_hudi_occ.core.commit.transaction", "confirm_under_lock"),
    ("metadata-table write", "airflow_hudi_occ.core.commit.transaction", "stats_blocks"),
    ("metadata-table write", "airflow_hudi_occ.core.commit.transaction", "write_metadata_deltacommit"),
    ("completion", "airflow_hudi_occ.core.commit.transaction", "complete"),
    ("metadata-table services (compaction, clean, archival)",
     "airflow_hudi_occ.core.commit.transaction", "run_metadata_table_services"),
)


class PhaseTimer:
    """Wall-clock windows of the wrapped phases (outermost call only), in this process."""

    def __init__(self):
        self.windows: list[tuple[str, float, float]] = []
        self._depth = threading.local()

    def wrap(self, label: str, fn):
        timer = self

        def timed(*args, **kwargs):
            depth = getattr(timer._depth, "n", 0)
            timer._depth.n = depth + 1
            t0 = time.time()
            try:
                return fn(*args, **kwargs)
            finally:
                timer._depth.n = depth
                if depth == 0:
                    timer.windows.append((label, t0, time.time()))
        return timed

    def install(self) -> list[tuple[object, str, object]]:
        """Wrap every phase's function; returns ``(owner, name, original)`` of each."""
        import importlib
        saved = []
        for label, module, attr in PHASES:
            owner = importlib.import_module(module)
            name = attr
            if "." in attr:
                cls, name = attr.split(".")
                owner = getattr(owner, cls)
            saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, self.wrap(label, getattr(owner, name)))
        return saved

    @contextmanager
    def installed(self):
        """Wrapped while inside (a bench process that goes on to measure other things)."""
        saved = self.install()
        try:
            yield self
        finally:
            for owner, name, original in reversed(saved):
                setattr(owner, name, original)


def split_holds(holds: list[tuple[float, float]], windows: list[tuple[str, float, float]]) -> dict:
    """Seconds of each phase inside the holds, and ``other`` (the rest of the hold)."""
    out: dict[str, float] = {}
    for a, b in holds:
        inside = 0.0
        for label, t0, t1 in windows:
            overlap = min(b, t1) - max(a, t0)
            if overlap > 0:
                out[label] = out.get(label, 0.0) + overlap
                inside += overlap
        out["other"] = out.get("other", 0.0) + max(0.0, (b - a) - inside)
    return out


def key_of(worker: int, i: int) -> int:
    """The new key of commit ``i`` of ``worker`` (the shared key of overlapping writers is 0)."""
    return 1_000_000 + worker * 10_000 + i


def row(worker: int, i: int, partition: str, shared_key: bool, schema: pa.Schema | None = None) -> pa.Table:
    """One new key of this writer (and, for an overlapping writer, the shared key 0 too).
    ``schema``: the table's (Java's fixture: ``txn_id`` key, ``region`` partition, the rest
    null); None: delta-rs's three columns."""
    ids = ([0] if shared_key else []) + [key_of(worker, i)]
    if schema is None:
        return pa.table({"id": pa.array(ids, pa.int64()), "p": pa.array([partition] * len(ids)),
                         "v": pa.array([f"w{worker}-c{i}"] * len(ids))})
    rows = [{**{n: None for n in schema.names}, "txn_id": f"K{k}", "region": partition, "txn_ts": 1,
             "txn_metadata": f"w{worker}-c{i}"} for k in ids]
    return pa.Table.from_pylist(rows, schema=schema)


def schema_of(spec: dict) -> pa.Schema | None:
    import base64
    raw = spec.get("schema_b64")
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(raw))) if raw else None


#: installed once per process (a process serves many points): the phase timer, the admission
#: waits of the current commit, the lock tracer
_INSTRUMENTS: dict = {}


def instruments() -> dict:
    if not _INSTRUMENTS:
        from airflow_hudi_occ.core.concurrency import admission
        from bench.scale import RequestTracer
        phases = PhaseTimer()
        phases.install()
        waits: list[float] = []
        raw_wait = admission.wait_admitted

        def timed_wait(*args, **kwargs):
            t0 = time.time()
            try:
                return raw_wait(*args, **kwargs)
            finally:
                waits.append(time.time() - t0)
        admission.wait_admitted = timed_wait  # run_admitted calls it through the module
        # HUDI_OCC_BENCH_TRACE_CALLS=1: each commit also names the code path of every storage
        # call made in its holds (a diagnosis; the walk of frames costs CPU, so not by default)
        tracer = RequestTracer(trace_calls=bool(os.environ.get("HUDI_OCC_BENCH_TRACE_CALLS")))
        _INSTRUMENTS.update(phases=phases, waits=waits, tracer=tracer, installed=tracer.installed())
        _INSTRUMENTS["installed"].__enter__()  # for the life of the process
    return _INSTRUMENTS


def _is_lock_timeout(attempt) -> bool:
    return bool(attempt.error) and "LockAcquireTimeout" in json.dumps(attempt.error)


def run_ours(spec: dict, go) -> dict:
    from airflow_hudi_occ.core.commit import retry
    from airflow_hudi_occ.core.commit.attempt_log import LABELS_OPTION
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.concurrency.footprint import REQUEST_LABEL, batch_footprint
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.table.table import Table

    inst = instruments()
    phases, waits, tracer = inst["phases"], inst["waits"], inst["tracer"]
    options = dict(spec["write_options"])
    table = Table.open(spec["uri"], storage_options=spec["storage_options"])
    owner = f"scale-{spec['worker']}"
    schema = schema_of(spec)
    commits = []
    go()
    for i in range(spec["commits"]):
        data = row(spec["worker"], i, spec["partition"], spec["overlapping"], schema)
        tracer.reset()
        phases.windows = []
        waits.clear()
        run = retry.RetryRun()
        policy = retry.RetryPolicy(max_conflict_retries=8, base_delay_s=0.05, max_delay_s=1.0)

        def attempt(n, request_id, data=data):
            labelled = WriteConfig.from_options({**options, LABELS_OPTION: json.dumps({REQUEST_LABEL: request_id})})
            return ArrowTableWriter(table, labelled, writer_id=owner).write(data, "upsert", attempt=n)

        t0 = time.time()
        error = None
        try:
            footprint = batch_footprint(table, data, options, owner=owner)
            retry.run_admitted(table, footprint, attempt, policy, run=run)
        except Exception as e:  # noqa: BLE001 - reported per commit (a lock timeout is one)
            error = f"{type(e).__name__}: {str(e)[:300]}"
        t1 = time.time()
        timeouts = sum(1 for a in run.attempts if _is_lock_timeout(a))
        commits.append({
            "t0": t0, "t1": t1, "error": error, "attempts": len(run.attempts),
            "conflicts": sum(1 for a in run.attempts if a.outcome == "conflict") - timeouts,
            "lock_timeouts": timeouts, "admission_wait_s": sum(waits),
            "lock_wait_s": sum(b - a for a, b in tracer.acquires), "waits": list(tracer.acquires),
            "holds": list(tracer.holds), "hold_cpu_s": sum(tracer.hold_cpu),
            "hold_split_s": split_holds(tracer.holds, phases.windows)})
        if tracer.trace_calls:
            commits[-1]["calls_in_holds"] = dict(Counter(
                where for a, _b, where in tracer.calls if any(h0 <= a <= h1 for h0, h1 in tracer.holds)))
    return {"commits": commits}


def run_delta(spec: dict, go) -> dict:
    from deltalake import write_deltalake
    from deltalake.exceptions import CommitFailedError
    commits = []
    go()
    for i in range(spec["commits"]):
        data = row(spec["worker"], i, spec["partition"], False)
        t0 = time.time()
        attempts, error = 0, None
        while True:
            attempts += 1
            try:
                write_deltalake(spec["uri"], data, mode="append", partition_by=["p"],
                                storage_options=spec["delta_options"])
                break
            except CommitFailedError as e:
                if attempts > 8:
                    error = f"{type(e).__name__}: {str(e)[:300]}"
                    break
            except Exception as e:  # noqa: BLE001 - reported per commit
                error = f"{type(e).__name__}: {str(e)[:300]}"
                break
        commits.append({"t0": t0, "t1": time.time(), "error": error, "attempts": attempts,
                        "conflicts": attempts - 1})
    return {"commits": commits}


def vm_peak_mb() -> float:
    """This process's peak resident memory since :func:`reset_vm_peak` (VmHWM), in MiB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def reset_vm_peak() -> None:
    """Start a new peak (Linux: ``5`` to ``clear_refs`` resets VmHWM): one process serves
    several points, each reports its own peak."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def warm_up(engine: str) -> None:
    """Imports before the first point: the figures are commits, not start-up."""
    row(0, 0, "p", True).to_pandas()
    if engine == "ours":
        import airflow_hudi_occ.core.commit.writer  # noqa: F401
        import bench.scale  # noqa: F401
    else:
        import deltalake  # noqa: F401


def main(argv: list[str]) -> int:
    """``python -m bench.scale_workers ENGINE``: one spec (JSON) a line on stdin, one result
    (JSON) a line on stdout; the process serves every point of its engine (imported once)."""
    import logging
    logging.basicConfig(level=logging.CRITICAL)  # conflicts and lock waits are in the results
    engine = argv[0]
    warm_up(engine)
    print(RESULT + json.dumps({"ready": engine}), flush=True)
    for line in sys.stdin:
        spec = json.loads(line)
        reset_vm_peak()

        def go() -> None:
            """Table opened: say so, then wait for every writer of the point."""
            open(f"{spec['start']}.ready.{spec['worker']}", "w").close()
            while not os.path.exists(spec["start"]):
                time.sleep(0.005)
        cpu0 = time.process_time()
        try:
            out = (run_ours if engine == "ours" else run_delta)(spec, go)
        except Exception as e:  # noqa: BLE001 - the point reports it
            out = {"commits": [], "failed": f"{type(e).__name__}: {str(e)[:500]}"}
        out["worker"] = spec["worker"]
        out["peak_rss_mb"] = round(vm_peak_mb(), 1)
        # every thread of the process (delta-rs's Rust threads too): what one commit costs the
        # machine's cores, which on a 2-core machine with 32 writers bounds the table as well
        out["cpu_s"] = round(time.process_time() - cpu0, 3)
        print(RESULT + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover - runs in the writer process
    sys.exit(main(sys.argv[1:]))
