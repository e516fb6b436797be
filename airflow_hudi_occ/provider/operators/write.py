"""The write operator: one batch written to a Hudi table with optimistic concurrency control.

:class:`HudiWriteOperator` is thin: the write itself (transaction, markers, conflict
resolution, rollback of a loser) lives in the job (``airflow_hudi_occ/spark/job.py``, or a
Java Hudi job) and in ``core``; what only an orchestrator can do around it lives in the attempt
loop (``provider/attempt_loop.py``: idempotence by batch key, write windows, admission,
conflict retries on fresh instants, deferral, the attempt record, the outcome decided from the
table); how each attempt's job is started is the launcher's (``provider/launchers/``:
spark-submit by default, a Java Hudi job, a Spark Connect client, or the user's own operator on their platform).

- **Airflow's retries by error type** (``provider/retry_policy.py``): the task fails with the
  package's own error (the job's, decoded from its result line), and the operator's default
  ``retry_policy`` (:class:`~airflow_hudi_occ.provider.retry_policy.HudiRetryPolicy`) fails a
  non-retryable one (exit 1: bad options, a refused schema, a missing source; exit 2: usage)
  at once and lets Airflow retry a retryable one (conflict retries exhausted, a store or lock
  service down). A job killed by a signal or a crashed JVM is left to the task's ``retries``.
  ``retry_policy=None``: ``AirflowFailException`` for the non-retryable errors instead.
- **idempotence**: the batch key (``dag_id/run_id/task_id[/map_index]``, or the source
  checkpoint you give) is recorded in the commit; a batch found committed before an attempt
  launches nothing. The job decides it again under the commit lock, so a zombie attempt and
  its retry racing to commit the same batch cannot both complete: the loser exits 0 with
  ``"outcome": "already_committed"``, which the operator reports as such.
- **a record of every attempt**: logged, pushed to XCom (``hudi_occ_attempts``) and, through
  the ``hoodie.occ.writer.labels`` option, kept in the table's attempt log with the task's
  dag/task/run/try/map index for the timeline page.
- **kill**: ``on_kill`` ends the attempt's job (the whole Spark process tree for spark-submit,
  see ``HudiSparkJobHook``; the user's operator's ``on_kill`` for the external launcher); the
  killed instant stays pending with its markers until a rollback removes it once its
  heartbeat expired.
- **deferrable** (``deferrable=True``): the job runs detached (``provider/deferred_job.py``);
  once its instant is known the operator pushes it and the timeline link to XCom and defers to
  ``HudiWriteJobTrigger``, which reads the outcome from the timeline and the attempt log (so
  cluster deploy mode and jobs on other platforms work too).
- **crash recovery by re-commit**: a job that died after writing every file of its instant
  (the commit was *staged*, core/recovery.py) is not rewritten: the next attempt of the same
  batch takes the instant over once its writer's heartbeat expired and completes it with the
  conflict check (``"outcome": "recommitted"``).
"""

from __future__ import annotations

import copy
from typing import Any, Sequence

from airflow.sdk import conf

from airflow_hudi_occ.core.commit.retry import RetryPolicy
from airflow_hudi_occ.provider.admission import AdmissionSettings
from airflow_hudi_occ.provider.arguments import check_loop_arguments
from airflow_hudi_occ.provider.assets import declare_table_outlet
from airflow_hudi_occ.provider.attempt_loop import TIMELINE_LINK, AttemptLoop
from airflow_hudi_occ.provider.hooks.hudi_occ import HudiOccHook
from airflow_hudi_occ.provider.launchers.base import Launcher
from airflow_hudi_occ.provider.launchers.spark_submit import SparkSubmitLauncher
from airflow_hudi_occ.provider.retry_policy import DEFAULT_RETRY_POLICY, resolve_retry_policy
from airflow_hudi_occ.provider.version_compat import BaseOperator
from airflow_hudi_occ.provider.write_window import WriteWindows


class HudiWriteOperator(BaseOperator):
    """Write one batch (a parquet/csv/json path or a SQL query) to a Hudi table with OCC.

    :param source: input path, or a SQL query with ``source_format="sql"`` (templated); None
        for a launcher whose job reads its own input (a Java Hudi job)
    :param table_path: table base path (templated); default: the connection's host
    :param source_format: parquet | csv | json | sql
    :param operation: upsert | insert | bulk_insert | delete | insert_overwrite
    :param options: ``hoodie.*`` write options (templated); override the connection's
    :param hudi_conn_id: the table connection (type ``hudi_occ``); may be absent
    :param batch_key: idempotency key (templated); default dag_id/run_id/task_id
    :param checkpoint: source position recorded in the commit (templated); also the batch key
        when ``batch_key`` is not given
    :param launcher: how each attempt's job is started (``provider/launchers/``, templated):
        :class:`~airflow_hudi_occ.provider.launchers.spark_submit.SparkSubmitLauncher` (the
        default: the Spark connection, ``spark_conf``, ``spark_env``, ``application``),
        :class:`~airflow_hudi_occ.provider.launchers.java.JavaHudiLauncher`,
        :class:`~airflow_hudi_occ.provider.launchers.connect.ConnectLauncher` (the job as a
        Spark Connect client: a ``spark_connect`` connection or ``remote="sc://..."``), or
        :class:`~airflow_hudi_occ.provider.launchers.external.ExternalLauncher` (your own
        operator runs the job on your platform)
    :param conflict_retries: attempts after a lost conflict, each on a fresh instant: a number,
        or a :class:`~airflow_hudi_occ.core.commit.retry.RetryPolicy` (``max_conflict_retries``,
        ``base_delay_s``, ``max_delay_s``: exponential backoff with full jitter); None: Hudi's
        ``hoodie.write.num.retries.on.conflict.failures`` in the options (the same budget; both
        set to different numbers is refused), else 5. Separate from Airflow's task ``retries``
    :param write_windows: :class:`~airflow_hudi_occ.provider.write_window.WriteWindows`: wait
        (bounded) while an older write-window request of another DAG run covers the batch's
        ``partitions`` (templated); None: do not yield
    :param admission: :class:`~airflow_hudi_occ.provider.admission.AdmissionSettings`:
        ``on_overlap`` (wait | go | fail; default the connection's, else wait), ``timeout_s``,
        ``kind`` (ingestion | backfill: ingestion goes first among waiters), ``poll_s``,
        ``starvation_s`` (docs/concurrency.md)
    :param deferrable: run the job detached and give the worker slot back while it runs
        (``HudiWriteJobTrigger`` follows it; conflict retries resume on a worker); default
        ``[operators] default_deferrable``
    :param retry_policy: decides Airflow's retries from the error (AIP-105); default
        :class:`~airflow_hudi_occ.provider.retry_policy.HudiRetryPolicy`, or ``default_args``'
        one; ``None``: no policy

    Arguments are checked when the DAG file is parsed (``provider/arguments.py``): a wrong
    operation, source format, number, ``hoodie.*`` key (the closest known key is suggested) or
    plug-in name is an import error of the DAG, not a failed run; templated values and the
    connection's options are checked in ``execute``, and the job checks its source and the
    table's folder before its Spark session starts.
    """

    template_fields: Sequence[str] = ("source", "table_path", "options", "batch_key", "checkpoint",
                                      "write_windows", "launcher")
    template_fields_renderers = {"options": "json"}
    ui_color = "#d6ecff"
    operator_extra_links = (TIMELINE_LINK,)

    def __init__(self, *, source: str | None = None, table_path: str | None = None,
                 source_format: str = "parquet", operation: str = "upsert",
                 options: dict[str, Any] | None = None,
                 hudi_conn_id: str | None = HudiOccHook.default_conn_name,
                 batch_key: str | None = None, checkpoint: str | None = None,
                 launcher: Launcher | None = None, conflict_retries: int | RetryPolicy | None = None,
                 write_windows: WriteWindows | None = WriteWindows(),
                 admission: AdmissionSettings | None = None,
                 deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
                 retry_policy: Any = DEFAULT_RETRY_POLICY, **kwargs):
        super().__init__(retry_policy=resolve_retry_policy(retry_policy), **kwargs)
        # copies: Airflow renders the templated ones in place, and a DAG file may share one
        self.launcher = copy.copy(launcher) if launcher is not None else SparkSubmitLauncher()
        self.write_windows = copy.copy(write_windows)
        self.admission = copy.copy(admission) if admission is not None else AdmissionSettings()
        self.launcher.check_arguments(self.task_id, source=source, source_format=source_format,
                                      operation=operation, options=options)
        check_loop_arguments(self.task_id, conflict_retries=conflict_retries, write_windows=self.write_windows)
        #: a RetryPolicy, a number of retries, or None: Hudi's
        #: ``hoodie.write.num.retries.on.conflict.failures`` in the options, else 5 (one budget:
        #: both given as different numbers is refused; resolved with the options per run)
        self.conflict_retries = conflict_retries
        self.source = source
        self.table_path = table_path
        self.source_format = source_format
        self.operation = operation
        self.options = options or {}
        self.hudi_conn_id = hudi_conn_id
        self.batch_key = batch_key
        self.checkpoint = checkpoint
        self.deferrable = deferrable
        # assets and lineage (provider/assets.py, provider/openlineage.py)
        self.table_asset = declare_table_outlet(self, table_path)
        self.commit_summary: dict | None = None
        self.resolved_table_path: str | None = None
        self._loop: AttemptLoop | None = None

    def execute(self, context) -> dict:
        self._loop = AttemptLoop(self, context)
        return self._loop.execute()

    def execute_admitted(self, context, event: dict, attempt: int = 1, attempts: list | None = None,
                         waits: list | None = None) -> dict:
        """The admission trigger's event: admitted (or waited out): launch attempt ``attempt``."""
        self._loop = AttemptLoop(self, context)
        return self._loop.admitted(event, attempt, attempts, waits)

    def execute_complete(self, context, event: dict, attempt: int = 1, attempts: list | None = None,
                         submitted_at: float | None = None, waits: list | None = None,
                         request_id: str | None = None, job: dict | None = None) -> dict:
        """The job trigger's outcome of attempt ``attempt``: done, another deferred attempt after
        a conflict (with backoff), or the failure raised as the synchronous path raises it."""
        self._loop = AttemptLoop(self, context)
        return self._loop.complete(event, attempt, attempts, submitted_at, waits, request_id, job)

    def on_kill(self) -> None:
        if self._loop is not None:
            self._loop.kill()
        else:
            self.launcher.kill()

    def get_openlineage_facets_on_complete(self, task_instance):
        """The source as input, the table as output (schema, rowCount, size of the commit),
        and the ``hudi_occ`` run facet; never raises (provider/openlineage.py)."""
        from airflow_hudi_occ.provider.openlineage import write_lineage
        return write_lineage(source=self.source, source_format=self.source_format,
                             table_path=self.resolved_table_path or self.table_path,
                             summary=self.commit_summary)
