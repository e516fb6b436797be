"""What the other writers are doing: their marker folders under ``.hoodie/.temp/``, the
candidates among them (earlier, pending, not a table service, heartbeat alive), both marker
layouts (direct and batched) read alike, cached between checks."""

from __future__ import annotations

import logging
import struct
import threading
from typing import Callable

from airflow_hudi_occ.core.errors import CorruptMetadataError
from airflow_hudi_occ.core.concurrency.heartbeat import last_beat
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.format.layout import bucket_id_of
from airflow_hudi_occ.core.concurrency.markers.names import (INSTANT_DIR_RE, MARKER_SUFFIXES,
                                                             MARKERS_TYPE_FILE, TEMP_FOLDER, group_key,
                                                             group_of_line)
from airflow_hudi_occ.core.concurrency.markers.folder import markers_file_names
from airflow_hudi_occ.core.concurrency.markers.files import read_marker_file
from airflow_hudi_occ.core.concurrency.early_conflict.bloom import BloomFilter, is_bloom_file

log = logging.getLogger(__name__)

#: (partition, fileId) as the markers spell it; a FileGroupId compares and hashes equal.
FileGroup = tuple[str, str]


def conflict_key(group: FileGroup, by_bucket: bool) -> tuple[str, str]:
    """What two writers must share to conflict: the file group, or under the bucket index its
    bucket. Two first writers of a bucket each create a fileId of their own
    (``00000001-<uuid>``); compared by fileId they would be seen only at commit, by the bucket
    strategy, after both wrote everything."""
    if by_bucket:
        bucket = bucket_id_of(group[1])
        if bucket is not None:
            return (group[0], "bucket:" + bucket)
    return (group[0], group[1])


def _file_id_of_marker(name: str) -> str:
    return name.lstrip(".").split("_", 1)[0].split(".", 1)[0]


class MarkerView:
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

    def __init__(self, table, instant_time: str, heartbeat_config, clock: Callable[[], float], *,
                 by_bucket: bool = False):
        self.table = table
        self.by_bucket = by_bucket
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
                          and INSTANT_DIR_RE.match(n))
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
        """Whether the markers of ``n`` hold this file group (its bucket, under ``by_bucket``)."""
        if self.by_bucket and bucket_id_of(file_id) is not None:
            return bool(self.file_groups_among(n, {(partition, file_id)}, {partition: {file_id}}))
        if self.is_batched(n):
            key = group_key(partition, file_id)
            return any(key in c.keys for c in self.batched_contents(n))
        names = self.storage.list_names(self._dir(n, partition))
        return _names_have_file_id(names, file_id)

    def file_groups_among(self, n: str, wanted: set[FileGroup],
                          by_partition: dict[str, set[str]]) -> set[FileGroup]:
        """Which of ``wanted`` the markers of ``n`` hold (by bucket, under ``by_bucket``)."""
        if self.by_bucket:
            return self._buckets_among(n, wanted, by_partition)
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
            theirs = {group_of_line(x)[1] for x in names if x.endswith(MARKER_SUFFIXES)}
            hit.update((partition, f) for f in ids & theirs)
        return hit

    def _buckets_among(self, n: str, wanted: set[FileGroup],
                       by_partition: dict[str, set[str]]) -> set[FileGroup]:
        theirs: set[tuple[str, str]] = set()
        if self.is_batched(n):
            for c in self.batched_contents(n):
                theirs |= {conflict_key(g, True) for g in c.file_groups if g[0] in by_partition}
        else:
            for partition in by_partition:
                theirs |= {conflict_key((partition, _file_id_of_marker(x)), True)
                           for x in self.storage.list_names(self._dir(n, partition))
                           if x.endswith(MARKER_SUFFIXES)}
        return {g for g in wanted if conflict_key(g, True) in theirs}

    def all_file_groups(self, n: str) -> set[FileGroup]:
        """Every file group in the markers of ``n`` (this writer's own instant, for async)."""
        if self.is_batched(n):
            out: set[FileGroup] = set()
            for c in self.batched_contents(n):
                out |= c.file_groups
            return out
        return {group_of_line(rel) for rel in self.storage.walk_files(self._dir(n))
                if rel.endswith(MARKER_SUFFIXES)}

    def blooms(self, n: str) -> list[BloomFilter] | None:
        """The candidate's bloom filters, or None when it has none or one is unreadable."""
        names = [x for x in self.storage.list_names(self._dir(n)) if is_bloom_file(x)]
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
        if (name.startswith(p1) or name.startswith(p2)) and name.endswith(MARKER_SUFFIXES):
            return True
    # a data file name without "_" is its own fileId
    exact = {f"{file_id}{s}" for s in MARKER_SUFFIXES} | {f".{file_id}{s}" for s in MARKER_SUFFIXES}
    return not exact.isdisjoint(names)
