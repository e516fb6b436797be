"""Commit latency on a short and on a long timeline.

The claim under test: the cost of a commit follows the instants completed since the write
began, not the timeline's length. Two tables are built, one with 100 and one with 10,000
completed commits (each with its requested, inflight and completed file, as a v8 timeline
keeps them: 300 and 30,000 files), written directly as files: the point is the timeline's
size, not 10,000 real writes.

One measured run: a :class:`WriteTransaction` begins (file-system lock, clock-skew wait 0 so
that it does not dominate), writes one tiny parquet file behind its marker, then three other
writers begin and commit disjoint file groups, then the timed ``commit()``: lock, timeline
reload, rollback check, conflict resolution over the 3 new instants, completion time, the
completed file, release, marker and heartbeat clean-up. Runs alternate between the two tables.

Archived: the same two sizes, then archival with Hudi's defaults (keep 20..30 completed writes
active) and measured commits with automatic archival on, so that the archival runs they
trigger are part of what is measured (median, and mean to amortise them).

Figures: latency(10,000) / latency(100) (target <= 1.5, "close to 1"); the same ratio for
each phase of the commit (found by wrapping the library's functions in this process, never by
editing them); and the commit with Hudi's default 200 ms clock-skew wait against the same
commit without it, because that wait is a deliberate constant, not a cost of the timeline.
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from collections import defaultdict
from contextlib import contextmanager

import pyarrow as pa

from airflow_hudi_occ.core.concurrency import conflict as conflict_mod
from airflow_hudi_occ.core.commit import transaction as tx_mod
from airflow_hudi_occ.core.format.base_file import new_file_id, with_meta_columns, write_parquet, write_token
from airflow_hudi_occ.core.format.layout import base_file_path
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.concurrency.heartbeat import Heartbeat
from airflow_hudi_occ.core.format.instant import Action, Instant, State
from airflow_hudi_occ.core.format.instant_time import InstantTimeGenerator, format_ms
from airflow_hudi_occ.core.concurrency.locks.base import LockManager
from airflow_hudi_occ.core.format.metadata import CommitMetadata, WriteStat
from airflow_hudi_occ.core.format.storage import Storage
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.table.timeline import PinnedTimeline, Timeline
from airflow_hudi_occ.core.commit.transaction import WriteTransaction

from .common import Figure, work_dir

NAME = "commit_latency"
CONCURRENT = 3  # instants completed since the measured write began
PARTITIONS = [f"dt=2024-06-{d:02d}" for d in range(1, 31)]

#: (phase, owner, attribute, nested?) - nested phases run inside another and are not summed
PHASES = [
    ("lock_acquire", LockManager, "acquire", False),
    ("timeline_load", Timeline, "load", False),
    ("  listdir", Storage, "list_names", True),
    ("rollback_check", tx_mod, "_refuse_if_being_rolled_back", False),
    ("conflict_resolution", tx_mod, "resolve_write_conflicts", False),  # where commit() looks it up
    ("  candidate_selection", conflict_mod.ConflictResolutionStrategy, "candidate_instants", True),
    ("  metadata_reads", Timeline, "commit_metadata", True),
    ("latest_time", Timeline, "latest_time", False),
    ("completion_time", InstantTimeGenerator, "new_time", False),
    ("heartbeat_check", Heartbeat, "check_alive", False),
    ("lock_check_held", LockManager, "check_held", False),
    ("complete_write", tx_mod, "complete", False),
    ("lock_release", LockManager, "release", False),
    ("cleanup", WriteTransaction, "_cleanup_after_commit", False),
]

#: more functions timed under a phase of PHASES (no figure of their own): the commit lists
#: its timeline once under the lock as a pinned timeline (Table.timeline_pinned)
ALSO_TIMED = [("timeline_load", PinnedTimeline, "__init__")]


def sizes(quick: bool) -> tuple[int, int]:
    return (100, 2_000) if quick else (100, 10_000)


def figure_names(quick: bool = False) -> list[str]:
    small, large = sizes(quick)
    names = [f"commit.latency.{large}_vs_{small}", f"commit.latency.archived.{large}_vs_{small}",
             f"commit.latency.archived_mean.{large}_vs_{small}", "commit.skew_wait.default_vs_0"]
    names += [f"commit.phase.{p.strip()}" for p, *_ in PHASES]
    return names + ["commit.phase.gc_pauses", "commit.phase.other"]


# --- the phase profiler ------------------------------------------------------------------------


class PhaseTimer:
    """Wraps library functions in this process to add up time per phase while ``active``."""

    def __init__(self):
        self.totals: dict[str, float] = defaultdict(float)
        self.active = False
        self._saved = []
        self._gc_start: float | None = None

    def _on_gc(self, phase: str, info: dict) -> None:
        # The cyclic collector runs inside whatever allocates; building tens of thousands of
        # objects per timeline load triggers it, so its pauses are counted apart.
        if not self.active:
            return
        if phase == "start":
            self._gc_start = time.perf_counter()
        elif self._gc_start is not None:
            self.totals["gc_pauses"] += time.perf_counter() - self._gc_start
            self._gc_start = None

    def _wrap(self, phase, func):
        timer = self

        def wrapper(*args, **kwargs):
            if not timer.active:
                return func(*args, **kwargs)
            t0 = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                timer.totals[phase] += time.perf_counter() - t0
        wrapper.__wrapped__ = func
        return wrapper

    @contextmanager
    def installed(self):
        for phase, owner, attr in [(p, o, a) for p, o, a, _ in PHASES] + ALSO_TIMED:
            raw = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
            self._saved.append((owner, attr, raw))
            if isinstance(raw, classmethod):
                new = classmethod(self._wrap(phase, raw.__func__))
            elif isinstance(raw, staticmethod):
                new = staticmethod(self._wrap(phase, raw.__func__))
            else:
                new = self._wrap(phase, raw)
            setattr(owner, attr, new)
        gc.callbacks.append(self._on_gc)
        try:
            yield self
        finally:
            gc.callbacks.remove(self._on_gc)
            for owner, attr, raw in reversed(self._saved):
                setattr(owner, attr, raw)
            self._saved.clear()

    @contextmanager
    def measuring(self):
        self.totals = defaultdict(float)
        self.active = True
        try:
            yield self.totals
        finally:
            self.active = False


# --- building ---------------------------------------------------------------------------------


def build_table(root: str, completed: int) -> Table:
    """A table whose timeline holds ``completed`` completed commits (3 files each; the
    inflight files are empty, as nothing on the commit path reads old inflight files)."""
    table = Table.create(root, "commits", record_key_fields=["id"], partition_fields=["dt"],
                         hive_style_partitioning=True)
    tl_dir = table.timeline_dir
    start = int(time.time() * 1000) - 3 * completed - 120_000
    for i in range(completed):
        t, c = format_ms(start + 3 * i), format_ms(start + 3 * i + 2)
        part = PARTITIONS[i % len(PARTITIONS)]
        fid = new_file_id()
        stat = WriteStat(file_id=fid, path=base_file_path(part, fid, write_token(), t),
                         partition_path=part, num_writes=100, num_inserts=100,
                         file_size_in_bytes=435_000)
        meta = CommitMetadata.from_stats([stat], operation_type="UPSERT",
                                         extra_metadata={"hoodie.occ.writer": f"bench-{i % 7}"})
        for inst, data in ((Instant(t, Action.COMMIT, State.REQUESTED), b""),
                           (Instant(t, Action.COMMIT, State.INFLIGHT), b""),
                           (Instant(t, Action.COMMIT, State.COMPLETED, c), meta.encode())):
            # Plain writes: the library's create-if-absent fsyncs every file, which would make
            # building 30,000 files the slowest part of the benchmark and measure nothing.
            with open(os.path.join(tl_dir, inst.file_name()), "wb") as f:
                f.write(data)
    return table


def _tiny_write(tx: WriteTransaction, part: str) -> WriteStat:
    fid = new_file_id()
    token = write_token()
    rel = base_file_path(part, fid, token, tx.instant_time)
    tx.create_marker(part, os.path.basename(rel), "CREATE")
    data = pa.table({"id": [f"k-{fid[:8]}"], "dt": [part.split("=")[1]], "value": [1]})
    data = with_meta_columns(data, instant_time=tx.instant_time, partition=part,
                             file_name=os.path.basename(rel), key_fields=["id"])
    size = write_parquet(tx.table.storage, rel, data)
    return WriteStat(file_id=fid, path=rel, partition_path=part, num_writes=1, num_inserts=1,
                     file_size_in_bytes=size)


def options(skew_ms: int, archive: bool = False) -> dict:
    """Archival off unless asked: the un-archived figures measure a long *active* timeline."""
    return {
        "hoodie.archive.automatic": str(archive).lower(),
        "hoodie.write.lock.provider": "filesystem",
        "hoodie.write.lock.wait_time_ms": "5000",
        "hoodie.write.lock.client.wait_time_ms_between_retry": "20",
        "hoodie.time.generator.max_expected_clock_skew_ms": str(skew_ms),
    }


def one_commit(table: Table, timer: PhaseTimer, run: int, skew_ms: int = 0,
               archive: bool = False) -> tuple[float, dict]:
    """One measured commit; returns (seconds, seconds per phase)."""
    cfg = WriteConfig.from_options(options(skew_ms, archive))
    others_cfg = WriteConfig.from_options(options(0, archive))
    tx = WriteTransaction(table, cfg, writer_id=f"bench-measured-{run}")
    tx.begin()
    part = PARTITIONS[run % len(PARTITIONS)]
    stat = _tiny_write(tx, part)
    for k in range(CONCURRENT):
        other = WriteTransaction(table, others_cfg, writer_id=f"bench-other-{run}-{k}")
        other.begin()
        other_stat = _tiny_write(other, PARTITIONS[(run + k + 1) % len(PARTITIONS)])
        other.commit([other_stat])
    with timer.measuring() as phases:
        t0 = time.perf_counter()
        result = tx.commit([stat])
        elapsed = time.perf_counter() - t0
    if len(result.checked_instants) < CONCURRENT:
        raise AssertionError(f"the measured commit checked {result.checked_instants}, expected "
                             f"the {CONCURRENT} instants completed since it began")
    return elapsed, dict(phases)


def _archived_runs(ctx, root: str, timer: PhaseTimer, SIZES) -> tuple[dict, dict, dict]:
    """Tables that have had n completed writes, archived with Hudi's defaults, then measured
    commits with automatic archival on; enough commits that archival runs during them."""
    from airflow_hudi_occ.core.commit.archival import run_archival
    tables, first = {}, {}
    for n in SIZES:
        tables[n] = build_table(os.path.join(root, f"a{n}"), n)
        t0 = time.perf_counter()
        run_archival(tables[n], options(0, archive=True))
        first[n] = time.perf_counter() - t0
        ctx.log(f"commit_latency: archived a {n:,}-commit timeline in {first[n]:.2f}s "
                f"({len(os.listdir(tables[n].timeline_dir))} files left active)")
    runs = 6 if ctx.quick else 15  # x (1 + CONCURRENT) commits per table: archival runs in them
    lat: dict[int, list[float]] = {n: [] for n in SIZES}
    for i in range(runs + 1):
        for n in SIZES:
            elapsed, _ = one_commit(tables[n], timer, 1000 + i, archive=True)
            if i:
                lat[n].append(elapsed)
    return lat, first, {n: len(os.listdir(tables[n].timeline_dir)) for n in SIZES}


def run(ctx) -> list[Figure]:
    runs = 4 if ctx.quick else 9
    warmup = 1 if ctx.quick else 2
    timer = PhaseTimer()
    SIZES = sizes(ctx.quick)
    lat: dict[int, list[float]] = {n: [] for n in SIZES}
    phases: dict[int, list[dict]] = {n: [] for n in SIZES}
    with work_dir(ctx.base_dir, "commit") as root, timer.installed():
        tables = {}
        for n in SIZES:
            t0 = time.perf_counter()
            tables[n] = build_table(os.path.join(root, f"t{n}"), n)
            ctx.log(f"commit_latency: built a timeline of {n:,} completed commits "
                    f"({len(os.listdir(tables[n].timeline_dir)):,} files) in "
                    f"{time.perf_counter() - t0:.1f}s")
        for i in range(warmup + runs):
            for n in SIZES:
                elapsed, ph = one_commit(tables[n], timer, i)
                if i >= warmup:
                    lat[n].append(elapsed)
                    phases[n].append(ph)
        ctx.log("commit_latency: the default 200 ms clock-skew wait")
        skew_runs = 2 if ctx.quick else 3
        skewed = [one_commit(tables[SIZES[0]], timer, 100 + i, skew_ms=200)[0]
                  for i in range(skew_runs)]
        timeline_files = {n: len(os.listdir(tables[n].timeline_dir)) for n in SIZES}
        archived = _archived_runs(ctx, root, timer, SIZES)

    small, large = SIZES
    med = {n: statistics.median(lat[n]) * 1000 for n in SIZES}
    common = {"storage": ctx.storage, "runs": runs, "concurrent_commits_since_begin": CONCURRENT,
              "timeline_files_at_end": timeline_files, "lock": "filesystem",
              "max_expected_clock_skew_ms": 0}

    def phase_median(n: int, phase: str) -> float:
        return statistics.median(p.get(phase, 0.0) for p in phases[n]) * 1000

    breakdown = {n: {p.strip(): round(phase_median(n, p), 4) for p, *_ in PHASES} for n in SIZES}
    figures = [Figure(
        f"commit.latency.{large}_vs_{small}", NAME,
        f"WriteTransaction.commit() with {large:,} vs {small} completed instants on the timeline "
        f"({CONCURRENT} completed since the write began)",
        med[large], "ms", f"same commit, {small} instants", med[small], target=1.5,
        details={**common,
                 "latency_ms": {str(n): [round(x * 1000, 4) for x in lat[n]] for n in SIZES},
                 "breakdown_median_ms": {str(n): breakdown[n] for n in SIZES}})]
    for phase, _owner, _attr, nested in PHASES:
        name = phase.strip()
        figures.append(Figure(
            f"commit.phase.{name}", NAME,
            f"commit phase {name}{' (inside the phase above)' if nested else ''}: "
            f"{large:,} vs {small} instants",
            phase_median(large, phase), "ms", f"{small} instants", phase_median(small, phase),
            details={"nested": nested, "share_of_commit_at_large": round(
                phase_median(large, phase) / med[large], 4) if med[large] else None}))
    gc_mean = {n: statistics.mean(p.get("gc_pauses", 0.0) for p in phases[n]) * 1000 for n in SIZES}
    figures.append(Figure(
        "commit.phase.gc_pauses", NAME,
        f"cyclic GC pauses per commit (mean; inside whichever phase they fell) at {large:,} "
        f"instants, as a share of the whole commit",
        gc_mean[large], "ms", f"whole commit, {large:,} instants", med[large],
        details={"nested": True, "mean_ms": {str(n): round(gc_mean[n], 4) for n in SIZES}}))
    top = [p for p, *_, nested in PHASES if not nested]
    other = {n: statistics.median(
        lat[n][i] * 1000 - sum(phases[n][i].get(p, 0.0) * 1000 for p in top) for i in range(runs))
        for n in SIZES}
    figures.append(Figure("commit.phase.other", NAME,
                          "commit time outside the phases above (bookkeeping, metadata encoding)",
                          other[large], "ms", f"{small} instants", other[small]))
    alat, first_archival, active_files = archived
    amed = {n: statistics.median(alat[n]) * 1000 for n in SIZES}
    amean = {n: statistics.mean(alat[n]) * 1000 for n in SIZES}
    adetails = {"latency_ms": {str(n): [round(x * 1000, 3) for x in alat[n]] for n in SIZES},
                "first_archival_s": {str(n): round(first_archival[n], 3) for n in SIZES},
                "active_timeline_files_at_end": {str(n): active_files[n] for n in SIZES},
                "archival": "Hudi defaults: keep.min.commits 20, keep.max.commits 30, automatic"}
    figures.append(Figure(
        f"commit.latency.archived.{large}_vs_{small}", NAME,
        f"commit() median on a table that has had {large:,} vs {small} completed writes, "
        "archival on with Hudi's defaults (the measured commits archive as they go)",
        amed[large], "ms", f"same commit, {small} writes", amed[small], target=1.5, details=adetails))
    figures.append(Figure(
        f"commit.latency.archived_mean.{large}_vs_{small}", NAME,
        f"commit() mean (archival runs amortised) after {large:,} vs {small} writes, archival on",
        amean[large], "ms", f"same commit, {small} writes", amean[small], target=1.5))
    figures.append(Figure(
        "commit.skew_wait.default_vs_0", NAME,
        f"commit with Hudi's default max_expected_clock_skew_ms=200 vs 0 ({small} instants)",
        statistics.median(skewed) * 1000, "ms", "same commit, skew wait 0", med[small],
        details={"runs": skew_runs, "note": "the wait is a constant by design (TrueTime-style "
                                            "commit wait), reported apart from the timeline cost"}))
    return figures
