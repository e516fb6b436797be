"""The markers of one instant, in Hudi's two layouts (``core.concurrency.markers`` says what
markers are for).

A marker is created *before* its data file; :class:`WriteMarkers` is the one interface,
:func:`markers_for` picks the layout an instant's folder already has.

Two layouts, as Hudi writes them, so Java Hudi and this library can roll back each other's
failed writes:

- :class:`DirectWriteMarkers` (``DIRECT``): one empty file per marker,
  ``.hoodie/.temp/<t>/<partition>/<datafile>.marker.<IOTYPE>``. Creation is create-if-absent,
  so two processes creating the same marker cannot both fail or clobber.
- :class:`BatchedWriteMarkers` (Hudi's ``TIMELINE_SERVER_BASED``): files ``MARKERS0..N`` each
  holding one marker relative path per line, plus ``MARKERS.type``. Hudi funnels every marker
  through one timeline server that owns the files; here there is no server, so each writer
  object claims files of its own (create-if-absent on the lowest free ``MARKERS<n>``) and only
  ever replaces its own files whole. Writers of one instant in several processes therefore
  never lose each other's markers.

Reading is tolerant by design: a batched file may be read while it is being replaced on a
backend without atomic replace, so a short, empty or cut file is read as far as it makes sense
(RFC-56: "treat it as empty for this round") and a line that is not a marker is skipped; the
next reading catches up. Creating a marker raises what :func:`~.names.new_marker` raises for a
partition or name that would leave the folder; :func:`markers_for` raises
:class:`~airflow_hudi_occ.core.errors.CorruptMetadataError` for an unreadable
``MARKERS.type``.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from typing import Iterable

from airflow_hudi_occ.core.config import MarkerType
from airflow_hudi_occ.core.concurrency.markers.files import MarkerFileContent, read_marker_file
from airflow_hudi_occ.core.concurrency.markers.folder import marker_dir, markers_file_names, read_marker_type
from airflow_hudi_occ.core.concurrency.markers.names import (DEFAULT_MAX_LINES_PER_FILE, MARKER_SUFFIXES,
                                                            MARKERS_FILE_PREFIX, MARKERS_TYPE_FILE, TEMP_FOLDER,
                                                            IOType, Marker, marker_partition, new_marker,
                                                            try_parse_marker)


class WriteMarkers(ABC):
    """The markers of one instant. Create before the data file; delete after completion."""

    marker_type: MarkerType

    def __init__(self, table, instant_time: str):
        self.table = table
        self.instant_time = instant_time
        self.storage = table.storage
        self.dir = marker_dir(table, instant_time)
        #: the marker files this object created (or found there already when it created them)
        self._made: list[str] = []
        self._made_lock = threading.Lock()

    # -- writing -------------------------------------------------------------------------------

    @abstractmethod
    def create(self, partition: str, data_file_name: str, io_type: IOType | str) -> Marker:
        """Create the marker of a data file (idempotent: an existing marker is returned)."""

    def create_many(self, items: Iterable[tuple[str, str, IOType | str]]) -> list[Marker]:
        """Create several markers; backends that write in batches do it in one write."""
        return [self.create(p, n, t) for p, n, t in items]

    # -- reading -------------------------------------------------------------------------------

    @abstractmethod
    def all_markers(self) -> list[Marker]:
        """Every marker of the instant (unique, in a stable order)."""

    def markers_in_partition(self, partition: str) -> list[Marker]:
        partition = marker_partition(partition)
        return [m for m in self.all_markers() if m.partition == partition]

    def file_ids_in_partition(self, partition: str) -> set[str]:
        return {m.file_id for m in self.markers_in_partition(partition)}

    def file_groups(self) -> set[tuple[str, str]]:
        return {m.file_group for m in self.all_markers()}

    def data_files(self) -> list[str]:
        """Relative paths of the data files the markers stand for (what rollback deletes)."""
        seen: dict[str, None] = {}
        for m in self.all_markers():
            seen.setdefault(m.data_file_path, None)
        return list(seen)

    def exists(self) -> bool:
        return self.storage.exists(self.dir)

    def made_paths(self) -> list[str] | None:
        """The files this object created in the folder, for a caller that knows it made every
        marker of the instant (the core writer, :func:`~airflow_hudi_occ.core.commit.pipeline.write_marked`)
        to delete them by name, without listing the folder; None where the layout cannot tell
        (a batched folder is shared by every writer of the instant)."""
        return None

    def delete_all(self) -> None:
        """Remove the instant's marker folder (after completion, or after a rollback)."""
        self.storage.delete_dir(self.dir)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.instant_time})"


class DirectWriteMarkers(WriteMarkers):
    """One empty file per marker (Hudi's DIRECT markers)."""

    marker_type = MarkerType.DIRECT

    def _path(self, marker: Marker) -> str:
        return self.storage.path(*TEMP_FOLDER, self.instant_time, marker.relative_path)

    def create(self, partition: str, data_file_name: str, io_type: IOType | str) -> Marker:
        marker = new_marker(partition, data_file_name, io_type)
        path = self._path(marker)
        try:
            self.storage.create_if_absent(path, b"")
        except FileExistsError:
            pass  # already there: markers are idempotent (a retried task, a second call)
        with self._made_lock:
            self._made.append(path)
        return marker

    def made_paths(self) -> list[str] | None:
        with self._made_lock:
            return list(self._made)

    def all_markers(self) -> list[Marker]:
        out = []
        for rel in sorted(self.storage.walk_files(self.dir)):
            if rel.endswith(MARKER_SUFFIXES):
                m = try_parse_marker(rel)
                if m is not None:
                    out.append(m)
        return out

    def markers_in_partition(self, partition: str) -> list[Marker]:
        partition = marker_partition(partition)
        folder = self.storage.path(*TEMP_FOLDER, self.instant_time, partition)
        out = []
        for name in sorted(self.storage.list_names(folder)):
            if name.endswith(MARKER_SUFFIXES):
                m = try_parse_marker(f"{partition}/{name}" if partition else name)
                if m is not None:
                    out.append(m)
        return out


class BatchedWriteMarkers(WriteMarkers):
    """Markers batched into ``MARKERS<n>`` files (Hudi's TIMELINE_SERVER_BASED layout).

    Thread-safe within one process; across processes safe because every object writes only
    files it claimed with create-if-absent.
    """

    marker_type = MarkerType.TIMELINE_SERVER_BASED

    def __init__(self, table, instant_time: str, *,
                 max_lines_per_file: int = DEFAULT_MAX_LINES_PER_FILE):
        super().__init__(table, instant_time)
        if max_lines_per_file < 1:
            raise ValueError("max_lines_per_file must be >= 1")
        self.max_lines_per_file = max_lines_per_file
        self._lock = threading.Lock()
        self._own_file: str | None = None     # the MARKERS<n> this object appends to
        self._own_lines: list[str] = []       # its content, one marker path per line
        self._known: set[str] | None = None   # every marker path seen or written by this object
        self.claimed_files: list[str] = []

    # -- writing -------------------------------------------------------------------------------

    def _ensure_type_file(self) -> None:
        path = self.storage.path(*TEMP_FOLDER, self.instant_time, MARKERS_TYPE_FILE)
        if self.storage.exists(path):
            return
        try:
            self.storage.create_if_absent(path, MarkerType.TIMELINE_SERVER_BASED.value.encode())
        except FileExistsError:
            pass

    def _claim_file(self) -> None:
        """Become the only writer of the lowest free ``MARKERS<n>``."""
        taken = set(self.storage.list_names(self.dir))
        n = 0
        while True:
            name = f"{MARKERS_FILE_PREFIX}{n}"
            if name not in taken:
                try:
                    self.storage.create_if_absent(self.storage.path(*TEMP_FOLDER, self.instant_time, name), b"")
                except FileExistsError:
                    taken.add(name)  # another writer claimed it between our listing and now
                else:
                    self._own_file = name
                    self._own_lines = []
                    self.claimed_files.append(name)
                    return
            n += 1

    def _start(self) -> None:
        if self._known is not None:
            return
        # The type file comes first, so any reader that finds a MARKERS<n> file can also tell
        # that the folder is batched.
        self._ensure_type_file()
        known = set()
        for name in markers_file_names(self.storage.list_names(self.dir)):
            known.update(read_marker_file(self.storage, self.storage.path(
                *TEMP_FOLDER, self.instant_time, name)).lines)
        self._known = known

    def _flush(self, lines: list[str]) -> None:
        self.storage.write(self.storage.path(*TEMP_FOLDER, self.instant_time, self._own_file),
                           "".join(f"{line}\n" for line in lines).encode("utf-8"))

    def create_many(self, items: Iterable[tuple[str, str, IOType | str]]) -> list[Marker]:
        markers = [new_marker(p, n, t) for p, n, t in items]
        with self._lock:
            self._start()
            # dict keeps first-seen order and makes the duplicate check O(1) per marker
            new = list(dict.fromkeys(m.relative_path for m in markers
                                     if m.relative_path not in self._known))
            while new:
                if self._own_file is None or len(self._own_lines) >= self.max_lines_per_file:
                    self._claim_file()
                room = self.max_lines_per_file - len(self._own_lines)
                chunk, new = new[:room], new[room:]
                lines = self._own_lines + chunk
                # Memory follows the disk only after the write succeeded, so a failed write
                # cannot leave markers that this object believes exist.
                self._flush(lines)
                self._own_lines = lines
                self._known.update(chunk)
        return markers

    def create(self, partition: str, data_file_name: str, io_type: IOType | str) -> Marker:
        return self.create_many([(partition, data_file_name, io_type)])[0]

    # -- reading -------------------------------------------------------------------------------

    def marker_files(self) -> list[str]:
        return markers_file_names(self.storage.list_names(self.dir))

    def contents(self) -> list[MarkerFileContent]:
        return [read_marker_file(self.storage, self.storage.path(*TEMP_FOLDER, self.instant_time, n))
                for n in self.marker_files()]

    def all_markers(self) -> list[Marker]:
        seen: dict[Marker, None] = {}
        for content in self.contents():
            for m in content.markers:
                seen.setdefault(m, None)
        return list(seen)

    def file_groups(self) -> set[tuple[str, str]]:
        out: set[tuple[str, str]] = set()
        for content in self.contents():
            out |= content.file_groups
        return out

    def file_ids_in_partition(self, partition: str) -> set[str]:
        partition = marker_partition(partition)
        out: set[str] = set()
        for content in self.contents():
            out |= content.file_ids_by_partition().get(partition, frozenset())
        return out


def markers_for(table, instant_time: str, marker_type: MarkerType | None = None) -> WriteMarkers:
    """The markers of an instant; with no type given, the folder's ``MARKERS.type`` decides."""
    if marker_type is None:
        marker_type = read_marker_type(table, instant_time) or MarkerType.DIRECT
    if marker_type is MarkerType.TIMELINE_SERVER_BASED:
        return BatchedWriteMarkers(table, instant_time)
    return DirectWriteMarkers(table, instant_time)
