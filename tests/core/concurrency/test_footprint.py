"""Footprints: the codec (Hudi's workload-profile shape, round trip), the overlap rule, and a
real transaction declaring its partitions in its requested file at begin and its file groups
at inflight, read back by another process's view of the table (``live_writers``)."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.transaction import WriteTransaction
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.concurrency.footprint import (BACKFILL, EVERY_NEW_KEY, EVERY_PARTITION, INGESTION,
                                                        Footprint, LiveWriter, declared, live_writers, meeting,
                                                        new_key_slot, overlapping)
from airflow_hudi_occ.core.config import HeartbeatConfig, LockConfig, WriteConfig
from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.format.instant import Action, Instant, State
from airflow_hudi_occ.core.format.metadata import CommitMetadata, WriteStat
from airflow_hudi_occ.core.table.table import Table

HB = HeartbeatConfig(interval_ms=60_000, tolerable_misses=2)


def cfg(**options) -> WriteConfig:
    return WriteConfig.from_options(options).replace(heartbeat=HB, lock=LockConfig(provider="filesystem"))


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


def test_meeting_rule_file_groups_where_both_sides_know_them():
    """Admission's rule: two writers meet where both may touch a common file group; a partition
    whose groups either side does not know counts whole (when in doubt, they meet)."""
    partitions_only = Footprint.of(["a", "c"])
    ingest_c = Footprint.of(["c"], reach={"c": ["C1"]})
    backfill = Footprint.of(["b", "c"], reach={"b": ["B1"], "c": ["C2"]})
    assert meeting(ingest_c, backfill) == []                       # partition c, not a file group
    assert meeting(Footprint.of(["c"], reach={"c": ["C1", "C2"]}), backfill) == ["c"]
    assert meeting(partitions_only, backfill) == ["c"]             # groups unknown on one side
    assert meeting(ingest_c, None) == [EVERY_PARTITION] and meeting(None, ingest_c) == [EVERY_PARTITION]
    assert meeting(Footprint.of(["b"], reach={"b": []}), backfill) == []  # only new file groups
    # refined (inflight): its plan's groups are exactly the existing groups it touches
    refined = Footprint.of(["c"]).refined([("c", "C2"), ("c", "fresh-new-group")])
    assert refined.exact and meeting(ingest_c, refined) == [] and meeting(backfill, refined) == ["c"]
    # the bucket index: buckets meet whatever the fileIds
    b3, b4 = "00000003-aaaa-0", "00000004-bbbb-0"
    by_bucket = Footprint.of(["p"], reach={"p": ["bucket:00000003"]})
    assert meeting(by_bucket, Footprint.of(["p"]).refined([("p", b3)])) == ["p"]
    assert meeting(by_bucket, Footprint.of(["p"]).refined([("p", b4)])) == []
    # new keys: the same new key inserted by two writers meets (each would make a group for it)
    k1, k2 = new_key_slot("k1"), new_key_slot("k2")
    assert k1 != k2
    ins1 = Footprint.of(["p"], reach={"p": [k1]})
    assert meeting(ins1, Footprint.of(["p"], reach={"p": [k1]})) == ["p"]
    assert meeting(ins1, Footprint.of(["p"], reach={"p": [k2]})) == []
    assert meeting(ins1, Footprint.of(["p"], reach={"p": [EVERY_NEW_KEY]})) == ["p"]
    # ... and a refined writer keeps the new keys its request reached (no file says which they are)
    assert meeting(ins1, Footprint.of(["p"], reach={"p": [k1]}).refined([("p", "new-group")])) == ["p"]
    assert meeting(ins1, Footprint.of(["p"]).refined([("p", "new-group")])) == []


def test_codec_keeps_exact_and_the_admission_request():
    fp = Footprint.of(["p"], request="0001-abc").refined([("p", "f1")])
    back = Footprint.from_metadata(CommitMetadata.decode(fp.encode("UPSERT")))
    assert back.exact and back.request == "0001-abc" and back.file_groups == {("p", "f1")}
    assert back.reach == {}  # a reach lives in the admission request, never on the timeline


def test_a_writer_declared_with_its_partitions_unknown_is_named_and_meets_every_writer(tmp_path):
    """The Spark bulk_insert checked by its write tasks learns its partitions in its job: it
    declares itself (owner, kind) with them unknown, at begin and again at inflight (no file
    group planned); others read it as unknown, which meets everyone, not as touching nothing."""
    table = make_table(tmp_path)
    labels = '{"dag_id": "load", "task_id": "bulk"}'
    tx = WriteTransaction(table, cfg(**{"hoodie.occ.writer.labels": labels, "hoodie.occ.write.kind": "backfill"}),
                          footprint=Footprint.of(None, kind=BACKFILL))
    tx.begin()
    try:
        for step in ("begin", "inflight"):
            fp = declared(table.timeline(), table.timeline().get(tx.instant_time))
            assert fp.partitions is None and not fp.file_groups, step
            assert (fp.owner, fp.kind) == ("load.bulk", BACKFILL), step
            assert meeting(Footprint.of(["p=9"]), fp) == [EVERY_PARTITION], step
            if step == "begin":
                tx.start_inflight(planned_file_groups=[])
        assert CommitMetadata.decode(Footprint.of(None).encode()).partition_to_write_stats == {}
    finally:
        tx.abort()


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
