"""The table-service operator: rollback, clean, archive, cluster and compact, each decision that
changes the timeline taken under the table lock by the service itself (core); clustering and
compaction planned here and executed by the engine's service job (spark-submit).

Errors: the task fails with the package's own error, and the default ``retry_policy``
(``provider/retry_policy.py``) lets Airflow retry a retryable one (a lock timeout, a service
that yielded to a write, a store down) and fails any other at once (a bad option, a missing
table). ``retry_policy=None``: ``AirflowException`` and ``AirflowFailException`` as before
retry policies. A service job killed by a signal is left to the task's own ``retries``.

Admission (clustering): before planning, the clustering files an admission request for the
partitions it would cluster, as a write does before spark-submit, and keeps it until its job
ends. Its kind is ``table_service`` unless the user says otherwise
(``admission=AdmissionSettings(kind=...)``, or ``hoodie.occ.write.kind`` in the task's options): when ingestion and a clustering wait on the
same partitions, ingestion goes first (RFC-22's example); while it runs, writers on its
partitions wait for it instead of being refused by the clustering gate (docs/concurrency.md).
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any, Sequence

from airflow_hudi_occ.core.catalog.sync import sync_table
from airflow_hudi_occ.core.commit.archival import run_archival
from airflow_hudi_occ.core.commit.attempt_log import LABELS_OPTION, task_label
from airflow_hudi_occ.core.commit.rollback import rollback_failed_writes, rollback_instant
from airflow_hudi_occ.core.concurrency import admission as core_admission
from airflow_hudi_occ.core.concurrency.footprint import TABLE_SERVICE, Footprint, check_kind
from airflow_hudi_occ.core.config import OPTIONS_STRICT_KEY, WRITE_KIND
from airflow_hudi_occ.core.errors import ConfigError, HudiOccError, RetryableError, from_dict
from airflow_hudi_occ.core.job_protocol import EXIT_ERROR, EXIT_OK, EXIT_RETRYABLE, EXIT_USAGE, format_options
from airflow_hudi_occ.core.services.clean import run_clean
from airflow_hudi_occ.core.services.clustering import clustering_config, plan_clustering, schedule_clustering
from airflow_hudi_occ.core.services.compaction import schedule_compaction
from airflow_hudi_occ.core.table.table import MERGE_ON_READ
from airflow_hudi_occ.provider import admission
from airflow_hudi_occ.provider.admission import AdmissionSettings
from airflow_hudi_occ.provider.arguments import check_service_arguments
from airflow_hudi_occ.provider.assets import commit_summary, declare_table_outlet, emit_table_event
from airflow_hudi_occ.provider.hooks.hudi_occ import HudiOccHook, HudiSparkJobHook
from airflow_hudi_occ.provider.retry_policy import DEFAULT_RETRY_POLICY, raise_task_failure, resolve_retry_policy
from airflow_hudi_occ.provider.spark_jobs import (DEFAULT_SPARK_CONF, SERVICE_APP, JobOutput, application_for,
                                                  check_task_assets, with_parent_job)
from airflow_hudi_occ.provider.task_keys import task_labels, task_owner
from airflow_hudi_occ.provider.version_compat import AirflowException, BaseOperator


def _service_instant(out: dict) -> str | None:
    """The instant a service created: a clean, a clustering replacecommit, a rollback."""
    for key in ("clean_instant", "scheduled", "rollback_instant"):
        if out.get(key):
            return str(out[key])
    rolled = [r.get("rollback_instant") for r in out.get("rolled_back") or [] if isinstance(r, dict)]
    rolled = [r for r in rolled if r]
    return rolled[-1] if rolled else None


def _service_outcome(out: dict) -> str:
    if out.get("service") == "archive":
        return f"archived {len(out.get('archived') or [])}"
    if out.get("service") == "rollback":
        return f"rolled back {len(out.get('rolled_back') or [])}"
    if out.get("service") == "sync":
        return f"synced to {out.get('last_commit_time_sync') or '-'}"
    return "done" if _service_instant(out) else "nothing to do"


class HudiTableServiceOperator(BaseOperator):
    """Run a table service: ``rollback`` (failed writes whose heartbeat expired), ``clean``,
    ``archive`` (old completed instants to the LSM history, Hudi's keep.min/max commits),
    ``cluster`` (planned here under the table lock, executed as a Spark job), or ``compact``
    (merge-on-read only: planned here under the lock when Hudi's trigger says so, executed by
    the service job; on a copy-on-write table a no-op that says so), or ``sync`` (the table's
    catalog, as a commit's sync does, from the ``hoodie.datasource.hive_sync.*`` options: the
    catch-up after a metastore outage, docs/catalog-sync.md).

    Every decision that changes the timeline is taken under the table lock by the service
    itself (core), with the same lock the writers use, taken from the same connection.

    :param admission: clustering's admission before planning, the write operator's
        :class:`~airflow_hudi_occ.provider.admission.AdmissionSettings`: ``on_overlap``
        ``wait`` while a live writer or an earlier request shares its partitions (bounded by
        ``timeout_s``, then it goes anyway), ``go`` at once, ``fail``; default the
        connection's ``hoodie.occ.admission.on.overlap``, else ``wait``. ``kind``, the
        clustering's rank among waiting writers: ``table_service`` (default, after ingestion
        and backfill, RFC-22), or ``ingestion`` / ``backfill`` to rank it as one
    :param retry_policy: decides Airflow's retries from the error (AIP-105); default
        :class:`~airflow_hudi_occ.provider.retry_policy.HudiRetryPolicy`; ``None``: no policy
    """

    template_fields: Sequence[str] = ("table_path", "options", "instant")
    template_fields_renderers = {"options": "json"}
    ui_color = "#f0e0ff"
    SERVICES = ("rollback", "clean", "archive", "cluster", "compact", "sync")
    #: the options are checked against this project's keys (a subclass for Java checks none)
    check_option_keys = True

    def __init__(self, *, service: str, table_path: str | None = None,
                 options: dict[str, Any] | None = None,
                 hudi_conn_id: str | None = HudiOccHook.default_conn_name,
                 spark_conn_id: str = "spark_default", spark_conf: dict[str, Any] | None = None,
                 instant: str | None = None, application: str | None = None,
                 admission: AdmissionSettings | None = None,
                 retry_policy: Any = DEFAULT_RETRY_POLICY, **kwargs):
        super().__init__(retry_policy=resolve_retry_policy(retry_policy), **kwargs)
        check_service_arguments(self.task_id, service=service, services=self.SERVICES, options=options)
        # a copy: a DAG file may share one settings object between tasks
        self.admission = (copy.copy(admission) if admission is not None
                          else AdmissionSettings(kind=TABLE_SERVICE))
        self.write_kind = check_kind((options or {}).get(WRITE_KIND.key) or self.admission.kind)
        self._labels: dict = {}
        self._admission_wait: dict | None = None
        self._request: core_admission.AdmissionRequest | None = None
        self.application = application
        self.service = service
        self.table_path = table_path
        self.options = options or {}
        self.hudi_conn_id = hudi_conn_id
        self.spark_conn_id = spark_conn_id
        self.spark_conf = {**DEFAULT_SPARK_CONF, **(spark_conf or {})}
        self.instant = instant
        self._job_hook: HudiSparkJobHook | None = None
        self.table_asset = declare_table_outlet(self, table_path)
        self._run_spark_conf: dict | None = None
        self._commit_summary: dict | None = None
        self._resolved_table_path: str | None = None

    def execute(self, context) -> dict:
        hook = HudiOccHook(self.hudi_conn_id, table_path=self.table_path, options=self.options)
        labels = self._labels = task_labels(context)
        try:
            extra = {LABELS_OPTION: json.dumps(labels, sort_keys=True)}
            if not self.check_option_keys:  # another engine's keys: warned about, not refused
                extra[OPTIONS_STRICT_KEY] = "false"
            options = hook.write_options(extra)
            config = hook.write_config(options)
            table = hook.get_table()
        except HudiOccError as e:
            raise_task_failure(self, e)
        self._resolved_table_path = hook.table_path
        check_task_assets(self, hook.table_path, hook.storage_options)
        self._run_spark_conf = with_parent_job(self.spark_conf, context)
        try:
            out = getattr(self, f"_{self.service}")(table, config, options, hook)
        except HudiOccError as e:  # a lock timeout and the like: Airflow's retries may help
            raise_task_failure(self, e)
        self.log.info("%s on %s: %s", self.service, table.base_uri, out)
        self._commit_summary = commit_summary(
            hook.table_path, hook.storage_options, instant=_service_instant(out),
            operation=self.service, outcome=_service_outcome(out))
        emit_table_event(self, context, self._commit_summary)
        return out

    def get_openlineage_facets_on_complete(self, task_instance):
        """The table as input and output, with the service's instant; never raises."""
        from airflow_hudi_occ.provider.openlineage import service_lineage
        return service_lineage(table_path=self._resolved_table_path or self.table_path,
                               summary=self._commit_summary)

    def _rollback(self, table, config, options, hook) -> dict:
        if self.instant:
            res = [rollback_instant(table, self.instant, config, reason="requested by Airflow",
                                    only_if_expired=True)]
        else:
            res = rollback_failed_writes(table, config)
        return {"service": "rollback", "rolled_back": [r.to_json() for r in res]}

    def _clean(self, table, config, options, hook) -> dict:
        return {"service": "clean", **run_clean(table, config).to_json()}

    def _archive(self, table, config, options, hook) -> dict:
        return {"service": "archive", **run_archival(table, config).to_json()}

    def _sync(self, table, config, options, hook) -> dict:
        return {"service": "sync", **sync_table(table, config, force=True).to_json()}

    def _cluster(self, table, config, options, hook) -> dict:
        request_id = None if self.instant else self._admit_clustering(table, config, options)
        try:
            return self._run_clustering(table, config, options, hook)
        finally:
            if request_id:  # kept while the job ran: writers on its partitions waited for it
                core_admission.withdraw(table, request_id)

    def _admit_clustering(self, table, config, options) -> str | None:
        """Wait (bounded) until no live writer or earlier request shares the partitions the
        clustering would plan for; the admitted request's id, withdrawn when the job ends.
        None: nothing to cluster, or ``on_overlap='go'``."""
        settings = self.admission.resolved(options)
        if settings.on_overlap == core_admission.GO:
            return None
        preview = plan_clustering(table, table.timeline(), clustering_config(config.options))
        parts = sorted({p for g in preview for p, _, _ in g.slices})
        if not parts:
            return None  # the plan under the lock will say so
        owner = task_label(self._labels) or f"{self._labels.get('dag_id')}.{self._labels.get('task_id')}"
        req = admission.file_request(table, Footprint(frozenset(parts), owner=owner, kind=self.write_kind),
                                     task_owner(self._labels))
        res = admission.wait_on_worker(table, req, config.heartbeat, settings, self.log)
        if res.waited_for:
            self._admission_wait = res.to_json()
        self._request = req
        return req.request_id

    def _declare_plan(self, table, instant: str) -> None:
        """The admitted request takes the plan's partitions: made under the lock, the plan may
        reach partitions the preview did not (small files written meanwhile); until the job's
        heartbeat makes the clustering a live writer, the request is what writers see."""
        req = self._request
        plan = table.timeline().requested_replace_metadata(table.timeline().get(instant))
        parts = {p for g in (plan.input_groups if plan is not None else []) for p, _, _ in g.slices}
        if req is not None and parts - set(req.partitions or ()):
            req.partitions = sorted(parts | set(req.partitions or ()))
            core_admission.save(table, req)

    def _run_clustering(self, table, config, options, hook) -> dict:
        instant = self.instant or schedule_clustering(table, config)
        if instant is None:
            return {"service": "cluster", "scheduled": None, "message": "nothing to cluster"}
        if self._request is not None:
            self._declare_plan(table, instant)
        code, result = self._run_service_job("cluster", instant, table, options, hook)
        if code == EXIT_RETRYABLE:
            raise RetryableError(f"clustering {instant} yielded to a conflicting write and was "
                                 f"rolled back, plan included: {result.get('error')}",
                                 remedy="the next run plans again")
        if code != EXIT_OK:
            self._job_failed(code, result, f"clustering {instant} failed (exit {code})")
        out = {"service": "cluster", "scheduled": instant, **result}
        if self._admission_wait is not None:
            out["admission_wait"] = self._admission_wait
        return out

    def _compact(self, table, config, options, hook) -> dict:
        if table.config.table_type != MERGE_ON_READ:
            # one services DAG for every table: compaction is simply not a step of a COW table
            msg = f"{table.base_uri} is {table.config.table_type}: nothing to compact"
            self.log.info(msg)
            return {"service": "compact", "scheduled": None, "message": msg}
        # planned here, under the lock, as clustering is: the job only executes a fixed plan;
        # without a new plan, a pending one (a dead executor's) is what the job re-runs
        instant = self.instant or schedule_compaction(table, config)
        pending = [i.requested_time for i in table.timeline().pending_compactions()]
        run = instant or (pending[0] if pending else None)
        if run is None:
            return {"service": "compact", "scheduled": None,
                    "message": "nothing to compact (trigger not reached, or no log files)"}
        code, result = self._run_service_job("compact", run, table, options, hook)
        if code == EXIT_RETRYABLE:
            raise RetryableError(f"compaction {run} yielded to a conflicting write and was rolled "
                                 f"back to requested, plan kept: {result.get('error')}",
                                 remedy="the next run executes it again")
        if code != EXIT_OK:
            self._job_failed(code, result, f"compaction {run} failed (exit {code}); its plan stays "
                                           f"pending for the next run")
        return {**result, "service": "compact", "scheduled": instant, "executed": run}

    @staticmethod
    def _job_failed(code: int, result: dict, what: str):
        """The service job's own error (exit 1, 2), raised for the retry policy to judge; a job
        killed by a signal is left to the task's retries."""
        if code in (EXIT_ERROR, EXIT_USAGE):
            err = from_dict(result.get("error") or {})
            raise err if err is not None else HudiOccError(f"{what}: {result.get('error')}",
                                                           remedy="read the service job's log above")
        raise AirflowException(f"{what}: {result.get('error')}")

    def _run_service_job(self, service: str, instant: str, table, options, hook) -> tuple[int, dict]:
        """spark-submit the service job for one planned instant; its exit code and result line.
        The plan was made here, under the lock: the job only executes it."""
        args = ["--table", table.base_uri, "--service", service, "--instant", str(instant),
                *format_options(options)]
        out = JobOutput()
        self._job_hook = self._get_hook(args, name=f"hudi-occ {service} {instant}", on_line=out,
                                        storage_options=hook.storage_options)
        code = self._job_hook.run(application_for(self.application, SERVICE_APP))
        return code, out.result

    def _get_hook(self, args: list[str], *, name: str, on_line, storage_options) -> HudiSparkJobHook:
        """The service job's Spark hook, built when the job is submitted (never at DAG parse time)."""
        return HudiSparkJobHook(
            conf=self._run_spark_conf or self.spark_conf, conn_id=self.spark_conn_id,
            application_args=args, on_line=on_line,
            env_vars={"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else None,
            name=name, storage_options=storage_options)

    def on_kill(self) -> None:
        if self._job_hook is not None:
            self._job_hook.on_kill()
