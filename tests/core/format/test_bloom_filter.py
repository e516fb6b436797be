"""Hudi's DYNAMIC_V0 bloom filter (core/format/bloom_filter.py): the ``bloomFilter`` meta block of
the metadata-table base files Java wrote, rebuilt from their keys byte for byte."""

from __future__ import annotations

from airflow_hudi_occ.core.format.bloom_filter import DynamicBloomFilter, bloom_filter_of, murmur_hash
from airflow_hudi_occ.core.format.hfile import read_hfile
from tests.core.format.test_hfile import java_hfiles


def test_the_meta_block_of_javas_base_file_is_rebuilt_from_its_keys():
    bases = {k: read_hfile(v) for k, v in java_hfiles().items() if k.endswith(".hfile")}
    assert bases
    for name, h in bases.items():
        keys = [k for k, _ in h.entries]
        assert bloom_filter_of(keys).serialize() == h.meta["bloomFilter"], name
        assert h.file_info["bloomFilterTypeCode"] == b"DYNAMIC_V0"


def test_keys_added_are_found_and_java_sizes_hold():
    f = DynamicBloomFilter()
    assert (f.vector_size, f.num_hashes) == (431_328, 30)  # 10,000 keys at 1e-9, as Java's
    keys = [f"part={i}/x" for i in range(300)] + ["__all_partitions__", "é/ü"]
    for k in keys:
        f.add(k)
    assert all(f.might_contain(k) for k in keys)
    assert sum(f.might_contain(f"absent-{i}") for i in range(2000)) == 0


def test_rows_grow_past_the_row_capacity():
    f = DynamicBloomFilter(num_entries=10, fpp=0.01, max_entries=30)
    for i in range(45):
        f.add(str(i))
    assert len(f.rows) == 3 and all(f.might_contain(str(i)) for i in range(45))


def test_murmur_tail_bytes_are_sign_extended_as_java_does():
    # the same 3-byte tail with and without the high bit must differ (Java's (int) byte cast)
    assert murmur_hash(b"\x01\x02\x03", 0) != murmur_hash(b"\x81\x02\x03", 0)
    assert -2 ** 31 <= murmur_hash(b"abcdefg\xff", 7) < 2 ** 31
