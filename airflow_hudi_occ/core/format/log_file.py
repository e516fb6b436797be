"""Hudi's log file format (merge-on-read delta files), as a codec: names and blocks.

A merge-on-read write does not rewrite a file group's base file; it appends *log blocks* to a
log file of the file group's latest file slice, and readers merge them over the base file.
This module turns blocks into bytes and back, and log-file names into their parts and back,
with nothing else: no storage, no timeline. It is what Java Hudi's ``HoodieLogFormatWriter``,
``HoodieLogBlock`` and ``HoodieLogFile`` define, for log format version 1 and block content
version 3 (the only ones Hudi 1.x writes and hudi-rs reads).

**Name** (:class:`LogFileName`): ``.<fileId>_<instant>.log.<version>_<writeToken>``. In table
version 8 the instant is the *deltacommit's* requested time (Hudi 1.0's completion-time file
slicing: a reader puts a log file into the slice whose base instant is the latest at or before
the deltacommit's completion time), so every deltacommit writes its own new log file and a
rollback deletes it whole. In table version 6 it was the base file's instant and writers
appended to one file; that layout is not written here.

**Block** (:func:`encode_block` / :func:`decode_blocks`), all integers big-endian::

    magic "#HUDI#" | block length: long (everything after it) | format version: int (1)
    | block type: int | header: int count, then (int key, int length, UTF-8 value) each
    | content length: long | content | footer (same layout as the header; empty)
    | reverse pointer: long (bytes from the magic to the end of the footer)

Contents: AVRO_DATA (int 3, int record count, then each record as int size + Avro binary
datum in the header's SCHEMA), PARQUET_DATA (a whole parquet file), DELETE (int 3, int size,
one Avro ``HoodieDeleteRecordList`` datum), COMMAND (empty; header COMMAND_BLOCK_TYPE "0" =
rollback of the instant in TARGET_INSTANT_TIME).

Errors: :class:`LogFormatError` (a ``ValueError``) for bytes that are not a log file; a
reader that may meet a file being written treats a truncated last block as absent
(``decode_blocks(..., allow_truncated_tail=True)``), as Java's reader turns it into a corrupt
block it skips.
"""

from __future__ import annotations

import enum
import io
import json
import re
import struct
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_hudi_occ.core.format.layout import META_COLUMNS

MAGIC = b"#HUDI#"
#: the log format version Hudi has written since 0.5 (has block type, header, footer, lengths)
LOG_FORMAT_VERSION = 1
#: the version of AVRO_DATA and DELETE block contents (v3: Avro delete records, sized records)
BLOCK_CONTENT_VERSION = 3
LOG_EXTENSION = "log"
#: COMMAND_BLOCK_TYPE of a rollback command block (the ordinal of Hudi's ROLLBACK_BLOCK)
ROLLBACK_COMMAND = "0"


class LogFormatError(ValueError):
    """Bytes or a name that are not Hudi's log format."""


class _Truncated(LogFormatError):
    """The bytes end inside a block (a writer died mid-append, or is still appending)."""


class BlockType(enum.IntEnum):
    """Hudi's ``HoodieLogBlockType`` ordinals, as written in the block."""

    COMMAND = 0
    DELETE = 1
    CORRUPTED = 2
    AVRO_DATA = 3
    HFILE_DATA = 4
    PARQUET_DATA = 5
    CDC_DATA = 6


class HeaderKey(enum.IntEnum):
    """Hudi's ``HeaderMetadataType`` ordinals (the keys of the header and footer maps)."""

    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6
    IS_PARTIAL = 7
    BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS = 8


# --- names --------------------------------------------------------------------------------

# The fileId never starts with a dot: ``..<log name>.crc`` is the checksum file Hadoop's local
# file system writes beside each file Java Hudi writes (hidden from Java's own listings).
_NAME_RE = re.compile(r"^\.([^._][^_]*)_(\d{14}|\d{17})\.([a-z]+)\.(\d+)_([^_]+)$")


@dataclass(frozen=True, order=True)
class LogFileName:
    """A log file's name: file group, instant, version (rolled-over files count up), token."""

    file_id: str
    instant_time: str
    version: int = 1
    write_token: str = "0-0-0"
    extension: str = LOG_EXTENSION

    @property
    def name(self) -> str:
        if "_" in self.file_id:
            raise ValueError(f"fileId must not contain '_': {self.file_id!r}")
        return (f".{self.file_id}_{self.instant_time}.{self.extension}."
                f"{self.version}_{self.write_token}")

    def __str__(self) -> str:
        return self.name

    @classmethod
    def parse(cls, name: str) -> "LogFileName | None":
        """The parts of a log file's name, or None for any other name (base files,
        ``.hoodie_partition_metadata``, cdc files, Hadoop's ``.crc`` checksum files)."""
        m = _NAME_RE.match(name)
        if not m or m.group(3) != LOG_EXTENSION:
            return None
        return cls(m.group(1), m.group(2), int(m.group(4)), m.group(5), m.group(3))


def is_log_file_name(name: str) -> bool:
    return LogFileName.parse(name) is not None


# --- blocks -------------------------------------------------------------------------------


@dataclass
class LogBlock:
    """One block: its type, header, raw content and footer; decoded lazily by the helpers
    below (a reader skipping blocks of rolled-back instants never decodes them)."""

    block_type: BlockType
    header: dict[HeaderKey, str] = field(default_factory=dict)
    content: bytes = b""
    footer: dict[HeaderKey, str] = field(default_factory=dict)

    @property
    def instant_time(self) -> str | None:
        return self.header.get(HeaderKey.INSTANT_TIME)

    @property
    def target_instant_time(self) -> str | None:
        return self.header.get(HeaderKey.TARGET_INSTANT_TIME)

    @property
    def schema(self) -> str | None:
        return self.header.get(HeaderKey.SCHEMA)

    @property
    def is_rollback(self) -> bool:
        return (self.block_type is BlockType.COMMAND
                and self.header.get(HeaderKey.COMMAND_BLOCK_TYPE) == ROLLBACK_COMMAND)


def _encode_map(m: Mapping[HeaderKey, str]) -> bytes:
    out = [struct.pack(">i", len(m))]
    for k, v in m.items():
        raw = v.encode("utf-8")
        out.append(struct.pack(">ii", int(k), len(raw)))
        out.append(raw)
    return b"".join(out)


def encode_block(block: LogBlock) -> bytes:
    """The bytes of one block, as ``HoodieLogFormatWriter.appendBlocks`` lays them out."""
    header = _encode_map(block.header)
    footer = _encode_map(block.footer)
    # version + type + header + content length + content + footer + reverse pointer
    length = 4 + 4 + len(header) + 8 + len(block.content) + len(footer) + 8
    body = b"".join([
        MAGIC, struct.pack(">q", length), struct.pack(">ii", LOG_FORMAT_VERSION, int(block.block_type)),
        header, struct.pack(">q", len(block.content)), block.content, footer])
    return body + struct.pack(">q", len(body))


def encode_blocks(blocks: Iterable[LogBlock]) -> bytes:
    return b"".join(encode_block(b) for b in blocks)


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise _Truncated(f"truncated log block at byte {self.pos} (needs {n} more)")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def long(self) -> int:
        return struct.unpack(">q", self.take(8))[0]


def _decode_map(r: _Reader) -> dict[HeaderKey, str]:
    out: dict[HeaderKey, str] = {}
    for _ in range(r.int()):
        key = r.int()
        value = r.take(r.int()).decode("utf-8")
        try:
            out[HeaderKey(key)] = value
        except ValueError as e:
            raise LogFormatError(f"unknown log block header key {key}") from e
    return out


def decode_blocks(data: bytes, *, allow_truncated_tail: bool = False) -> list[LogBlock]:
    """Every block of a log file's bytes, in file order."""
    blocks: list[LogBlock] = []
    r = _Reader(data)
    while r.pos < len(data):
        start = r.pos
        try:
            if r.take(len(MAGIC)) != MAGIC:
                raise LogFormatError(f"no log block magic at byte {start}")
            length = r.long()
            end = r.pos + length
            version = r.int()
            if version != LOG_FORMAT_VERSION:
                raise LogFormatError(f"log format version {version} at byte {start}; only "
                                     f"{LOG_FORMAT_VERSION} is read")
            try:
                btype = BlockType(r.int())
            except ValueError as e:
                raise LogFormatError(f"unknown log block type at byte {start}") from e
            header = _decode_map(r)
            content = r.take(r.long())
            footer = _decode_map(r)
            pointer = r.long()
            if r.pos != end or pointer != end - 8 - start:
                raise LogFormatError(f"log block at byte {start} has inconsistent lengths")
        except _Truncated:
            if allow_truncated_tail:
                break
            raise
        blocks.append(LogBlock(btype, header, content, footer))
    return blocks


# --- contents -----------------------------------------------------------------------------


def table_avro_schema(data_schema: Mapping[str, Any]) -> dict:
    """The table's Avro record schema with Hudi's five meta fields first (nullable strings),
    as Java writes ``writeSchemaWithMetaFields`` into data block headers."""
    fields = [f for f in data_schema["fields"] if f["name"] not in META_COLUMNS]
    meta = [{"name": c, "type": ["null", "string"], "default": None} for c in META_COLUMNS]
    return {**data_schema, "fields": meta + fields}


def avro_data_block(instant_time: str, schema_json: str, records: Iterable[Mapping[str, Any]]) -> LogBlock:
    """An AVRO_DATA block of ``records`` (dicts with the meta fields) in ``schema_json``."""
    parsed = fastavro.parse_schema(json.loads(schema_json))
    parts: list[bytes] = []
    n = 0
    buf = io.BytesIO()
    for rec in records:
        buf.seek(0)
        buf.truncate()
        fastavro.schemaless_writer(buf, parsed, rec)
        raw = buf.getvalue()
        parts.append(struct.pack(">i", len(raw)))
        parts.append(raw)
        n += 1
    content = struct.pack(">ii", BLOCK_CONTENT_VERSION, n) + b"".join(parts)
    return LogBlock(BlockType.AVRO_DATA, {HeaderKey.INSTANT_TIME: instant_time,
                                          HeaderKey.SCHEMA: schema_json}, content)


def read_avro_records(block: LogBlock) -> list[dict]:
    """The records of an AVRO_DATA block, decoded with the block's own header schema."""
    if block.block_type is not BlockType.AVRO_DATA:
        raise LogFormatError(f"not an Avro data block: {block.block_type.name}")
    parsed = fastavro.parse_schema(json.loads(block.schema or "null"))
    r = _Reader(block.content)
    version = r.int()
    if version != BLOCK_CONTENT_VERSION:
        raise LogFormatError(f"Avro data block content version {version}; only "
                             f"{BLOCK_CONTENT_VERSION} is read")
    out = []
    for _ in range(r.int()):
        raw = r.take(r.int())
        out.append(fastavro.schemaless_reader(io.BytesIO(raw), parsed, parsed))
    return out


def parquet_data_block(instant_time: str, schema_json: str, table: pa.Table) -> LogBlock:
    """A PARQUET_DATA block: the rows (meta columns first) as one whole parquet file."""
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return LogBlock(BlockType.PARQUET_DATA, {HeaderKey.INSTANT_TIME: instant_time,
                                             HeaderKey.SCHEMA: schema_json}, sink.getvalue())


def read_parquet_block(block: LogBlock) -> pa.Table:
    if block.block_type is not BlockType.PARQUET_DATA:
        raise LogFormatError(f"not a parquet data block: {block.block_type.name}")
    return pq.read_table(io.BytesIO(block.content))


#: Hudi's ``HoodieDeleteRecordList`` (log block content version 3): the ordering value is a
#: union whose branch carries its type, so a reader compares it with the data's ordering field
DELETE_RECORD_LIST_SCHEMA = {
    "namespace": "org.apache.hudi.avro.model", "type": "record", "name": "HoodieDeleteRecordList",
    "fields": [{"name": "deleteRecordList", "type": {"type": "array", "items": {
        "name": "HoodieDeleteRecord", "type": "record", "fields": [
            {"name": "recordKey", "type": ["null", "string"], "default": None},
            {"name": "partitionPath", "type": ["null", "string"], "default": None},
            {"name": "orderingVal", "default": None, "type": [
                "null", "int", "long", "float", "double", "bytes", "string",
                {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15},
                {"type": "int", "logicalType": "date"},
                {"type": "int", "logicalType": "time-millis"},
                {"type": "long", "logicalType": "time-micros"},
                {"type": "long", "logicalType": "timestamp-millis"},
                {"type": "long", "logicalType": "timestamp-micros"}]}]}}}]}
_DELETE_PARSED = fastavro.parse_schema(DELETE_RECORD_LIST_SCHEMA)
#: union branches by the Avro type of the ordering field (fastavro's (type, value) tuples)
_ORDERING_BRANCH = {"int": "int", "long": "long", "float": "float", "double": "double",
                    "string": "string", "bytes": "bytes"}


@dataclass(frozen=True)
class DeleteRecord:
    record_key: str
    partition_path: str
    #: the ordering value and its Avro type ("long", "int", ...); None for no value
    ordering_value: Any = None
    ordering_type: str | None = None


def delete_block(instant_time: str, schema_json: str, records: Iterable[DeleteRecord]) -> LogBlock:
    """A DELETE block. hudi-rs refuses a delete block whose first record has a null ordering
    value, and compares ordering values typed as the table's ordering field: pass a value of
    that field's type (Hudi writes 0 for a delete without one: "delete whatever came before")."""
    items = []
    for d in records:
        if d.ordering_value is None:
            ov = None
        else:
            branch = _ORDERING_BRANCH.get(d.ordering_type or "")
            if branch is None:
                raise ValueError(f"unsupported ordering value type {d.ordering_type!r}")
            ov = (branch, d.ordering_value)
        items.append({"recordKey": d.record_key, "partitionPath": d.partition_path,
                      "orderingVal": ov})
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _DELETE_PARSED, {"deleteRecordList": items})
    raw = buf.getvalue()
    content = struct.pack(">ii", BLOCK_CONTENT_VERSION, len(raw)) + raw
    return LogBlock(BlockType.DELETE, {HeaderKey.INSTANT_TIME: instant_time,
                                       HeaderKey.SCHEMA: schema_json}, content)


def read_delete_records(block: LogBlock) -> list[DeleteRecord]:
    if block.block_type is not BlockType.DELETE:
        raise LogFormatError(f"not a delete block: {block.block_type.name}")
    r = _Reader(block.content)
    version = r.int()
    if version != BLOCK_CONTENT_VERSION:
        raise LogFormatError(f"delete block content version {version}; only "
                             f"{BLOCK_CONTENT_VERSION} is read")
    raw = r.take(r.int())
    rec = fastavro.schemaless_reader(io.BytesIO(raw), _DELETE_PARSED, _DELETE_PARSED)
    out = []
    for d in rec["deleteRecordList"]:
        # the union branch (int or long, ...) is not kept by fastavro: the type stays unknown
        out.append(DeleteRecord(d["recordKey"], d["partitionPath"], d["orderingVal"]))
    return out


def rollback_block(instant_time: str, target_instant_time: str) -> LogBlock:
    """A COMMAND block telling readers to ignore every block of ``target_instant_time``
    (how Hudi rolls back a failed append to a log file it cannot delete)."""
    return LogBlock(BlockType.COMMAND, {HeaderKey.INSTANT_TIME: instant_time,
                                        HeaderKey.TARGET_INSTANT_TIME: target_instant_time,
                                        HeaderKey.COMMAND_BLOCK_TYPE: ROLLBACK_COMMAND})


__all__ = ["MAGIC", "LOG_FORMAT_VERSION", "BLOCK_CONTENT_VERSION", "ROLLBACK_COMMAND",
           "LogFormatError", "BlockType", "HeaderKey", "LogFileName", "is_log_file_name",
           "LogBlock", "encode_block", "encode_blocks", "decode_blocks", "table_avro_schema",
           "avro_data_block", "read_avro_records", "parquet_data_block", "read_parquet_block",
           "DeleteRecord", "delete_block", "read_delete_records", "rollback_block",
           "DELETE_RECORD_LIST_SCHEMA"]
