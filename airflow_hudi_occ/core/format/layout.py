"""Where a Hudi table keeps things and what it names them.

Every other module asks here for the folder names, the meta columns, the base-file name and
the identity of a file group, so that a name is built (and parsed) in one place only; the
reader on the other side (Java Hudi, hudi-rs) parses the same names.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import NamedTuple

META_FOLDER = ".hoodie"
PROPERTIES_FILE = "hoodie.properties"
PARTITION_METADATA_FILE = ".hoodie_partition_metadata"

META_COLUMNS = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                "_hoodie_partition_path", "_hoodie_file_name")

BASE_FILE_RE = re.compile(r"^([^_]+)_([^_]+)_(\d{14}|\d{17})\.(parquet|orc|hfile)$")


class FileGroupId(NamedTuple):
    """A file group: its partition path ('' for a non-partitioned table) and its fileId.

    A tuple, so it still equals and hashes like the ``(partition, file_id)`` pairs that
    metadata and markers decode; ``str()`` is the ``partition/fileId`` name users see.
    """

    partition: str
    file_id: str

    def __str__(self) -> str:
        return f"{self.partition}/{self.file_id}" if self.partition else self.file_id

    @classmethod
    def parse(cls, name: str) -> "FileGroupId":
        """The inverse of ``str()``: the fileId is the last path segment."""
        partition, _, file_id = name.rpartition("/")
        return cls(partition, file_id)

    @classmethod
    def of(cls, pair) -> "FileGroupId":
        return pair if isinstance(pair, cls) else cls(*pair)


def file_group_names(groups) -> list[str]:
    """Sorted ``partition/fileId`` names of (partition, fileId) pairs."""
    return sorted(str(FileGroupId.of(g)) for g in groups)


def join_partition(partition: str, name: str) -> str:
    """A path relative to the table's base: ``name`` inside ``partition`` (or at the root)."""
    return posixpath.join(partition, name) if partition else name


@dataclass(frozen=True)
class BaseFile:
    partition: str
    file_id: str
    write_token: str
    instant_time: str
    name: str
    size: int = 0

    @property
    def relative_path(self) -> str:
        return join_partition(self.partition, self.name)

    @property
    def file_group(self) -> FileGroupId:
        return FileGroupId(self.partition, self.file_id)


def parse_base_file_name(name: str, partition: str = "") -> BaseFile | None:
    m = BASE_FILE_RE.match(name)
    if not m:
        return None
    return BaseFile(partition, m.group(1), m.group(2), m.group(3), name)


def base_file_name(file_id: str, write_token: str, instant_time: str, ext: str = "parquet") -> str:
    if "_" in file_id:
        raise ValueError(f"fileId must not contain '_': {file_id!r}")
    return f"{file_id}_{write_token}_{instant_time}.{ext}"


def base_file_path(partition: str, file_id: str, token: str, instant_time: str) -> str:
    return join_partition(partition, base_file_name(file_id, token, instant_time))


def bucket_id_of(file_id: str) -> str | None:
    """The bucket of a bucket-index fileId (its 8-digit numeric prefix), else None."""
    m = re.match(r"^(\d{8})", file_id)
    return m.group(1) if m else None
