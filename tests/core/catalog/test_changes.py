"""Partition values as Java's extractors give them, and the sync point's order."""

from airflow_hudi_occ.core.catalog.changes import SyncPoint, partition_values

MULTI = "org.apache.hudi.hive.MultiPartKeysValueExtractor"


def test_partition_values_follow_javas_extractors():
    assert partition_values("a", ["p"], "org.apache.hudi.hive.SinglePartPartitionValueExtractor", False) == ["a"]
    assert partition_values("2024/01/02", ["d"], "org.apache.hudi.hive.SinglePartPartitionValueExtractor",
                            False) == ["2024/01/02"]
    assert partition_values("p=a", ["p"], "org.apache.hudi.hive.HiveStylePartitionValueExtractor", False) == ["a"]
    assert partition_values("y=2024/m=01", ["y", "m"], MULTI, False) == ["2024", "01"]
    assert partition_values("a%2Fb/c", ["x", "y"], MULTI, True) == ["a/b", "c"]
    assert partition_values("", [], "org.apache.hudi.hive.NonPartitionedExtractor", False) == []


def test_sync_point_only_moves_forward():
    old = SyncPoint("20260101000000000", "20260101000000500")
    new = SyncPoint("20260101000001000", "20260101000000900")
    assert old.later(new) == new.later(old) == SyncPoint("20260101000001000", "20260101000000900")
    assert SyncPoint().later(old) == old
    assert SyncPoint.of(old.params()) == old
