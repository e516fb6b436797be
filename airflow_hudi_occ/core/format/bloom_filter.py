"""Hudi's ``DYNAMIC_V0`` bloom filter, as Java writes it into a metadata-table base HFile.

Every base HFile of Hudi's metadata table carries a ``bloomFilter`` meta block and names its type
in the file info (``bloomFilterTypeCode=DYNAMIC_V0``): Java's ``HoodieAvroHFileWriter`` adds each
record key to a ``HoodieDynamicBoundedBloomFilter`` and stores ``serializeToString()`` (Base64
of the Hadoop ``Writable`` form) as the block. Our metadata-table compaction
(:mod:`~airflow_hudi_occ.core.table.metadata_compaction`) writes the same bytes, so the block is
byte-identical to Java's for the same keys (checked against the base files Java wrote).

The layout (Hadoop's ``org.apache.hadoop.util.bloom``, which Hudi carries as its own copy):
the filter's header (version ``-1``, number of hashes, hash type ``1`` = Murmur, vector size),
then the dynamic filter's row capacity, the records in its last row, the number of rows, and
each row as a header plus its bit vector (bit ``i`` in byte ``i // 8`` at ``1 << i % 8``).
A key's positions are ``abs(h_i % vector_size)`` with ``h_0 = murmur(key, 0)`` and
``h_i = murmur(key, h_{i-1})``: Hadoop's MurmurHash 2 over the key's UTF-8 bytes.

Java's metadata table builds it with 10,000 entries a row at a false-positive rate of 1e-9
(431,328 bits, 30 hashes) and at most 100,000 entries (ten rows; past that the rows are reused
in turn, as Hadoop's dynamic filter does). Readers of the ``files`` partition never consult it:
it is there so the file matches Java's.
"""

from __future__ import annotations

import base64
import math
import struct
from typing import Iterable

import numpy as np

TYPE_CODE = "DYNAMIC_V0"
#: what Java's metadata table uses (HoodieStorageConfig's bloom defaults for its HFiles)
NUM_ENTRIES = 10_000
FPP = 0.000000001
MAX_ENTRIES = 100_000
_MURMUR = 1
_VERSION = -1
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def _int32(n: int) -> int:
    n &= _MASK
    return n - (1 << 32) if n & 0x80000000 else n


def murmur_hash(data: bytes, seed: int) -> int:
    """Hadoop's ``MurmurHash.hash(data, length, seed)`` (MurmurHash 2, signed 32-bit result;
    the tail bytes are sign-extended as Java's ``(int) byte`` casts them)."""
    length = len(data)
    h = (seed ^ length) & _MASK
    n4 = length >> 2
    for i in range(n4):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    left = length - (n4 << 2)
    if left:
        tail = data[length - left:]

        def signed(b: int) -> int:
            return b - 256 if b > 127 else b
        if left >= 3:
            h ^= (signed(tail[-3]) << 16) & _MASK
        if left >= 2:
            h ^= (signed(tail[-2]) << 8) & _MASK
        h ^= signed(tail[-1]) & _MASK
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return _int32(h)


def _signed(h: np.ndarray) -> np.ndarray:
    """uint32 hash values as Java's signed ints (int64 array)."""
    v = h.astype(np.int64)
    return np.where(v >= 1 << 31, v - (1 << 32), v)


def _by_length(keys: list[bytes]) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """``(length, indexes, bytes as a len(indexes) x length uint8 array)`` per key length."""
    by_len: dict[int, list[int]] = {}
    for i, k in enumerate(keys):
        by_len.setdefault(len(k), []).append(i)
    return [(length, np.asarray(idx), np.frombuffer(b"".join(keys[i] for i in idx), dtype=np.uint8)
             .reshape(len(idx), length)) for length, idx in by_len.items()]


def murmur_hash_many(keys: list[bytes], seeds: np.ndarray, *, groups=None) -> np.ndarray:
    """:func:`murmur_hash` of every key with its seed (``seeds``: Java ints, int64 array), at
    once: the keys are grouped by length (``groups``: :func:`_by_length`'s, when the caller
    hashes the same keys again), each group hashed with numpy's wrapping uint32 arithmetic. A
    metadata-table compaction adds every record key of the new base file to the filter, 30
    hashes each: on 1,000 partitions that was 28 s of the compaction's 43 s, all of it under the
    table lock. Signed ints in, signed ints out (int64 arrays)."""
    out = np.empty(len(keys), dtype=np.int64)
    m = np.uint32(_M)
    for length, ix, raw in (groups if groups is not None else _by_length(keys)):
        h = (seeds[ix] & _MASK).astype(np.uint32) ^ np.uint32(length & _MASK)
        n4 = length >> 2
        if n4:
            blocks = np.ascontiguousarray(raw[:, :n4 * 4]).view("<u4").astype(np.uint32)
            for j in range(n4):
                k = blocks[:, j] * m
                k ^= k >> np.uint32(24)
                k *= m
                h *= m
                h ^= k
        left = length - (n4 << 2)
        if left:
            tail = raw[:, length - left:].view(np.int8).astype(np.int64)  # Java's (int) byte
            if left >= 3:
                h ^= ((tail[:, -3] << 16) & _MASK).astype(np.uint32)
            if left >= 2:
                h ^= ((tail[:, -2] << 8) & _MASK).astype(np.uint32)
            h ^= (tail[:, -1] & _MASK).astype(np.uint32)
            h *= m
        h ^= h >> np.uint32(13)
        h *= m
        h ^= h >> np.uint32(15)
        out[ix] = _signed(h)
    return out


def positions_many(keys: list[bytes], num_hashes: int, vector_size: int) -> np.ndarray:
    """Every key's bit positions (``len(keys) x num_hashes``), as :func:`_positions` gives one
    key's."""
    seeds = np.zeros(len(keys), dtype=np.int64)
    out = np.empty((len(keys), num_hashes), dtype=np.int64)
    groups = _by_length(keys)
    for j in range(num_hashes):
        seeds = murmur_hash_many(keys, seeds, groups=groups)
        out[:, j] = np.abs(np.fmod(seeds, vector_size))  # C's and Java's %: the dividend's sign
    return out


def _positions(key: bytes, num_hashes: int, vector_size: int) -> list[int]:
    out, seed = [], 0
    for _ in range(num_hashes):
        seed = murmur_hash(key, seed)
        out.append(abs(int(math.fmod(seed, vector_size))))  # Java's % keeps the dividend's sign
    return out


class DynamicBloomFilter:
    """Hudi's ``HoodieDynamicBoundedBloomFilter``: rows of ``num_entries`` keys each, at most
    ``max_entries`` in all (see the module doc)."""

    def __init__(self, num_entries: int = NUM_ENTRIES, fpp: float = FPP, max_entries: int = MAX_ENTRIES):
        self.num_entries = num_entries
        self.vector_size = int(math.ceil(num_entries * (-math.log(fpp) / (math.log(2) ** 2))))
        self.num_hashes = int(math.ceil(math.log(2) * self.vector_size / num_entries))
        self.max_entries = max_entries
        self.rows = [bytearray((self.vector_size + 7) // 8)]
        self.current = 0  # keys in the last row
        self._reached_max = False
        self._next_row = 0

    def _active_row(self) -> bytearray:
        if self._reached_max:
            row = self.rows[self._next_row % len(self.rows)]
            self._next_row += 1
            return row
        if self.current >= self.num_entries:
            if len(self.rows) * self.num_entries < self.max_entries:
                self.rows.append(bytearray((self.vector_size + 7) // 8))
                self.current = 0
            else:
                self._reached_max = True
                self._next_row = 1
                return self.rows[0]
        return self.rows[-1]

    def add(self, key: str) -> None:
        row = self._active_row()
        for pos in _positions(key.encode("utf-8"), self.num_hashes, self.vector_size):
            row[pos >> 3] |= 1 << (pos & 7)
        self.current += 1

    def add_many(self, keys: Iterable[str]) -> None:
        """:meth:`add` of each key in turn (the same rows, counts and bits), hashed at once."""
        keys = list(keys)
        if not keys:
            return
        positions = positions_many([k.encode("utf-8") for k in keys], self.num_hashes, self.vector_size)
        rows_of = []
        for _ in keys:  # each key's row, with the counters moving as add moves them
            rows_of.append(id(self._active_row()))
            self.current += 1
        by_id = {id(r): r for r in self.rows}
        rows_of = np.asarray(rows_of)
        for rid, row in by_id.items():
            pos = positions[rows_of == rid].ravel()
            if pos.size:
                arr = np.frombuffer(row, dtype=np.uint8)  # a writable view of the bytearray
                np.bitwise_or.at(arr, pos >> 3, (1 << (pos & 7)).astype(np.uint8))

    def might_contain(self, key: str) -> bool:
        positions = _positions(key.encode("utf-8"), self.num_hashes, self.vector_size)
        return any(all(row[p >> 3] & (1 << (p & 7)) for p in positions) for row in self.rows)

    def _header(self) -> bytes:
        return struct.pack(">iiBi", _VERSION, self.num_hashes, _MURMUR, self.vector_size)

    def serialize(self) -> bytes:
        """The bytes of Java's ``serializeToString()`` (what the ``bloomFilter`` block holds)."""
        out = bytearray(self._header())
        out += struct.pack(">iii", self.num_entries, self.current, len(self.rows))
        for row in self.rows:
            out += self._header() + row
        return base64.b64encode(bytes(out))


def bloom_filter_of(keys: Iterable[str]) -> DynamicBloomFilter:
    f = DynamicBloomFilter()
    f.add_many(keys)
    return f


__all__ = ["DynamicBloomFilter", "bloom_filter_of", "murmur_hash", "murmur_hash_many", "positions_many",
           "TYPE_CODE"]
