"""Write markers: the record of every data file an instant is about to write.

A marker is created *before* its data file, so the markers of an instant are always a superset
of the files it wrote. Two readers depend on that: rollback (a failed instant's markers name
the files to delete) and early conflict detection (an earlier, still running writer's markers
say which file groups it is writing). Markers live under ``.hoodie/.temp/<instant>/`` and are
deleted when the instant completes.

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
next reading catches up. Only :func:`parse_marker`, given one explicit path, raises
:class:`CorruptMetadataError`.
"""

from __future__ import annotations

import enum
import os
import re
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterable

from airflow_hudi_occ.core.config import MarkerType
from airflow_hudi_occ.core.errors import CorruptMetadataError

TEMP_FOLDER = (".hoodie", ".temp")
MARKER_INFIX = ".marker."
MARKERS_TYPE_FILE = "MARKERS.type"
MARKERS_FILE_PREFIX = "MARKERS"
MARKERS_FILE_RE = re.compile(r"^MARKERS(\d+)$")
INSTANT_DIR_RE = re.compile(r"^(\d{14}|\d{17})$")

#: Lines a writer puts in one MARKERS file before it claims a new one. Each marker rewrites its
#: file whole, so this bounds the cost of one create, not the number of markers.
DEFAULT_MAX_LINES_PER_FILE = 2_000


class IOType(str, enum.Enum):
    CREATE = "CREATE"
    MERGE = "MERGE"
    APPEND = "APPEND"

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value


MARKER_SUFFIXES = tuple(f"{MARKER_INFIX}{t.value}" for t in IOType)


def file_id_of(data_file_name: str) -> str:
    """The fileId in a data file name.

    Base files are ``<fileId>_<token>_<t>.parquet``; log files (merge-on-read, and Hudi's
    APPEND markers) are ``.<fileId>_<t>.log.<v>_<token>``, hence the leading dot is dropped.
    """
    if data_file_name.startswith("."):
        data_file_name = data_file_name[1:]
    return data_file_name.partition("_")[0]


@dataclass(frozen=True)
class Marker:
    partition: str
    data_file_name: str
    io_type: IOType

    @property
    def file_id(self) -> str:
        return file_id_of(self.data_file_name)

    @property
    def file_group(self) -> tuple[str, str]:
        return (self.partition, self.file_id)

    @property
    def name(self) -> str:
        return f"{self.data_file_name}{MARKER_INFIX}{self.io_type.value}"

    @property
    def relative_path(self) -> str:
        return f"{self.partition}/{self.name}" if self.partition else self.name

    @property
    def data_file_path(self) -> str:
        """The data file relative to the base path: what a rollback deletes."""
        return f"{self.partition}/{self.data_file_name}" if self.partition else self.data_file_name


def _normalise_partition(partition: str | None) -> str:
    return (partition or "").strip("/")


def _validate_name(data_file_name: str) -> None:
    if not data_file_name or "/" in data_file_name or data_file_name in (".", ".."):
        raise ValueError(f"invalid data file name {data_file_name!r}")


def parse_marker(relative_path: str) -> Marker:
    """The marker a relative path (``<partition>/<datafile>.marker.<TYPE>``) stands for."""
    def bad(why: str) -> CorruptMetadataError:
        return CorruptMetadataError(f"not a marker path {relative_path!r}: {why}", path=relative_path,
                                    remedy="marker folders hold only Hudi markers; remove stray files")

    if not isinstance(relative_path, str) or not relative_path.strip():
        raise bad("empty")
    path = relative_path.strip()
    if path.startswith("/"):
        raise bad("absolute path")
    head, sep, type_name = path.rpartition(MARKER_INFIX)
    if not sep:
        raise bad(f"no {MARKER_INFIX!r}")
    try:
        io_type = IOType(type_name)
    except ValueError:
        raise bad(f"unknown IO type {type_name!r}") from None
    partition, _, data_file_name = head.rpartition("/")
    parts = partition.split("/") if partition else []
    if any(p in ("", ".", "..") for p in parts):
        raise bad("bad partition path")
    if not data_file_name or data_file_name in (".", ".."):
        raise bad("no data file name")
    if not file_id_of(data_file_name):
        raise bad("no fileId")
    return Marker(partition, data_file_name, io_type)


def _try_parse(relative_path: str) -> Marker | None:
    try:
        return parse_marker(relative_path)
    except CorruptMetadataError:
        return None


def group_of_line(line: str) -> tuple[str, str]:
    """(partition, fileId) of a line already known to end with a marker suffix."""
    i = line.rfind("/")
    name = line[i + 1:]
    if name.startswith("."):
        name = name[1:]
    j = name.find("_")
    if j < 0:
        j = name.rfind(MARKER_INFIX)
    return (line[:i] if i >= 0 else "", name[:j])


def group_key(partition: str, file_id: str) -> str:
    """``partition/fileId`` (``fileId`` alone when unpartitioned): one string per file group.

    Batched checks compare these strings rather than tuples because they can be cut out of a
    marker line with one slice, which is what makes reading 100,000 markers affordable. A
    fileId never contains ``/``, so :func:`split_group_key` inverts it.
    """
    return f"{partition}/{file_id}" if partition else file_id


def split_group_key(key: str) -> tuple[str, str]:
    partition, _, file_id = key.rpartition("/")
    return (partition, file_id)


def _keys_of_text(text: str, lines) -> frozenset[str] | set[str]:
    """The group keys of a MARKERS file's text, in bulk.

    The fast path cuts each marker line at the first ``_`` after its last ``/`` (a base file is
    ``<fileId>_<token>_<t>.<ext>``), in one comprehension over the text. Two shapes it gets
    wrong are detected with whole-text searches (C speed) and sent down the exact per-line
    path instead: log-file names, which start with a dot, and names without any ``_`` (the
    cut then runs into the marker suffix). ``lines`` gives the parsed lines for that path.
    """
    if "/." not in text and "\n." not in text and not text.startswith(".") and "\r" not in text:
        keys = {line[:line.find("_", line.rfind("/") + 1)]
                for line in text.split("\n") if line.endswith(MARKER_SUFFIXES)}
        if MARKER_INFIX not in "\n".join(keys):
            return keys
    return frozenset(group_key(*group_of_line(line)) for line in lines())


# --- batched marker files: tolerant parsing, cached by (size, mtime) -------------------------


class MarkerFileContent:
    """The complete marker lines of one MARKERS file, with derived views built on demand
    (a checker mostly needs only :attr:`keys`)."""

    __slots__ = ("_text", "_lines", "_keys", "_groups", "_by_partition", "_markers")

    def __init__(self, text: str = ""):
        self._text = text
        self._lines: tuple[str, ...] | None = None
        self._keys: frozenset[str] | set[str] | None = None
        self._groups: frozenset[tuple[str, str]] | None = None
        self._by_partition: dict[str, frozenset[str]] | None = None
        self._markers: tuple[Marker, ...] | None = None

    @property
    def lines(self) -> tuple[str, ...]:
        if self._lines is None:
            self._lines = _lines_of(self._text)
        return self._lines

    @property
    def keys(self) -> "frozenset[str] | set[str]":
        """:func:`group_key` of every marker in the file (do not modify)."""
        if self._keys is None:
            self._keys = _keys_of_text(self._text, lambda: self.lines)
        return self._keys

    @property
    def file_groups(self) -> frozenset[tuple[str, str]]:
        if self._groups is None:
            self._groups = frozenset(split_group_key(k) for k in self.keys)
        return self._groups

    def file_ids_by_partition(self) -> dict[str, frozenset[str]]:
        if self._by_partition is None:
            acc: dict[str, set[str]] = {}
            for part, fid in self.file_groups:
                acc.setdefault(part, set()).add(fid)
            self._by_partition = {p: frozenset(v) for p, v in acc.items()}
        return self._by_partition

    @property
    def markers(self) -> tuple[Marker, ...]:
        if self._markers is None:
            out = []
            for line in self.lines:
                m = _try_parse(line)
                if m is not None:
                    out.append(m)
            self._markers = tuple(out)
        return self._markers


EMPTY_CONTENT = MarkerFileContent("")


def parse_marker_lines(data: bytes) -> tuple[str, ...]:
    """Marker lines of a MARKERS file's bytes; never raises.

    Lines that do not end in a marker suffix are skipped. That also drops a last line cut
    mid-way by a concurrent rewrite: a cut line cannot end in ``.marker.<TYPE>`` unless the cut
    fell exactly before its newline, in which case the line is whole and is kept.
    """
    return _lines_of(data.decode("utf-8", errors="replace")) if data else ()


def _lines_of(text: str) -> tuple[str, ...]:
    if "\r" in text:  # written on Windows: tolerate CRLF
        text = text.replace("\r\n", "\n")
    return tuple([line for line in text.split("\n") if line.endswith(MARKER_SUFFIXES)])


_CACHE_LOCK = threading.Lock()
_FILE_CACHE: "OrderedDict[tuple[str, str], tuple[tuple[int, int], MarkerFileContent]]" = OrderedDict()
_FILE_CACHE_SIZE = 8192


def stat_key(storage, path: str) -> tuple[int, int] | None:
    """(size, mtime in ns) of a file, or None if it is missing or the backend gives no mtime."""
    try:
        if storage.is_local:
            st = os.stat(path)
            return (st.st_size, st.st_mtime_ns)
        return (storage.size(path), int(storage.mtime(path) * 1e9))
    except FileNotFoundError:
        return None
    except Exception:  # a backend without modification times: read, do not cache
        return None


def read_marker_file(storage, path: str) -> MarkerFileContent:
    """The content of one MARKERS file, cached while its (size, mtime) do not change.

    A MARKERS file only ever grows (its writer appends and replaces it whole), so a new version
    always differs in size, and a cached parse can never hide a newer marker. A read that does
    not match the size seen just before it (the file was being replaced) is used for this
    round but not cached. A missing file reads as empty.
    """
    key = stat_key(storage, path)
    ck = (storage.protocol, path)
    if key is not None:
        with _CACHE_LOCK:
            hit = _FILE_CACHE.get(ck)
            if hit is not None and hit[0] == key:
                _FILE_CACHE.move_to_end(ck)
                return hit[1]
    try:
        data = storage.read(path)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return EMPTY_CONTENT
    except OSError:
        return EMPTY_CONTENT  # RFC-56: a file we cannot read this round is empty this round
    content = MarkerFileContent(data.decode("utf-8", errors="replace"))
    if key is not None and len(data) == key[0]:
        with _CACHE_LOCK:
            _FILE_CACHE[ck] = (key, content)
            _FILE_CACHE.move_to_end(ck)
            while len(_FILE_CACHE) > _FILE_CACHE_SIZE:
                _FILE_CACHE.popitem(last=False)
    return content


# --- the marker folder of one instant ---------------------------------------------------------


def marker_dir(table, instant_time: str) -> str:
    return table.storage.path(*TEMP_FOLDER, instant_time)


def markers_file_names(names: Iterable[str]) -> list[str]:
    """``MARKERS<n>`` names among a folder listing, in index order."""
    found = []
    for n in names:
        m = MARKERS_FILE_RE.match(n)
        if m:
            found.append((int(m.group(1)), n))
    return [n for _, n in sorted(found)]


def read_marker_type(table, instant_time: str) -> MarkerType | None:
    """The type recorded in ``MARKERS.type``, or None when there is none (direct markers)."""
    path = table.storage.path(*TEMP_FOLDER, instant_time, MARKERS_TYPE_FILE)
    try:
        raw = table.storage.read(path).decode("utf-8", errors="replace").strip()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    try:
        return MarkerType[raw.upper()]
    except KeyError:
        raise CorruptMetadataError(f"{path} holds {raw!r}, not a marker type", path=path,
                                   base_path=table.base_uri,
                                   remedy="it should read TIMELINE_SERVER_BASED; fix or delete it "
                                          "after checking which writer owns the folder") from None


class WriteMarkers(ABC):
    """The markers of one instant. Create before the data file; delete after completion."""

    marker_type: MarkerType

    def __init__(self, table, instant_time: str):
        self.table = table
        self.instant_time = instant_time
        self.storage = table.storage
        self.dir = marker_dir(table, instant_time)

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
        partition = _normalise_partition(partition)
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

    def delete_all(self) -> None:
        """Remove the instant's marker folder (after completion, or after a rollback)."""
        self.storage.delete_dir(self.dir)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.instant_time})"


def _marker_of(partition: str, data_file_name: str, io_type: IOType | str) -> Marker:
    partition = _normalise_partition(partition)
    _validate_name(data_file_name)
    io = io_type if isinstance(io_type, IOType) else IOType(str(io_type).upper())
    return Marker(partition, data_file_name, io)


class DirectWriteMarkers(WriteMarkers):
    """One empty file per marker (Hudi's DIRECT markers)."""

    marker_type = MarkerType.DIRECT

    def _path(self, marker: Marker) -> str:
        return self.storage.path(*TEMP_FOLDER, self.instant_time, marker.relative_path)

    def create(self, partition: str, data_file_name: str, io_type: IOType | str) -> Marker:
        marker = _marker_of(partition, data_file_name, io_type)
        try:
            self.storage.create_if_absent(self._path(marker), b"")
        except FileExistsError:
            pass  # already there: markers are idempotent (a retried task, a second call)
        return marker

    def all_markers(self) -> list[Marker]:
        out = []
        for rel in sorted(self.storage.walk_files(self.dir)):
            if rel.endswith(MARKER_SUFFIXES):
                m = _try_parse(rel)
                if m is not None:
                    out.append(m)
        return out

    def markers_in_partition(self, partition: str) -> list[Marker]:
        partition = _normalise_partition(partition)
        folder = self.storage.path(*TEMP_FOLDER, self.instant_time, partition)
        out = []
        for name in sorted(self.storage.list_names(folder)):
            if name.endswith(MARKER_SUFFIXES):
                m = _try_parse(f"{partition}/{name}" if partition else name)
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
        markers = [_marker_of(p, n, t) for p, n, t in items]
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
        partition = _normalise_partition(partition)
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


def list_marker_instants(table) -> list[str]:
    """Instant times that have a marker folder under ``.hoodie/.temp`` (ascending)."""
    return sorted(n for n in table.storage.list_dirs(table.temp_dir) if INSTANT_DIR_RE.match(n))


__all__ = [
    "BatchedWriteMarkers", "DirectWriteMarkers", "IOType", "Marker", "MarkerFileContent",
    "WriteMarkers", "file_id_of", "group_key", "split_group_key", "list_marker_instants", "marker_dir", "markers_file_names",
    "markers_for", "parse_marker", "parse_marker_lines", "read_marker_file", "read_marker_type",
    "stat_key",
]
