"""The codec of marker names: what a marker says (partition, data file, IO type) and how it
is spelled, both ways.

``<partition>/<datafile>.marker.<IOTYPE>``, the same in both layouts (a direct marker's path,
a line of a batched MARKERS file); the file group of a marker is ``partition/fileId``.

- render: :func:`new_marker` checks what a writer is about to create (a partition that stays
  inside the instant's marker folder, a data file name without ``/``) and
  :attr:`Marker.relative_path` spells it;
- parse: :func:`parse_marker` reads one explicit path and raises
  :class:`~airflow_hudi_occ.core.errors.CorruptMetadataError` for anything that is not a
  marker; :func:`try_parse_marker` is the tolerant reader's form (``None`` instead), for
  folders and MARKERS files that may hold stray or half-written lines.

``parse_marker(m.relative_path) == m`` for every marker :func:`new_marker` accepts.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from airflow_hudi_occ.core.errors import CorruptMetadataError
from airflow_hudi_occ.core.format.partition_path import check_partition_path, leaves_problem

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


def marker_partition(partition: str | None) -> str:
    """The partition of a marker as markers spell it (no leading or trailing ``/``), kept
    inside the instant's marker folder (``core/format/partition_path``: no ``..``, ``.`` or
    empty segment; :class:`~airflow_hudi_occ.core.errors.UnsafePathError` otherwise)."""
    return check_partition_path((partition or "").strip("/"), source="a marker's partition")


def _validate_name(data_file_name: str) -> None:
    if not data_file_name or "/" in data_file_name or leaves_problem(data_file_name) is not None:
        raise ValueError(f"invalid data file name {data_file_name!r}")


def new_marker(partition: str | None, data_file_name: str, io_type: IOType | str) -> Marker:
    """The marker a writer is about to create, checked: the partition by
    :func:`marker_partition`, the data file name a single path segment (``ValueError``), the IO
    type one of :class:`IOType` (given as the enum or its name in any case)."""
    partition = marker_partition(partition)
    _validate_name(data_file_name)
    io = io_type if isinstance(io_type, IOType) else IOType(str(io_type).upper())
    return Marker(partition, data_file_name, io)


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
    if leaves_problem(partition) is not None:
        raise bad(f"bad partition path: {leaves_problem(partition)}")
    if not data_file_name or leaves_problem(data_file_name) is not None:
        raise bad("no data file name")
    if not file_id_of(data_file_name):
        raise bad("no fileId")
    return Marker(partition, data_file_name, io_type)


def try_parse_marker(relative_path: str) -> Marker | None:
    """:func:`parse_marker`, or ``None`` for what is not a marker: how a tolerant reader skips
    a stray file or a line cut by a concurrent rewrite."""
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
