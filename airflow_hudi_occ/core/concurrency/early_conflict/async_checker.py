"""The asynchronous strategies: a background checker compares this writer's file groups with
the candidates' and raises a sticky flag that marker creation only reads (``async``,
``bloom-async``)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import EarlyConflictError
from airflow_hudi_occ.core.concurrency.markers.names import IOType, Marker, file_id_of
from airflow_hudi_occ.core.concurrency.markers.write_markers import WriteMarkers
from airflow_hudi_occ.core.concurrency.early_conflict.bloom import BloomFilter, bloom_key
from airflow_hudi_occ.core.concurrency.early_conflict.marker_view import FileGroup
from airflow_hudi_occ.core.concurrency.early_conflict.strategies import (
    EarlyConflictDetectionStrategy, clean_partition)

log = logging.getLogger(__name__)


class AsyncTimelineServerBasedDetectionStrategy(EarlyConflictDetectionStrategy):
    """A background checker that raises a sticky flag; marker creation only reads the flag.

    Hudi runs this checker in the timeline server. Here it runs as a daemon thread of the
    writer's process: it compares this instant's markers on storage (every process of the
    write), the markers this object created, and those announced with :meth:`add_pending`,
    with the candidates' markers by ``(partition, fileId)``. A file being rewritten reads as
    short for one round; the next round sees it (RFC-56).
    """

    name = "async"
    hudi_class = "org.apache.hudi.timeline.service.handlers.marker.AsyncTimelineServerBasedDetectionStrategy"
    aliases = ("AsyncTimelineMarkerEarlyConflictDetectionStrategy",)

    def __init__(self, table, instant_time: str, write_config: WriteConfig | None = None, *,
                 completed_at_start: set[str] | frozenset[str] | None = None,
                 clock: Callable[[], float] = time.time):
        super().__init__(table, instant_time, write_config, completed_at_start=completed_at_start,
                         clock=clock)
        ecd = self.config.early_conflict
        self.initial_delay_s = max(0, ecd.async_initial_delay_ms) / 1000.0
        self.period_s = max(1, ecd.async_period_ms) / 1000.0
        self._pending: set[FileGroup] = set()
        self._check_lock = threading.Lock()
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self.rounds = 0
        self.errors = 0
        self.last_error: BaseException | None = None

    # -- the background checker -------------------------------------------------------------------

    def start(self) -> "AsyncTimelineServerBasedDetectionStrategy":
        if self._thread is None and not self._stop_event.is_set():
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name=f"hudi-ecd-{self.instant_time}")
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop_event.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=10)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        if self._stop_event.wait(self.initial_delay_s):
            return
        while True:
            try:
                self.run_check_once()
            except Exception as e:  # one failed round (storage hiccup) must not end checking
                self.errors += 1
                self.last_error = e
                log.warning("early conflict check of %s failed: %s", self.instant_time, e)
            if self.has_conflict or self._stop_event.wait(self.period_s):
                return

    def add_pending(self, partition: str, file_id: str) -> None:
        """Announce a file group this writer is about to write (Hudi's pending markers)."""
        with self._state_lock:
            self._pending.add((clean_partition(partition), file_id))

    def own_file_groups(self) -> set[FileGroup]:
        with self._state_lock:
            mine = self._mine | self._pending
        return mine | self.view.all_file_groups(self.instant_time)

    def run_check_once(self) -> EarlyConflictError | None:
        """One round of the checker; sets the sticky flag and returns the conflict, if any."""
        with self._check_lock:
            if self._conflict is None:
                self.rounds += 1
                mine = self.own_file_groups()
                if mine:
                    found = self._detect_all(mine)
                    if found is None and self.check_commit_conflict:
                        found = self._commit_conflict(mine)
                    if found is not None:
                        self._set_conflict(found)
            return self.conflict

    def _detect_all(self, mine: set[FileGroup]) -> dict | None:
        by_partition: dict[str, set[str]] = {}
        for p, f in mine:
            by_partition.setdefault(p, set()).add(f)
        for c in self.view.candidates():
            hit = self.view.file_groups_among(c, mine, by_partition)
            if hit:
                return self._marker_conflict(c, hit)
        return None

    # -- the writer's side ----------------------------------------------------------------------

    def _detect(self, partition: str, file_id: str) -> dict | None:
        return None  # the checker thread does the work

    def check_all(self, file_groups) -> None:
        """Announce the planned file groups and run one round of the checker now, in the
        caller's thread (one listing for all of them), instead of waiting for its first tick."""
        for partition, file_id in file_groups:
            self.add_pending(partition, file_id)
        self.run_check_once()
        self.check_sticky()

    def check(self, partition: str, file_id: str) -> None:
        """Only the sticky flag: a marker creation must not wait for storage (commit
        conflicts, if enabled, are also looked for by the checker thread)."""
        if not file_id:
            raise ValueError("file_id must not be empty")
        self.checks += 1
        self.check_sticky()

    def create_marker(self, markers: WriteMarkers, partition: str, data_file_name: str,
                      io_type: IOType | str) -> Marker:
        self._same_instant(markers)
        partition = clean_partition(partition)
        file_id = file_id_of(data_file_name)
        self.add_pending(partition, file_id)
        self.check(partition, file_id)
        return self._create(markers, partition, data_file_name, io_type)


class BloomAsyncTimelineServerBasedDetectionStrategy(AsyncTimelineServerBasedDetectionStrategy):
    """The async checker, reading each candidate's bloom filters before its marker files."""

    name = "bloom-async"
    hudi_class = "org.apache.hudi.timeline.service.handlers.marker.BloomAsyncTimelineServerBasedDetectionStrategy"
    aliases = ("BloomAsyncTimelineMarkerEarlyConflictDetectionStrategy",)
    uses_bloom = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._pairs: dict[FileGroup, tuple[str, tuple[int, int]]] = {}

    def _key(self, group: FileGroup) -> tuple[str, tuple[int, int]]:
        hit = self._pairs.get(group)
        if hit is None:
            k = bloom_key(*group)
            hit = self._pairs[group] = (k, BloomFilter.hash_pair(k))
        return hit

    def _detect_all(self, mine: set[FileGroup]) -> dict | None:
        groups = sorted(mine)
        keys = [self._key(g) for g in groups]
        for c in self.view.candidates():
            idx = self._bloom_may_hold(c, keys)
            if idx is None:
                wanted = mine
            elif not idx:
                continue
            else:
                wanted = {groups[i] for i in idx}
            by_partition: dict[str, set[str]] = {}
            for p, f in wanted:
                by_partition.setdefault(p, set()).add(f)
            hit = self.view.file_groups_among(c, wanted, by_partition)
            if hit:
                return self._marker_conflict(c, hit)
        return None
