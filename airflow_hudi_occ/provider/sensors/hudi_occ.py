"""Sensors: watch a running write for an early conflict; wait for a write window.

:class:`HudiEarlyConflictSensor` follows a write task's running instant (XCom
``hudi_occ_running_instant`` of ``write_task_id``, or a templated ``instant``) and, deferred to
the triggerer (:class:`~airflow_hudi_occ.provider.triggers.hudi_occ.HudiEarlyConflictTrigger`),
raises the engine's abort signal as soon as the write is doomed. It follows the write across
its conflict retries: when the watched instant is gone (rolled back) and the write task has
published a newer instant, it watches that one.

:class:`HudiWriteWindowSensor` waits until no live writer holds markers on the partitions the
next task will write, with a request that makes newer writers yield; the protocol and why it
is fair are in ``airflow_hudi_occ/provider/write_window.py``.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

from airflow_hudi_occ.provider.version_compat import AirflowException, BaseSensorOperator, PokeReturnValue

from airflow_hudi_occ.core.errors import TableNotFoundError
from airflow_hudi_occ.provider import write_window
from airflow_hudi_occ.provider.arguments import check_sensor_options
from airflow_hudi_occ.provider.hooks.hudi_occ import HudiOccHook
from airflow_hudi_occ.provider.conflict_watch import check_instant
from airflow_hudi_occ.provider.task_keys import XCOM_RUNNING, task_labels, task_owner
from airflow_hudi_occ.provider.triggers.hudi_occ import HudiEarlyConflictTrigger


class HudiEarlyConflictSensor(BaseSensorOperator):
    """Abort a running write early when another writer has already doomed it.

    :param write_task_id: the HudiWriteOperator task to follow (its running-instant XCom)
    :param instant: or an explicit instant time (templated)
    :param missing_instant_timeout_s: how long to wait for the write to publish an instant
        before concluding there is nothing to watch (it finished or never started)
    :param deferrable: poll in the triggerer (default) instead of a worker slot
    """

    template_fields: Sequence[str] = ("table_path", "instant", "options")
    ui_color = "#ffe8c2"

    def __init__(self, *, table_path: str | None = None, write_task_id: str | None = None,
                 instant: str | None = None, options: dict[str, Any] | None = None,
                 hudi_conn_id: str | None = HudiOccHook.default_conn_name,
                 missing_instant_timeout_s: float = 120.0, deferrable: bool = True,
                 max_follow: int = 20, **kwargs):
        super().__init__(**kwargs)
        check_sensor_options("HudiEarlyConflictSensor", self.task_id, options)
        if not write_task_id and not instant:
            raise ValueError("give write_task_id (follow a write task) or instant")
        self.table_path = table_path
        self.write_task_id = write_task_id
        self.instant = instant
        self.options = options or {}
        self.hudi_conn_id = hudi_conn_id
        self.missing_instant_timeout_s = missing_instant_timeout_s
        self.deferrable = deferrable
        self.max_follow = max_follow

    def _hook(self) -> HudiOccHook:
        return HudiOccHook(self.hudi_conn_id, table_path=self.table_path, options=self.options)

    def _running_instant(self, context, after: str | None = None) -> str | None:
        """The instant to watch: explicit, else the write task's latest published one."""
        if self.instant and after is None:
            return str(self.instant)
        if not self.write_task_id:
            return None
        deadline = time.time() + (self.missing_instant_timeout_s if after is None else 2 * self.poke_interval)
        while True:
            v = context["ti"].xcom_pull(task_ids=self.write_task_id, key=XCOM_RUNNING)
            t = (v or {}).get("instant") if isinstance(v, dict) else None
            if t and (after is None or t > after):
                return t
            if time.time() >= deadline:
                return None
            time.sleep(min(self.poke_interval, 5))

    def execute(self, context) -> Any:
        hook = self._hook()
        self._watch = {"table": hook.table_path, "options": hook.write_options(),
                       "storage_options": hook.storage_options}
        instant = self._running_instant(context)
        if instant is None:
            self.log.info("no running instant of %s to watch: nothing to do", self.write_task_id)
            return {"status": "nothing_to_watch"}
        return self._watch_instant(context, instant, [])

    def _watch_instant(self, context, instant: str, history: list) -> Any:
        w = self._watch if hasattr(self, "_watch") else None
        if w is None:
            hook = self._hook()
            w = {"table": hook.table_path, "options": hook.write_options(), "storage_options": hook.storage_options}
        self.log.info("watching instant %s of %s for early conflicts", instant, w["table"])
        if self.deferrable:
            self.defer(trigger=HudiEarlyConflictTrigger(w["table"], instant, w["options"],
                                                        w["storage_options"], self.poke_interval),
                       method_name="execute_complete", kwargs={"history": history})
        while True:  # not deferrable: poll in this worker
            event = check_instant(w["table"], instant, w["options"], w["storage_options"])
            if event is not None:
                return self.execute_complete(context, event, history=history)
            time.sleep(self.poke_interval)

    def execute_complete(self, context, event: dict, history: list | None = None) -> Any:
        history = list(history or []) + [event]
        status = event.get("status")
        if status == "error":
            raise AirflowException(f"early-conflict watch of {event.get('instant')} failed: "
                                   f"{event.get('message')}")
        if status == "conflict":
            self.log.warning("instant %s is doomed by %s on file groups %s: abort signal raised",
                             event["instant"], event.get("other_instant"), event.get("file_groups"))
        else:
            self.log.info("instant %s: %s", event.get("instant"), status)
        if status in ("conflict", "gone") and self.write_task_id and len(history) < self.max_follow:
            nxt = self._running_instant(context, after=event.get("instant"))
            if nxt is not None:  # the write retried with a fresh instant: follow it
                return self._watch_instant(context, nxt, history)
        return {"status": "done", "watched": history}


class HudiWriteWindowSensor(BaseSensorOperator):
    """Wait for a write window on ``partitions`` (see ``provider/write_window.py``).

    The request is keyed by this task (dag_id, run_id, task_id), so it survives reschedules;
    it is granted when no live writer holds markers (or planned file groups) on the partitions
    and no older request of another run overlaps them. Once granted, writes of other runs
    that honour windows wait for it, until the write task of this run ends (it releases the
    request) or ``hold_s`` passes.
    """

    template_fields: Sequence[str] = ("table_path", "partitions", "options")
    ui_color = "#e3f5d8"

    def __init__(self, *, partitions: list[str] | None, table_path: str | None = None,
                 options: dict[str, Any] | None = None,
                 hudi_conn_id: str | None = HudiOccHook.default_conn_name,
                 ttl_s: float | None = None, hold_s: float = 3600.0, **kwargs):
        super().__init__(**kwargs)
        check_sensor_options("HudiWriteWindowSensor", self.task_id, options)
        self.partitions = partitions
        self.table_path = table_path
        self.options = options or {}
        self.hudi_conn_id = hudi_conn_id
        self.ttl_s = ttl_s
        self.hold_s = hold_s

    def poke(self, context) -> PokeReturnValue:
        hook = HudiOccHook(self.hudi_conn_id, table_path=self.table_path, options=self.options)
        try:
            table = hook.get_table()
        except TableNotFoundError:
            return PokeReturnValue(True, {"request_id": None, "reason": "no table yet"})
        labels = task_labels(context)
        owner = task_owner(labels)
        ttl = self.ttl_s or max(60.0, 3 * float(self.poke_interval) + 30.0)
        mine = [r for r in write_window.requests(table) if r.owner == owner]
        req = mine[0] if mine else write_window.new_request(table, self.partitions, owner, ttl_s=ttl,
                                                            hold_s=self.hold_s)
        if req.state == write_window.GRANTED:
            return PokeReturnValue(True, {"request_id": req.request_id, "partitions": req.partitions})
        granted, why = write_window.try_grant(table, req, hook.write_config().heartbeat)
        if granted:
            self.log.info("write window %s granted on %s", req.request_id, req.partitions or "every partition")
            return PokeReturnValue(True, {"request_id": req.request_id, "partitions": req.partitions})
        self.log.info("write window %s waiting: live writers %s, older requests %s",
                      req.request_id, why["writers"], why["older_requests"])
        return PokeReturnValue(False)
