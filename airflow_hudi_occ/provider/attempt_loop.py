"""The write's attempt loop: engine-neutral, whoever launches the job.

What the loop does, for every launcher (``provider/launchers/``: spark-submit, a Java Hudi
job, the user's own operator on their platform):

- **idempotence**: before every attempt the batch key is looked up among the completed
  commits (``core.transaction.find_committed_batch``): an Airflow retry or a re-run of a batch
  that already committed launches nothing and says so;
- **write windows** (``provider/write_window.py``) and **admission** (``provider/admission.py``)
  before each launch, on the worker or, deferrable, in the triggerer;
- **conflict retries on fresh instants**: a job that lost a conflict (exit 75, or the table's
  attempt record) is launched again after a backoff (:class:`~airflow_hudi_occ.core.commit.retry.RetryPolicy`),
  and begins a new instant on the table as it is now; this budget is separate from Airflow's
  task ``retries``;
- **deferral**: the job started detached, its instant published to XCom, the worker slot given
  back to ``HudiWriteJobTrigger``, which decides from the table and the attempt log (so a
  driver elsewhere, or a job another operator launched, is followed the same way);
- **the attempt record**: instant, outcome, the winning instant and file groups on a conflict,
  seconds discarded, the admission wait; logged and pushed to XCom (``hudi_occ_attempts``);
- **the outcome**: committed (an asset event with the commit's summary), already committed,
  retried, or the task's failure with the package's own error for the retry policy to judge.

The launcher (``provider/launchers/base.py``) only starts a job and reads what it did.

Errors: the task fails through :func:`~airflow_hudi_occ.provider.retry_policy.raise_task_failure`
with the package's error (a ``HudiOccError`` with a remedy); a job killed by a signal or a
crashed JVM fails with ``AirflowException`` (Airflow's own retries may help).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping

from airflow_hudi_occ.core.catalog.sync import sync_table
from airflow_hudi_occ.core.commit.attempt_log import LABELS_OPTION, task_label
from airflow_hudi_occ.core.commit.retry import RetriesExhaustedError, RetryPolicy, RetryRun, run_with_conflict_retries
from airflow_hudi_occ.core.commit.transaction import find_committed_batch
from airflow_hudi_occ.core.concurrency import admission as core_admission
from airflow_hudi_occ.core.config import WRITE_KIND, HeartbeatConfig
from airflow_hudi_occ.core.errors import (HudiOccError, RetryableError, TableLocationNotEmptyError,
                                          TableNotFoundError, from_dict)
from airflow_hudi_occ.core.format.storage import Storage
from airflow_hudi_occ.core.job_protocol import EXIT_ERROR, EXIT_OK, EXIT_RETRYABLE, EXIT_USAGE
from airflow_hudi_occ.core.table.table import Table, check_new_table_location
from airflow_hudi_occ.provider import admission, deferred_job, write_window
from airflow_hudi_occ.provider.assets import commit_summary, emit_table_event
from airflow_hudi_occ.provider.hooks.hudi_occ import HudiOccHook
from airflow_hudi_occ.provider.links import HudiTimelineLink, build_url, table_name_for
from airflow_hudi_occ.provider.retry_policy import raise_task_failure
from airflow_hudi_occ.provider.spark_jobs import check_task_assets
from airflow_hudi_occ.provider.task_keys import (XCOM_ATTEMPTS, XCOM_RUNNING, XCOM_TABLE, XCOM_WAITS,
                                                 default_batch_key, task_labels, task_owner)
from airflow_hudi_occ.provider.triggers.hudi_occ import HudiAdmissionTrigger, HudiWriteJobTrigger
from airflow_hudi_occ.provider.version_compat import AirflowException

if TYPE_CHECKING:
    from airflow_hudi_occ.provider.launchers.base import Launcher
    from airflow_hudi_occ.spark.submit.options import SparkWriteOptions

#: the write operator's extra link (its XCom key is where the loop publishes the link)
TIMELINE_LINK = HudiTimelineLink()


class JobConflict(RetryableError):
    """The attempt lost a conflict (its instant is rolled back, or left for a lazy rollback)."""

    def __init__(self, result: dict):
        self.result = result
        super().__init__(f"instant {result.get('instant')} lost to {result.get('other_instant')} "
                         f"on {len(result.get('file_groups') or [])} file group(s)",
                         remedy="retried with a fresh instant")


class JobFailed(HudiOccError):
    """The attempt's job failed with ``code``; :meth:`error` is the job's own error."""

    def __init__(self, code: int, result: dict | None):
        self.code = code
        self.result = result or {}
        err = self.result.get("error") or {}
        super().__init__(f"the Spark job exited {code}: {err.get('error', 'no result line')}: "
                         f"{err.get('message', '(see the log above)')}",
                         remedy=err.get("remedy") or "read the job's log above")

    def error(self) -> HudiOccError:
        """The job's own error (its class and fields, from the result line), else this one."""
        return from_dict(self.result.get("error") or {}) or self


def committed_instant(table_path: str, storage_options: dict | None, batch_key: str):
    """The batch's completed instant, or None. Where there is no table yet, the folder must
    be new or empty: a folder of other files is refused here, before any job is launched."""
    try:
        table = Table.open(table_path, storage_options or None)
    except TableNotFoundError:
        try:
            check_new_table_location(Storage(table_path, storage_options or None))
        except FileExistsError:  # created meanwhile
            pass
        return None
    return find_committed_batch(table, batch_key)


@dataclass
class WriteRun:
    """What every attempt of one task's write shares."""

    table_path: str
    options: dict
    storage_options: dict | None
    batch_key: str
    labels: dict
    ti: Any
    #: what is written (the engine's job reads them; a Java job decides its own)
    source: str | None = None
    source_format: str = "parquet"
    operation: str = "upsert"
    checkpoint: str | None = None
    attempts: list = field(default_factory=list)
    admission: admission.AdmissionSettings | None = None
    #: admission waits, one per attempt that waited (XCom ``hudi_occ_waits``)
    waits: list = field(default_factory=list)
    #: the wait of the attempt being launched, joined to its attempt record
    pending_wait: dict | None = None
    #: the admission request of the attempt being launched (withdrawn once its instant exists)
    request_id: str | None = None
    #: the writers' heartbeat settings (admission judges liveness by them), from the one check
    heartbeat: HeartbeatConfig | None = None
    #: the options as the launcher's one check parsed them (None: another engine's)
    checked: "SparkWriteOptions | None" = None
    #: the task's context (a launcher may render templates with it)
    context: Any = None
    #: the conflict retries, the task's argument resolved with the options' Hudi key
    policy: RetryPolicy = field(default_factory=RetryPolicy)

    @property
    def owner(self) -> dict:
        return task_owner(self.labels)

    @property
    def owner_label(self) -> str:
        return task_label(self.labels) or f"{self.labels.get('dag_id')}.{self.labels.get('task_id')}"


def _exhausted(run: WriteRun, attempts: list) -> RetriesExhaustedError:
    """Every conflict retry lost: retryable by Airflow later, when the rivals are done."""
    return RetriesExhaustedError(f"{len(run.attempts)} attempts all lost a conflict (batch "
                                 f"{run.batch_key!r})", attempts=list(attempts))


class AttemptLoop:
    """One task run's attempts, for ``task`` (a ``HudiWriteOperator``: its arguments, log,
    ``defer``) and its launcher. Made fresh for each entry point (execute, and each resumption
    after a deferral)."""

    def __init__(self, task, context):
        self.task = task
        self.launcher: "Launcher" = task.launcher
        self.log = task.log
        self.context = context
        self.detached: deferred_job.DetachedJob | None = None
        self.launcher.attach(task, context)

    # -- the write, resolved once per entry ----------------------------------------------------

    def resolve(self) -> WriteRun:
        """The connection, options and batch key of this write; a bad key fails here, naming
        it, before any job is launched."""
        t, context = self.task, self.context
        hook = HudiOccHook(t.hudi_conn_id, table_path=t.table_path, options=t.options)
        labels = task_labels(context)
        try:
            table_path = hook.table_path
            options = hook.write_options({LABELS_OPTION: json.dumps(labels, sort_keys=True)})
            options.setdefault(WRITE_KIND.key, t.admission.kind)  # declared in the footprint
            checked = self.launcher.check_options(hook, options)
            settings = t.admission.resolved(options)
            policy = conflict_policy(t.conflict_retries, options)
        except HudiOccError as e:
            raise_task_failure(t, e)
        ti = context["ti"]
        ti.xcom_push(key=XCOM_TABLE, value=table_path)
        t.resolved_table_path = table_path
        return WriteRun(table_path=table_path, options=options, storage_options=hook.storage_options,
                        batch_key=str(t.batch_key or t.checkpoint or default_batch_key(context)),
                        labels=labels, ti=ti, source=t.source, source_format=t.source_format,
                        operation=t.operation, checkpoint=t.checkpoint, admission=settings,
                        checked=checked, context=context, policy=policy,
                        heartbeat=checked.write_config.heartbeat if checked is not None
                        else admission.heartbeat_of(options))

    def resumed(self, attempts: list | None, waits: list | None) -> WriteRun:
        run = self.resolve()
        run.attempts = list(attempts or [])
        run.waits = list(waits or [])
        return run

    # -- synchronous: attempts on the worker until one commits ---------------------------------

    def execute(self) -> dict:
        run = self.resolve()
        check_task_assets(self.task, run.table_path, run.storage_options)
        if self.task.deferrable:
            return self.deferred_attempt(run, 1)
        try:
            out = run_with_conflict_retries(lambda n: self.attempt(run, n), run.policy, RetryRun())
        except RetriesExhaustedError as e:
            raise_task_failure(self.task, _exhausted(run, e.attempts))
        except JobFailed as e:
            self.job_failed(e)
        finally:
            self.release_windows(run)
        return self.committed(run, out)

    def attempt(self, run: WriteRun, n: int) -> dict:
        """One attempt: the batch already committed? wait for write windows, launch, decide."""
        if self.launcher.killed:
            raise AirflowException("the task was killed")
        found = self.find_committed(run)
        if found is not None:
            return self.already_committed(run, found)
        self.yield_to_windows(run)
        run.request_id = self.admit(run, n)

        def began(payload: dict) -> None:
            run.ti.xcom_push(key=XCOM_RUNNING, value={**payload, "table": run.table_path})
            self.log.info("attempt %d began instant %s", n, payload.get("instant"))

        try:
            code, began_payload, result, seconds = self.launcher.run_attempt(run, n, began)
        except HudiOccError as e:
            raise_task_failure(self.task, e)
        finally:
            admission.withdraw(run.table_path, run.storage_options, run.request_id)
            run.request_id = None
        rec = self.record(run, n, code, began_payload, result, seconds)
        return self.decide(run, n, code, result, rec)

    def find_committed(self, run: WriteRun):
        try:
            return committed_instant(run.table_path, run.storage_options, run.batch_key)
        except TableLocationNotEmptyError as e:
            raise_task_failure(self.task, e)

    def job_failed(self, e: JobFailed):
        """Exit 1 or 2: the job's own error, for the retry policy to judge; anything else
        (killed by a signal, a JVM crash) Airflow's default retries may help."""
        if e.code in (EXIT_ERROR, EXIT_USAGE):
            raise_task_failure(self.task, e.error())
        raise AirflowException(str(e)) from e

    def committed(self, run: WriteRun, out: dict) -> dict:
        """The end of a write that committed (or found its batch committed): log, asset event."""
        conflicts = sum(1 for a in run.attempts if a["outcome"] == "conflict")
        self.log.info("batch %r: %s after %d attempt(s), %d conflict(s), %d admission wait(s) "
                      "(%.1f s)", run.batch_key, out["outcome"], len(run.attempts), conflicts,
                      len(run.waits), sum(w["seconds"] for w in run.waits))
        # Only here, after a commit: a task that failed (retries exhausted) emits no event.
        self.task.commit_summary = commit_summary(
            run.table_path, run.storage_options, instant=out.get("instant"), operation=run.operation,
            outcome=out.get("outcome"), conflict_retries=conflicts, attempts=len(run.attempts),
            batch_key=run.batch_key)
        emit_table_event(self.task, self.context, self.task.commit_summary)
        return out

    def already_committed(self, run: WriteRun, inst) -> dict:
        self.release_windows(run)
        self.log.info("batch %r is already committed as instant %s (completed %s): this run "
                      "writes nothing new", run.batch_key, inst.requested_time, inst.completion_time)
        out = {"outcome": "already_committed", "instant": inst.requested_time,
               "completion_time": inst.completion_time, "table": run.table_path,
               "batch_key": run.batch_key, "attempts": run.attempts}
        # The try before may have committed and then failed its catalog sync (a metastore
        # down): this try syncs, as the job would have after its commit (docs/catalog-sync.md).
        # (Our engine's options only: a Java job syncs with Java's own tool.)
        config = run.checked.write_config if run.checked is not None else None
        if config is not None and config.meta_sync.enabled:
            try:
                rep = sync_table(Table.open(run.table_path, run.storage_options or None), config,
                                 committed_instant=inst.requested_time)
            except HudiOccError as e:
                raise_task_failure(self.task, e)
            out["catalog_sync"] = rep.to_json() if rep is not None else None
        return out

    # -- write windows and admission -----------------------------------------------------------

    def yield_to_windows(self, run: WriteRun) -> None:
        """Wait (bounded) while an older write-window request of another DAG run covers the
        batch's partitions (``provider/write_window.py``)."""
        windows = self.task.write_windows
        if windows is None:
            return
        try:
            table = Table.open(run.table_path, run.storage_options or None)
        except TableNotFoundError:
            return
        deadline = time.time() + windows.timeout_s
        announced = False
        while True:
            ahead = write_window.yielding_to(table, windows.partitions, run.owner)
            if not ahead:
                return
            if time.time() >= deadline:
                self.log.warning("still yielding to write window(s) %s after %.0f s: writing anyway "
                                 "(OCC keeps the table correct)", [r.request_id for r in ahead],
                                 windows.timeout_s)
                return
            if not announced:
                self.log.info("yielding to older write-window request(s) %s on partitions %s",
                              [(r.request_id, r.owner.get("dag_id")) for r in ahead],
                              sorted({p for r in ahead for p in (r.partitions or ["*"])}))
                announced = True
            time.sleep(windows.poll_s)

    def release_windows(self, run: WriteRun) -> None:
        try:
            write_window.release_owned(Table.open(run.table_path, run.storage_options or None),
                                       run.owner)
        except Exception:  # noqa: BLE001 - no table yet, or nothing to release
            pass

    def batch_request(self, run: WriteRun):
        """(table, filed admission request), or None: ``on_overlap='go'``, or no table and
        the launcher does not create one before its job."""
        if run.admission is None or run.admission.on_overlap == core_admission.GO:
            return None
        table = admission.open_table(run.table_path, run.storage_options)
        if table is None:
            try:
                table = self.launcher.create_for_first_write(run)
            except HudiOccError as e:
                raise_task_failure(self.task, e)
        if table is None:
            return None
        fp = admission.batch_footprint(table, run.source, run.source_format, owner=run.owner_label,
                                       kind=run.options.get(WRITE_KIND.key, run.admission.kind),
                                       storage_options=run.storage_options, operation=run.operation,
                                       options=run.options)
        return table, admission.file_request(table, fp, run.owner)

    def admit(self, run: WriteRun, n: int) -> str | None:
        """Attempt ``n``'s admission on this worker; the request id to withdraw once the job's
        instant exists (its declared footprint takes over) or the attempt ends."""
        filed = self.batch_request(run)
        if filed is None:
            return None
        table, req = filed
        try:
            res = admission.wait_on_worker(table, req, run.heartbeat, run.admission,
                                           self.log, killed=lambda: self.launcher.killed,
                                           storage_options=run.storage_options)
        except admission.AdmissionRefusedError as e:
            raise_task_failure(self.task, e)
        self.note_wait(run, n, res.to_json())
        return req.request_id

    def note_wait(self, run: WriteRun, n: int, wait: dict) -> None:
        if not wait.get("waited_for"):
            return
        run.pending_wait = {"attempt": n, **wait}
        run.waits.append(run.pending_wait)
        run.ti.xcom_push(key=XCOM_WAITS, value=run.waits)

    # -- the attempt's record and the decision -------------------------------------------------

    def record(self, run: WriteRun, n: int, code: int, began: dict, result: dict,
               seconds: float) -> dict:
        """The attempt as XCom and the timeline page see it."""
        rec = {"attempt": n, "exit_code": code, "instant": result.get("instant") or began.get("instant"),
               "outcome": result.get("outcome") or ("killed" if self.launcher.killed else "error"),
               "seconds": seconds}
        for k in ("completion_time", "other_instant", "file_groups", "seconds_discarded",
                  "files_discarded", "stats", "attempted_instant", "recovered_from"):
            if result.get(k) is not None:
                rec[k] = result[k]
        if result.get("error"):
            rec["error"] = {k: result["error"].get(k) for k in ("error", "message", "remedy")}
        if run.pending_wait is not None and run.pending_wait.get("attempt") == n:
            rec["waited_s"] = run.pending_wait["seconds"]
            rec["waited_for"] = run.pending_wait["waited_for"]
            run.pending_wait = None
        run.attempts.append(rec)
        run.ti.xcom_push(key=XCOM_ATTEMPTS, value=run.attempts)
        return rec

    def decide(self, run: WriteRun, n: int, code: int, result: dict, rec: dict) -> dict:
        """Done, retry on a fresh instant (:class:`JobConflict`), or fail (:class:`JobFailed`)."""
        if code == EXIT_OK:
            outcome = result.get("outcome") or "committed"
            if outcome == "already_committed":
                self.log.info("attempt %d: batch %r is already committed as instant %s "
                              "(completed %s), found under the commit lock: this run writes "
                              "nothing new%s", n, run.batch_key, rec["instant"],
                              rec.get("completion_time"),
                              f"; its attempt {result['attempted_instant']} was rolled back"
                              if result.get("attempted_instant") else "")
            elif outcome == "recommitted":
                self.log.info("attempt %d re-committed instant %s (completed %s), staged by the "
                              "dead writer %s: no data rewritten", n, rec["instant"],
                              rec.get("completion_time"), result.get("recovered_from"))
            else:
                self.log.info("attempt %d committed instant %s (completed %s): %s", n,
                              rec["instant"], rec.get("completion_time"), rec.get("stats"))
            return {**result, "outcome": outcome, "table": run.table_path,
                    "batch_key": run.batch_key, "attempts": run.attempts}
        if self.launcher.killed:
            raise AirflowException(f"the task was killed during attempt {n} (instant "
                                   f"{rec['instant']}; left for rollback)")
        if code == EXIT_RETRYABLE:
            self.log.warning("attempt %d: instant %s lost a conflict to %s on file groups %s; "
                             "%.1f s of work discarded; retrying with a fresh instant",
                             n, rec["instant"], rec.get("other_instant"), rec.get("file_groups"),
                             rec.get("seconds_discarded") or 0.0)
            raise JobConflict(result)
        raise JobFailed(code, result)

    # -- deferrable: launch detached, defer, resume on the trigger's event ---------------------

    def deferred_attempt(self, run: WriteRun, n: int) -> dict:
        """Attempt ``n``: as :meth:`attempt` up to the launch, which is detached; then publish
        the instant and the timeline link and defer (this method does not return then)."""
        found = self.find_committed(run)
        if found is not None:
            return self.committed(run, self.already_committed(run, found))
        self.yield_to_windows(run)
        request_id = None
        filed = self.batch_request(run)
        if filed is not None:
            table, req = filed
            request_id = req.request_id
            verdict = admission.named(table, core_admission.try_admit(
                table, req, run.heartbeat, starvation_s=run.admission.starvation_s))
            if not verdict.admitted:
                if run.admission.on_overlap == core_admission.FAIL:
                    core_admission.withdraw(table, req.request_id)
                    raise_task_failure(self.task, admission.AdmissionRefusedError(
                        "on_overlap='fail': live writer(s) share partitions with this batch: "
                        f"{verdict.describe()}"))
                self.log.info("waiting for %s (in the triggerer, holding no worker slot; at most "
                              "%.0f s)", verdict.describe(), run.admission.timeout_s)
                self.task.defer(trigger=HudiAdmissionTrigger(
                    run.table_path, req.request_id, options=deferred_job.heartbeat_options(run.options),
                    storage_options=run.storage_options, poll_interval=run.admission.poll_s,
                    timeout_s=run.admission.timeout_s, starvation_s=run.admission.starvation_s,
                    started_at=time.time()),
                    method_name="execute_admitted",
                    kwargs={"attempt": n, "attempts": run.attempts, "waits": run.waits})
        return self.deferred_launch(run, n, request_id)

    def admitted(self, event: dict, attempt: int, attempts: list | None, waits: list | None) -> dict:
        """The admission trigger's event: admitted (or waited out): launch attempt ``attempt``."""
        run = self.resumed(attempts, waits)
        wait = {"seconds": event.get("waited_s") or 0.0, "waited_for": event.get("waited_for") or [],
                "timed_out": event.get("status") == "timeout"}
        if wait["timed_out"]:
            self.log.warning("still waiting for %s after %.1f s: starting anyway (OCC still decides "
                             "the commit)", "; ".join(event.get("blockers") or []), wait["seconds"])
        else:
            self.log.info("admitted after waiting %.1f s for %s", wait["seconds"],
                          "; ".join(wait["waited_for"]) or "nothing")
        self.note_wait(run, attempt, wait)
        return self.deferred_launch(run, attempt, event.get("request_id"))

    def deferred_launch(self, run: WriteRun, n: int, request_id: str | None) -> dict:
        """Attempt ``n`` admitted: launch it detached, publish its instant, defer to its job."""
        run.request_id = request_id  # named in the job's labels (its footprint declares it)
        try:
            job, keep = self.launcher.start(run, n)
        except HudiOccError as e:
            admission.withdraw(run.table_path, run.storage_options, request_id)
            raise_task_failure(self.task, e)
        self.detached = job
        self.log.info("attempt %d launched detached (writer %s, log %s)", n, job.writer_id, job.log_path)
        job.instant = self.launcher.wait_for_instant(run, job)
        if job.instant:  # the instant blocks now, with the request's reach
            admission.link(run.table_path, run.storage_options, request_id, job.instant)
        elif job.alive() is False:
            admission.withdraw(run.table_path, run.storage_options, request_id)
            request_id = None
        self.publish_running(run, job, n)
        self.task.defer(trigger=HudiWriteJobTrigger(
            run.table_path, job.to_json(), options=deferred_job.heartbeat_options(run.options),
            storage_options=run.storage_options, poll_interval=self.launcher.poll_interval),
            method_name="execute_complete",
            kwargs={"attempt": n, "attempts": run.attempts, "submitted_at": job.started_at,
                    "waits": run.waits, "request_id": request_id, "job": {"detached": job.to_json(), **keep}})

    def publish_running(self, run: WriteRun, job: deferred_job.DetachedJob, n: int) -> None:
        lab = run.labels
        if job.instant:
            run.ti.xcom_push(key=XCOM_RUNNING, value={"instant": job.instant, "attempt": n,
                                                     "writer_id": job.writer_id, "pid": job.pid,
                                                     "table": run.table_path})
            self.log.info("attempt %d began instant %s; deferring while the job runs", n, job.instant)
        link = build_url(table_name_for(self.task, {"table_path": run.table_path}), dag_id=lab["dag_id"],
                         task_id=lab["task_id"], run_id=lab["run_id"], instant=job.instant)
        run.ti.xcom_push(key=TIMELINE_LINK.xcom_key, value=link)
        self.launcher.on_running(run, job, n)

    def complete(self, event: dict, attempt: int, attempts: list | None, submitted_at: float | None,
                 waits: list | None, request_id: str | None, job: dict | None) -> dict:
        """The trigger's outcome of attempt ``attempt``: done, another deferred attempt after a
        conflict (with backoff), or the failure raised as the synchronous path raises it.
        ``job``: what :meth:`deferred_launch` kept of the attempt for the launcher's outcome."""
        run = self.resumed(attempts, waits)
        admission.withdraw(run.table_path, run.storage_options, request_id)
        seconds = round(time.time() - submitted_at, 3) if submitted_at else 0.0
        status, code, result = self.launcher.outcome(run, attempt, event, seconds, job or {})
        rec = self.record(run, attempt, code, {"instant": event.get("instant")}, result, seconds)
        try:
            if status == deferred_job.ALREADY_COMMITTED:
                found = committed_instant(run.table_path, run.storage_options, run.batch_key)
                if found is None:
                    raise JobFailed(EXIT_ERROR, {**result, "error": {
                        "error": "BatchNotFound", "message": "the job said the batch was already "
                        f"committed, but no completed instant carries {run.batch_key!r}"}})
                out = self.already_committed(run, found)
            else:
                out = self.decide(run, attempt, code, result, rec)
        except JobConflict:
            policy = run.policy
            if attempt > policy.max_conflict_retries:
                self.release_windows(run)
                raise_task_failure(self.task, _exhausted(run, []))
            delay = policy.delay(attempt)
            self.log.info("retrying in %.1f s with a fresh instant (attempt %d of %d)", delay,
                          attempt + 1, policy.max_conflict_retries + 1)
            policy.sleep(delay)
            return self.deferred_attempt(run, attempt + 1)
        except JobFailed as e:
            self.release_windows(run)
            self.job_failed(e)
        self.release_windows(run)
        return self.committed(run, out)

    def kill(self) -> None:
        """``on_kill``: the detached job (killed before it deferred: the trigger does it after)
        and the launcher's running job."""
        if self.detached is not None:
            self.log.info("killed the detached job: %s", self.detached.kill())
        self.launcher.kill()


def conflict_policy(given: int | RetryPolicy | None, options: Mapping[str, Any]) -> RetryPolicy:
    """The task's ``conflict_retries`` (a policy, a number, or None) with Hudi's
    ``hoodie.write.num.retries.on.conflict.failures`` of ``options``: one budget
    (:meth:`RetryPolicy.budget` refuses the two set to different numbers)."""
    if isinstance(given, RetryPolicy):
        n = RetryPolicy.budget(given.max_conflict_retries, options)
        return given if n == given.max_conflict_retries else replace(given, max_conflict_retries=n)
    return RetryPolicy(max_conflict_retries=RetryPolicy.budget(given, options))
