"""Hudi's index ids (core/format/index_id.py): XXH64 against the algorithm's reference
vectors, and the ids against keys Java 1.2 wrote into a column_stats partition."""

from __future__ import annotations

import pytest

from airflow_hudi_occ.core.format.index_id import column_id, file_id, partition_id, xxh64


@pytest.mark.parametrize("data, seed, expected", [
    (b"", 0, 0xEF46DB3751D8E999),
    (b"a", 0, 0xD24EC4F1A98C6E5B),
    (b"abc", 0, 0x44BC2CF5AD770999),
    (b"Nobody inspects the spammish repetition", 0, 0xFBCEA83C8A378BF1),  # 39 bytes: the 32-byte lanes
])
def test_xxh64_reference_vectors(data, seed, expected):
    assert xxh64(data, seed) == expected


def test_the_ids_are_the_pieces_of_keys_java_wrote():
    # from a column_stats record Java 1.2.0 wrote for a table partitioned by p (values a, b)
    assert column_id("_hoodie_commit_time") == "JBBzUToHtLc="
    assert column_id("_hoodie_record_key") == "uSJGdDiVr/k="
    assert column_id("v") == "hPjzBX1OK5M="
    assert partition_id("a") == "BFHqp2KLzrM=" and partition_id("b") == "Ikp1UxohNwU="
    assert file_id("d128cbb2-bbe2-4a68-93a1-15ee16e769b5-0_1-22-22_20261127193804690.parquet") \
        == "+li9GD4Ly5PxIhaKS1FEWw=="
    assert len(column_id("a column name longer than thirty-two bytes")) == 12
