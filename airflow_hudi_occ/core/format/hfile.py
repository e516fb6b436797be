"""HFile version 3, the file format of Hudi's metadata table, as Hudi 1.x writes and reads it.

Hudi's metadata table (``.hoodie/metadata``) keeps its records in HFiles: as base files of its
file groups, and as the content of the HFile data blocks in its log files. To keep that table
up to date (issue 32) this project has to write HFiles Java Hudi and hudi-rs read, so this module
is a codec for the subset of HFile v3 that Hudi uses (hudi-io's ``hfile_format.md``; Hudi's own
writer is ``org.apache.hudi.io.hfile.HFileWriterImpl``, its reader ``HFileReaderImpl``, and
hudi-rs has ``crates/core/src/hfile``):

- sorted key-value pairs in data blocks (keys are UTF-8 strings, stored as HBase ``KeyValue``
  keys: a 2-byte length, the bytes, then a column-family length 0, the "latest" timestamp and
  the ``Put`` type, which Hudi's readers skip);
- named meta blocks (Hudi puts a bloom filter under ``bloomFilter``);
- a single-level root data index, a meta index, the file-info map and the 4,096-byte trailer.

Blocks are written the way Hudi 1.2 writes them (compared byte for byte with a metadata-table
base file Java wrote): GZ-compressed by default (``NONE`` on request), the checksum type
``NULL`` with its zero checksum bytes still counted in the on-disk size, the previous-block
offset ``-1``, and index keys without the ``KeyValue`` tail. The reader also accepts what HBase
writes (CRC32/CRC32C checksums are skipped, not verified) except multi-level indexes and
encoded data blocks, which Hudi never writes; it raises :class:`CorruptMetadataError` on
anything it cannot parse.

The trailer and the file-info block are two small fixed protobuf messages; they are encoded
here with the wire format's two primitives (varints and length-delimited fields) rather than
making protobuf a runtime dependency of the core library for them.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from airflow_hudi_occ.core.errors import CorruptMetadataError

DATA_MAGIC = b"DATABLK*"
META_MAGIC = b"METABLKc"
ROOT_INDEX_MAGIC = b"IDXROOT2"
FILE_INFO_MAGIC = b"FILEINF2"
TRAILER_MAGIC = b'TRABLK"$'
PBUF_MAGIC = b"PBUF"

#: magic (8), on-disk size without header (4), uncompressed size without header (4),
#: previous block offset (8), checksum type (1), bytes per checksum (4), on-disk data size
#: with header (4)
HEADER = struct.Struct(">8siiqBii")
HEADER_SIZE = HEADER.size  # 33
TRAILER_SIZE = 4096
BYTES_PER_CHECKSUM = 16 * 1024
CHECKSUM_SIZE = 4
CHECKSUM_NULL = 0

COMPRESSION_GZ = 1
COMPRESSION_NONE = 2
COMPRESSIONS = {"GZ": COMPRESSION_GZ, "NONE": COMPRESSION_NONE}

#: the tail Hudi appends to every data-block key so that it parses as an HBase KeyValue key:
#: column-family length 0, timestamp Long.MAX_VALUE ("latest"), key type Put (4)
KEY_TAIL = b"\x00" + struct.pack(">q", 2 ** 63 - 1) + b"\x04"
KEY_TAIL_SIZE = len(KEY_TAIL)
#: Hudi's writer starts a new data block once the current one would pass this many bytes
DEFAULT_BLOCK_SIZE = 64 * 1024
#: what Hudi 1.2's metadata-table HFiles name as their comparator (readers ignore it)
HUDI_COMPARATOR = "org.apache.hudi.io.storage.HoodieHBaseKVComparator"
LAST_KEY = "hfile.LASTKEY"
MAX_MEMSTORE_TS_KEY = "MAX_MEMSTORE_TS_KEY"
KEY_VALUE_VERSION = "KEY_VALUE_VERSION"
AVG_KEY_LEN = "hfile.AVG_KEY_LEN"
AVG_VALUE_LEN = "hfile.AVG_VALUE_LEN"
CREATE_TIME_TS = "hfile.CREATE_TIME_TS"


def _corrupt(message: str, path: str | None) -> CorruptMetadataError:
    return CorruptMetadataError(f"not a readable HFile{f' ({path})' if path else ''}: {message}",
                                path=path, remedy="the file is damaged or not an HFile Hudi wrote; "
                                                  "restore it, or let Java Hudi rebuild the metadata table")


# -- protobuf wire format: the two primitives the trailer and file info need ----------------------

def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _pb_fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """The (field number, value) pairs of one message: varints as ints, length-delimited
    fields as bytes (the only two wire types these messages use)."""
    out, pos = [], 0
    while pos < len(buf):
        tag, pos = _read_varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _read_varint(buf, pos)
        elif wire == 2:
            n, pos = _read_varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        else:
            raise ValueError(f"unexpected protobuf wire type {wire}")
        out.append((number, value))
    return out


def _pb_varint_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _pb_bytes_field(number: int, value: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(value)) + value


# -- Hadoop WritableUtils VInt (block index key lengths) ------------------------------------------

def _write_vint(n: int) -> bytes:
    if -112 <= n <= 127:
        return struct.pack(">b", n)
    length, tmp = -112, n
    if tmp < 0:
        tmp, length = ~tmp, -120
    body = bytearray()
    while tmp:
        body.insert(0, tmp & 0xFF)
        tmp >>= 8
    return struct.pack(">b", length - len(body)) + bytes(body)


def _read_vint(buf: bytes, pos: int) -> tuple[int, int]:
    first = struct.unpack_from(">b", buf, pos)[0]
    pos += 1
    if first >= -112:
        return first, pos
    negative = first < -120
    size = (-119 - first) if negative else (-111 - first)
    value = 0
    for _ in range(size - 1):
        value = (value << 8) | buf[pos]
        pos += 1
    return (~value if negative else value), pos


# -- the model ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class HFileTrailer:
    """The trailer's fields (``TrailerProto``), as found or as written."""

    file_info_offset: int
    load_on_open_offset: int
    uncompressed_data_index_size: int
    total_uncompressed_bytes: int
    data_index_count: int
    meta_index_count: int
    entry_count: int
    num_data_index_levels: int
    first_data_block_offset: int
    last_data_block_offset: int
    comparator: str
    compression: int
    major_version: int = 3
    minor_version: int = 0

    _FIELDS = ("file_info_offset", "load_on_open_offset", "uncompressed_data_index_size",
               "total_uncompressed_bytes", "data_index_count", "meta_index_count", "entry_count",
               "num_data_index_levels", "first_data_block_offset", "last_data_block_offset")

    def encode(self) -> bytes:
        msg = b"".join(_pb_varint_field(i + 1, getattr(self, name)) for i, name in enumerate(self._FIELDS))
        msg += _pb_bytes_field(11, self.comparator.encode()) + _pb_varint_field(12, self.compression)
        body = TRAILER_MAGIC + _varint(len(msg)) + msg
        if len(body) > TRAILER_SIZE - 4:
            raise ValueError("HFile trailer too large")
        version = bytes([self.minor_version]) + self.major_version.to_bytes(3, "big")
        return body + b"\x00" * (TRAILER_SIZE - 4 - len(body)) + version

    @classmethod
    def decode(cls, raw: bytes) -> "HFileTrailer":
        if raw[:8] != TRAILER_MAGIC:
            raise ValueError(f"trailer magic {raw[:8]!r}")
        minor, major = raw[-4], int.from_bytes(raw[-3:], "big")
        if major != 3:
            raise ValueError(f"HFile major version {major} (only 3 is read)")
        n, pos = _read_varint(raw, 8)
        got = dict(_pb_fields(raw[pos:pos + n]))
        values = {name: int(got.get(i + 1, 0)) for i, name in enumerate(cls._FIELDS)}
        values["num_data_index_levels"] = int(got.get(8, 1))
        comparator = got.get(11, b"")
        return cls(**values, comparator=comparator.decode() if isinstance(comparator, bytes) else "",
                   compression=int(got.get(12, COMPRESSION_NONE)), major_version=major, minor_version=minor)


@dataclass
class HFile:
    """An HFile's content: its entries in key order (``(key, value)``, keys as str), its meta
    blocks by name, its file-info map and its trailer."""

    entries: list[tuple[str, bytes]]
    meta: dict[str, bytes] = field(default_factory=dict)
    file_info: dict[str, bytes] = field(default_factory=dict)
    trailer: HFileTrailer | None = None

    def get(self, key: str) -> bytes | None:
        """The value of ``key`` (the first one, should keys repeat), or None."""
        import bisect
        keys = [k for k, _ in self.entries]
        i = bisect.bisect_left(keys, key)
        return self.entries[i][1] if i < len(keys) and keys[i] == key else None


# -- writing ---------------------------------------------------------------------------------------

def _block(magic: bytes, payload: bytes, compression: int) -> bytes:
    data = gzip.compress(payload, mtime=0) if compression == COMPRESSION_GZ else payload
    with_header = HEADER_SIZE + len(data)
    checksums = -(-with_header // BYTES_PER_CHECKSUM) * CHECKSUM_SIZE  # NULL: zeros, still counted
    header = HEADER.pack(magic, len(data) + checksums, len(payload), -1, CHECKSUM_NULL,
                         BYTES_PER_CHECKSUM, with_header)
    return header + data + b"\x00" * checksums


def _data_key(key: bytes) -> bytes:
    if len(key) > 0x7FFF:
        raise ValueError(f"HFile key of {len(key)} bytes (at most 32767)")
    return struct.pack(">h", len(key)) + key + KEY_TAIL


def _index_entry(offset: int, size: int, key: bytes) -> bytes:
    return struct.pack(">qi", offset, size) + _write_vint(len(key)) + key


def write_hfile(entries: Iterable[tuple[str | bytes, bytes]] | Mapping[str, bytes], *,
                meta: Mapping[str, bytes] | None = None, file_info: Mapping[str, bytes] | None = None,
                compression: str = "GZ", block_size: int = DEFAULT_BLOCK_SIZE,
                comparator: str = HUDI_COMPARATOR, create_time_ms: int | None = None) -> bytes:
    """The bytes of an HFile holding ``entries`` (sorted here by key bytes; keys may repeat,
    in the order given), the named ``meta`` blocks and ``file_info``, to which the entries Hudi
    1.2's writer puts in every file are added as it encodes them (``hfile.LASTKEY``, the
    average key and value lengths, ``KEY_VALUE_VERSION``, ``MAX_MEMSTORE_TS_KEY``,
    ``hfile.CREATE_TIME_TS``: now, unless ``create_time_ms``). At least one entry: Hudi never
    writes an empty HFile and its reader expects a first data block."""
    if compression not in COMPRESSIONS:
        raise ValueError(f"HFile compression {compression!r}: one of {sorted(COMPRESSIONS)}")
    codec = COMPRESSIONS[compression]
    pairs = entries.items() if isinstance(entries, Mapping) else entries
    encoded = sorted(((k.encode() if isinstance(k, str) else bytes(k), bytes(v)) for k, v in pairs),
                     key=lambda kv: kv[0])
    if not encoded:
        raise ValueError("an HFile needs at least one entry")

    out = bytearray()
    index: list[bytes] = []
    first_offsets: list[int] = []
    block, block_first, block_bytes, payload_total = bytearray(), None, 0, 0
    last_key = b""

    def flush():
        nonlocal block, block_first, block_bytes, payload_total
        first_offsets.append(len(out))
        payload_total += len(block)
        raw = _block(DATA_MAGIC, bytes(block), codec)
        index.append(_index_entry(len(out), len(raw), struct.pack(">h", len(block_first)) + block_first))
        out.extend(raw)
        block, block_first, block_bytes = bytearray(), None, 0

    for key, value in encoded:
        kv_size = len(key) + len(value) + 9  # as Hudi's writer counts an entry against the block size
        if block and block_bytes + kv_size > block_size:
            flush()
        full_key = _data_key(key)
        block += struct.pack(">ii", len(full_key), len(value)) + full_key + value + b"\x00"  # MVCC 0
        if block_first is None:
            block_first = key
        block_bytes += kv_size
        last_key = key
    flush()
    last_data_block = first_offsets[-1]

    meta_index = []
    for name, payload in sorted((meta or {}).items()):
        raw = _block(META_MAGIC, bytes(payload), codec)
        meta_index.append(_index_entry(len(out), len(raw), name.encode()))
        out.extend(raw)

    load_on_open = len(out)
    root_payload = b"".join(index)
    out.extend(_block(ROOT_INDEX_MAGIC, root_payload, codec))
    out.extend(_block(ROOT_INDEX_MAGIC, b"".join(meta_index), codec))
    if create_time_ms is None:
        import time
        create_time_ms = int(time.time() * 1000)
    info = {**dict(file_info or {}),
            LAST_KEY: struct.pack(">h", len(last_key)) + last_key,
            AVG_KEY_LEN: struct.pack(">i", sum(len(k) for k, _ in encoded) // len(encoded)),
            AVG_VALUE_LEN: struct.pack(">i", sum(len(v) for _, v in encoded) // len(encoded)),
            KEY_VALUE_VERSION: struct.pack(">i", 1), MAX_MEMSTORE_TS_KEY: struct.pack(">q", 0),
            CREATE_TIME_TS: struct.pack(">q", create_time_ms)}
    proto = b"".join(_pb_bytes_field(1, _pb_bytes_field(1, k.encode()) + _pb_bytes_field(2, bytes(v)))
                     for k, v in info.items())
    file_info_offset = len(out)
    out.extend(_block(FILE_INFO_MAGIC, PBUF_MAGIC + _varint(len(proto)) + proto, codec))
    trailer = HFileTrailer(
        file_info_offset=file_info_offset, load_on_open_offset=load_on_open,
        # as Hudi 1.2 fills them in: the data blocks' uncompressed bytes here, the total unset
        uncompressed_data_index_size=payload_total, total_uncompressed_bytes=0,
        data_index_count=len(index), meta_index_count=len(meta_index), entry_count=len(encoded),
        num_data_index_levels=1, first_data_block_offset=0, last_data_block_offset=last_data_block,
        comparator=comparator, compression=codec)
    out.extend(trailer.encode())
    return bytes(out)


# -- reading ---------------------------------------------------------------------------------------

def _read_block(buf: bytes, offset: int, codec: int, magic: bytes | None) -> tuple[bytes, bytes, int]:
    """(magic, uncompressed payload, on-disk size with header) of the block at ``offset``."""
    if offset < 0 or offset + HEADER_SIZE > len(buf):
        raise ValueError(f"block offset {offset} outside the file")
    got, on_disk, uncompressed, _prev, _ctype, _bpc, data_with_header = HEADER.unpack_from(buf, offset)
    if magic is not None and got != magic:
        raise ValueError(f"block at {offset}: magic {got!r}, expected {magic!r}")
    if got == b"DATABLKE":
        raise ValueError("encoded data blocks (an HBase data block encoding) are not read")
    end = offset + data_with_header
    if on_disk < 0 or end > len(buf) or data_with_header < HEADER_SIZE:
        raise ValueError(f"block at {offset}: sizes outside the file")
    data = buf[offset + HEADER_SIZE:end]
    if codec == COMPRESSION_GZ:
        payload = zlib.decompress(data, 47)  # gzip or zlib framing
    elif codec == COMPRESSION_NONE:
        payload = data[:uncompressed]
    else:
        raise ValueError(f"compression codec {codec} (only GZ and NONE are read)")
    if len(payload) != uncompressed:
        raise ValueError(f"block at {offset}: {len(payload)} bytes, header says {uncompressed}")
    return got, payload, HEADER_SIZE + on_disk


def _read_index(payload: bytes, count: int) -> list[tuple[int, int, bytes]]:
    out, pos = [], 0
    for _ in range(count):
        offset, size = struct.unpack_from(">qi", payload, pos)
        n, pos = _read_vint(payload, pos + 12)
        out.append((offset, size, payload[pos:pos + n]))
        pos += n
    return out


def _entries(payload: bytes) -> Iterable[tuple[str, bytes]]:
    pos = 0
    while pos < len(payload):
        key_len, value_len = struct.unpack_from(">ii", payload, pos)
        key_start = pos + 8
        content_len = struct.unpack_from(">h", payload, key_start)[0]
        key = payload[key_start + 2:key_start + 2 + content_len]
        value_start = key_start + key_len
        yield key.decode(), payload[value_start:value_start + value_len]
        pos = value_start + value_len + 1  # the MVCC timestamp, a one-byte VLong 0 in Hudi's files
        if payload[pos - 1] != 0:
            raise ValueError("an entry with a non-zero MVCC timestamp")


def read_hfile(data: bytes, *, path: str | None = None) -> HFile:
    """Every entry, meta block and file-info pair of an HFile; :class:`CorruptMetadataError`
    (naming ``path``) if it is not one this reader can parse."""
    try:
        if len(data) < TRAILER_SIZE:
            raise ValueError(f"{len(data)} bytes, shorter than a trailer")
        trailer = HFileTrailer.decode(data[-TRAILER_SIZE:])
        if trailer.num_data_index_levels != 1:
            raise ValueError(f"a {trailer.num_data_index_levels}-level data index (Hudi writes one level)")
        codec = trailer.compression
        pos = trailer.load_on_open_offset
        _, root, size = _read_block(data, pos, codec, ROOT_INDEX_MAGIC)
        data_index = _read_index(root, trailer.data_index_count)
        _, meta_root, _ = _read_block(data, pos + size, codec, ROOT_INDEX_MAGIC)
        meta_index = _read_index(meta_root, trailer.meta_index_count)
        _, info_payload, _ = _read_block(data, trailer.file_info_offset, codec, FILE_INFO_MAGIC)
        if info_payload[:4] != PBUF_MAGIC:
            raise ValueError("file info without its PBUF magic")
        n, p = _read_varint(info_payload, 4)
        file_info = {}
        for number, pair in _pb_fields(info_payload[p:p + n]):
            if number == 1 and isinstance(pair, bytes):
                kv = dict(_pb_fields(pair))
                file_info[bytes(kv.get(1, b"")).decode()] = bytes(kv.get(2, b""))
        entries: list[tuple[str, bytes]] = []
        for offset, _size, _key in data_index:
            _, payload, _ = _read_block(data, offset, codec, DATA_MAGIC)
            entries.extend(_entries(payload))
        meta = {}
        for offset, _size, key in meta_index:
            _, payload, _ = _read_block(data, offset, codec, META_MAGIC)
            meta[key.decode()] = payload
        if len(entries) != trailer.entry_count:
            raise ValueError(f"{len(entries)} entries, the trailer says {trailer.entry_count}")
    except (ValueError, struct.error, zlib.error, UnicodeDecodeError, IndexError) as e:
        raise _corrupt(str(e), path) from e
    return HFile(entries=entries, meta=meta, file_info=file_info, trailer=trailer)


__all__ = ["HFile", "HFileTrailer", "write_hfile", "read_hfile", "COMPRESSIONS", "DEFAULT_BLOCK_SIZE",
           "HUDI_COMPARATOR"]
