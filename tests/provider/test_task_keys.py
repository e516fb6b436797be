"""``task_keys``: a task's labels, owner and default batch key (a mapped task's index included)."""

from __future__ import annotations

from types import SimpleNamespace

from airflow_hudi_occ.core.concurrency import admission
from airflow_hudi_occ.core.concurrency.footprint import BACKFILL, Footprint
from airflow_hudi_occ.core.config import HeartbeatConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider.task_keys import default_batch_key, task_labels, task_owner


def _ctx(map_index=-1):
    return {"ti": SimpleNamespace(dag_id="d", task_id="t", run_id="r", try_number=2, map_index=map_index)}


def test_labels_owner_and_batch_key():
    labels = task_labels(_ctx())
    assert labels == {"dag_id": "d", "task_id": "t", "run_id": "r", "try_number": "2", "map_index": "-1"}
    assert task_owner(labels) == {"dag_id": "d", "run_id": "r", "task_id": "t"}
    assert default_batch_key(_ctx()) == "d/r/t"
    assert default_batch_key(_ctx(3)) == "d/r/t/3"


def test_a_mapped_tasks_owner_is_its_own_so_its_siblings_queue_for_its_partitions(tmp_path):
    """The mapped tasks of one run are different writers: admission must not take one for
    another's retry (``same_owner``), or two siblings writing one partition both go and one
    loses its write to the other."""
    first, second = (task_owner(task_labels(_ctx(i))) for i in (0, 1))
    assert first == {"dag_id": "d", "run_id": "r", "task_id": "t", "map_index": "0"}
    assert task_owner(task_labels(_ctx())) == {"dag_id": "d", "run_id": "r", "task_id": "t"}
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"])
    hb = HeartbeatConfig(interval_ms=60_000, tolerable_misses=2)
    a = admission.new_request(table, Footprint.of(["day=1"], owner="d.t[0]", kind=BACKFILL), owner_key=first)
    b = admission.new_request(table, Footprint.of(["day=1"], owner="d.t[1]", kind=BACKFILL), owner_key=second)
    assert admission.try_admit(table, a, hb).admitted
    v = admission.try_admit(table, b, hb)
    assert not v.admitted and [(x.ident, x.owner) for x in v.blockers] == [(a.request_id, "d.t[0]")]
    # the same mapped task's next try is the same owner: its own old request does not hold it
    admission.withdraw(table, b.request_id)
    again = admission.new_request(table, Footprint.of(["day=1"], owner="d.t[0]", kind=BACKFILL),
                                  owner_key=task_owner(task_labels(_ctx(0))))
    assert admission.try_admit(table, again, hb).admitted
