"""The bloom filter of a writer's file groups (``.hoodie/.temp/<t>/BLOOM``): a checker reads it
first and skips candidates that cannot hold the file group (a missing or unreadable bloom
means "may contain"). The format is this library's own (blake2b, a checksum); Hudi's Java
writers write no such file, so a Java candidate is always checked by its markers."""

from __future__ import annotations

import hashlib
import logging
import math
import re
import struct
import threading
import zlib
from typing import Iterable

from airflow_hudi_occ.core.concurrency.markers.names import TEMP_FOLDER

log = logging.getLogger(__name__)

BLOOM_FILE = "BLOOM"
_BLOOM_FILE_RE = re.compile(r"^BLOOM(\d*)$")


def is_bloom_file(name: str) -> bool:
    """Whether a name in an instant's marker folder is one of its bloom files (``BLOOM``,
    ``BLOOM1``, ...: one per process of the write, see :class:`OwnBloom`)."""
    return _BLOOM_FILE_RE.match(name) is not None


class BloomFilter:
    """A fixed-size bloom filter with Kirsch-Mitzenmacher double hashing over blake2b.

    Serialised as ``magic | m | k | count | bits | crc32``; the checksum lets a reader tell a
    cut or foreign file from a filter, and such a file must count as "may contain".
    """

    MAGIC = b"HOCCBLM1"
    _HEADER = struct.Struct(">IIQ")

    def __init__(self, num_bits: int, num_hashes: int, bits: bytearray | None = None,
                 count: int = 0):
        if num_bits < 8 or num_hashes < 1:
            raise ValueError("a bloom filter needs at least 8 bits and one hash")
        self.num_bits = num_bits
        self.num_hashes = num_hashes
        self.bits = bits if bits is not None else bytearray((num_bits + 7) // 8)
        self.count = count

    @classmethod
    def for_capacity(cls, capacity: int, fpp: float = 0.01) -> "BloomFilter":
        capacity = max(1, capacity)
        m = max(64, int(math.ceil(-capacity * math.log(fpp) / (math.log(2) ** 2))))
        k = max(1, int(round(m / capacity * math.log(2))))
        return cls(m, k)

    @staticmethod
    def hash_pair(key: str) -> tuple[int, int]:
        d = hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()
        return int.from_bytes(d[:8], "little"), int.from_bytes(d[8:], "little") | 1

    def _positions(self, pair: tuple[int, int]) -> Iterable[int]:
        h1, h2 = pair
        m = self.num_bits
        return ((h1 + i * h2) % m for i in range(self.num_hashes))

    def add(self, key: str, pair: tuple[int, int] | None = None) -> None:
        for pos in self._positions(pair or self.hash_pair(key)):
            self.bits[pos >> 3] |= 1 << (pos & 7)
        self.count += 1

    def might_contain(self, key: str, pair: tuple[int, int] | None = None) -> bool:
        bits = self.bits
        for pos in self._positions(pair or self.hash_pair(key)):
            if not bits[pos >> 3] & (1 << (pos & 7)):
                return False
        return True

    def to_bytes(self) -> bytes:
        body = self.MAGIC + self._HEADER.pack(self.num_bits, self.num_hashes, self.count) + bytes(self.bits)
        return body + struct.pack(">I", zlib.crc32(body))

    @classmethod
    def from_bytes(cls, data: bytes) -> "BloomFilter":
        head = len(cls.MAGIC) + cls._HEADER.size
        if len(data) < head + 4 or not data.startswith(cls.MAGIC):
            raise ValueError("not a bloom filter")
        body, crc = data[:-4], struct.unpack(">I", data[-4:])[0]
        if zlib.crc32(body) != crc:
            raise ValueError("bloom filter checksum mismatch")
        m, k, count = cls._HEADER.unpack(data[len(cls.MAGIC):head])
        bits = bytearray(body[head:])
        if len(bits) != (m + 7) // 8:
            raise ValueError("bloom filter length mismatch")
        return cls(m, k, bits, count)


def bloom_key(partition: str, file_id: str) -> str:
    # fileIds never contain "/", so the last "/" separates the two unambiguously
    return f"{partition}/{file_id}"


class OwnBloom:
    """This writer's bloom file: claimed like a MARKERS file (``BLOOM``, ``BLOOM1``, ...), so
    several processes of one instant never overwrite each other's filters."""

    INITIAL_CAPACITY = 1024

    def __init__(self, storage, instant_time: str):
        self.storage = storage
        self.instant_time = instant_time
        self._keys: set[str] = set()
        self._filter: BloomFilter | None = None
        self._capacity = 0
        self._file: str | None = None
        self._lock = threading.Lock()

    def _path(self, name: str) -> str:
        return self.storage.path(*TEMP_FOLDER, self.instant_time, name)

    def add(self, partition: str, file_id: str) -> None:
        key = bloom_key(partition, file_id)
        with self._lock:
            if key in self._keys:
                return
            keys = self._keys | {key}
            if self._filter is None or len(keys) > self._capacity:
                self._capacity = max(self.INITIAL_CAPACITY, 2 * len(keys))
                flt = BloomFilter.for_capacity(self._capacity)
                for k in keys:
                    flt.add(k)
            else:
                flt = self._filter
                flt.add(key)  # a key added before a failed write only adds a false positive
            data = flt.to_bytes()
            if self._file is None:
                self._claim(data)
            else:
                self.storage.write(self._path(self._file), data)
            self._filter, self._keys = flt, keys

    def _claim(self, data: bytes) -> None:
        taken = set(self.storage.list_names(self.storage.path(*TEMP_FOLDER, self.instant_time)))
        n = 0
        while True:
            name = BLOOM_FILE if n == 0 else f"{BLOOM_FILE}{n}"
            if name not in taken:
                try:
                    self.storage.create_if_absent(self._path(name), data)
                except FileExistsError:
                    taken.add(name)
                else:
                    self._file = name
                    return
            n += 1
