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
    for k in keys:
        f.add(k)
    return f


__all__ = ["DynamicBloomFilter", "bloom_filter_of", "murmur_hash", "TYPE_CODE"]
