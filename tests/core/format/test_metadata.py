"""Instant metadata read back from the timeline: a commit or plan naming a path outside the
table is refused as it is decoded (core/format/partition_path.check_partition_path), so no
service reads, writes or deletes there. Files Java Hudi writes are not refused for names this
library would not create (a control character), only for leaving the table."""

from __future__ import annotations

import pytest

from airflow_hudi_occ.core.errors import CorruptMetadataError, UnsafePathError
from airflow_hudi_occ.core.format.metadata import (ClusteringGroup, CleanerPlan, CommitMetadata,
                                                   CompactionOperation, CompactionPlan,
                                                   RequestedReplaceMetadata, RollbackPlan, WriteStat)

HOSTILE = ["..", "../../etc", "a/../../b", "/abs", "a//b", "..\\x"]


def _commit(part: str, path: str) -> bytes:
    return CommitMetadata.from_stats([WriteStat(file_id="f1", path=path, partition_path=part)],
                                     operation_type="UPSERT").encode()


@pytest.mark.parametrize("part", HOSTILE)
def test_a_commit_naming_a_partition_outside_the_table_is_refused(part):
    with pytest.raises(UnsafePathError) as e:
        CommitMetadata.decode(_commit(part, "f1_1-0-1_20240101000000000.parquet"), "x.commit")
    assert "x.commit" in str(e.value) and isinstance(e.value, CorruptMetadataError)


@pytest.mark.parametrize("path", ["p/../../victim.parquet", "../victim.parquet", "p/.."])
def test_a_commit_naming_a_file_outside_the_table_is_refused(path):
    with pytest.raises(UnsafePathError):
        CommitMetadata.decode(_commit("p", path), "x.commit")


def test_names_java_may_write_are_still_read():
    # written by Java Hudi without url-encoding: odd, but inside the table
    meta = CommitMetadata.decode(_commit("a\tb/2024", "a\tb/2024/f1_1-0-1_1.parquet"), "x.commit")
    assert list(meta.partition_to_write_stats) == ["a\tb/2024"]


@pytest.mark.parametrize("part", HOSTILE)
def test_plans_naming_a_partition_outside_the_table_are_refused(part):
    plans = [
        (RequestedReplaceMetadata, RequestedReplaceMetadata(
            "CLUSTER", [ClusteringGroup([(part, "f1", f"{part}/f1_1-0-1_1.parquet")])]).encode()),
        (CompactionPlan, CompactionPlan([CompactionOperation(part, "f1", "1", "f1_1-0-1_1.parquet")]).encode()),
        (RollbackPlan, RollbackPlan("1", "commit", {part: [f"{part}/f1_1-0-1_1.parquet"]}).encode()),
    ]
    for cls, data in plans:
        with pytest.raises(UnsafePathError) as e:
            cls.decode(data, "t.plan")
        assert "t.plan" in str(e.value), cls
    with pytest.raises(UnsafePathError):
        CleanerPlan.decode(CleanerPlan("KEEP_LATEST_COMMITS", None, "1",
                                       {part: [f"{part}/f1_1-0-1_1.parquet"]}).encode("/base"),
                           "/base", "t.clean.requested")


def test_a_compaction_plan_naming_a_log_file_outside_its_partition_is_refused():
    plan = CompactionPlan([CompactionOperation("p", "f1", "1", None, [".."])]).encode()
    with pytest.raises(UnsafePathError):
        CompactionPlan.decode(plan, "t.compaction.requested")


def test_a_clustering_plan_keeps_the_log_files_of_each_slice():
    """The plan names a merge-on-read slice's log files (Java's executor reads exactly them);
    they survive the round trip per slice, and a slice without any keeps none."""
    logs = ["/t/a/.f1_2.log.1_0-0-1", "/t/a/.f1_1.log.1_0-0-1"]
    plan = RequestedReplaceMetadata("CLUSTER", [ClusteringGroup(
        [("a", "f1", "/t/a/f1_1-0-1_1.parquet"), ("a", "f2", "/t/a/f2_1-0-1_1.parquet")], 1,
        {("a", "f1"): logs})])
    back = RequestedReplaceMetadata.decode(plan.encode(), "t.clustering.requested")
    [group] = back.input_groups
    assert group.delta_file_paths == {("a", "f1"): logs}
    assert group.log_file_names("a", "f1") == [".f1_2.log.1_0-0-1", ".f1_1.log.1_0-0-1"]
    assert group.log_file_names("a", "f2") == []


def test_a_clustering_plan_naming_a_log_file_outside_its_partition_is_refused():
    plan = RequestedReplaceMetadata("CLUSTER", [ClusteringGroup(
        [("a", "f1", "/t/a/f1_1-0-1_1.parquet")], 1, {("a", "f1"): ["/t/a/.."]})]).encode()
    with pytest.raises(UnsafePathError):
        RequestedReplaceMetadata.decode(plan, "t.clustering.requested")
