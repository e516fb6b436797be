"""Admission (core/concurrency/admission.py): live writers' declared footprints block a request
on shared partitions only; waiting requests are ordered ingestion first, then by age, and a
starving one first; two requests admitted at the same moment cannot both go; dead requests
are forgotten."""

from __future__ import annotations

import os

from airflow_hudi_occ.core.commit.transaction import WriteTransaction
from airflow_hudi_occ.core.concurrency import admission
from airflow_hudi_occ.core.concurrency.footprint import BACKFILL, INGESTION, Footprint
from airflow_hudi_occ.core.config import HeartbeatConfig, LockConfig, WriteConfig
from airflow_hudi_occ.core.table.table import Table

HB = HeartbeatConfig(interval_ms=60_000, tolerable_misses=2)


def make_table(root) -> Table:
    return Table.create(os.path.join(str(root), "t"), "t", record_key_fields=["id"],
                        partition_fields=["p"])


def cfg() -> WriteConfig:
    return WriteConfig(heartbeat=HB, lock=LockConfig(provider="filesystem"))


def req(table, parts, kind=INGESTION, owner="d.t", now=None, run="r1"):
    return admission.new_request(table, Footprint.of(parts, owner=owner, kind=kind),
                                 owner_key={"dag_id": owner, "run_id": run, "task_id": "w"}, now=now)


def test_a_live_writer_blocks_shared_partitions_only(tmp_path):
    table = make_table(tmp_path)
    tx = WriteTransaction(table, cfg(), footprint=["a"])
    tx.begin()
    try:
        blocked = req(table, ["a", "b"])
        v = admission.try_admit(table, blocked, HB)
        assert not v.admitted
        assert [(b.what, b.ident, b.partitions) for b in v.blockers] == [("writer", tx.instant_time, ("a",))]
        assert "on partitions a" in v.describe()
        free = req(table, ["c"], owner="other")
        assert admission.try_admit(table, free, HB).admitted
        # an admitted request blocks an overlapping newcomer until it is withdrawn
        late = req(table, ["c"], owner="third")
        assert [b.what for b in admission.try_admit(table, late, HB).blockers] == ["admitted request"]
        admission.withdraw(table, free.request_id)
        assert admission.try_admit(table, late, HB).admitted
    finally:
        tx.abort()
    assert admission.try_admit(table, blocked, HB).admitted  # the writer ended


def test_unknown_footprints_overlap_everything(tmp_path):
    table = make_table(tmp_path)
    tx = WriteTransaction(table, cfg())  # declares nothing (as a Java writer)
    tx.begin()
    try:
        v = admission.try_admit(table, req(table, ["z"]), HB)
        assert not v.admitted and v.blockers[0].partitions == ("*",)
    finally:
        tx.abort()


def test_a_writer_declaring_unknown_partitions_blocks_where_its_request_said_it_goes(tmp_path):
    """The Spark engine's bulk_insert written by its input tasks begins with its partitions
    unknown (spark/pair_write.py); admitted by a request for ``a``, it blocks newcomers on ``a``
    only, as the request's partitions say, not the whole table (without a request: everywhere)."""
    table = make_table(tmp_path)
    backfill = req(table, ["a"], kind=BACKFILL, owner="backfill")
    assert admission.try_admit(table, backfill, HB).admitted
    tx = WriteTransaction(table, cfg(), footprint=Footprint.of(None, kind=BACKFILL, request=backfill.request_id))
    tx.begin()
    try:
        admission.link(table, backfill.request_id, tx.instant_time)
        assert tx.footprint.partitions is None  # it declared no partition
        elsewhere = req(table, ["b"], owner="ingest-b")
        assert admission.try_admit(table, elsewhere, HB).admitted
        same = req(table, ["a"], owner="ingest-a")
        v = admission.try_admit(table, same, HB)
        assert not v.admitted and ("writer", tx.instant_time, ("a",)) in [
            (b.what, b.ident, b.partitions) for b in v.blockers]
    finally:
        tx.abort()


def test_ingestion_goes_before_an_older_backfill_unless_the_backfill_starves(tmp_path):
    table = make_table(tmp_path)
    now = 1_000_000.0
    backfill = req(table, ["a"], kind=BACKFILL, owner="bf", now=now)
    ingest = req(table, ["a"], owner="in", now=now + 10)
    v = admission.try_admit(table, backfill, HB, now=now + 11, starvation_s=600)
    assert not v.admitted and v.blockers[0].what == "request ahead" and v.blockers[0].owner == "in"
    assert admission.try_admit(table, ingest, HB, now=now + 11, starvation_s=600).admitted
    admission.withdraw(table, ingest.request_id)
    # starving: a backfill that waited past starvation_s comes first whatever its kind
    backfill.refreshed_at = now + 695  # its waiter kept looking
    admission.save(table, backfill)
    ingest2 = req(table, ["a"], owner="in2", now=now + 700)
    assert not admission.try_admit(table, ingest2, HB, now=now + 701, starvation_s=600).admitted
    assert admission.try_admit(table, backfill, HB, now=now + 701, starvation_s=600).admitted


def test_two_requests_admitted_at_the_same_moment_cannot_both_go(tmp_path, monkeypatch):
    table = make_table(tmp_path)
    a, b = req(table, ["a"], owner="A"), req(table, ["a"], owner="B")
    # both judged before either's decision was visible: a is admitted and saved; b's own
    # judgement (made at the same moment) found nothing, so b writes "admitted" too...
    assert admission.try_admit(table, a, HB).admitted
    monkeypatch.setattr(admission, "blockers", lambda *args, **kw: [])
    v = admission.try_admit(table, b, HB)
    # ...and its re-read finds a admitted: b goes back to waiting
    assert not v.admitted and v.blockers[0].ident == a.request_id
    assert admission.load(table, b.request_id).state == admission.WAITING


def test_dead_requests_are_forgotten(tmp_path):
    table = make_table(tmp_path)
    now = 1_000_000.0
    old = req(table, ["a"], owner="gone", now=now)
    assert [r.request_id for r in admission.requests(table, now=now + 1)] == [old.request_id]
    assert admission.requests(table, now=now + old.ttl_s + 1) == []
    assert admission.load(table, old.request_id) is None  # deleted by whoever saw it dead


def test_a_clustering_being_executed_blocks_its_partitions_a_plan_alone_does_not(tmp_path):
    """A clustering whose executor runs (heartbeat alive) is a live writer for admission: a
    write into its partitions now would be refused by the clustering gate or make it lose. A
    plan nobody executes holds nobody (it may wait for days)."""
    import pyarrow as pa

    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.services.clustering import ClusteringTransaction, schedule_clustering
    table = Table.create(os.path.join(str(tmp_path), "t"), "t", record_key_fields=["id"],
                         partition_fields=["p"], precombine_field="ts")
    opts = {"hoodie.write.lock.provider": "filesystem", "hoodie.parquet.small.file.limit": "0",
            "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "p"}
    for i in range(2):
        ArrowTableWriter(table, WriteConfig.from_options(opts)).write(
            pa.Table.from_pylist([{"id": f"{i}", "p": "a", "ts": 1}, {"id": f"b{i}", "p": "b", "ts": 1}]), "insert")
    t = schedule_clustering(table, {**opts, "hoodie.clustering.plan.strategy.partition.selected": "a"})
    assert t is not None
    on_a = req(table, ["a"])
    assert admission.try_admit(table, on_a, HB).admitted  # planned, not executed: no wait
    admission.withdraw(table, on_a.request_id)
    tx = ClusteringTransaction(table, cfg())
    tx.adopt(t)
    try:
        v = admission.try_admit(table, req(table, ["a", "c"]), HB)
        assert [(b.what, b.ident, b.partitions) for b in v.blockers] == [("writer", t, ("a",))]
        assert admission.try_admit(table, req(table, ["b"], owner="o2"), HB).admitted
    finally:
        tx.abort()


def test_a_requeued_loser_keeps_its_age_and_goes_before_a_newer_request(tmp_path):
    """Issue 43, item 4: a loser's claim ages. Its request waits again after a lost attempt with
    its first look's time, so a batch that asked later and meets it waits behind it."""
    table = make_table(tmp_path)
    now = 1_000_000.0
    loser = req(table, ["a"], owner="loser", now=now)
    assert admission.try_admit(table, loser, HB, now=now + 1).admitted
    admission.requeue(table, loser)  # its attempt lost a conflict
    assert admission.load(table, loser.request_id).state == admission.WAITING
    newer = req(table, ["a"], owner="newer", now=now + 5)
    v = admission.try_admit(table, newer, HB, now=now + 6)
    assert not v.admitted and [(b.what, b.owner) for b in v.blockers] == [("request ahead", "loser")]
    assert admission.try_admit(table, loser, HB, now=now + 6).admitted


def test_wait_admitted_looks_until_nothing_blocks_and_gives_up_at_its_timeout(tmp_path):
    table = make_table(tmp_path)
    tx = WriteTransaction(table, cfg(), footprint=["a"])
    tx.begin()
    waiter = req(table, ["a"], owner="waiter")
    clock = [0.0]
    sleeps = []

    def sleep(s):
        sleeps.append(s)
        clock[0] += s
        if len(sleeps) == 3:
            tx.abort()  # the live writer ends

    out = admission.wait_admitted(table, waiter, HB, admission.AdmissionWait(poll_s=0.1, max_poll_s=0.3),
                                  sleep=sleep, clock=lambda: clock[0])
    assert not out.timed_out and sleeps == [0.1, 0.2, 0.3]  # the poll doubles up to its cap
    assert out.waited_for and tx.instant_time in out.waited_for[0]
    admission.withdraw(table, waiter.request_id)
    blocker = req(table, ["b"], owner="blocker")
    assert admission.try_admit(table, blocker, HB).admitted
    late = req(table, ["b"], owner="late")
    out = admission.wait_admitted(table, late, HB, admission.AdmissionWait(timeout_s=1.0, poll_s=0.5),
                                  sleep=lambda s: clock.__setitem__(0, clock[0] + s), clock=lambda: clock[0])
    assert out.timed_out and out.seconds >= 1.0  # then it goes anyway: OCC decides the commit


def test_a_reach_of_buckets_never_goes_stale(tmp_path):
    """Writes completing meanwhile make a reach of file ids stale (its partitions decide), not
    one of buckets: a key's bucket is a function of the key."""
    table = make_table(tmp_path)
    now = 1_000_000.0
    a = admission.new_request(table, Footprint.of(["a"], owner="A", reach={"a": ["bucket:00000001"]}), now=now)
    assert admission.try_admit(table, a, HB, now=now).admitted
    tx = WriteTransaction(table, cfg(), footprint=["z"])
    tx.begin()
    tx.commit([])  # a write completed after both reaches were computed
    b = admission.new_request(table, Footprint.of(["a"], owner="B", reach={"a": ["bucket:00000002"]}), now=now)
    assert admission.try_admit(table, b, HB, now=now).admitted  # different buckets of one partition
    c = admission.new_request(table, Footprint.of(["a"], owner="C", reach={"a": ["fileid-1"]}), now=now)
    assert admission.reach_is_current(a, table.timeline()) and not admission.reach_is_current(c, table.timeline())


def test_a_request_filed_with_its_first_look_is_judged_as_one_filed_before_it(tmp_path):
    """``new_request(with_first_look=True)`` (a library writer's, issue 43: one round trip
    fewer): nothing is on storage until the first look, which files the request while it reads
    the others; blocked, it waits filed like any other, and is admitted once free."""
    table = make_table(tmp_path)
    first = req(table, ["a"], owner="A")
    assert admission.try_admit(table, first, HB).admitted
    later = admission.new_request(table, Footprint.of(["a"], owner="B"),
                                  owner_key={"dag_id": "B", "run_id": "r1", "task_id": "w"}, with_first_look=True)
    assert admission.load(table, later.request_id) is None  # not filed before its look
    v = admission.try_admit(table, later, HB)
    assert not v.admitted and [(b.what, b.ident) for b in v.blockers] == [("admitted request", first.request_id)]
    assert admission.load(table, later.request_id).state == admission.WAITING  # filed by the look
    admission.withdraw(table, first.request_id)
    assert admission.try_admit(table, later, HB).admitted
    assert admission.load(table, later.request_id).state == admission.ADMITTED
    alone = admission.new_request(table, Footprint.of(["z"], owner="C"), with_first_look=True)
    assert admission.try_admit(table, alone, HB).admitted  # nothing meets it: admitted at its first look
    assert admission.load(table, alone.request_id).state == admission.ADMITTED
