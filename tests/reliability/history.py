"""Running stress writers and checking the history they leave (serializability oracle).

The check does not trust the writers: it reads the timeline and commit metadata written by the
library, the batches each writer logged before its first attempt, and the table as hudi-rs
reads it; then it replays the committed batches one at a time, in completion order, into a
fresh table with a single writer. Serializable OCC means the two tables are equal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.format.metadata import EXTRA_BATCH_KEY, RollbackMetadata
from airflow_hudi_occ.core.table.history import TimelineHistory
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter

from .conftest import read_rows

WORKER = str(Path(__file__).with_name("stress_worker.py"))
SEED_KEYS = 40


def seed_rows(key_space: int = SEED_KEYS, partitions: int = 2) -> list[dict]:
    return [{"id": k, "p": f"p{k % partitions}", "value": "seed", "ts": 0} for k in range(key_space)]


def start_workers(table: Table, options: dict, n_workers: int, n_tx: int, log_dir: Path, *,
                  key_space: int = SEED_KEYS, storage_options: dict | None = None,
                  seed: int = 0, **job) -> list[tuple[subprocess.Popen, Path]]:
    procs = []
    for i in range(n_workers):
        log = log_dir / f"w{i}.jsonl"
        payload = {"table": table.base_uri, "storage_options": storage_options, "options": options,
                   "name": f"w{i}", "n_tx": n_tx, "seed": seed * 1000 + i, "key_space": key_space,
                   "log": str(log), **job}
        procs.append((subprocess.Popen([sys.executable, WORKER, json.dumps(payload)],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), log))
    return procs


def wait_workers(procs, timeout_s: float = 900) -> list[dict]:
    """Wait for every worker; if anything goes wrong (a failure, a timeout, pytest's own timeout
    interrupting us), kill the workers still running so no writer outlives its test."""
    out = []
    try:
        for p, _log in procs:
            stdout, stderr = p.communicate(timeout=timeout_s)
            assert p.returncode == 0, f"stress worker failed (rc {p.returncode}):\n{stderr[-4000:]}"
            out.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        for p, _log in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return out


def read_logs(procs) -> tuple[dict, dict]:
    batches, committed = {}, {}
    for _p, log in procs:
        for line in Path(log).read_text().splitlines():
            rec = json.loads(line)
            if "rows" in rec:
                batches[rec["batch_key"]] = rec["rows"]
            else:
                committed[rec["batch_key"]] = rec["committed"]
    return batches, committed


def check_history(table: Table, procs, replay_path: str, *, storage_options: dict | None = None,
                  seed: list[dict] | None = None) -> dict:
    """Assert serializability of the run; returns the figures for the report."""
    batches, claimed = read_logs(procs)
    tl = table.timeline()
    # automatic archival may have moved the oldest commits to the LSM history: both count
    pairs = [(i, m) for i, m in TimelineHistory(table).completed_writes() if i.action is Action.COMMIT]
    pairs += [(i, tl.commit_metadata(i)) for i in tl.completed_by_completion_time() if i.action is Action.COMMIT]
    pairs.sort(key=lambda im: (im[0].completion_time, im[0].requested_time))
    commits = [i for i, _m in pairs]
    metas = {i.requested_time: m for i, m in pairs}
    keyed = [(i, metas[i.requested_time].extra_metadata.get(EXTRA_BATCH_KEY)) for i in commits]
    stress = [(i, k) for i, k in keyed if k in batches]

    # every batch committed exactly once (no starvation, no duplicate commit of a retried batch)
    counts = Counter(k for _i, k in stress)
    assert set(counts) == set(batches), f"batches never committed: {sorted(set(batches) - set(counts))}"
    assert max(counts.values()) == 1, f"a batch committed twice: {counts.most_common(3)}"
    assert {k: i.requested_time for i, k in stress} == claimed, "writers' view differs from the timeline"

    # no two overlapping commits were concurrent (the loser of each such pair never completed)
    def groups(i):
        return metas[i.requested_time].mutated_file_groups()
    overlapping_pairs = 0
    for a_idx, (a, _) in enumerate(stress):
        for b, _ in stress[a_idx + 1:]:
            if groups(a) & groups(b):
                overlapping_pairs += 1
                concurrent = a.requested_time < b.completion_time and b.requested_time < a.completion_time
                assert not concurrent, f"overlapping concurrent commits both won: {a} and {b}"

    # every conflict loser names a winner that committed, after the loser began, on a shared group
    by_time = {i.requested_time: i for i in commits}
    records = list(attempt_log.read_records(table))
    losers = [r for r in records if r.outcome == "conflict"]
    for r in losers:
        assert r.other_instant in by_time, f"{r.instant} lost to {r.other_instant}, which never committed"
        win = by_time[r.other_instant]
        assert win.completion_time > r.instant, f"{r.instant} lost to {win}, completed before it began"
        shared = {f"{p}/{f}" for p, f in groups(win)}
        assert shared & set(r.file_groups), f"{r.instant} lost to {win} without a shared file group"
        assert tl.get(r.instant) is None, f"loser {r.instant} is still on the timeline"

    # no instant time repeats (requested, completion, and every rolled-back attempt)
    times = []
    rolled_back = []
    for inst in tl:
        times.append(inst.requested_time)
        if inst.completion_time:
            times.append(inst.completion_time)
        if inst.action is Action.ROLLBACK and inst.is_completed:
            path = tl.file_path(inst)
            rolled_back += [t for t, _a in RollbackMetadata.decode(table.storage.read(path), path).rolled_back]
    times += rolled_back
    dup = [t for t, c in Counter(times).items() if c > 1]
    assert not dup, f"instant times repeat: {dup}"

    # the table equals a serial replay of the committed batches in completion order
    replay = Table.create(replay_path, "replay", record_key_fields=["id"], partition_fields=["p"],
                          precombine_field="ts")
    w = ArrowTableWriter(replay, WriteConfig.from_options({"hoodie.write.lock.provider": "inprocess"}))
    if seed:
        w.write(pa.Table.from_pylist(seed))
    for _i, k in stress:
        w.write(pa.Table.from_pylist(batches[k]))
    got, want = read_rows(table, storage_options), read_rows(replay)
    lost = sorted(set(want) - set(got))
    exposed = sorted(k for k in got if k not in want or got[k] != want[k])
    assert not lost and not exposed, f"lost rows {lost[:10]}, rows differing from the replay {exposed[:10]}"
    return {"transactions": len(stress), "attempts": len(records),
            "conflicts": len(losers), "aborted_other": sum(r.outcome not in ("conflict", "committed")
                                                           for r in records),
            "overlapping_committed_pairs": overlapping_pairs, "lost_rows": len(lost),
            "exposed_rows": len(exposed), "rows": len(got)}


def write_figures(name: str, figures: dict) -> None:
    """Append the figures to $HUDI_OCC_FIGURES (a JSON-lines file) when set, for the report."""
    path = os.environ.get("HUDI_OCC_FIGURES")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"test": name, **figures}) + "\n")
