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


def _keys(n: int) -> list[str]:
    import random
    rng = random.Random(43)
    alphabet = "abcxyz0189-_/é€\u00ff"  # one to three UTF-8 bytes a character: every tail length
    return [f"{i}:" + "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 23))) for i in range(n)]


def test_hashing_many_keys_at_once_gives_each_keys_hash():
    """The metadata-table compaction hashes every key of its new base file at once
    (``murmur_hash_many``); each must be what the one-key Hadoop hash gives, tails and signs
    included, for any seed."""
    import numpy as np

    from airflow_hudi_occ.core.format.bloom_filter import murmur_hash_many
    keys = [k.encode("utf-8") for k in _keys(500)] + [b"", b"\xff", b"\x80\x81", b"\xfe\xfd\xfc"]
    for seeds in ([0] * len(keys), [(-1) ** i * (i * 7919 + 123456789) % (1 << 31) for i in range(len(keys))]):
        got = murmur_hash_many(keys, np.asarray(seeds, dtype=np.int64))
        assert got.tolist() == [murmur_hash(k, s) for k, s in zip(keys, seeds)]


def test_adding_many_keys_at_once_makes_the_filter_adding_them_one_by_one_makes():
    """Same bits, same rows, same counts: a filter small enough to fill its rows and wrap
    around them (as one past 100,000 keys does) serializes to the same bytes."""
    keys = _keys(75)
    one, many = DynamicBloomFilter(num_entries=10, max_entries=40), DynamicBloomFilter(num_entries=10, max_entries=40)
    for k in keys:
        one.add(k)
    many.add_many(keys)
    assert many.serialize() == one.serialize()
    assert bloom_filter_of(keys[:5]).serialize() != DynamicBloomFilter().serialize()
    assert all(many.might_contain(k) for k in keys)
