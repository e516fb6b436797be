"""Early conflict detection (ECD, Hudi RFC-56): stop a doomed write before it writes data.

Commit-time conflict resolution finds an overlap only after all the data is written. ECD
looks at the *markers* of other, still running writers just before this writer creates each
of its own markers, and aborts at once if one of them is writing the same file group.

Where this sits in a write (see ``transaction.py``)::

    begin -> inflight -> for each data file: detector.create_marker(...) -> write the file
          -> commit (conflict resolution under the table lock still runs: ECD only saves work)

Candidates (section 3 of the design): marker folders under ``.hoodie/.temp/`` of instants
strictly EARLIER than this one (of two overlapping writers only the later one fails, the same
rule as commit-time resolution), that are pending on the timeline (completed or rolled-back
instants leave only leftovers), not a compaction or clustering, and whose heartbeat is alive.

Strategies, named as Hudi names them (and by short names):

- ``simple`` (:class:`SimpleDirectMarkerBasedDetectionStrategy`): list
  ``<candidate>/<partition>`` only and look for the fileId. Two writers checking the same file
  group at the same moment can both pass (then the commit-time check catches it).
- ``transactional`` (:class:`SimpleTransactionDirectMarkerBasedDetectionStrategy`): the same,
  with check and marker creation under a lock keyed ``partition/fileId``, which closes that race.
- ``async`` (:class:`AsyncTimelineServerBasedDetectionStrategy`): for batched markers. A
  background thread periodically compares this writer's file groups with the candidates' and
  raises a sticky flag; marker creation only reads the flag, so it costs nothing.
- ``bloom-direct`` / ``bloom-async``: as above, and every writer also keeps a bloom filter of
  its file groups (``.hoodie/.temp/<t>/BLOOM``); the checker reads it first and skips candidates
  that cannot hold the file group. A missing or unreadable bloom means "may contain".

Optionally (``...early.conflict.check.commit.conflict``) an instant that *completed* after this
write began and touched the file group is a conflict as well: its markers are gone by then.

Beyond Hudi, deliberately: every strategy reads both marker layouts (a direct-marker writer
sees a batched-marker writer and vice versa), and a pending insert-overwrite replacecommit is a
candidate (Hudi skips every pending replacecommit; only clustering yields here).

Errors: :class:`EarlyConflictError` (retryable: retry with a fresh instant time); once raised,
the detector keeps raising it (the write is doomed). :class:`UnknownStrategyError` for a
strategy name that does not exist. Storage errors pass through.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import struct
import threading
import time
import zlib
from abc import ABC, abstractmethod
from typing import Callable, ClassVar, Iterable

from airflow_hudi_occ.core.config import ECD_STRATEGY, MarkerType, WriteConfig
from airflow_hudi_occ.core.plugins import Registry
from airflow_hudi_occ.core.errors import CorruptMetadataError, EarlyConflictError, UnknownStrategyError
from airflow_hudi_occ.core.concurrency.heartbeat import last_beat
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.concurrency.markers import (_SUFFIXES, MARKERS_TYPE_FILE, TEMP_FOLDER, IOType, Marker, WriteMarkers,
                      _group_of_line, file_id_of, group_key, markers_file_names, read_marker_file)
from airflow_hudi_occ.core.concurrency.locks import LockManager, get_lock_provider

log = logging.getLogger(__name__)

FileGroup = tuple[str, str]

_INSTANT_DIR_RE = re.compile(r"^(\d{14}|\d{17})$")
_BLOOM_FILE_RE = re.compile(r"^BLOOM(\d*)$")
BLOOM_FILE = "BLOOM"

_COMMIT_CONFLICT_REMEDY = ("an instant that completed after this write began already rewrote the "
                           "same file group; this write read stale data: retry with a fresh "
                           "instant time")


# --- a small bloom filter -------------------------------------------------------------------


class BloomFilter:
    """A fixed-size bloom filter with Kirsch-Mitzenmacher double hashing over blake2b.

    Serialised as ``magic | m | k | count | bits | crc32``; the checksum lets a reader tell a
    cut or foreign file from a filter, and such a file must count as "may contain".
    """

    MAGIC = b"HOCCBLM1"
    _HEADER = struct.Struct(">IIQ")

    def __init__(self, num_bits: int, num_hashes: int, bits: bytearray | None = None,
                 count: int = 0):
        if num_bits < 8 or num_hashes < 1:
            raise ValueError("a bloom filter needs at least 8 bits and one hash")
        self.num_bits = num_bits
        self.num_hashes = num_hashes
        self.bits = bits if bits is not None else bytearray((num_bits + 7) // 8)
        self.count = count

    @classmethod
    def for_capacity(cls, capacity: int, fpp: float = 0.01) -> "BloomFilter":
        capacity = max(1, capacity)
        m = max(64, int(math.ceil(-capacity * math.log(fpp) / (math.log(2) ** 2))))
        k = max(1, int(round(m / capacity * math.log(2))))
        return cls(m, k)

    @staticmethod
    def hash_pair(key: str) -> tuple[int, int]:
        d = hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()
        return int.from_bytes(d[:8], "little"), int.from_bytes(d[8:], "little") | 1

    def _positions(self, pair: tuple[int, int]) -> Iterable[int]:
        h1, h2 = pair
        m = self.num_bits
        return ((h1 + i * h2) % m for i in range(self.num_hashes))

    def add(self, key: str, pair: tuple[int, int] | None = None) -> None:
        for pos in self._positions(pair or self.hash_pair(key)):
            self.bits[pos >> 3] |= 1 << (pos & 7)
        self.count += 1

    def might_contain(self, key: str, pair: tuple[int, int] | None = None) -> bool:
        bits = self.bits
        for pos in self._positions(pair or self.hash_pair(key)):
            if not bits[pos >> 3] & (1 << (pos & 7)):
                return False
        return True

    def to_bytes(self) -> bytes:
        body = self.MAGIC + self._HEADER.pack(self.num_bits, self.num_hashes, self.count) + bytes(self.bits)
        return body + struct.pack(">I", zlib.crc32(body))

    @classmethod
    def from_bytes(cls, data: bytes) -> "BloomFilter":
        head = len(cls.MAGIC) + cls._HEADER.size
        if len(data) < head + 4 or not data.startswith(cls.MAGIC):
            raise ValueError("not a bloom filter")
        body, crc = data[:-4], struct.unpack(">I", data[-4:])[0]
        if zlib.crc32(body) != crc:
            raise ValueError("bloom filter checksum mismatch")
        m, k, count = cls._HEADER.unpack(data[len(cls.MAGIC):head])
        bits = bytearray(body[head:])
        if len(bits) != (m + 7) // 8:
            raise ValueError("bloom filter length mismatch")
        return cls(m, k, bits, count)


def bloom_key(partition: str, file_id: str) -> str:
    # fileIds never contain "/", so the last "/" separates the two unambiguously
    return f"{partition}/{file_id}"


class _OwnBloom:
    """This writer's bloom file: claimed like a MARKERS file (``BLOOM``, ``BLOOM1``, ...), so
    several processes of one instant never overwrite each other's filters."""

    INITIAL_CAPACITY = 1024

    def __init__(self, storage, instant_time: str):
        self.storage = storage
        self.instant_time = instant_time
        self._keys: set[str] = set()
        self._filter: BloomFilter | None = None
        self._capacity = 0
        self._file: str | None = None
        self._lock = threading.Lock()

    def _path(self, name: str) -> str:
        return self.storage.path(*TEMP_FOLDER, self.instant_time, name)

    def add(self, partition: str, file_id: str) -> None:
        key = bloom_key(partition, file_id)
        with self._lock:
            if key in self._keys:
                return
            keys = self._keys | {key}
            if self._filter is None or len(keys) > self._capacity:
                self._capacity = max(self.INITIAL_CAPACITY, 2 * len(keys))
                flt = BloomFilter.for_capacity(self._capacity)
                for k in keys:
                    flt.add(k)
            else:
                flt = self._filter
                flt.add(key)  # a key added before a failed write only adds a false positive
            data = flt.to_bytes()
            if self._file is None:
                self._claim(data)
            else:
                self.storage.write(self._path(self._file), data)
            self._filter, self._keys = flt, keys

    def _claim(self, data: bytes) -> None:
        taken = set(self.storage.list_names(self.storage.path(*TEMP_FOLDER, self.instant_time)))
        n = 0
        while True:
            name = BLOOM_FILE if n == 0 else f"{BLOOM_FILE}{n}"
            if name not in taken:
                try:
                    self.storage.create_if_absent(self._path(name), data)
                except FileExistsError:
                    taken.add(name)
                else:
                    self._file = name
                    return
            n += 1


# --- what other writers are doing ------------------------------------------------------------


class _MarkerView:
    """Candidate instants and their markers, with every immutable fact cached.

    Immutable, hence cached: an earlier instant that is completed, rolled back (gone from the
    timeline: instant times are never reused) or a table service stays out for good; a folder
    with ``MARKERS.type`` stays batched; a heartbeat seen at ``b`` is alive at least until
    ``b + expiry`` (beats only move forward, and a heartbeat is deleted only after its markers).
    Not cached: directory listings and the content of files being written (batched files are
    cached by size and mtime in :mod:`.markers`).

    An instant seen pending is not re-read from the timeline on every check: if it completed
    since, and its leftover markers overlap ours, then it wrote our file group after our write
    began, which the commit-time check would reject anyway.
    """

    def __init__(self, table, instant_time: str, heartbeat_config, clock: Callable[[], float]):
        self.table = table
        self.storage = table.storage
        self.instant_time = instant_time
        self.expiry_s = heartbeat_config.expiry_ms / 1000.0
        self.clock = clock
        self.temp_dir = table.temp_dir
        self._excluded: set[str] = set()
        self._pending: dict[str, str] = {}      # candidate -> its action, for error messages
        self._unsure: set[str] = set()          # candidates to classify again next time
        self._alive_until: dict[str, float] = {}
        self._batched: set[str] = set()
        self._lock = threading.Lock()
        self.timeline_loads = 0

    # -- candidates ----------------------------------------------------------------------------

    def candidates(self) -> list[str]:
        names = self.storage.list_names(self.temp_dir)
        with self._lock:
            todo = sorted(n for n in names if n < self.instant_time and n not in self._excluded
                          and _INSTANT_DIR_RE.match(n))
            if not todo:
                return []
            unknown = [n for n in todo if n not in self._pending or n in self._unsure]
            if unknown:
                self._classify(unknown)
            return [n for n in todo if n in self._pending and self._alive(n)]

    def _classify(self, names: list[str]) -> None:
        timeline = self.table.timeline()
        self.timeline_loads += 1
        for n in names:
            inst = timeline.get(n)
            if inst is None or inst.is_completed:
                self._excluded.add(n)  # rolled back, or done: its markers are leftovers
                continue
            if inst.action in (Action.COMPACTION, Action.LOG_COMPACTION, Action.CLUSTERING):
                self._excluded.add(n)
                continue
            if inst.action is Action.REPLACE_COMMIT:
                try:
                    clustering = timeline.is_clustering(inst)
                except CorruptMetadataError:
                    # A plan we cannot read (yet): a candidate this time (a false early conflict
                    # costs a retry; a missed one costs the whole write), asked again next time.
                    log.warning("cannot tell whether %s is a clustering; treating it as a writer", n)
                    self._pending[n] = inst.action.value
                    self._unsure.add(n)
                    continue
                if clustering:
                    self._excluded.add(n)
                    self._pending.pop(n, None)
                    self._unsure.discard(n)
                    continue
            self._pending[n] = inst.action.value
            self._unsure.discard(n)

    def _alive(self, n: str) -> bool:
        now = self.clock()
        until = self._alive_until.get(n)
        if until is not None and now <= until:
            return True
        beat = last_beat(self.table, n)
        # the rule of heartbeat.is_expired: dead when missing or older than the expiry
        if beat is None or now - beat > self.expiry_s:
            return False
        self._alive_until[n] = beat + self.expiry_s
        return True

    def action_of(self, n: str) -> str | None:
        return self._pending.get(n)

    # -- markers of one instant -----------------------------------------------------------------

    def _dir(self, n: str, *parts: str) -> str:
        return self.storage.path(*TEMP_FOLDER, n, *parts)

    def is_batched(self, n: str) -> bool:
        if n in self._batched:
            return True
        if self.storage.exists(self._dir(n, MARKERS_TYPE_FILE)):
            self._batched.add(n)
            return True
        return False

    def batched_contents(self, n: str, names: list[str] | None = None):
        if names is None:
            names = self.storage.list_names(self._dir(n))
        return [read_marker_file(self.storage, self._dir(n, f)) for f in markers_file_names(names)]

    def has_file_group(self, n: str, partition: str, file_id: str) -> bool:
        if self.is_batched(n):
            key = group_key(partition, file_id)
            return any(key in c.keys for c in self.batched_contents(n))
        names = self.storage.list_names(self._dir(n, partition))
        return _names_have_file_id(names, file_id)

    def file_groups_among(self, n: str, wanted: set[FileGroup],
                          by_partition: dict[str, set[str]]) -> set[FileGroup]:
        """Which of ``wanted`` the markers of ``n`` hold."""
        if self.is_batched(n):
            by_key = {group_key(p, f): (p, f) for p, f in wanted}
            wanted_keys = frozenset(by_key)
            hit_keys: set[str] = set()
            for c in self.batched_contents(n):
                hit_keys |= wanted_keys & c.keys  # C-level, iterates the smaller set
            return {by_key[k] for k in hit_keys}
        hit: set[FileGroup] = set()
        for partition, ids in by_partition.items():
            names = self.storage.list_names(self._dir(n, partition))
            if not names:
                continue
            theirs = {_group_of_line(x)[1] for x in names if x.endswith(_SUFFIXES)}
            hit.update((partition, f) for f in ids & theirs)
        return hit

    def all_file_groups(self, n: str) -> set[FileGroup]:
        """Every file group in the markers of ``n`` (this writer's own instant, for async)."""
        if self.is_batched(n):
            out: set[FileGroup] = set()
            for c in self.batched_contents(n):
                out |= c.file_groups
            return out
        return {_group_of_line(rel) for rel in self.storage.walk_files(self._dir(n))
                if rel.endswith(_SUFFIXES)}

    def blooms(self, n: str) -> list[BloomFilter] | None:
        """The candidate's bloom filters, or None when it has none or one is unreadable."""
        names = [x for x in self.storage.list_names(self._dir(n)) if _BLOOM_FILE_RE.match(x)]
        if not names:
            return None
        out = []
        for name in names:
            try:
                out.append(BloomFilter.from_bytes(self.storage.read(self._dir(n, name))))
            except (ValueError, OSError, struct.error):
                return None
        return out


def _names_have_file_id(names: list[str], file_id: str) -> bool:
    """Whether a direct-marker listing holds a marker of ``file_id`` (exact fileId match)."""
    p1 = file_id + "_"
    p2 = "." + p1
    for name in names:
        if (name.startswith(p1) or name.startswith(p2)) and name.endswith(_SUFFIXES):
            return True
    # a data file name without "_" is its own fileId
    exact = {f"{file_id}{s}" for s in _SUFFIXES} | {f".{file_id}{s}" for s in _SUFFIXES}
    return not exact.isdisjoint(names)


# --- strategies -------------------------------------------------------------------------------


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
        self.view = _MarkerView(table, instant_time, self.config.heartbeat, clock)
        self.check_commit_conflict = self.config.early_conflict.check_commit_conflict
        if self.check_commit_conflict and completed_at_start is None:
            completed_at_start = {i.requested_time for i in table.timeline().completed()}
        self.completed_at_start = frozenset(completed_at_start or ())
        self._completed_groups: dict[str, frozenset[FileGroup]] = {}
        self._state_lock = threading.Lock()
        self._mine: set[FileGroup] = set()
        self._conflict: dict | None = None
        self._bloom = _OwnBloom(table.storage, instant_time) if self.uses_bloom else None
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
        partition = _partition(partition)
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

    def create_marker(self, markers: WriteMarkers, partition: str, data_file_name: str,
                      io_type: IOType | str) -> Marker:
        """Check, then create the marker (only if the check passed)."""
        self._same_instant(markers)
        partition = _partition(partition)
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

    def _marker_conflict(self, other: str, groups: Iterable[FileGroup]) -> dict:
        groups = sorted(groups)
        action = self.view.action_of(other) or "instant"
        shown = ", ".join(f"{p}/{f}" if p else f for p, f in groups[:5]) + (
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
            hit = sorted(groups & theirs)
            if hit:
                shown = ", ".join(f"{p}/{f}" if p else f for p, f in hit[:5])
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


def _partition(partition: str | None) -> str:
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
                                     lock_key=f"{partition}/{file_id}")
        return LockManager(provider, self.config.lock)

    def create_marker(self, markers: WriteMarkers, partition: str, data_file_name: str,
                      io_type: IOType | str) -> Marker:
        self._same_instant(markers)
        partition = _partition(partition)
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
            self._pending.add((_partition(partition), file_id))

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
        partition = _partition(partition)
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


# --- registry ------------------------------------------------------------------------------------

STRATEGIES: tuple[type[EarlyConflictDetectionStrategy], ...] = (
    SimpleDirectMarkerBasedDetectionStrategy,
    SimpleTransactionDirectMarkerBasedDetectionStrategy,
    AsyncTimelineServerBasedDetectionStrategy,
    BloomDirectMarkerBasedDetectionStrategy,
    BloomAsyncTimelineServerBasedDetectionStrategy,
)

def valid_strategy_names() -> list[str]:
    return [n for cls in STRATEGIES for n in (cls.name, cls.hudi_class)] + ["<python.module>:<Class>"]


def _unknown(value: str, why: str) -> UnknownStrategyError:
    return UnknownStrategyError(
        f"unknown early conflict detection strategy {value!r}: {why}; valid: "
        f"{', '.join(valid_strategy_names())}",
        key=ECD_STRATEGY.key, value=value,
        remedy=f"set {ECD_STRATEGY.key} to one of simple, transactional, async, bloom-direct, "
               "bloom-async (or Hudi's class name), or leave it empty for the marker type's default")


_REGISTRY = Registry(EarlyConflictDetectionStrategy, _unknown, reserved_prefix="org.apache.hudi.",
                     reserved_reason="not a known strategy")
for _cls in STRATEGIES:
    _REGISTRY.add(_cls, _cls.name, _cls.hudi_class, _cls.hudi_class.rsplit(".", 1)[-1], *_cls.aliases)


def get_detection_strategy(name_or_empty: str | None,
                           write_config: WriteConfig | None = None) -> type[EarlyConflictDetectionStrategy]:
    """The strategy class for a config value; empty picks the marker type's default."""
    raw = (name_or_empty or "").strip()
    if not raw:
        marker_type = (write_config or WriteConfig()).marker_type
        return (AsyncTimelineServerBasedDetectionStrategy
                if marker_type is MarkerType.TIMELINE_SERVER_BASED
                else SimpleDirectMarkerBasedDetectionStrategy)
    return _REGISTRY.resolve(raw)


def create_detector(table, instant_time: str, write_config: WriteConfig | None = None,
                    **kwargs) -> EarlyConflictDetectionStrategy:
    """The detector ``write_config`` asks for (strategy by name, else by marker type)."""
    write_config = write_config or WriteConfig()
    cls = get_detection_strategy(write_config.early_conflict.strategy, write_config)
    return cls(table, instant_time, write_config, **kwargs)


__all__ = [
    "AsyncTimelineServerBasedDetectionStrategy",
    "BloomAsyncTimelineServerBasedDetectionStrategy",
    "BloomDirectMarkerBasedDetectionStrategy",
    "BloomFilter",
    "EarlyConflictDetectionStrategy",
    "STRATEGIES",
    "SimpleDirectMarkerBasedDetectionStrategy",
    "SimpleTransactionDirectMarkerBasedDetectionStrategy",
    "bloom_key",
    "create_detector",
    "get_detection_strategy",
    "valid_strategy_names",
]
