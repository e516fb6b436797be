"""``HudiTableServiceOperator(service="cluster")`` takes part in admission: before planning it
waits (on the worker, bounded) while a live writer shares the partitions it would cluster,
and while its job runs its admitted request holds writers on those partitions off.

Real table, real writers (core transactions), real planning under the lock; spark-submit of the
service job is the seam (a stand-in hook that records what it was asked and what the table
looked like then). The whole path through ``airflow dags test`` and a real Spark job is the
slow ``tests/provider/test_admission_e2e.py``."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.transaction import WriteTransaction
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.concurrency import admission
from airflow_hudi_occ.core.concurrency.footprint import Footprint
from airflow_hudi_occ.core.config import HeartbeatConfig, WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider.admission import AdmissionRefusedError, AdmissionSettings
from airflow_hudi_occ.provider.operators import table_service as ops

OPTS = {"hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts", "hoodie.write.lock.provider": "filesystem",
        "hoodie.parquet.small.file.limit": "0", "hoodie.client.heartbeat.interval_in_ms": "60000",
        "hoodie.clustering.plan.strategy.partition.selected": "a"}
HB = HeartbeatConfig(interval_ms=60_000, tolerable_misses=2)


class _StubTI:
    dag_id, task_id, run_id, try_number, map_index = "d", "cluster", "r", 1, -1


class _Events(dict):
    def __missing__(self, key):
        class Acc:
            extra: dict = {}
        self[key] = Acc()
        return self[key]


def _table(tmp_path) -> Table:
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                     precombine_field="ts")
    for i in range(2):  # two small file groups in a: something to cluster
        ArrowTableWriter(t, WriteConfig.from_options(OPTS)).write(
            pa.Table.from_pylist([{"id": f"a{i}", "p": "a", "ts": 1}, {"id": f"b{i}", "p": "b", "ts": 1}]),
            "insert")
    return t


@pytest.fixture
def job_seen(monkeypatch):
    """The service job's spark-submit replaced: what the table looked like when it was called."""
    seen = []

    class Hook:
        def __init__(self, *, application_args, on_line, **kw):
            self.args = application_args

        def run(self, application):
            table = Table.open(self.args[self.args.index("--table") + 1])
            newcomer = admission.new_request(table, Footprint.of(["a"], owner="other.write"),
                                             owner_key={"dag_id": "other", "run_id": "r", "task_id": "write"})
            verdict = admission.try_admit(table, newcomer, HB)
            admission.withdraw(table, newcomer.request_id)
            seen.append({"instant": self.args[self.args.index("--instant") + 1],
                         "pending": [i.requested_time for i in table.timeline().pending()],
                         "newcomer": verdict})
            return 0

        def on_kill(self):
            pass

    monkeypatch.setattr(ops, "HudiSparkJobHook", Hook)
    return seen


def _op(table, **kw):
    return ops.HudiTableServiceOperator(task_id="cluster", service="cluster", table_path=table.base_uri,
                                        hudi_conn_id=None, options=OPTS,
                                        admission=AdmissionSettings(**{"poll_s": 0.05, "kind": "table_service", **kw}))


def test_clustering_waits_for_a_live_writer_on_its_partitions_then_holds_writers_off(tmp_path, job_seen):
    table = _table(tmp_path)
    cfg = WriteConfig.from_options(OPTS)
    disjoint = WriteTransaction(table, cfg, footprint=["b"])
    disjoint.begin()
    overlap = WriteTransaction(table, cfg, footprint=["a"])
    overlap.begin()

    def end_overlap_once_waiting():
        deadline = time.time() + 60
        while time.time() < deadline and not admission.requests(table):
            time.sleep(0.05)
        overlap.abort(reason="the overlapping writer ends")

    ender = threading.Thread(target=end_overlap_once_waiting)
    ender.start()
    try:
        out = _op(table, timeout_s=60).execute({"ti": _StubTI(), "outlet_events": _Events()})
    finally:
        ender.join()
        disjoint.abort()
    [call] = job_seen
    assert out["scheduled"] == call["instant"] and call["instant"] > overlap.instant_time
    # it waited for the writer on a (named), never for the one on b
    assert [b.split(" (")[0] for b in out["admission_wait"]["waited_for"]] == [overlap.instant_time]
    assert "on partitions a" in out["admission_wait"]["waited_for"][0]
    # while its job ran, a writer on a was held off by the clustering's admitted request
    assert not call["newcomer"].admitted
    assert [(b.what, b.owner) for b in call["newcomer"].blockers] == [("admitted request", "d.cluster")]
    assert admission.requests(table) == []  # withdrawn when the job ended


def test_on_overlap_fail_refuses_before_planning(tmp_path, job_seen):
    table = _table(tmp_path)
    live = WriteTransaction(table, WriteConfig.from_options(OPTS), footprint=["a"])
    live.begin()
    try:
        with pytest.raises(AdmissionRefusedError, match=live.instant_time):
            _op(table, on_overlap="fail").execute({"ti": _StubTI(), "outlet_events": _Events()})
        assert job_seen == []
        assert [i.requested_time for i in Table.open(table.base_uri).timeline().pending()] == [live.instant_time]
    finally:
        live.abort()


def test_a_clustering_ranked_as_ingestion_when_the_user_says_so(tmp_path):
    table = _table(tmp_path)
    assert _op(table).write_kind == "table_service"
    assert ops.HudiTableServiceOperator(task_id="c", service="cluster", table_path=table.base_uri, hudi_conn_id=None,
                                        options=OPTS).write_kind == "table_service"  # the default
    assert _op(table, kind="ingestion").write_kind == "ingestion"
    op = ops.HudiTableServiceOperator(task_id="c", service="cluster", table_path=table.base_uri, hudi_conn_id=None,
                                      options={**OPTS, "hoodie.occ.write.kind": "backfill"})
    assert op.write_kind == "backfill"
