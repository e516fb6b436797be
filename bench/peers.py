"""The core writer side by side with its peers, on the same data in the same run.

Peers: a plain ``pyarrow.parquet.write_to_dataset`` (the floor: parquet files and nothing
else) and the ``deltalake`` package (delta-rs, a lakehouse writer with its own optimistic
concurrency). Every figure is ours / theirs, medians of alternating runs (5 for the write and
upsert, whose 0.4-1 s are of the order of this VM's noise; 3 for the rest):

- ``write``: N rows (id, ts, a 20-character string, 10 partitions) written once into a new
  table (2,000,000; quick: 20,000). Ours writes Hudi's five meta columns besides the data and
  fsyncs every file before the commit; the floor does neither. ``write_virtual_keys`` /
  ``upsert_virtual_keys``: the same on a table with Hudi's virtual keys
  (``hoodie.populate.meta.fields=false``): no meta columns, still fsynced and committed.
- ``write.vs_pyarrow_with_meta_columns``: the same write against a like-for-like floor
  (:func:`floor_with_meta_columns`): pyarrow writing the same columns, Hudi's five meta
  columns included (built with ``pyarrow.compute``: commit time and file name constant, the
  sequence number and record key per row, the partition path), one file per partition, no
  fsync, no timeline. What is left over it is the writer's own cost, not Hudi's layout's.
- ``upsert``: N/10 rows (half updates spread over all partitions, half new keys) into that
  table; delta-rs ``merge`` (update all / insert all) on the same keys. Both rewrite the files
  they touch (copy-on-write; delta-rs without deletion vectors).
- ``small_commit``: K sequential commits of 100 rows, default settings on both sides, the
  median per commit; ``small_commit_wait`` the same with Hudi's own time generator
  (``hoodie.time.generator.type=WAIT_TO_ADJUST_SKEW``, 200 ms), for scale.
- ``concurrent.disjoint`` / ``concurrent.overlapping``: P processes x C commits started
  together; wall time until all are done. Overlapping commits all upsert 10 shared keys, so
  writers conflict and retry (ours: the OCC conflict, retried with a fresh instant; delta-rs:
  ``CommitFailedError``). Every table is then checked exactly (bench/peer_workers.py).

Every table ours writes is read back with hudi-rs and compared with the rows written; a
mismatch is a benchmark error, not a figure. Peak memory of the 2 M-row write (a fresh
process: peak RSS minus RSS before the write, over the batch's Arrow size) is in the details
of the ``write`` figures.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .common import Figure, work_dir

NAME = "peers"
META_COLUMN_NAMES = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                     "_hoodie_partition_path", "_hoodie_file_name")


def sizes(quick: bool) -> dict:
    if quick:
        return {"rows": 20_000, "runs": 1, "write_runs": 1, "small_commits": 6, "wait_commits": 2,
                "processes": 2, "per_process": 3}
    # the write and upsert take 0.4-1 s each and this VM's noise is of that order: 5 runs
    return {"rows": 2_000_000, "runs": 3, "write_runs": 5, "small_commits": 200, "wait_commits": 10,
            "processes": 4, "per_process": 25}


def figure_names(quick: bool = False) -> list[str]:
    return ["peers.write.vs_pyarrow", "peers.write.vs_pyarrow_with_meta_columns", "peers.write.vs_deltalake", "peers.upsert.vs_deltalake",
            "peers.write_virtual_keys.vs_pyarrow", "peers.upsert_virtual_keys.vs_deltalake",
            "peers.small_commit.vs_deltalake", "peers.small_commit_wait.vs_deltalake",
            "peers.concurrent.disjoint.vs_deltalake", "peers.concurrent.overlapping.vs_deltalake"]


def make_data(n: int, seed: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(n, dtype=np.int64)
    return pa.table({"id": ids, "ts": rng.integers(0, 1 << 40, n),
                     "s": pa.array(np.char.zfill(rng.integers(0, 10**9, n).astype(str), 20)),
                     "p": pa.array((ids % 10).astype(str))})


def make_upsert(data: pa.Table, seed: int = 2) -> pa.Table:
    n = data.num_rows
    m = max(1, n // 20)
    rng = np.random.default_rng(seed)
    sel = rng.choice(n, m, replace=False)
    up = data.take(pa.array(sel)).set_column(1, "ts", pa.array(rng.integers(1 << 40, 1 << 41, m)))
    new_ids = np.arange(n, n + m, dtype=np.int64)
    new = pa.table({"id": new_ids, "ts": rng.integers(0, 1 << 40, m), "s": up.column("s"),
                    "p": pa.array((new_ids % 10).astype(str))})
    return pa.concat_tables([up, new])


def small_batch(i: int) -> pa.Table:
    ids = np.arange(i * 100, i * 100 + 100, dtype=np.int64)
    return pa.table({"id": ids, "ts": np.full(100, i, dtype=np.int64), "s": pa.array(["x" * 20] * 100),
                     "p": pa.array((ids % 10).astype(str))})


# --- the engines ---------------------------------------------------------------------------------


def ours_table(path: str, virtual_keys: bool = False):
    from airflow_hudi_occ.core.table.table import Table
    shutil.rmtree(path, ignore_errors=True)
    return Table.create(path, "bench", record_key_fields=["id"], partition_fields=["p"],
                        precombine_field="ts",
                        extra_properties={"hoodie.populate.meta.fields": "false"} if virtual_keys else None)


def ours_writer(table, options: dict | None = None):
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.config import WriteConfig
    return ArrowTableWriter(table, WriteConfig.from_options(options or {}))


def check_with_hudi_rs(path: str, expected: pa.Table) -> int:
    """Compare what hudi-rs reads with the expected rows (by key); raises on any difference."""
    from airflow_hudi_occ.testing.tables import hudi_read
    got = hudi_read(path).select(["id", "ts", "s", "p"]).sort_by("id")
    want = expected.select(["id", "ts", "s", "p"]).sort_by("id")
    if got.num_rows != want.num_rows or not got.equals(want.cast(got.schema)):
        raise AssertionError(f"hudi-rs reads {got.num_rows} rows at {path}, expected "
                             f"{want.num_rows} (or different values)")
    return got.num_rows


def floor_with_meta_columns(data: pa.Table, root: str, instant: str = "20260101000000000") -> int:
    """The like-for-like floor: each partition's rows with Hudi's five meta columns in front,
    built with pyarrow alone, one parquet file per partition (snappy, as ``write_to_dataset``;
    dictionaries and statistics only where they pay). Rows written."""
    import uuid

    import pyarrow.compute as pc
    n = 0
    parts = data.column("p")
    # pyarrow at its best for these columns, as base_file.py writes them: no dictionary tried
    # on the unique ones, no statistics where no reader filters
    names = [*META_COLUMN_NAMES, *data.column_names]
    dictionary = [c for c in names if c not in ("_hoodie_commit_seqno", "_hoodie_record_key")]
    statistics_on = [c for c in names if c not in ("_hoodie_commit_seqno", "_hoodie_partition_path",
                                                   "_hoodie_file_name")]
    for i, value in enumerate(pc.unique(parts).to_pylist()):
        rows = data.filter(pc.equal(parts, value))
        k = rows.num_rows
        name = f"{uuid.uuid4()}-0_0-0-0_{instant}.parquet"
        seq = pc.binary_join_element_wise(pa.scalar(f"{instant}_{i}"),
                                          pc.cast(pa.array(np.arange(k)), pa.string()), "_")
        meta = pa.table({"_hoodie_commit_time": pa.repeat(pa.scalar(instant), k),
                         "_hoodie_commit_seqno": seq,
                         "_hoodie_record_key": pc.cast(rows.column("id"), pa.string()),
                         "_hoodie_partition_path": rows.column("p"),
                         "_hoodie_file_name": pa.repeat(pa.scalar(name), k)})
        full = pa.Table.from_arrays(meta.columns + rows.columns, names=meta.column_names + rows.column_names)
        os.makedirs(os.path.join(root, value), exist_ok=True)
        pq.write_table(full, os.path.join(root, value, name), use_dictionary=dictionary,
                       write_statistics=statistics_on)
        n += k
    return n


def merged(base: pa.Table, upsert: pa.Table) -> pa.Table:
    """The model: the upsert's rows replace the base's by key (its ts values are larger)."""
    import pyarrow.compute as pc
    keep = base.filter(pc.invert(pc.is_in(base.column("id"), value_set=upsert.column("id"))))
    return pa.concat_tables([keep, upsert])


def median_ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1000.0


# --- the measurements ----------------------------------------------------------------------------


def bench_write_and_upsert(root: str, size: dict, log) -> dict:
    from deltalake import DeltaTable, write_deltalake
    data = make_data(size["rows"])
    upsert = make_upsert(data)
    t = {"ours": [], "floor": [], "floor_meta": [], "delta": [], "ours_up": [], "delta_up": [], "vk": [], "vk_up": []}
    rows_checked = 0
    for r in range(size["write_runs"]):
        for virtual, w_key, up_key in ((False, "ours", "ours_up"), (True, "vk", "vk_up")):
            tbl = ours_table(os.path.join(root, w_key), virtual_keys=virtual)
            w = ours_writer(tbl)
            t0 = time.perf_counter()
            w.write(data, "insert")
            t[w_key].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            w.write(upsert, "upsert")
            t[up_key].append(time.perf_counter() - t0)
            rows_checked = check_with_hudi_rs(tbl.base_uri, merged(data, upsert))
            shutil.rmtree(tbl.base_uri, ignore_errors=True)

        floor = os.path.join(root, "floor")
        shutil.rmtree(floor, ignore_errors=True)
        t0 = time.perf_counter()
        pq.write_to_dataset(data, floor, partition_cols=["p"])
        t["floor"].append(time.perf_counter() - t0)
        shutil.rmtree(floor, ignore_errors=True)
        t0 = time.perf_counter()
        if floor_with_meta_columns(data, floor) != data.num_rows:
            raise AssertionError("the floor with meta columns lost rows")
        t["floor_meta"].append(time.perf_counter() - t0)

        delta = os.path.join(root, "delta")
        shutil.rmtree(delta, ignore_errors=True)
        t0 = time.perf_counter()
        write_deltalake(delta, data, partition_by=["p"])
        t["delta"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        (DeltaTable(delta).merge(upsert, predicate="t.id = s.id AND t.p = s.p", source_alias="s",
                                 target_alias="t")
         .when_matched_update_all().when_not_matched_insert_all().execute())
        t["delta_up"].append(time.perf_counter() - t0)
        log(f"peers: run {r + 1}: write ours {t['ours'][-1]:.2f}s floor {t['floor'][-1]:.2f}s "
            f"floor with meta columns {t['floor_meta'][-1]:.2f}s "
            f"delta {t['delta'][-1]:.2f}s virtual keys {t['vk'][-1]:.2f}s; upsert ours "
            f"{t['ours_up'][-1]:.2f}s delta {t['delta_up'][-1]:.2f}s virtual keys {t['vk_up'][-1]:.2f}s")
    return {"t": t, "rows": data.num_rows, "upsert_rows": upsert.num_rows, "rows_checked": rows_checked,
            "batch_bytes": data.nbytes}


def peak_memory(rows: int) -> dict:
    """The 2 M-row write in a fresh process: peak RSS growth over the batch's Arrow size."""
    out = subprocess.run([sys.executable, "-m", "bench.peers", "--memory", str(rows)],
                         capture_output=True, text=True, timeout=900,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _memory_child(rows: int) -> None:
    """Peak RSS of the write alone. Building the data peaks far above the batch (numpy's string
    temporaries), and ``ru_maxrss`` never goes down, so the kernel's high-water mark is reset
    first (``5`` into ``/proc/self/clear_refs``, Linux >= 4.0) and read back after the write."""
    import gc
    import tempfile
    data = make_data(rows)
    d = tempfile.mkdtemp(prefix="hudi-occ-bench-mem-")
    try:
        w = ours_writer(ours_table(os.path.join(d, "t")))
        gc.collect()
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            reset = True
        except OSError:
            reset = False
        before = (_status_kb("VmRSS") or 0) * 1024
        w.write(data, "insert")
        if reset and _status_kb("VmHWM") is not None:
            peak, how = _status_kb("VmHWM") * 1024, "VmHWM after a clear_refs reset"
        else:
            peak, how = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "ru_maxrss (no reset)"
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print(json.dumps({"batch_bytes": data.nbytes, "rss_before": before, "rss_peak": peak, "measured_by": how,
                      "growth_over_batch": round((peak - before) / data.nbytes, 3)}))


def bench_small_commits(root: str, size: dict, log) -> dict:
    from deltalake import write_deltalake
    res = {}
    for label, opts, k in (("default", {}, size["small_commits"]),
                           ("wait", {"hoodie.time.generator.type": "WAIT_TO_ADJUST_SKEW"}, size["wait_commits"])):
        w = ours_writer(ours_table(os.path.join(root, f"small-{label}")), opts)
        delta = os.path.join(root, f"small-delta-{label}")
        shutil.rmtree(delta, ignore_errors=True)
        ours, theirs = [], []
        for i in range(k + 2):  # two warm-up commits each, then alternate commit by commit
            b = small_batch(i)
            t0 = time.perf_counter()
            w.write(b, "insert")
            d_ours = time.perf_counter() - t0
            t0 = time.perf_counter()
            write_deltalake(delta, b, mode="append", partition_by=["p"])
            d_theirs = time.perf_counter() - t0
            if i >= 2:
                ours.append(d_ours)
                theirs.append(d_theirs)
        rows = check_with_hudi_rs(w.table.base_uri, pa.concat_tables([small_batch(i) for i in range(k + 2)]))
        res[label] = {"ours": ours, "delta": theirs, "rows_checked": rows}
        log(f"peers: small commits ({label}): ours {median_ms(ours):.1f} ms, delta {median_ms(theirs):.1f} ms")
    return res


def _concurrent_once(root: str, engine: str, mode: str, size: dict) -> tuple[float, dict]:
    from airflow_hudi_occ.core.commit.transaction import last_checkpoint
    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.testing.tables import hudi_read
    from deltalake import DeltaTable, write_deltalake
    from .peer_workers import SHARED
    path = os.path.join(root, f"conc-{engine}-{mode}")
    shutil.rmtree(path, ignore_errors=True)
    empty = pa.table({"id": pa.array([], pa.int64()), "p": pa.array([], pa.string()),
                      "v": pa.array([], pa.string())})
    if engine == "ours":
        Table.create(path, "bench", record_key_fields=["id"], partition_fields=["p"])
    else:
        write_deltalake(path, empty)
    start = os.path.join(root, f"start-{engine}-{mode}")
    for stale in [start, *(f"{start}.ready.{w}" for w in range(size["processes"]))]:
        if os.path.exists(stale):
            os.unlink(stale)
    p, c = size["processes"], size["per_process"]
    procs = [subprocess.Popen([sys.executable, "-m", "bench.peer_workers", engine, mode, path, str(w), str(c), start],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
             for w in range(p)]
    ready = [f"{start}.ready.{w}" for w in range(p)]
    deadline = time.monotonic() + 300
    while not all(os.path.exists(r) for r in ready):  # every process imported and waiting
        if time.monotonic() > deadline or any(pr.poll() is not None for pr in procs):
            raise RuntimeError(f"{engine} workers did not get ready: "
                               f"{[pr.communicate()[1][-500:] for pr in procs if pr.poll() is not None]}")
        time.sleep(0.01)
    t0 = time.perf_counter()
    open(start, "w").close()
    outs = [pr.communicate(timeout=900) for pr in procs]
    wall = time.perf_counter() - t0
    for pr, (o, e) in zip(procs, outs):
        if pr.returncode != 0:
            raise RuntimeError(f"{engine} worker failed: {e[-2000:]}")
    retries = sum(json.loads(o.strip().splitlines()[-1])["retries"] for o, _ in outs)
    # the exact check: every own key with its tag; the shared keys all with the last tag
    if engine == "ours":
        got = hudi_read(path)
        last = last_checkpoint(Table.open(path))
    else:
        dt = DeltaTable(path)
        got = dt.to_pyarrow_table()
        last = next((h.get("tag") for h in dt.history(1)), None)
    rows = {r["id"]: r["v"] for r in got.select(["id", "v"]).to_pylist()}
    own = {100_000 + w * 1000 + i: f"w{w}-c{i}" for w in range(p) for i in range(c)}
    want = dict(own)
    if mode == "overlapping":
        want.update({k: last for k in range(SHARED)})
    if rows != want:
        raise AssertionError(f"{engine} {mode}: the table does not hold exactly the committed rows "
                             f"({len(rows)} rows, expected {len(want)})")
    return wall, {"retries": retries, "rows_checked": len(rows)}


def bench_concurrent(root: str, size: dict, log) -> dict:
    res = {}
    for mode in ("disjoint", "overlapping"):
        walls = {"ours": [], "delta": []}
        info = {}
        for r in range(size["runs"]):
            for engine in ("ours", "delta"):
                wall, det = _concurrent_once(root, engine, mode, size)
                walls[engine].append(wall)
                info[engine] = det
        res[mode] = {"walls": walls, "info": info}
        log(f"peers: {size['processes']} x {size['per_process']} {mode}: ours "
            f"{statistics.median(walls['ours']):.2f}s ({info['ours']['retries']} retries), delta "
            f"{statistics.median(walls['delta']):.2f}s ({info['delta']['retries']} retries)")
    return res


def run(ctx) -> list[Figure]:
    size = sizes(ctx.quick)
    with work_dir(ctx.disk_dir, "peers") as root:  # fsync costs count: a real disk
        wu = bench_write_and_upsert(root, size, ctx.log)
        small = bench_small_commits(root, size, ctx.log)
        conc = bench_concurrent(root, size, ctx.log)
    mem = peak_memory(size["rows"])
    t = wu["t"]
    common = {"rows": wu["rows"], "runs": size["write_runs"], "hudi_rs_rows_checked": wu["rows_checked"],
              "peak_memory": mem}
    figs = [
        Figure("peers.write.vs_pyarrow", NAME, f"core writer: {wu['rows']:,} rows into a new table vs "
               "pyarrow write_to_dataset (no meta columns, no fsync)", median_ms(t["ours"]), "ms",
               "pyarrow.parquet.write_to_dataset", median_ms(t["floor"]), target=1.3,
               details={**common, "ours_s": t["ours"], "floor_s": t["floor"]}),
        Figure("peers.write.vs_pyarrow_with_meta_columns", NAME, f"core writer: {wu['rows']:,} rows into "
               "a new table vs pyarrow writing the same columns, Hudi's five meta columns included "
               "(floor_with_meta_columns: no fsync, no timeline)", median_ms(t["ours"]), "ms",
               "pyarrow with the meta columns", median_ms(t["floor_meta"]), target=1.2,
               details={**common, "ours_s": t["ours"], "floor_meta_s": t["floor_meta"],
                        "floor_meta_vs_floor": round(median_ms(t["floor_meta"]) / median_ms(t["floor"]), 3)}),
        Figure("peers.write.vs_deltalake", NAME, f"core writer: {wu['rows']:,} rows into a new table vs "
               "deltalake write_deltalake", median_ms(t["ours"]), "ms", "deltalake.write_deltalake",
               median_ms(t["delta"]), details={**common, "delta_s": t["delta"]}),
        Figure("peers.upsert.vs_deltalake", NAME, f"core writer: upsert of {wu['upsert_rows']:,} rows "
               "(half updates over every partition) vs deltalake merge", median_ms(t["ours_up"]), "ms",
               "deltalake merge", median_ms(t["delta_up"]), target=1.0,
               details={**common, "ours_s": t["ours_up"], "delta_s": t["delta_up"]}),
        Figure("peers.write_virtual_keys.vs_pyarrow", NAME, f"core writer, virtual keys "
               f"(hoodie.populate.meta.fields=false): {wu['rows']:,} rows into a new table vs pyarrow "
               "write_to_dataset", median_ms(t["vk"]), "ms", "pyarrow.parquet.write_to_dataset",
               median_ms(t["floor"]), target=1.3, details={**common, "ours_s": t["vk"], "floor_s": t["floor"]}),
        Figure("peers.upsert_virtual_keys.vs_deltalake", NAME, f"core writer, virtual keys: upsert of "
               f"{wu['upsert_rows']:,} rows vs deltalake merge", median_ms(t["vk_up"]), "ms",
               "deltalake merge", median_ms(t["delta_up"]), target=1.0,
               details={**common, "ours_s": t["vk_up"], "delta_s": t["delta_up"]}),
    ]
    for label, name, target in (("default", "peers.small_commit.vs_deltalake", 1.0),
                                ("wait", "peers.small_commit_wait.vs_deltalake", None)):
        s = small[label]
        figs.append(Figure(name, NAME, f"{len(s['ours'])} sequential commits of 100 rows ({label} "
                           "time generator), median per commit", median_ms(s["ours"]), "ms",
                           "deltalake append", median_ms(s["delta"]), target=target,
                           details={"commits": len(s["ours"]), "hudi_rs_rows_checked": s["rows_checked"]}))
    for mode in ("disjoint", "overlapping"):
        c = conc[mode]
        figs.append(Figure(f"peers.concurrent.{mode}.vs_deltalake", NAME,
                           f"{size['processes']} processes x {size['per_process']} {mode} commits, wall time",
                           median_ms(c["walls"]["ours"]), "ms", "deltalake, same processes and batches",
                           median_ms(c["walls"]["delta"]), target=1.0,
                           details={"ours_s": c["walls"]["ours"], "delta_s": c["walls"]["delta"], **c["info"]}))
    return figs


if __name__ == "__main__":  # pragma: no cover - the memory child
    if len(sys.argv) == 3 and sys.argv[1] == "--memory":
        _memory_child(int(sys.argv[2]))
