"""How a task is known to others: the XCom keys a write task publishes (read by the sensors and
the timeline page), the labels the attempt log keeps for each attempt, the default batch key.

Shared by the operators and the sensors, so that neither imports the other.
"""

from __future__ import annotations

#: XCom keys (also read by the sensors and the timeline page)
XCOM_ATTEMPTS = "hudi_occ_attempts"
XCOM_RUNNING = "hudi_occ_running_instant"
XCOM_TABLE = "hudi_occ_table"
XCOM_WAITS = "hudi_occ_waits"  # admission waits: seconds and whom for, per attempt
#: the external launcher's job of the current attempt: its entry point, arguments, command line
#: and writer id (also in the template context under this name)
XCOM_JOB = "hudi_occ_job"


def task_labels(context) -> dict:
    """Who is writing: what the attempt log and the timeline page show for this attempt."""
    ti = context["ti"]
    return {"dag_id": ti.dag_id, "task_id": ti.task_id, "run_id": ti.run_id,
            "try_number": str(ti.try_number), "map_index": str(getattr(ti, "map_index", -1))}


def default_batch_key(context) -> str:
    ti = context["ti"]
    key = f"{ti.dag_id}/{ti.run_id}/{ti.task_id}"
    mi = getattr(ti, "map_index", -1)
    return key if mi is None or mi < 0 else f"{key}/{mi}"


def task_owner(labels: dict) -> dict:
    """The part of the labels that names a DAG run's task (not its try): the owner of its
    admission requests and write windows. A mapped task's index is part of it, so the mapped
    tasks of one run queue for each other's partitions like any two writers (a write window is
    shared by the whole DAG run: it compares only the DAG and run)."""
    owner = {k: labels[k] for k in ("dag_id", "run_id", "task_id")}
    mi = str(labels.get("map_index", "-1"))
    if mi not in ("", "-1", "None"):
        owner["map_index"] = mi
    return owner
