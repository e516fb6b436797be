"""The detection strategies that check before each marker: the base class, ``simple``,
``transactional`` (check and marker under a per-file-group lock) and ``bloom-direct``."""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from typing import Callable, ClassVar, Iterable

from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import EarlyConflictError
from airflow_hudi_occ.core.format.layout import FileGroupId
from airflow_hudi_occ.core.concurrency.markers.names import IOType, Marker, file_id_of
from airflow_hudi_occ.core.concurrency.markers.write_markers import WriteMarkers
from airflow_hudi_occ.core.concurrency.locks import get_lock_provider
from airflow_hudi_occ.core.concurrency.locks.base import LockManager
from airflow_hudi_occ.core.concurrency.early_conflict.bloom import BloomFilter, OwnBloom, bloom_key
from airflow_hudi_occ.core.concurrency.early_conflict.declared import declared_conflict, earlier_rivals
from airflow_hudi_occ.core.concurrency.early_conflict.marker_view import FileGroup, MarkerView, conflict_key
from airflow_hudi_occ.core.concurrency.footprint import Footprint, LiveWriter

log = logging.getLogger(__name__)

_COMMIT_CONFLICT_REMEDY = ("an instant that completed after this write began already rewrote the "
                           "same file group; this write read stale data: retry with a fresh "
                           "instant time")


def uses_bucket_index(table, config: WriteConfig) -> bool:
    """Whether writes conflict by bucket rather than by fileId: exactly when the commit-time
    strategy does (``WriteConfig.conflict_strategy``: the bucket strategy, named or implied by
    ``hoodie.index.type=BUCKET``), so that an early conflict is never one the commit would
    have let through, nor the reverse."""
    name = config.conflict_strategy.strip().lower()
    return name == "bucket" or name.endswith("bucketindexconcurrentfilewritesconflictresolutionstrategy")


class EarlyConflictDetectionStrategy(ABC):
    """One writer's (one instant's) early conflict detector.

    Call :meth:`create_marker` instead of ``markers.create`` before writing each data file.
    Once a conflict is found the detector stays in conflict: every later call raises.
    """

    #: short name (``hoodie.write.concurrency.early.conflict.detection.strategy`` may use it)
    name: ClassVar[str] = ""
    #: Hudi's class name for the same strategy
    hudi_class: ClassVar[str] = ""
    aliases: ClassVar[tuple[str, ...]] = ()
    uses_bloom: ClassVar[bool] = False

    def __init__(self, table, instant_time: str, write_config: WriteConfig | None = None, *,
                 completed_at_start: set[str] | frozenset[str] | None = None,
                 clock: Callable[[], float] = time.time):
        self.table = table
        self.instant_time = instant_time
        self.config = write_config or WriteConfig()
        self.clock = clock
        self.by_bucket = uses_bucket_index(table, self.config)
        self.view = MarkerView(table, instant_time, self.config.heartbeat, clock, by_bucket=self.by_bucket)
        self.check_commit_conflict = self.config.early_conflict.check_commit_conflict
        if self.check_commit_conflict and completed_at_start is None:
            completed_at_start = {i.requested_time for i in table.timeline().completed()}
        self.completed_at_start = frozenset(completed_at_start or ())
        self._completed_groups: dict[str, frozenset[FileGroup]] = {}
        self._state_lock = threading.Lock()
        self._mine: set[FileGroup] = set()
        self._conflict: dict | None = None
        self._bloom = OwnBloom(table.storage, instant_time) if self.uses_bloom else None
        self.checks = 0

    # -- the contract --------------------------------------------------------------------------

    def start(self) -> "EarlyConflictDetectionStrategy":
        return self

    def stop(self) -> None:
        pass

    def __enter__(self) -> "EarlyConflictDetectionStrategy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def has_conflict(self) -> bool:
        return self._conflict is not None

    @property
    def conflict(self) -> EarlyConflictError | None:
        return None if self._conflict is None else EarlyConflictError(**self._conflict)

    def check_sticky(self) -> None:
        """Raise the conflict found earlier, if any (cheap: no storage access)."""
        if self._conflict is not None:
            raise EarlyConflictError(**self._conflict)

    def check(self, partition: str, file_id: str) -> None:
        """Raise :class:`EarlyConflictError` if writing ``(partition, file_id)`` is doomed."""
        partition = clean_partition(partition)
        if not file_id:
            raise ValueError("file_id must not be empty")
        self.check_sticky()
        self.checks += 1
        found = self._detect(partition, file_id)
        if found is None and self.check_commit_conflict:
            found = self._commit_conflict({(partition, file_id)})
        if found is not None:
            self._set_conflict(found)
            self.check_sticky()

    def check_all(self, file_groups) -> None:
        """Check every ``(partition, file_id)`` a write plans, before any of its data exists
        (the Spark driver, before the write job starts): a doomed write stops having written
        nothing. Raises :class:`EarlyConflictError` for the first conflict. Earlier live
        writers' declared file groups count as their markers (``declared.py``): they will be."""
        file_groups = list(file_groups)
        self.check_declared(file_groups)
        for partition, file_id in file_groups:
            self.check(partition, file_id)

    def rivals(self, footprint: Footprint | None) -> list[tuple[LiveWriter, list[str]]]:
        """Earlier live writers whose declared footprint shares a partition with ``footprint``
        (every earlier live writer when it is unknown), with the shared partitions."""
        return earlier_rivals(self.table, self.instant_time, footprint, self.config.heartbeat,
                              now=self.clock())

    def check_declared(self, file_groups, rivals: list | None = None) -> list[tuple[LiveWriter, list[str]]]:
        """Raise :class:`EarlyConflictError` if an earlier live writer declared one of
        ``file_groups`` (by bucket under the bucket index); a shared partition alone is not a
        conflict. Returns the rivals looked at."""
        file_groups = [(clean_partition(p), f) for p, f in file_groups]
        self.check_sticky()
        if rivals is None:
            rivals = self.rivals(Footprint.of({p for p, _ in file_groups}))
        found = declared_conflict(self.instant_time, rivals, file_groups, by_bucket=self.by_bucket,
                                  strategy=self.name)
        if found is not None:
            self._set_conflict(found)
            self.check_sticky()
        return rivals

    def create_marker(self, markers: WriteMarkers, partition: str, data_file_name: str,
                      io_type: IOType | str) -> Marker:
        """Check, then create the marker (only if the check passed)."""
        self._same_instant(markers)
        partition = clean_partition(partition)
        self.check(partition, file_id_of(data_file_name))
        return self._create(markers, partition, data_file_name, io_type)

    # -- for subclasses --------------------------------------------------------------------------

    @abstractmethod
    def _detect(self, partition: str, file_id: str) -> dict | None:
        """The conflict (as EarlyConflictError keyword arguments) or None."""

    def _same_instant(self, markers: WriteMarkers) -> None:
        if markers.instant_time != self.instant_time:
            raise ValueError(f"markers of {markers.instant_time} given to the detector of "
                             f"{self.instant_time}")

    def _create(self, markers: WriteMarkers, partition: str, data_file_name: str,
                io_type: IOType | str) -> Marker:
        group = (partition, file_id_of(data_file_name))
        if self._bloom is not None:
            # The bloom is written BEFORE the marker, so a reader never finds a marker that the
            # bloom does not cover (the bloom may only over-approximate).
            self._bloom.add(*group)
        marker = markers.create(partition, data_file_name, io_type)
        with self._state_lock:
            self._mine.add(group)
        return marker

    def _set_conflict(self, kwargs: dict) -> None:
        with self._state_lock:
            if self._conflict is None:
                self._conflict = kwargs
                log.warning("%s", EarlyConflictError(**kwargs).message)

    def conflict_with(self, other: str, groups: Iterable[FileGroup]) -> EarlyConflictError:
        """The error for this write meeting ``other``'s markers on ``groups`` (found by a
        caller's own check, e.g. the Spark driver's check before tagging); also made sticky."""
        kwargs = self._marker_conflict(other, groups)
        self._set_conflict(kwargs)
        return EarlyConflictError(**kwargs)

    def _marker_conflict(self, other: str, groups: Iterable[FileGroup]) -> dict:
        groups = sorted(groups)
        action = self.view.action_of(other) or "instant"
        shown = ", ".join(str(FileGroupId.of(g)) for g in groups[:5]) + (
            " ..." if len(groups) > 5 else "")
        return dict(message=(f"early conflict: {action} {other} (an earlier writer, still running) "
                             f"has markers on file group(s) [{shown}] that instant "
                             f"{self.instant_time} is about to write"),
                    instant=self.instant_time, other_instant=other, file_groups=groups,
                    other_action=action, strategy=self.name)

    def _commit_conflict(self, groups: set[FileGroup]) -> dict | None:
        """RFC-56 step 2: an instant completed since this write began that touched ``groups``."""
        timeline = self.table.timeline()
        for inst in timeline.completed_by_completion_time():
            t = inst.requested_time
            if t == self.instant_time or t in self.completed_at_start or not inst.is_write:
                continue
            theirs = self._completed_groups.get(t)
            if theirs is None:
                theirs = frozenset(timeline.commit_metadata(inst).mutated_file_groups())
                self._completed_groups[t] = theirs
            mine = {conflict_key(g, self.by_bucket) for g in groups}
            hit = sorted(g for g in theirs if conflict_key(g, self.by_bucket) in mine)  # as they named it
            if hit:
                shown = ", ".join(str(FileGroupId.of(g)) for g in hit[:5])
                return dict(message=(f"early conflict: {inst.action.value} {t} completed after "
                                     f"instant {self.instant_time} began and wrote file group(s) "
                                     f"[{shown}]"),
                            instant=self.instant_time, other_instant=t, file_groups=hit,
                            other_action=inst.action.value, strategy=self.name,
                            remedy=_COMMIT_CONFLICT_REMEDY)
        return None

    def _bloom_may_hold(self, candidate: str, keys: list[tuple[str, tuple[int, int]]]) -> list[int] | None:
        """Indices of ``keys`` the candidate's blooms may hold; None = no usable bloom."""
        blooms = self.view.blooms(candidate)
        if blooms is None:
            return None
        return [i for i, (k, pair) in enumerate(keys)
                if any(b.might_contain(k, pair) for b in blooms)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.instant_time}, conflict={self.has_conflict})"


def clean_partition(partition: str | None) -> str:
    """A partition path as markers and locks spell it: no leading or trailing "/"."""
    return (partition or "").strip("/")


class SimpleDirectMarkerBasedDetectionStrategy(EarlyConflictDetectionStrategy):
    """List the candidates' folder of this partition; conflict if one has this fileId."""

    name = "simple"
    hudi_class = "org.apache.hudi.table.marker.SimpleDirectMarkerBasedDetectionStrategy"
    aliases = ("SimpleDirectMarkerBasedEarlyConflictDetectionStrategy",)

    def _detect(self, partition: str, file_id: str) -> dict | None:
        for c in self.view.candidates():
            if self.view.has_file_group(c, partition, file_id):
                return self._marker_conflict(c, [(partition, file_id)])
        return None


class SimpleTransactionDirectMarkerBasedDetectionStrategy(SimpleDirectMarkerBasedDetectionStrategy):
    """The simple check and the marker creation under a lock keyed ``partition/fileId``.

    Without the lock, two writers can both check before either creates its marker, and both
    pass. With it, whichever enters second sees the first one's marker.
    """

    name = "transactional"
    hudi_class = "org.apache.hudi.table.marker.SimpleTransactionDirectMarkerBasedDetectionStrategy"
    aliases = ("SimpleTransactionDirectMarkerBasedEarlyConflictDetectionStrategy",)

    def _lock_manager(self, partition: str, file_id: str):
        provider = get_lock_provider(self.config.lock, base_path=self.table.base_uri,
                                     table_name=self.table.name, storage=self.table.storage,
                                     lock_key="/".join(conflict_key((partition, file_id), self.by_bucket)))
        return LockManager(provider, self.config.lock)

    def create_marker(self, markers: WriteMarkers, partition: str, data_file_name: str,
                      io_type: IOType | str) -> Marker:
        self._same_instant(markers)
        partition = clean_partition(partition)
        file_id = file_id_of(data_file_name)
        self.check_sticky()
        manager = self._lock_manager(partition, file_id)
        try:
            with manager.locked():
                self.check(partition, file_id)
                # A lock taken over while we checked (a file lock past its expiry) would let
                # another writer in; refuse to create the marker on a lock that is not ours.
                manager.check_held()
                return self._create(markers, partition, data_file_name, io_type)
        finally:
            manager.close()


class BloomDirectMarkerBasedDetectionStrategy(SimpleDirectMarkerBasedDetectionStrategy):
    """The simple check, skipping candidates whose bloom filter cannot hold the file group."""

    name = "bloom-direct"
    hudi_class = "org.apache.hudi.table.marker.BloomDirectMarkerBasedDetectionStrategy"
    aliases = ("BloomDirectMarkerBasedEarlyConflictDetectionStrategy",)
    uses_bloom = True

    def _detect(self, partition: str, file_id: str) -> dict | None:
        key = bloom_key(partition, file_id)
        keys = [(key, BloomFilter.hash_pair(key))]
        for c in self.view.candidates():
            if self._bloom_may_hold(c, keys) == []:
                continue
            if self.view.has_file_group(c, partition, file_id):
                return self._marker_conflict(c, [(partition, file_id)])
        return None
