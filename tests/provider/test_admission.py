"""Admission's overlap rule on real tables, through the write operator's pieces
(``provider/admission.py``) and a real transaction of the writer admitted first: the batches'
reaches are read from the table's footers and files before any Spark, and two writers that
share a partition but not a file group of it do not wait for each other; two that share one
do. The four-writer scenario runs it through real ``airflow dags test`` processes
(tests/provider/test_admission_e2e.py, slow)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_hudi_occ.core.commit.attempt_log import LABELS_OPTION
from airflow_hudi_occ.core.commit.transaction import WriteTransaction
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.concurrency import admission as core_admission
from airflow_hudi_occ.core.concurrency.footprint import BACKFILL, REQUEST_LABEL
from airflow_hudi_occ.core.config import HeartbeatConfig, LockConfig, WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider import admission

HB = HeartbeatConfig(interval_ms=60_000, tolerable_misses=2)
OPTS = {"hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts", "hoodie.write.lock.provider": "filesystem"}
#: who writes which keys (the key's first letter is its partition), as in the four-writer test
BATCHES = {"ingest_ab": ["a0", "a1", "b0", "b1"], "ingest_c": ["c0", "c1"],
           "backfill_bc": ["b2", "b3", "c10", "c11"]}


def _rows(keys, v):
    return [{"id": k, "p": k[0], "ts": 2, "v": v} for k in keys]


def _seed(tmp_path) -> Table:
    """a: 2 file groups, b: 1, c: 2 (c0..c3 and c10..c13)."""
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    cfg = WriteConfig.from_options({**OPTS, "hoodie.parquet.small.file.limit": "0"})
    for keys in ([f"a{i}" for i in range(4)] + [f"b{i}" for i in range(6)] + [f"c{i}" for i in range(4)],
                 [f"a1{i}" for i in range(4)] + [f"c1{i}" for i in range(4)]):
        ArrowTableWriter(table, cfg).write(pa.Table.from_pylist(_rows(keys, "seed")), "insert")
    return table


def _request(table, tmp_path, name, kind="ingestion"):
    src = tmp_path / f"{name}.parquet"
    if not src.exists():
        pq.write_table(pa.Table.from_pylist(_rows(BATCHES[name], name)), src)
    fp = admission.batch_footprint(table, str(src), "parquet", owner=f"{name}.write", kind=kind,
                                   storage_options=None, operation="upsert", options=OPTS)
    return admission.file_request(table, fp, {"dag_id": name, "run_id": "r", "task_id": "write"})


def _begin(table, req) -> WriteTransaction:
    """The admitted writer begins, as the Spark job does: its labels name its request."""
    labels = {"dag_id": req.owner.split(".")[0], "task_id": "write", REQUEST_LABEL: req.request_id}
    cfg = WriteConfig.from_options({**OPTS, LABELS_OPTION: json.dumps(labels)}).replace(
        heartbeat=HB, lock=LockConfig(provider="filesystem"))
    tx = WriteTransaction(table, cfg, footprint=req.partitions)
    tx.begin()
    return tx


def test_writers_sharing_a_partition_but_no_file_group_go_together_those_sharing_one_wait(tmp_path):
    table = _seed(tmp_path)
    backfill = _request(table, tmp_path, "backfill_bc", BACKFILL)
    assert set(backfill.reach) == {"b", "c"} and all(len(g) == 1 for g in backfill.reach.values())
    assert core_admission.try_admit(table, backfill, HB).admitted
    tx = _begin(table, backfill)
    try:
        # right after begin, before the operator links its request: the instant names it
        ingest_c = _request(table, tmp_path, "ingest_c")
        assert core_admission.try_admit(table, ingest_c, HB).admitted  # partition c, another file group
        core_admission.withdraw(table, ingest_c.request_id)
        admission.link(table.base_uri, None, backfill.request_id, tx.instant_time)
        ingest_ab = _request(table, tmp_path, "ingest_ab")
        v = core_admission.try_admit(table, ingest_ab, HB)
        assert [(b.what, b.ident, b.partitions) for b in v.blockers] == [("writer", tx.instant_time, ("b",))]
        # inflight: the plan's file groups judge it exactly from now on
        tx.start_inflight(planned_file_groups=[("b", backfill.reach["b"][0]), ("c", backfill.reach["c"][0])])
        assert core_admission.try_admit(table, _request(table, tmp_path, "ingest_c"), HB).admitted
        assert not core_admission.try_admit(table, ingest_ab, HB).admitted

        # a write completed since a waiter's reach was computed makes it stale: judged as its
        # partitions (c: the backfill's) until computed again
        late_c = _request(table, tmp_path, "ingest_c")
        ArrowTableWriter(table, WriteConfig.from_options(OPTS)).write(
            pa.Table.from_pylist(_rows(["a3"], "other")), "upsert")
        v = core_admission.try_admit(table, late_c, HB)
        assert not v.admitted and [b.ident for b in v.blockers] == [tx.instant_time]
        admission.refresh_reach(table, late_c, None)
        assert core_admission.try_admit(table, late_c, HB).admitted
    finally:
        tx.abort()
    assert core_admission.try_admit(table, ingest_ab, HB).admitted  # the backfill ended


def test_a_writer_whose_request_is_gone_is_judged_by_its_partitions(tmp_path):
    """When in doubt, overlap: an instant that names no request, or one that expired, shares
    its whole partitions."""
    table = _seed(tmp_path)
    backfill = _request(table, tmp_path, "backfill_bc", BACKFILL)
    tx = _begin(table, backfill)
    core_admission.withdraw(table, backfill.request_id)
    try:
        v = core_admission.try_admit(table, _request(table, tmp_path, "ingest_c"), HB)
        assert [(b.ident, b.partitions) for b in v.blockers] == [(tx.instant_time, ("c",))]
    finally:
        tx.abort()


def test_a_clustering_being_executed_is_named_by_its_dag_and_task(tmp_path):
    """Its plan names nobody; its executor's running record (written when it adopts the plan)
    does: a writer waiting on it says "<instant> (<dag>.<task>) on partitions a", as for a
    write, not "(unknown writer)"."""
    from airflow_hudi_occ.core.services.clustering import ClusteringTransaction, schedule_clustering
    table = _seed(tmp_path)
    opts = {**OPTS, "hoodie.clustering.plan.strategy.partition.selected": "a"}
    t = schedule_clustering(table, opts)
    assert t is not None
    labels = {"dag_id": "maint", "task_id": "cluster", "run_id": "r", "try_number": "1"}
    tx = ClusteringTransaction(table, WriteConfig.from_options({**opts, LABELS_OPTION: json.dumps(labels)}).replace(
        heartbeat=HB, lock=LockConfig(provider="filesystem")))
    tx.adopt(t)
    try:
        waiting = _request(table, tmp_path, "ingest_ab")
        raw = core_admission.try_admit(table, waiting, HB)
        assert [(b.ident, b.owner) for b in raw.blockers] == [(t, "unknown writer")]  # core alone
        v = admission.named(table, raw)
        assert [(b.ident, b.owner, b.partitions) for b in v.blockers] == [(t, "maint.cluster", ("a",))]
        assert v.describe() == f"{t} (maint.cluster) on partitions a"
    finally:
        tx.abort()
