"""``task_keys``: a task's labels, owner and default batch key (a mapped task's index included)."""

from __future__ import annotations

from types import SimpleNamespace

from airflow_hudi_occ.provider.task_keys import default_batch_key, task_labels, task_owner


def _ctx(map_index=-1):
    return {"ti": SimpleNamespace(dag_id="d", task_id="t", run_id="r", try_number=2, map_index=map_index)}


def test_labels_owner_and_batch_key():
    labels = task_labels(_ctx())
    assert labels == {"dag_id": "d", "task_id": "t", "run_id": "r", "try_number": "2", "map_index": "-1"}
    assert task_owner(labels) == {"dag_id": "d", "run_id": "r", "task_id": "t"}
    assert default_batch_key(_ctx()) == "d/r/t"
    assert default_batch_key(_ctx(3)) == "d/r/t/3"
