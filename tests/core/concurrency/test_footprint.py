"""Footprints: the codec (Hudi's workload-profile shape, round trip), the overlap rule, and a
real transaction declaring its partitions in its requested file at begin and its file groups
at inflight, read back by another process's view of the table (``live_writers``)."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.transaction import WriteTransaction
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.concurrency.footprint import (BACKFILL, EVERY_PARTITION, INGESTION, Footprint,
                                                        LiveWriter, declared, live_writers, overlapping)
from airflow_hudi_occ.core.config import HeartbeatConfig, LockConfig, WriteConfig
from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.format.instant import Action, Instant, State
from airflow_hudi_occ.core.format.metadata import CommitMetadata, WriteStat
from airflow_hudi_occ.core.table.table import Table

HB = HeartbeatConfig(interval_ms=60_000, tolerable_misses=2)


def cfg(**options) -> WriteConfig:
    return WriteConfig(heartbeat=HB, lock=LockConfig(provider="filesystem"), options=options)


def make_table(root) -> Table:
    return Table.create(os.path.join(str(root), "t"), "t", record_key_fields=["id"],
                        partition_fields=["p"])


def test_codec_round_trip_in_hudis_workload_profile_shape():
    fp = Footprint.of(["p=1", "p=2"], [("p=2", "fg-a")], owner="dag.task", kind=BACKFILL)
    meta = CommitMetadata.decode(fp.encode("UPSERT"))
    # Hudi's shape: one stat per partition with an empty fileId, one per known file group
    assert sorted(s.file_id for s in meta.partition_to_write_stats["p=1"]) == [""]
    assert sorted(s.file_id for s in meta.partition_to_write_stats["p=2"]) == ["", "fg-a"]
    assert meta.operation_type == "UPSERT"
    assert meta.mutated_file_groups() == {("p=2", "fg-a")}  # partitions are never file groups
    back = Footprint.from_metadata(meta)
    assert back == fp


def test_a_java_workload_profile_reads_as_a_footprint_without_owner():
    meta = CommitMetadata.from_stats([WriteStat(file_id="", path="", partition_path="p=1"),
                                      WriteStat(file_id="f1", path="", partition_path="p=3")],
                                     operation_type="UPSERT")
    fp = Footprint.from_metadata(CommitMetadata.decode(meta.encode()))
    assert fp.partitions == {"p=1", "p=3"} and fp.file_groups == {("p=3", "f1")}
    assert fp.owner is None and fp.kind == INGESTION
    assert Footprint.from_metadata(CommitMetadata()) is None  # an empty file declares nothing


def test_overlap_rule():
    a = Footprint.of(["p=1", "p=2"])
    assert a.shared_partitions(Footprint.of(["p=2", "p=3"])) == ["p=2"]
    assert a.shared_partitions(Footprint.of(["p=3"])) == []
    assert not a.overlaps(Footprint.of([]))
    # unknown on either side: may touch anything (a reason to wait, never to stop)
    assert a.shared_partitions(None) == [EVERY_PARTITION]
    assert Footprint(None).shared_partitions(a) == [EVERY_PARTITION]
    inst = Instant("20250101000000001", Action.COMMIT, State.REQUESTED)
    ws = [LiveWriter(inst, Footprint.of(["p=3"])), LiveWriter(inst, Footprint.of(["p=1"])),
          LiveWriter(inst, None)]
    assert [s for _, s in overlapping(a, ws)] == [["p=1"], [EVERY_PARTITION]]
    with pytest.raises(ConfigError, match="write kind"):
        Footprint.of(["p=1"], kind="bulk")


def test_transaction_declares_at_begin_and_refines_at_inflight(tmp_path):
    table = make_table(tmp_path)
    labels = '{"dag_id": "ingest", "task_id": "write"}'
    tx = WriteTransaction(table, cfg(**{"hoodie.occ.writer.labels": labels,
                                        "hoodie.occ.write.kind": "backfill"}),
                          footprint=["p=1", "p=2"])
    other = WriteTransaction(table, cfg())  # declares nothing (as a Java writer at begin)
    tx.begin()
    other.begin()
    try:
        seen = {w.requested_time: w.footprint for w in live_writers(Table.open(table.base_uri), HB)}
        assert seen[other.instant_time] is None
        fp = seen[tx.instant_time]
        assert fp.partitions == {"p=1", "p=2"} and not fp.file_groups
        assert (fp.owner, fp.kind) == ("ingest.write", BACKFILL)
        assert live_writers(table, HB, exclude=[tx.instant_time, other.instant_time]) == []
        tx.start_inflight(planned_file_groups=[("p=2", "fg-1")])
        fp = declared(table.timeline(), table.timeline().get(tx.instant_time))
        assert fp.file_groups == {("p=2", "fg-1")} and fp.partitions == {"p=1", "p=2"}
        assert fp.owner == "ingest.write"
    finally:
        tx.abort()
        other.abort()
    assert live_writers(table, HB) == []  # rolled back: nothing pending


def test_core_writer_declares_its_partitions_and_commits_as_before(tmp_path):
    table = make_table(tmp_path)
    seen = {}

    def hold(tx):
        seen.update({w.requested_time: w.footprint for w in live_writers(table, HB)})

    w = ArrowTableWriter(table, cfg())
    res = w.write(pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"], "v": [1, 2, 3]}), "insert",
                  before_commit=hold)
    fp = seen[res.instant.requested_time]
    assert fp.partitions == {"a", "b"}
    assert fp.file_groups == res.metadata.mutated_file_groups()
    # the completed commit holds only real write stats (the footprint was the plan)
    assert all(s.file_id for s in res.metadata.write_stats())


def test_an_unreadable_declaration_is_unknown_not_an_error(tmp_path):
    """A requested file we cannot decode (another engine's content) declares nothing we can
    trust: unknown, which overlaps everything for a wait and never stops a writer."""
    from airflow_hudi_occ.core.table.timeline import create_requested
    table = make_table(tmp_path)
    inst = Instant("20250101000000001", Action.COMMIT, State.REQUESTED)
    create_requested(table, inst, b"\x00not metadata\x00")
    assert declared(table.timeline(), table.timeline().get(inst.requested_time)) is None
