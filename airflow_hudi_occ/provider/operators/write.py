"""The write operator: one batch written to a Hudi table as a Spark job, with optimistic
concurrency control.

:class:`HudiWriteOperator` is thin: the write itself (transaction, markers, conflict
resolution, rollback of a loser) lives in the Spark job (``airflow_hudi_occ/spark/job.py``)
and in ``core``. What the operator adds is what only an orchestrator can do:

- **conflict retries on fresh instants**: the job exits 75 when it lost a conflict (its
  instant is already rolled back); the operator waits (exponential backoff, full jitter,
  :class:`~airflow_hudi_occ.core.commit.retry.RetryPolicy`) and runs the job again, which begins a new
  instant on the table as it is now. This budget (``conflict_retries``) is separate from
  Airflow's task ``retries``: losing a race is not a failure of the task.
- **Airflow's retries by error type** (``provider/retry_policy.py``): the task fails with the
  package's own error (the job's, decoded from its result line), and the operator's default
  ``retry_policy`` (:class:`~airflow_hudi_occ.provider.retry_policy.HudiRetryPolicy`) fails a
  non-retryable one (exit 1: bad options, a refused schema, a missing source; exit 2: usage)
  at once and lets Airflow retry a retryable one (conflict retries exhausted, a store or lock
  service down). A job killed by a signal or a crashed JVM is left to the task's ``retries``.
  ``retry_policy=None``: ``AirflowFailException`` for the non-retryable errors instead.
- **idempotence**: the batch key (``dag_id/run_id/task_id[/map_index]``, or the source
  checkpoint you give) is recorded in the commit. Before every attempt the operator looks for a
  completed commit carrying it (``core.transaction.find_committed_batch``): an Airflow retry or
  a re-run of a batch that already committed writes nothing and says so. The job decides it
  again under the commit lock, so a zombie attempt and its retry racing to commit the same batch
  cannot both complete: the loser exits 0 with ``"outcome": "already_committed"``, which the
  operator reports as such (not as a new commit).
- **a record of every attempt**: instant, outcome, the winning instant and file groups on a
  conflict, seconds discarded; logged, pushed to XCom (``hudi_occ_attempts``) and, through
  the ``hoodie.occ.writer.labels`` option, kept in the table's attempt log with the task's
  dag/task/run/try/map index for the timeline page.
- **kill**: ``on_kill`` ends the whole Spark process tree (see ``HudiSparkJobHook``); the
  killed instant stays pending with its markers until a rollback (the table-service operator,
  or any writer's lazy rollback) removes it once its heartbeat expired.

- **deferrable** (``deferrable=True``): the job is submitted detached
  (``provider/deferred_job.py``); once its instant is known the operator pushes it and the
  timeline link to XCom and defers to ``HudiWriteJobTrigger``, which reads the outcome from the
  timeline and the attempt log (so cluster deploy mode works too). ``execute_complete`` ends as
  ``execute`` does, or after a conflict backs off and defers a fresh attempt.

- **crash recovery by re-commit**: a job that died after writing every file of its instant
  (the commit was *staged*, core/recovery.py) is not rewritten: the next attempt of the same
  batch (an Airflow retry, or the next conflict retry) takes the instant over once its writer's
  heartbeat expired and completes it with the conflict check (``"outcome": "recommitted"``); if
  that check fails, the staged instant is rolled back and the batch is written afresh. A dead
  instant that was staged is left by the LAZY rollback for ``hoodie.occ.recovery.grace_period_ms``
  (default 10 minutes) so that the retry can find it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from airflow.sdk import conf

from airflow_hudi_occ.core.commit.attempt_log import LABELS_OPTION
from airflow_hudi_occ.core.commit.retry import RetriesExhaustedError, RetryPolicy, RetryRun, run_with_conflict_retries
from airflow_hudi_occ.core.commit.transaction import find_committed_batch
from airflow_hudi_occ.core.errors import (ConfigError, HudiOccError, RetryableError,
                                          SourceNotFoundError, TableLocationNotEmptyError, TableNotFoundError,
                                          from_dict)
from airflow_hudi_occ.core.format.storage import Storage
from airflow_hudi_occ.core.job_protocol import EXIT_ERROR, EXIT_OK, EXIT_RETRYABLE, EXIT_USAGE, format_options
from airflow_hudi_occ.core.table.table import Table, check_new_table_location
from airflow_hudi_occ.core.concurrency import admission as core_admission
from airflow_hudi_occ.core.concurrency.footprint import REQUEST_LABEL, check_kind
from airflow_hudi_occ.core.config import WRITE_KIND, HeartbeatConfig
from airflow_hudi_occ.provider import admission, deferred_job, write_window
from airflow_hudi_occ.provider.arguments import check_write_arguments
from airflow_hudi_occ.provider.assets import commit_summary, declare_table_outlet, emit_table_event
from airflow_hudi_occ.provider.hooks.hudi_occ import HudiOccHook, HudiSparkJobHook
from airflow_hudi_occ.provider.links import HudiTimelineLink, build_url, table_name_for
from airflow_hudi_occ.provider.retry_policy import DEFAULT_RETRY_POLICY, raise_task_failure, resolve_retry_policy
from airflow_hudi_occ.provider.spark_jobs import (DEFAULT_SPARK_CONF, SPARK_APP, JobOutput, application_for,
                                                  check_task_assets, with_parent_job)
from airflow_hudi_occ.provider.task_keys import (XCOM_ATTEMPTS, XCOM_RUNNING, XCOM_TABLE, XCOM_WAITS,
                                                 default_batch_key, task_labels, task_owner)
from airflow_hudi_occ.provider.triggers.hudi_occ import HudiAdmissionTrigger, HudiWriteJobTrigger
from airflow_hudi_occ.provider.version_compat import AirflowException, BaseOperator
from airflow_hudi_occ.spark.submit.options import SparkWriteOptions
from airflow_hudi_occ.spark.submit.master import check_master_reachable
from airflow_hudi_occ.spark.submit.source import check_source
from airflow_hudi_occ.spark.submit.table_creation import open_or_create_table

_LINKS: tuple = (HudiTimelineLink(),)


class _JobConflict(RetryableError):
    def __init__(self, result: dict):
        self.result = result
        super().__init__(f"instant {result.get('instant')} lost to {result.get('other_instant')} "
                         f"on {len(result.get('file_groups') or [])} file group(s)",
                         remedy="retried with a fresh instant")


class _JobFailed(HudiOccError):
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
    be new or empty: a folder of other files is refused here, before a spark-submit."""
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
class _WriteRun:
    """What every attempt of one task's write shares."""

    table_path: str
    options: dict
    storage_options: dict | None
    batch_key: str
    labels: dict
    ti: Any
    attempts: list = field(default_factory=list)
    admission: admission.AdmissionSettings | None = None
    #: admission waits, one per attempt that waited (XCom ``hudi_occ_waits``)
    waits: list = field(default_factory=list)
    #: the wait of the attempt being submitted, joined to its attempt record
    pending_wait: dict | None = None
    #: the admission request of the attempt being submitted (withdrawn once its instant exists)
    request_id: str | None = None
    #: the writers' heartbeat settings (admission judges liveness by them), from the one check
    heartbeat: HeartbeatConfig | None = None
    #: the options as the one check in ``_resolve`` parsed them (None: another engine's)
    checked: SparkWriteOptions | None = None

    @property
    def owner(self) -> dict:
        return task_owner(self.labels)

    @property
    def owner_label(self) -> str:
        return f"{self.labels.get('dag_id')}.{self.labels.get('task_id')}"


class HudiWriteOperator(BaseOperator):
    """Write one batch (a parquet/csv/json path or a SQL query) to a Hudi table with OCC.

    :param source: input path, or a SQL query with ``source_format="sql"`` (templated)
    :param table_path: table base path (templated); default: the connection's host
    :param operation: upsert | insert | bulk_insert | delete | insert_overwrite
    :param options: ``hoodie.*`` write options (templated); override the connection's
    :param hudi_conn_id: the table connection (type ``hudi_occ``); may be absent
    :param spark_conn_id: the Spark connection (``local[*]`` or a cluster master)
    :param conflict_retries: attempts after a lost conflict, each on a fresh instant; None:
        Hudi's ``hoodie.write.num.retries.on.conflict.failures`` in the options (the same
        budget; both set to different numbers is refused), else 5
    :param batch_key: idempotency key (templated); default dag_id/run_id/task_id
    :param checkpoint: source position recorded in the commit (templated); also the batch key
        when ``batch_key`` is not given
    :param partitions: partitions this write may touch (for write windows); None = unknown
    :param application: the spark-submit application (default: the engine's
        ``airflow_hudi_occ/spark/job.py``, or ``$HUDI_OCC_SPARK_APPLICATION``)
    Arguments are checked when the DAG file is parsed (``provider/arguments.py``): a wrong
    operation, source format, number, ``hoodie.*`` key (the closest known key is suggested) or
    plug-in name is an import error of the DAG, not a failed run; templated values and the
    connection's options are checked in ``execute``, and the job checks its source and the
    table's folder before its Spark session starts.

    :param deferrable: submit the job detached and give the worker slot back while it runs
        (a :class:`~airflow_hudi_occ.provider.triggers.hudi_occ.HudiWriteJobTrigger` follows it;
        conflict retries resume on a worker); default ``[operators] default_deferrable``
    :param poll_interval: seconds between the trigger's looks at the job (deferrable)
    :param instant_wait_s: how long the worker waits for the attempt's instant before it
        defers (to push it to XCom first); the trigger finds it if it comes later (deferrable)
    :param yield_to_windows: wait (up to ``window_wait_timeout_s``) while an older write-window
        request of another DAG run covers these partitions (see ``provider/write_window.py``)
    :param retry_policy: decides Airflow's retries from the error (AIP-105); default
        :class:`~airflow_hudi_occ.provider.retry_policy.HudiRetryPolicy` (retry a conflict or an
        unavailable store, fail a configuration error at once), or ``default_args``' one;
        ``None``: no policy
    :param on_overlap: admission before each spark-submit (``provider/admission.py``,
        docs/concurrency.md): ``wait`` until no live writer's footprint shares partitions with
        the batch (bounded by ``admission_timeout_s``, then it goes anyway), ``go`` at once,
        ``fail``; default the connection's ``hoodie.occ.admission.on.overlap``, else ``wait``.
        The deferrable operator waits in the triggerer.
    :param write_kind: ``ingestion`` (default) or ``backfill``: among writes waiting on the same
        partitions ingestion goes first (a backfill waiting longer than
        ``admission_starvation_s`` goes first whatever its kind)
    :param admission_timeout_s: the longest admission wait (default the connection's
        ``hoodie.occ.admission.timeout_ms``, else 900 s)
    """

    template_fields: Sequence[str] = ("source", "table_path", "options", "batch_key", "checkpoint",
                                      "partitions", "spark_conf")
    template_fields_renderers = {"options": "json", "spark_conf": "json"}
    ui_color = "#d6ecff"
    operator_extra_links = _LINKS

    def __init__(self, *, source: str, table_path: str | None = None, source_format: str = "parquet",
                 operation: str = "upsert", options: dict[str, Any] | None = None,
                 hudi_conn_id: str | None = HudiOccHook.default_conn_name,
                 spark_conn_id: str = "spark_default", spark_conf: dict[str, Any] | None = None,
                 spark_env: dict[str, str] | None = None, conflict_retries: int | None = None,
                 backoff_base_s: float = 1.0, backoff_max_s: float = 60.0,
                 batch_key: str | None = None, checkpoint: str | None = None,
                 partitions: list[str] | None = None, yield_to_windows: bool = True,
                 window_wait_timeout_s: float = 600.0, window_poll_s: float = 2.0,
                 application: str | None = None, on_overlap: str | None = None,
                 write_kind: str = "ingestion", admission_timeout_s: float | None = None,
                 admission_poll_s: float = 2.0, admission_starvation_s: float = 600.0,
                 deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
                 poll_interval: float = 5.0, instant_wait_s: float = 60.0,
                 retry_policy: Any = DEFAULT_RETRY_POLICY, **kwargs):
        super().__init__(retry_policy=resolve_retry_policy(retry_policy), **kwargs)
        check_write_arguments(self.task_id, operation=operation, source=source,
                              source_format=source_format, options=options,
                              conflict_retries=conflict_retries, backoff_base_s=backoff_base_s,
                              backoff_max_s=backoff_max_s, window_wait_timeout_s=window_wait_timeout_s,
                              window_poll_s=window_poll_s)
        if on_overlap is not None and on_overlap not in core_admission.POLICIES:
            raise ConfigError(f"HudiWriteOperator {self.task_id!r}: on_overlap must be one of "
                              f"{', '.join(core_admission.POLICIES)}, got {on_overlap!r}",
                              key="on_overlap", value=on_overlap)
        self.on_overlap = on_overlap
        self.write_kind = check_kind(write_kind)
        self.admission_timeout_s = admission_timeout_s
        self.admission_poll_s = admission_poll_s
        self.admission_starvation_s = admission_starvation_s
        self.application = application
        self.source = source
        self.table_path = table_path
        self.source_format = source_format
        self.operation = operation
        self.options = options or {}
        self.hudi_conn_id = hudi_conn_id
        self.spark_conn_id = spark_conn_id
        self.spark_conf = {**DEFAULT_SPARK_CONF, **(spark_conf or {})}
        self.spark_env = spark_env or {}
        self.conflict_retries = conflict_retries
        #: the budget as resolved with the options (``_resolve``)
        self._conflict_retries = RetryPolicy.budget(conflict_retries, None)
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.batch_key = batch_key
        self.checkpoint = checkpoint
        self.partitions = partitions
        self.yield_to_windows = yield_to_windows
        self.window_wait_timeout_s = window_wait_timeout_s
        self.window_poll_s = window_poll_s
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.instant_wait_s = instant_wait_s
        self._job_hook: HudiSparkJobHook | None = None
        self._detached: deferred_job.DetachedJob | None = None
        self._killed = False
        # assets and lineage (provider/assets.py, provider/openlineage.py)
        self.table_asset = declare_table_outlet(self, table_path)
        self._run_spark_conf: dict | None = None
        self._commit_summary: dict | None = None
        self._resolved_table_path: str | None = None

    # -- helpers -------------------------------------------------------------------------------

    def _get_hook(self, run: "_WriteRun", n: int, *, extra_args: list[str] | None = None,
                  on_line=None) -> HudiSparkJobHook:
        """The Spark job hook of attempt ``n``, built when the attempt is submitted (never at
        DAG parse time): the task's Spark connection and conf, the job's arguments."""
        return HudiSparkJobHook(
            conf=self._run_spark_conf or self.spark_conf, conn_id=self.spark_conn_id, env_vars=self._env(),
            name=f"hudi-occ {run.labels['dag_id']}.{run.labels['task_id']} attempt {n}",
            application_args=self._args(run.table_path, self._attempt_options(run, n), run.batch_key, n)
            + list(extra_args or []),
            on_line=on_line, storage_options=run.storage_options)

    @staticmethod
    def _attempt_options(run: "_WriteRun", n: int) -> dict:
        """The write options of attempt ``n``: its admission wait (seconds, whom for) joins
        its labels, so the table's attempt log keeps it: the trends count waits beside
        conflicts, the timeline page says whom each attempt waited for."""
        wait = next((w for w in run.waits if w.get("attempt") == n), None)
        if wait is None and not run.request_id:
            return run.options
        labels = dict(run.labels)
        if wait is not None:
            labels.update(core_admission.wait_labels(wait["seconds"], wait.get("waited_for") or []))
        if run.request_id:  # declared in the instant's footprint: admission finds its reach
            labels[REQUEST_LABEL] = run.request_id
        return {**run.options, LABELS_OPTION: json.dumps(labels, sort_keys=True)}

    def _env(self) -> dict[str, str]:
        env = {}  # PYSPARK_PYTHON: the hook's choice (local master only), see HudiSparkJobHook
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        env.update({k: str(v) for k, v in self.spark_env.items()})
        return env

    def _args(self, table_path: str, options: dict, batch_key: str, attempt: int) -> list[str]:
        args = ["--table", table_path, "--operation", self.operation, "--source", self.source,
                "--source-format", self.source_format, "--attempt", str(attempt),
                "--batch-key", batch_key,
                # every attempt looked the key up (committed_instant) just before submitting
                "--batch-checked"]
        if self.checkpoint:
            args += ["--checkpoint", str(self.checkpoint)]
        return args + format_options(options)

    def _wait_for_window(self, table, owner: dict) -> None:
        deadline = time.time() + self.window_wait_timeout_s
        announced = False
        while True:
            ahead = write_window.yielding_to(table, self.partitions, owner)
            if not ahead:
                return
            if time.time() >= deadline:
                self.log.warning("still yielding to write window(s) %s after %.0f s: writing anyway "
                                 "(OCC keeps the table correct)", [r.request_id for r in ahead],
                                 self.window_wait_timeout_s)
                return
            if not announced:
                self.log.info("yielding to older write-window request(s) %s on partitions %s",
                              [(r.request_id, r.owner.get("dag_id")) for r in ahead],
                              sorted({p for r in ahead for p in (r.partitions or ["*"])}))
                announced = True
            time.sleep(self.window_poll_s)

    # -- execute: resolve the write, then attempts until one commits ---------------------------

    def execute(self, context) -> dict:
        run = self._resolve(context)
        check_task_assets(self, run.table_path, run.storage_options)
        self._run_spark_conf = with_parent_job(self.spark_conf, context)
        if self.deferrable:
            return self._deferred_attempt(context, run, 1)
        policy = self._policy()
        try:
            out = run_with_conflict_retries(lambda n: self._attempt(run, n), policy, RetryRun())
        except RetriesExhaustedError as e:
            raise_task_failure(self, _exhausted(run, e.attempts))
        except _JobFailed as e:
            self._job_failed(e)
        finally:
            self._release_windows(run)
        return self._committed(context, run, out)

    def _job_failed(self, e: _JobFailed):
        """Exit 1 or 2: the job's own error, for the retry policy to judge; anything else
        (killed by a signal, a JVM crash) Airflow's default retries may help."""
        if e.code in (EXIT_ERROR, EXIT_USAGE):
            raise_task_failure(self, e.error())
        raise AirflowException(str(e)) from e

    def _policy(self) -> RetryPolicy:
        return RetryPolicy(max_conflict_retries=self._conflict_retries,
                           base_delay_s=self.backoff_base_s, max_delay_s=self.backoff_max_s)

    def _committed(self, context, run: "_WriteRun", out: dict) -> dict:
        """The end of a write that committed (or found its batch committed): log, asset event."""
        conflicts = sum(1 for a in run.attempts if a["outcome"] == "conflict")
        self.log.info("batch %r: %s after %d attempt(s), %d conflict(s), %d admission wait(s) "
                      "(%.1f s)", run.batch_key, out["outcome"], len(run.attempts), conflicts,
                      len(run.waits), sum(w["seconds"] for w in run.waits))
        # Only here, after a commit: a task that failed (retries exhausted) emits no event.
        self._commit_summary = commit_summary(
            run.table_path, run.storage_options, instant=out.get("instant"), operation=self.operation,
            outcome=out.get("outcome"), conflict_retries=conflicts, attempts=len(run.attempts),
            batch_key=run.batch_key)
        emit_table_event(self, context, self._commit_summary)
        return out

    def get_openlineage_facets_on_complete(self, task_instance):
        """The source as input, the table as output (schema, rowCount, size of the commit),
        and the ``hudi_occ`` run facet; never raises (provider/openlineage.py)."""
        from airflow_hudi_occ.provider.openlineage import write_lineage
        return write_lineage(source=self.source, source_format=self.source_format,
                             table_path=self._resolved_table_path or self.table_path,
                             summary=self._commit_summary)

    def _resolve(self, context) -> "_WriteRun":
        """The connection, options and batch key of this write; a bad key fails here, naming
        it, before Spark starts."""
        hook = HudiOccHook(self.hudi_conn_id, table_path=self.table_path, options=self.options)
        labels = task_labels(context)
        try:
            table_path = hook.table_path
            options = hook.write_options({LABELS_OPTION: json.dumps(labels, sort_keys=True)})
            options.setdefault(WRITE_KIND.key, self.write_kind)  # declared in the footprint
            checked = self._check_options(hook, options)
            self._conflict_retries = RetryPolicy.budget(self.conflict_retries, options)
            settings = admission.AdmissionSettings.resolve(
                self.on_overlap, self.admission_timeout_s, options, poll_s=self.admission_poll_s,
                starvation_s=self.admission_starvation_s)
        except HudiOccError as e:
            raise_task_failure(self, e)
        ti = context["ti"]
        ti.xcom_push(key=XCOM_TABLE, value=table_path)
        self._resolved_table_path = table_path
        return _WriteRun(table_path=table_path, options=options, storage_options=hook.storage_options,
                         batch_key=str(self.batch_key or self.checkpoint or default_batch_key(context)),
                         labels=labels, ti=ti, admission=settings,
                         checked=checked, heartbeat=checked.write_config.heartbeat if checked is not None
                         else admission.heartbeat_of(options))

    def _check_options(self, hook: HudiOccHook, options: dict) -> SparkWriteOptions | None:
        """The complete options (``hook.write_options``: connection and operator) checked once,
        as this engine reads them; every later step of every attempt reads the result (a
        subclass for another engine checks them as that engine does, and may return None: no
        typed options of ours)."""
        return SparkWriteOptions.from_options(options, warn=hook.log.warning)

    def _attempt(self, run: "_WriteRun", n: int) -> dict:
        """One attempt: the batch already committed? wait for write windows, submit, decide."""
        if self._killed:
            raise AirflowException("the task was killed")
        try:
            found = committed_instant(run.table_path, run.storage_options, run.batch_key)
        except TableLocationNotEmptyError as e:
            raise_task_failure(self, e)
        if found is not None:
            return self._already_committed(run, found)
        if self.yield_to_windows:
            self._yield_to_windows(run)
        run.request_id = self._admit(run, n)
        try:
            code, began, result, seconds = self._submit(run, n)
        finally:
            admission.withdraw(run.table_path, run.storage_options, run.request_id)
            run.request_id = None
        rec = self._record(run, n, code, began, result, seconds)
        return self._decide(run, n, code, result, rec)

    # -- admission: wait (bounded, holding no Spark) while a live writer shares partitions ----

    def _batch_request(self, run: "_WriteRun"):
        """(table, filed admission request), or None: ``on_overlap='go'``, or no table and
        this engine does not create one before its job."""
        if run.admission is None or run.admission.on_overlap == core_admission.GO:
            return None
        table = admission.open_table(run.table_path, run.storage_options)
        if table is None:
            table = self._create_for_first_write(run)
        if table is None:
            return None
        fp = admission.batch_footprint(table, self.source, self.source_format, owner=run.owner_label,
                                       kind=run.options.get(WRITE_KIND.key, self.write_kind),
                                       storage_options=run.storage_options, operation=self.operation,
                                       options=run.options)
        return table, admission.file_request(table, fp, run.owner)

    def _create_for_first_write(self, run: "_WriteRun") -> Table | None:
        """A table's first write creates the table before it asks for admission, exactly as
        its job would (``spark/submit/table_creation``, create-if-absent), so that its first
        writers find each other's requests and wait instead of racing (docs/concurrency.md,
        "A table's first write"). None when the job would refuse the write anyway (no record
        key, no source: it says so in its own words), leaving the location untouched."""
        try:
            check_source(self.source, self.source_format, run.storage_options)
        except SourceNotFoundError:
            return None
        try:
            opts = run.checked.with_operation(self.operation).check_writable()
            if not opts.record_key_fields:
                return None
            # a write that cannot be submitted (no Spark master there) makes nothing either
            check_master_reachable(self._get_hook(run, 1).master)
            table = open_or_create_table(run.table_path, opts, run.storage_options or None)
        except HudiOccError as e:
            raise_task_failure(self, e)
        self.log.info("table %s (%s) made before its first write (or found made by a rival): its "
                      "first writers are admitted one at a time", table.name, table.base_uri)
        return table

    def _admit(self, run: "_WriteRun", n: int) -> str | None:
        """Attempt ``n``'s admission on this worker; the request id to withdraw once the job's
        instant exists (its declared footprint takes over) or the attempt ends."""
        filed = self._batch_request(run)
        if filed is None:
            return None
        table, req = filed
        try:
            res = admission.wait_on_worker(table, req, run.heartbeat, run.admission,
                                           self.log, killed=lambda: self._killed,
                                           storage_options=run.storage_options)
        except admission.AdmissionRefusedError as e:
            raise_task_failure(self, e)
        self._note_wait(run, n, res.to_json())
        return req.request_id

    def _note_wait(self, run: "_WriteRun", n: int, wait: dict) -> None:
        if not wait.get("waited_for"):
            return
        run.pending_wait = {"attempt": n, **wait}
        run.waits.append(run.pending_wait)
        run.ti.xcom_push(key=XCOM_WAITS, value=run.waits)

    def _already_committed(self, run: "_WriteRun", inst) -> dict:
        self.log.info("batch %r is already committed as instant %s (completed %s): this run "
                      "writes nothing new", run.batch_key, inst.requested_time, inst.completion_time)
        return {"outcome": "already_committed", "instant": inst.requested_time,
                "completion_time": inst.completion_time, "table": run.table_path,
                "batch_key": run.batch_key, "attempts": run.attempts}

    def _yield_to_windows(self, run: "_WriteRun") -> None:
        try:
            self._wait_for_window(Table.open(run.table_path, run.storage_options or None), run.owner)
        except TableNotFoundError:
            pass

    def _submit(self, run: "_WriteRun", n: int) -> tuple[int, dict, dict, float]:
        """spark-submit one attempt; the BEGIN line publishes the running instant at once (and
        links the admission request to it: the instant blocks from now on, with the request's
        reach until its inflight file declares its file groups)."""

        def began(payload: dict) -> None:
            run.ti.xcom_push(key=XCOM_RUNNING, value={**payload, "table": run.table_path})
            self.log.info("attempt %d began instant %s", n, payload.get("instant"))
            admission.link(run.table_path, run.storage_options, run.request_id, payload.get("instant"))

        out = JobOutput(on_begin=began)
        self._job_hook = self._get_hook(run, n, on_line=out)
        t0 = time.time()
        code = self._job_hook.run(application_for(self.application, SPARK_APP))
        return code, out.began, out.result, round(time.time() - t0, 3)

    def _record(self, run: "_WriteRun", n: int, code: int, began: dict, result: dict,
                seconds: float) -> dict:
        """The attempt as XCom and the timeline page see it."""
        rec = {"attempt": n, "exit_code": code, "instant": result.get("instant") or began.get("instant"),
               "outcome": result.get("outcome") or ("killed" if self._killed else "error"),
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

    def _decide(self, run: "_WriteRun", n: int, code: int, result: dict, rec: dict) -> dict:
        """Done, retry on a fresh instant (:class:`_JobConflict`), or fail (:class:`_JobFailed`)."""
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
        if self._killed:
            raise AirflowException(f"the task was killed during attempt {n} (instant "
                                   f"{rec['instant']}; left for rollback)")
        if code == EXIT_RETRYABLE:
            self.log.warning("attempt %d: instant %s lost a conflict to %s on file groups %s; "
                             "%.1f s of work discarded; retrying with a fresh instant",
                             n, rec["instant"], rec.get("other_instant"), rec.get("file_groups"),
                             rec.get("seconds_discarded") or 0.0)
            raise _JobConflict(result)
        raise _JobFailed(code, result)

    def _release_windows(self, run: "_WriteRun") -> None:
        try:
            write_window.release_owned(Table.open(run.table_path, run.storage_options or None),
                                       run.owner)
        except Exception:  # noqa: BLE001 - no table yet, or nothing to release
            pass

    def on_kill(self) -> None:
        self._killed = True
        if self._detached is not None:  # killed before it deferred: the trigger does it after
            self.log.info("killed the detached Spark job: %s", self._detached.kill())
        if self._job_hook is not None:
            self._job_hook.on_kill()

    # -- deferrable: submit detached, defer, resume on the trigger's event --------------------

    def _deferred_attempt(self, context, run: "_WriteRun", n: int) -> dict:
        """Attempt ``n``: as :meth:`_attempt` up to the submission, which is detached; then
        publish the instant and the timeline link and defer (this method does not return then)."""
        try:
            found = committed_instant(run.table_path, run.storage_options, run.batch_key)
        except TableLocationNotEmptyError as e:
            raise_task_failure(self, e)
        if found is not None:
            self._release_windows(run)
            return self._committed(context, run, self._already_committed(run, found))
        if self.yield_to_windows:
            self._yield_to_windows(run)
        request_id = None
        filed = self._batch_request(run)
        if filed is not None:
            table, req = filed
            request_id = req.request_id
            verdict = admission.named(table, core_admission.try_admit(
                table, req, run.heartbeat, starvation_s=run.admission.starvation_s))
            if not verdict.admitted:
                if run.admission.on_overlap == core_admission.FAIL:
                    core_admission.withdraw(table, req.request_id)
                    raise_task_failure(self, admission.AdmissionRefusedError(
                        "on_overlap='fail': live writer(s) share partitions with this batch: "
                        f"{verdict.describe()}"))
                self.log.info("waiting for %s (in the triggerer, holding no worker slot; at most "
                              "%.0f s)", verdict.describe(), run.admission.timeout_s)
                self.defer(trigger=HudiAdmissionTrigger(
                    run.table_path, req.request_id, options=_heartbeat_options(run.options),
                    storage_options=run.storage_options, poll_interval=run.admission.poll_s,
                    timeout_s=run.admission.timeout_s, starvation_s=run.admission.starvation_s,
                    started_at=time.time()),
                    method_name="execute_admitted",
                    kwargs={"attempt": n, "attempts": run.attempts, "waits": run.waits})
        return self._deferred_submit(context, run, n, request_id)

    def execute_admitted(self, context, event: dict, attempt: int = 1, attempts: list | None = None,
                         waits: list | None = None) -> dict:
        """The admission trigger's event: admitted (or waited out): submit attempt ``attempt``."""
        run = self._resolve(context)
        run.attempts = list(attempts or [])
        run.waits = list(waits or [])
        self._run_spark_conf = with_parent_job(self.spark_conf, context)
        wait = {"seconds": event.get("waited_s") or 0.0, "waited_for": event.get("waited_for") or [],
                "timed_out": event.get("status") == "timeout"}
        if wait["timed_out"]:
            self.log.warning("still waiting for %s after %.1f s: starting anyway (OCC still decides "
                             "the commit)", "; ".join(event.get("blockers") or []), wait["seconds"])
        else:
            self.log.info("admitted after waiting %.1f s for %s", wait["seconds"],
                          "; ".join(wait["waited_for"]) or "nothing")
        self._note_wait(run, attempt, wait)
        return self._deferred_submit(context, run, attempt, event.get("request_id"))

    def _deferred_submit(self, context, run: "_WriteRun", n: int, request_id: str | None) -> dict:
        """Attempt ``n`` admitted: submit it detached, publish its instant, defer to its job."""
        run.request_id = request_id  # named in the job's labels (its footprint declares it)
        job, keep = self._start_detached(run, n)
        self._detached = job
        self.log.info("attempt %d submitted detached (pid %d, log %s)", n, job.pid, job.log_path)
        job.instant = self._wait_for_instant(run, job)
        if job.instant:  # the instant blocks now, with the request's reach
            admission.link(run.table_path, run.storage_options, request_id, job.instant)
        elif job.alive() is False:
            admission.withdraw(run.table_path, run.storage_options, request_id)
            request_id = None
        self._publish_running(run, job, n)
        self.defer(trigger=HudiWriteJobTrigger(
            run.table_path, job.to_json(), options=_heartbeat_options(run.options),
            storage_options=run.storage_options, poll_interval=self.poll_interval),
            method_name="execute_complete",
            kwargs={"attempt": n, "attempts": run.attempts, "submitted_at": job.started_at,
                    "waits": run.waits, "request_id": request_id, "job": {"detached": job.to_json(), **keep}})

    def _start_detached(self, run: "_WriteRun", n: int) -> tuple["deferred_job.DetachedJob", dict]:
        """Attempt ``n``'s job started detached, and what the engine keeps of it for
        :meth:`_deferred_outcome` (JSON: it travels with the deferral)."""
        hook = self._get_hook(run, n, extra_args=["--writer-id", self._writer_id(run, n)])
        return deferred_job.start_detached(hook, application_for(self.application, SPARK_APP),
                                           writer_id=self._writer_id(run, n)), {}

    @staticmethod
    def _writer_id(run: "_WriteRun", n: int) -> str:
        lab = run.labels
        return (f"airflow:{lab['dag_id']}.{lab['task_id']}.{lab['map_index']}:{lab['run_id']}:"
                f"try{lab['try_number']}:attempt{n}")

    def _wait_for_instant(self, run: "_WriteRun", job) -> str | None:
        """The attempt's instant, waited for (Spark's start) so that XCom has it before the
        worker lets go; None if it takes longer than ``instant_wait_s`` (the trigger finds it)."""
        deadline = time.time() + self.instant_wait_s
        while time.time() < deadline and not self._killed:
            try:
                instant = deferred_job.find_instant(Table.open(run.table_path, run.storage_options or None), job)
            except TableNotFoundError:
                instant = (job.began() or {}).get("instant")
            if instant or job.alive() is False:
                return instant
            time.sleep(0.5)
        return None

    def _publish_running(self, run: "_WriteRun", job, n: int) -> None:
        lab = run.labels
        if job.instant:
            run.ti.xcom_push(key=XCOM_RUNNING, value={"instant": job.instant, "attempt": n,
                                                     "writer_id": job.writer_id, "pid": job.pid,
                                                     "table": run.table_path})
            self.log.info("attempt %d began instant %s; deferring while Spark runs", n, job.instant)
        link = build_url(table_name_for(self, {"table_path": run.table_path}), dag_id=lab["dag_id"],
                         task_id=lab["task_id"], run_id=lab["run_id"], instant=job.instant)
        run.ti.xcom_push(key=_LINKS[0].xcom_key, value=link)

    def execute_complete(self, context, event: dict, attempt: int = 1, attempts: list | None = None,
                         submitted_at: float | None = None, waits: list | None = None,
                         request_id: str | None = None, job: dict | None = None) -> dict:
        """The trigger's outcome of attempt ``attempt``: done, another deferred attempt after a
        conflict (with backoff), or the failure raised as the synchronous path raises it.
        ``job``: what :meth:`_deferred_submit` kept of the attempt for :meth:`_deferred_outcome`."""
        run = self._resolve(context)
        run.attempts = list(attempts or [])
        run.waits = list(waits or [])
        admission.withdraw(run.table_path, run.storage_options, request_id)
        self._run_spark_conf = with_parent_job(self.spark_conf, context)
        seconds = round(time.time() - submitted_at, 3) if submitted_at else 0.0
        status, code, result = self._deferred_outcome(run, attempt, event, seconds, job or {})
        rec = self._record(run, attempt, code, {"instant": event.get("instant")}, result, seconds)
        try:
            if status == deferred_job.ALREADY_COMMITTED:
                found = committed_instant(run.table_path, run.storage_options, run.batch_key)
                if found is None:
                    raise _JobFailed(EXIT_ERROR, {**result, "error": {
                        "error": "BatchNotFound", "message": "the job said the batch was already "
                        f"committed, but no completed instant carries {run.batch_key!r}"}})
                out = self._already_committed(run, found)
            else:
                out = self._decide(run, attempt, code, result, rec)
        except _JobConflict as e:
            if attempt > self._conflict_retries:
                self._release_windows(run)
                raise_task_failure(self, _exhausted(run, []))
            delay = self._policy().delay(attempt)
            self.log.info("retrying in %.1f s with a fresh instant (attempt %d of %d)", delay,
                          attempt + 1, self._conflict_retries + 1)
            time.sleep(delay)
            return self._deferred_attempt(context, run, attempt + 1)
        except _JobFailed as e:
            self._release_windows(run)
            self._job_failed(e)
        self._release_windows(run)
        return self._committed(context, run, out)

    def _deferred_outcome(self, run: "_WriteRun", n: int, event: dict, seconds: float,
                          job: dict) -> tuple[str | None, int, dict]:
        """``(status, exit code, result)`` of deferred attempt ``n`` from the trigger's event:
        the engine's job reports through the table and its attempt log, which the trigger read
        (another engine's subclass reads its own job's outcome)."""
        return event.get("status"), deferred_job.exit_code_for(event), _result_of_event(event)


def _exhausted(run: "_WriteRun", attempts: list) -> RetriesExhaustedError:
    """Every conflict retry lost: retryable by Airflow later, when the rivals are done."""
    return RetriesExhaustedError(f"{len(run.attempts)} attempts all lost a conflict (batch "
                                 f"{run.batch_key!r})", attempts=list(attempts))


def _heartbeat_options(options: dict) -> dict:
    """What the trigger needs of the write options: the heartbeat's settings (no credential)."""
    return {k: v for k, v in options.items() if k.startswith("hoodie.client.heartbeat.")}


def _result_of_event(event: dict) -> dict:
    """The trigger's event in the shape of the job's result line, for :meth:`_record`/:meth:`_decide`."""
    status = event.get("status")
    drop = ("status", "writer_id", "exit_code", "error", "message", "remedy")
    out = {k: v for k, v in event.items() if k not in drop}
    if status in (deferred_job.COMMITTED, deferred_job.ALREADY_COMMITTED):
        out["outcome"] = event.get("outcome") or status
        return out
    out["outcome"] = "conflict" if status == deferred_job.CONFLICT else "error"
    err = event.get("error")
    out["error"] = err if isinstance(err, dict) else {
        "error": err or status, "message": event.get("message"), "remedy": event.get("remedy")}
    return out
