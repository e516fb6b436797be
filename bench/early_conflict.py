"""Early conflict detection over many pending writers' markers (RFC-56's measured case).

RFC-56 reports that Hudi's async conflict checker, on a local file system, took 179 ms to
check "1500+ inflight markers located in MARKER0~MARKER19". The aim here is 10x faster.

Set-up, per scale: a table with 20 pending instants (requested + inflight on the timeline,
live heartbeats) whose markers, ``markers / 20`` each, are spread over 10 date partitions
(``dt=2024-06-01`` .. ``-10``: every writer touches every recent day, so a check on any
partition has to look at every candidate). One table holds them as DIRECT markers (one empty
file each), another as batched ``MARKERS<n>`` files (4 writer objects per instant, as 4
executors would, so ``MARKERS0..3`` per candidate). The writer under test is a 21st, later
instant.

Measured:

- ``simple_check``: the direct strategy's ``check(partition, fileId)`` for a fileId no one
  writes, so it must list every candidate's folder of that partition; median per call.
  Floor: ``os.listdir`` of ``.hoodie/.temp`` and of those same 20 folders.
- ``async_cold``: the async strategy's whole ``run_check_once()`` for a writer holding 75
  batched markers of its own, with a new detector and the marker-file cache emptied before
  each round, so every MARKERS file is read and parsed (what Hudi's checker does every round).
- ``async_warm``: further rounds of one detector; unchanged MARKERS files are recognised by
  (size, mtime) and not re-read.
  Floor for both: ``os.listdir`` of ``.temp`` and of every candidate folder plus our own, and
  ``open().read()`` of every MARKERS file.

Each figure is given twice: against Hudi's published 179 ms (target <= 0.1) and against the
floor (informational: what the library adds on top of the bare I/O). A conflicting fileId is
checked once per strategy at the end, to show the set-up is one the detectors do see.
"""

from __future__ import annotations

import os
import time
import uuid

from airflow_hudi_occ.core.concurrency.markers.names import file_id_of
from airflow_hudi_occ.core.concurrency.markers import files as marker_file_cache
from airflow_hudi_occ.core.config import HeartbeatConfig, WriteConfig
from airflow_hudi_occ.core.concurrency.early_conflict.detector import create_detector
from airflow_hudi_occ.core.errors import EarlyConflictError
from airflow_hudi_occ.core.concurrency.heartbeat import Heartbeat
from airflow_hudi_occ.core.format.instant import Action, Instant, State
from airflow_hudi_occ.core.format.instant_time import format_ms
from airflow_hudi_occ.core.concurrency.markers.write_markers import BatchedWriteMarkers
from airflow_hudi_occ.core.concurrency.markers.folder import markers_file_names
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.table.timeline import create_requested, transition_to_inflight

from .common import Figure, sample_pair, work_dir

NAME = "early_conflict"

RFC56_MS = 179.0
RFC56_SOURCE = ("Hudi RFC-56 (HUDI-1575): async conflict checker, local FS, 1500+ inflight "
                "markers in MARKER0~MARKER19: 179 ms")
CANDIDATES = 20
PARTITIONS = [f"dt=2024-06-{d:02d}" for d in range(1, 11)]
OWN_MARKERS = 75
WRITERS_PER_INSTANT = 4  # batched: MARKERS0..3 per candidate


def scales(quick: bool) -> list[tuple[str, int]]:
    return [("1500", 1_500), ("10k", 10_000) if quick else ("100k", 100_000)]


def figure_names(quick: bool = False) -> list[str]:
    out = []
    for label, _ in scales(quick):
        for kind in ("simple_check", "async_cold", "async_warm"):
            out += [f"ecd.{label}.{kind}.vs_rfc56", f"ecd.{label}.{kind}.vs_floor"]
    return out


# --- building --------------------------------------------------------------------------------


def _token(i: int) -> str:
    return f"{i % 200}-{7 + i % 3}-0"


def _marker_names(instant: str, count: int, seed: int) -> list[tuple[str, str, str]]:
    """(partition, data file name, io type) for ``count`` markers of one instant: about two
    thirds MERGE (updates of existing file groups), the rest CREATE (new file groups)."""
    out = []
    for j in range(count):
        fid = f"{uuid.uuid4()}-0"
        io = "CREATE" if (j + seed) % 3 == 0 else "MERGE"
        out.append((PARTITIONS[j % len(PARTITIONS)], f"{fid}_{_token(j)}_{instant}.parquet", io))
    return out


class MarkerTable:
    """A table with 20 pending instants holding ``total`` markers, and a later writer."""

    def __init__(self, root: str, name: str, total: int, batched: bool):
        self.table = Table.create(root, name, record_key_fields=["id"], partition_fields=["dt"],
                                  hive_style_partitioning=True)
        self.batched = batched
        now = int(time.time() * 1000)
        self.instants = [format_ms(now - 60_000 + 1_000 * i) for i in range(CANDIDATES)]
        self.writer = format_ms(now - 60_000 + 1_000 * CANDIDATES)
        per = total // CANDIDATES
        self.total = per * CANDIDATES
        self.heartbeats = []
        self.some_marker: tuple[str, str] | None = None
        for i, t in enumerate(self.instants + [self.writer]):
            inst = Instant(t, Action.COMMIT, State.REQUESTED)
            create_requested(self.table, inst)
            transition_to_inflight(self.table, inst)
            hb = Heartbeat(self.table, t, HeartbeatConfig())
            hb.beat()
            self.heartbeats.append(hb)
        for i, t in enumerate(self.instants):
            items = _marker_names(t, per, i)
            if self.some_marker is None:
                p, n, _ = items[0]
                self.some_marker = (p, file_id_of(n))
            if batched:
                k = len(items) // WRITERS_PER_INSTANT + 1
                for w in range(WRITERS_PER_INSTANT):
                    BatchedWriteMarkers(self.table, t).create_many(items[w * k:(w + 1) * k])
            else:
                self._write_direct(t, items)
        if batched:
            own = [(p, f"{uuid.uuid4()}-0_{_token(j)}_{self.writer}.parquet", "CREATE")
                   for j, (p, _, _) in enumerate(_marker_names(self.writer, OWN_MARKERS, 0))]
            BatchedWriteMarkers(self.table, self.writer).create_many(own)

    def _write_direct(self, t: str, items) -> None:
        # The library's DirectWriteMarkers.create fsyncs every marker (create-if-absent);
        # building 100,000 of them that way would take minutes and measure nothing.
        base = os.path.join(self.table.temp_dir, t)
        made = set()
        for p, name, io in items:
            d = os.path.join(base, p)
            if d not in made:
                os.makedirs(d, exist_ok=True)
                made.add(d)
            os.close(os.open(os.path.join(d, f"{name}.marker.{io}"),
                             os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))

    def beat(self) -> None:
        for hb in self.heartbeats:
            hb.beat()

    def config(self, strategy: str) -> WriteConfig:
        return WriteConfig.from_options({
            "hoodie.write.concurrency.early.conflict.detection.enable": "true",
            "hoodie.write.concurrency.early.conflict.detection.strategy": strategy,
            "hoodie.write.markers.type": "TIMELINE_SERVER_BASED" if self.batched else "DIRECT",
        })

    def detector(self, strategy: str):
        return create_detector(self.table, self.writer, self.config(strategy))


# --- floors ------------------------------------------------------------------------------------


def listing_floor(mt: MarkerTable, partition: str):
    temp = mt.table.temp_dir
    folders = [os.path.join(temp, t, partition) for t in mt.instants]

    def run():
        os.listdir(temp)
        for d in folders:
            os.listdir(d)
    return run


def read_floor(mt: MarkerTable):
    temp = mt.table.temp_dir
    dirs = [os.path.join(temp, t) for t in mt.instants + [mt.writer]]

    def run():
        os.listdir(temp)
        for d in dirs:
            for name in os.listdir(d):
                if name.startswith("MARKERS") and name[7:].isdigit():
                    with open(os.path.join(d, name), "rb") as f:
                        f.read()
    return run


# --- the benchmark -------------------------------------------------------------------------------


def _pair(name_stem: str, total: int, what: str, ours, floor_ms: float,
          floor_text: str, details: dict) -> list[Figure]:
    return [
        Figure(f"{name_stem}.vs_rfc56", NAME, f"{what} ({total:,} markers, {CANDIDATES} instants)",
               ours.median_ms, "ms", "Hudi RFC-56 published", RFC56_MS, target=0.1,
               baseline_published=True, details={**details, "source": RFC56_SOURCE}),
        Figure(f"{name_stem}.vs_floor", NAME, f"{what} ({total:,} markers): overhead over bare I/O",
               ours.median_ms, "ms", floor_text, floor_ms, target=None, details=details),
    ]


def run(ctx) -> list[Figure]:
    figures: list[Figure] = []
    n_calls = 60 if ctx.quick else 300
    n_rounds = 5 if ctx.quick else 11
    for label, total in scales(ctx.quick):
        with work_dir(ctx.base_dir, f"ecd-{label}") as root:
            ctx.log(f"early_conflict[{label}]: building {total:,} direct markers")
            direct = MarkerTable(os.path.join(root, "direct"), "ecd_direct", total, batched=False)
            ctx.log(f"early_conflict[{label}]: building {total:,} batched markers")
            batched = MarkerTable(os.path.join(root, "batched"), "ecd_batched", total, batched=True)
            marker_files = sum(
                len(markers_file_names(os.listdir(os.path.join(batched.table.temp_dir, t))))
                for t in batched.instants)
            common = {"markers": direct.total, "candidates": CANDIDATES,
                      "partitions": len(PARTITIONS), "storage": ctx.storage}

            # (a) direct markers, simple strategy, one check per call
            direct.beat()
            det = direct.detector("simple")
            partition = PARTITIONS[0]
            ids = iter([f"{uuid.uuid4()}-0" for _ in range(n_calls * 3 + 20)])
            ours, floor = sample_pair(lambda: det.check(partition, next(ids)),
                                      listing_floor(direct, partition), n=n_calls, warmup=5)
            assert not det.has_conflict
            per_folder = total // CANDIDATES // len(PARTITIONS)
            figures += _pair(f"ecd.{label}.simple_check", direct.total,
                             "direct markers, simple strategy: check(partition, fileId) per call",
                             ours, floor.median_ms, f"os.listdir of .temp + {CANDIDATES} folders",
                             {**common, "markers_per_folder_listed": per_folder,
                              "ours": ours.summary(), "floor": floor.summary()})

            # (b) batched markers, async strategy, one whole checker round
            batched.beat()
            floor_fn = read_floor(batched)
            holder = {}

            def cold_setup():
                # marker_files keeps parsed MARKERS files by (size, mtime), process-wide; empty
                # it so that the round reads and parses every file, as Hudi's checker does
                # every round, and take a new detector so nothing it learnt is reused either.
                marker_file_cache.clear_cache()
                holder["det"] = batched.detector("async")

            def one_round():
                holder["det"].run_check_once()

            cold, floor_b = sample_pair(one_round, floor_fn, n=n_rounds, warmup=2,
                                        setup_ours=cold_setup)
            assert not holder["det"].has_conflict
            warm_det = batched.detector("async")
            warm_det.run_check_once()
            warm, floor_c = sample_pair(warm_det.run_check_once, floor_fn, n=n_rounds * 3, warmup=2)
            assert not warm_det.has_conflict
            bdet = {**common, "own_markers": OWN_MARKERS, "marker_files": marker_files,
                    "writers_per_instant": WRITERS_PER_INSTANT}
            floor_text = f"listdir + read {marker_files}+1 MARKERS files"
            figures += _pair(f"ecd.{label}.async_cold", batched.total,
                             "batched markers, async strategy: first run_check_once() (cold)",
                             cold, floor_b.median_ms, floor_text,
                             {**bdet, "ours": cold.summary(), "floor": floor_b.summary()})
            figures += _pair(f"ecd.{label}.async_warm", batched.total,
                             "batched markers, async strategy: later run_check_once() (cached)",
                             warm, floor_c.median_ms, floor_text,
                             {**bdet, "ours": warm.summary(), "floor": floor_c.summary()})

            # the set-up is one the detectors do see: a candidate's fileId is a conflict
            seen = {}
            p, fid = direct.some_marker
            try:
                direct.detector("simple").check(p, fid)
                seen["simple"] = False
            except EarlyConflictError:
                seen["simple"] = True
            d2 = batched.detector("async")
            d2.add_pending(*batched.some_marker)
            seen["async"] = d2.run_check_once() is not None
            for f in figures[-6:]:
                f.details["sanity_conflict_detected"] = seen
            if not all(seen.values()):
                raise AssertionError(f"bench set-up is wrong: a known conflict was missed {seen}")
    return figures
