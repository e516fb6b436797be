"""Hudi's index ids: the hashed pieces of the metadata table's column and partition stats keys.

Java's ``ColumnIndexID`` and ``PartitionIndexID`` are the 64-bit XXH64 hash (seed
``0xdabadaba``, the Java int sign-extended to the long seed ``hash64`` takes) of the UTF-8
name, written big-endian; ``FileIndexID`` is the MD5 of the file name. Each is written into a
key as standard base64 with padding (``Base64CodecUtil.encode``): 12 characters for the
8-byte ids, 24 for the file's 16. A column stats key is column + partition + file, a
partition stats key column + partition (:mod:`.column_stats_record`).

XXH64 is written out here (the public algorithm, about thirty lines) rather than taken from
the ``xxhash`` package: it hashes a few short names per commit, and the core library's
dependency set stays fsspec, fastavro, kazoo and pyarrow. Checked against the reference
vectors of the algorithm and against keys Java wrote (tests/core/format/test_index_id.py).
"""

from __future__ import annotations

import base64
import hashlib
import struct

_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5
_M = (1 << 64) - 1

#: Hudi's HASH_SEED (an int, 0xdabadaba), as the long Java passes to XXHash64
HUDI_SEED = 0xDABADABA - (1 << 32) & _M


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M, 31) * _P1) & _M


def _merge(acc: int, val: int) -> int:
    return ((acc ^ _round(0, val)) * _P1 + _P4) & _M


def xxh64(data: bytes, seed: int = 0) -> int:
    """XXH64 of ``data`` as an unsigned 64-bit integer."""
    seed &= _M
    n = len(data)
    i = 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed, (seed - _P1) & _M]
        while i + 32 <= n:
            lanes = struct.unpack_from("<4Q", data, i)
            v = [_round(a, lane) for a, lane in zip(v, lanes)]
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
        for a in v:
            h = _merge(h, a)
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 8 <= n:
        (lane,) = struct.unpack_from("<Q", data, i)
        h = ((_rotl(h ^ _round(0, lane), 27) * _P1) + _P4) & _M
        i += 8
    if i + 4 <= n:
        (word,) = struct.unpack_from("<I", data, i)
        h = ((_rotl(h ^ (word * _P1 & _M), 23) * _P2) + _P3) & _M
        i += 4
    while i < n:
        h = (_rotl(h ^ (data[i] * _P5 & _M), 11) * _P1) & _M
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    h ^= h >> 32
    return h


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def column_id(column: str) -> str:
    """``ColumnIndexID(column).asBase64EncodedString()``."""
    return _b64(struct.pack(">Q", xxh64(column.encode("utf-8"), HUDI_SEED)))


def partition_id(partition: str) -> str:
    """``PartitionIndexID(partition).asBase64EncodedString()`` (the caller passes Hudi's
    identifier: ``.`` for a table without partitions)."""
    return _b64(struct.pack(">Q", xxh64(partition.encode("utf-8"), HUDI_SEED)))


def file_id(file_name: str) -> str:
    """``FileIndexID(file_name).asBase64EncodedString()``: the MD5 of the file's name."""
    return _b64(hashlib.md5(file_name.encode("utf-8")).digest())


__all__ = ["xxh64", "HUDI_SEED", "column_id", "partition_id", "file_id"]
