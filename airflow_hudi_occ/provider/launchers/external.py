"""The user's own operator runs the engine's job on their platform; the table decides.

Why: most Airflow users do not run spark-submit themselves. They launch Spark through their
platform's operator (EMR Serverless, EMR steps, Dataproc batches, Databricks runs,
``SparkKubernetesOperator``, the Spark provider's ``SparkSubmitOperator``), which knows the
platform's credentials, images and queues. The OCC machinery does not need to own the launch:
it needs the attempt's arguments in the job and the job's records in the table. So for each
attempt the write operator (``provider/attempt_loop.py``):

1. admits the attempt (write windows, admission) as for any launcher;
2. builds :class:`ExternalJob`: the engine's entry point (``spark/job.py``, or where the
   platform sees it: ``application=``), its arguments (table, batch key, attempt, options:
   never a credential) and the writer id the job's attempt records will carry; it is pushed to
   XCom (``hudi_occ_job``) and put in the template context under the same name;
3. calls ``operator(job)`` for the operator that runs it, renders that operator's templates
   with the task's context (so ``bash_command="spark-submit {{ hudi_occ_job.command }}"``
   works as well as ``application_args=job.args``), and runs its ``execute`` in this task;
4. follows the job by its writer id in the table's attempt log, as it follows a driver on a
   cluster (``provider/deferred_job.py``): deferrable, in ``HudiWriteJobTrigger``; else on the
   worker. A lost conflict is launched again, through a fresh ``operator(job)``, on a fresh
   instant.

When ``waits=True`` (the default: ``SparkSubmitOperator``, ``BashOperator``, and the platform
operators with ``wait_for_completion=True``) the operator's return means the job ended, so the
outcome is read at once; with ``waits=False`` (an operator that only submits) the attempt log
and the instant's heartbeat tell when it ended. The operator must not defer itself: the write
operator defers (give it ``deferrable=False``).

Credentials: secret options and the table's storage options are never in the arguments (XCom
is readable by every user of the UI); the platform gives the job its own (an instance role, or
``HUDI_OCC_JOB_SECRETS`` from its secret store, ``core/job_secrets.py``).

Errors: an ``operator`` that is not callable is a ``ConfigError`` when the DAG is parsed; one
that returns no operator, or an operator that defers, is a ``ConfigError`` of the task.
"""

from __future__ import annotations

import re
import shlex
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.job_protocol import EXIT_ERROR, EXIT_OK
from airflow_hudi_occ.core.job_secrets import split_secret_options
from airflow_hudi_occ.provider import deferred_job
from airflow_hudi_occ.provider.launchers.base import (Launched, Launcher, attempt_options, job_arguments,
                                                      result_of_event, writer_id)
from airflow_hudi_occ.provider.spark_jobs import SPARK_APP, application_for
from airflow_hudi_occ.provider.task_keys import XCOM_JOB

if TYPE_CHECKING:
    from airflow_hudi_occ.provider.attempt_loop import WriteRun

#: how the platform operators' failures name the job's exit status (SparkSubmitHook: "Error
#: code is: 75."; BashOperator: "returned a non-zero exit code 75.")
_EXIT_IN_MESSAGE = re.compile(r"(?:error code is:?|exit code|exit status)\s*(-?\d+)", re.IGNORECASE)


@dataclass
class ExternalJob:
    """Attempt ``attempt``'s job as the user's operator must run it."""

    application: str
    args: list[str]
    writer_id: str
    attempt: int
    #: the secret options and storage options left out of ``args`` (their keys only)
    withheld: list[str] = field(default_factory=list)

    @property
    def command(self) -> str:
        """The entry point and its arguments as one shell-quoted string (for ``spark-submit
        {{ hudi_occ_job.command }}`` or a platform's command field)."""
        return shlex.join([self.application, *self.args])

    def to_json(self) -> dict:
        return {**asdict(self), "command": self.command}


def exit_code_in(error: BaseException) -> int:
    """The job's exit status named in its operator's failure, else 1."""
    m = _EXIT_IN_MESSAGE.search(str(error))
    return int(m.group(1)) if m else EXIT_ERROR


class ExternalLauncher(Launcher):
    """Each attempt's job is run by an operator of the user's, built by ``operator(job)``.

    :param operator: ``ExternalJob -> BaseOperator``: the operator that runs ``job`` (its
        ``application`` with its ``args``, or its ``command``) on the platform; called once per
        attempt, outside any DAG (its ``task_id`` is only a name in the log)
    :param application: the entry point as the platform sees it (templated; e.g.
        ``s3://bucket/jobs/airflow_hudi_occ/spark/job.py``); default: the engine's
        ``spark/job.py`` on this machine, or ``$HUDI_OCC_SPARK_APPLICATION``
    :param waits: the operator returns when the job has ended (False: it only submits)
    :param poll_interval: seconds between looks at the table while the job runs
    :param instant_wait_s: how long the worker waits for the attempt's instant before it
        defers (to push it to XCom first); the trigger finds it if it comes later
    """

    template_fields: Sequence[str] = ("application",)

    def __init__(self, operator: Callable[[ExternalJob], Any], *, application: str | None = None,
                 waits: bool = True, poll_interval: float = 5.0, instant_wait_s: float = 60.0):
        if not callable(operator):
            raise ConfigError(f"operator must be a callable that takes the attempt's job and returns "
                              f"the operator that runs it, got {type(operator).__name__}",
                              key="operator", remedy="pass operator=lambda job: SparkSubmitOperator("
                              "task_id='submit', application=job.application, application_args=job.args)")
        super().__init__(poll_interval=poll_interval, instant_wait_s=instant_wait_s)
        self.operator = operator
        self.application = application
        self.waits = waits
        self.task = None
        self.running = None

    def attach(self, task, context) -> None:
        super().attach(task, context)
        self.task = task

    def job_for(self, run: "WriteRun", n: int) -> ExternalJob:
        """Attempt ``n``'s job: the engine's arguments without any credential."""
        wid = writer_id(run, n)
        public, secret = split_secret_options(attempt_options(run, n))
        withheld = sorted(secret) + sorted(f"storage_options.{k}" for k in (run.storage_options or {}))
        if withheld:
            self.log.warning("not handed to the external job (XCom and its command line are readable "
                             "by others): %s; the platform must give them to the job (an instance "
                             "role, or HUDI_OCC_JOB_SECRETS from its secret store)", ", ".join(withheld))
        return ExternalJob(application=application_for(self.application, SPARK_APP),
                           args=job_arguments(run, n, options=public) + ["--writer-id", wid],
                           writer_id=wid, attempt=n, withheld=withheld)

    def launch(self, run: "WriteRun", n: int) -> deferred_job.DetachedJob:
        """Hand attempt ``n``'s job to the user's operator and run it; the record the table is
        read by (marked ended when the operator returned from a job that ended, or failed)."""
        job = self.job_for(run, n)
        run.ti.xcom_push(key=XCOM_JOB, value=job.to_json())
        record = deferred_job.external_job(job.writer_id)
        op = self.operator(job)
        if not callable(getattr(op, "execute", None)) or not callable(getattr(op, "render_template_fields", None)):
            raise ConfigError(f"operator(job) returned {type(op).__name__}, not an Airflow operator",
                              key="operator", remedy="return the operator that runs job.command")
        context = {**(run.context or {}), XCOM_JOB: job.to_json()}
        op.render_template_fields(context, self.task.get_template_env() if self.task is not None else None)
        self.running = op
        self.log.info("attempt %d: %s runs the job as writer %s: %s", n, type(op).__name__,
                      job.writer_id, job.command)
        try:
            op.execute(context)
        except BaseException as e:  # noqa: BLE001 - the table decides; TaskDeferred is a BaseException
            if type(e).__name__ == "TaskDeferred":
                raise ConfigError(f"{type(op).__name__} deferred: the write operator follows the job "
                                  "itself (deferrable=True on the write operator)", key="operator",
                                  remedy=f"give the {type(op).__name__} deferrable=False") from None
            if not isinstance(e, Exception):
                raise
            self.log.warning("attempt %d: %s failed (%s): the table tells what the job did",
                             n, type(op).__name__, str(e)[:500])
            record.mark_ended(exit_code_in(e), f"{type(op).__name__} failed: {e}\n")
        else:
            if self.waits:
                record.mark_ended(EXIT_OK)
        finally:
            self.running = None
        return record

    def run_attempt(self, run: "WriteRun", n: int, on_began: Callable[[dict], None]) -> Launched:
        """Launch, then follow the job in the table on the worker until it ended."""
        from airflow_hudi_occ.provider.attempt_loop import committed_instant
        t0 = time.time()
        record = self.launch(run, n)
        options = deferred_job.heartbeat_options(run.options)
        announced = False
        while True:
            event = deferred_job.check_job(run.table_path, run.storage_options, record, options)
            if record.instant and not announced:
                on_began({"instant": record.instant, "attempt": n, "writer_id": record.writer_id})
                announced = True
            if event is not None or self.killed:
                break
            time.sleep(self.poll_interval)
        event = event or {"status": deferred_job.FAILED, "error": "Killed", "message": "the task was killed"}
        code, result = deferred_job.exit_code_for(event), result_of_event(event)
        if event["status"] == deferred_job.ALREADY_COMMITTED and committed_instant(
                run.table_path, run.storage_options, run.batch_key) is None:
            code, result = EXIT_ERROR, {**result, "outcome": "error", "error": {
                "error": "BatchNotFound", "message": "the job ended without an instant, and no completed "
                f"instant carries {run.batch_key!r}: did the operator run job.command?",
                "remedy": "run the job's entry point with its arguments (job.application, job.args)"}}
        return Launched(code, {"instant": record.instant}, result, round(time.time() - t0, 3))

    def start(self, run: "WriteRun", n: int) -> tuple[deferred_job.DetachedJob, dict]:
        return self.launch(run, n), {}

    def kill(self) -> None:
        super().kill()
        if self.running is not None:
            self.running.on_kill()
