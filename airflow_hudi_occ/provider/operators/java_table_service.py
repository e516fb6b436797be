"""Java Hudi's own table services from Airflow: clean, archive, cluster and compact run by Java
Hudi's write client under the same lock as every writer, as an alternative to this project's.

Why a subclass of :class:`HudiTableServiceOperator` and not an ``engine=`` argument: it reads
as the Java write operator does (``HudiJavaWriteOperator``: the Java set-up's arguments,
``spark_submit``, ``spark_home``, ``python``, ``hudi_bundle``, are not the engine's), and
everything else is the service operator's: the connections, the asset event with the
service's instant, lineage, the retry policy, ``on_kill``.

Each run is one spark-submit of ``spark/java_service_job.py`` under the Java side's Spark and
Hudi bundle. Its options reach Java as the write operator's do, through a private
``hudi-defaults.conf`` (``provider/java_job.py``): the connection's lock as Java's class (and
ZooKeeper url with its port), OCC and the LAZY failed-writes policy, so Java's clean rolls
back a dead writer's instant only once its heartbeat expired, and Java takes the lock our
writers take for every timeline change. Java schedules and executes clustering and
compaction itself (a compaction plan a dead job left pending is executed when nothing new is
due, as ours does).

The outcome is read from the table (the timeline before and after the job): the service's
completed instant, the writes its clean rolled back, the instants archival moved. A failed
job: Hudi's conflict exception (a clustering that lost to a write) is a
:class:`~airflow_hudi_occ.core.errors.RetryableError`; any other failure is
:class:`~airflow_hudi_occ.provider.java_job.JavaJobError` quoting the job's own exception.
``rollback`` is not offered: under LAZY, Java rolls failed writes back inside its clean
(``HudiTableServiceOperator(service="rollback")`` is ours).
"""

from __future__ import annotations

import collections
import os
import time
from typing import Any

from airflow_hudi_occ.core.errors import ConfigError, RetryableError
from airflow_hudi_occ.core.job_protocol import EXIT_OK
from airflow_hudi_occ.core.table.table import MERGE_ON_READ, Table
from airflow_hudi_occ.provider import java_job
from airflow_hudi_occ.provider.hooks.hudi_occ import HudiSparkJobHook
from airflow_hudi_occ.provider.operators.table_service import HudiTableServiceOperator
from airflow_hudi_occ.provider.spark_jobs import JAVA_SERVICE_APP
from airflow_hudi_occ.provider.version_compat import AirflowException


class HudiJavaTableServiceOperator(HudiTableServiceOperator):
    """Run a table service with Java Hudi: ``clean``, ``archive``, ``cluster`` (schedule +
    execute) or ``compact`` (merge-on-read; schedule + execute, else a pending plan; on a
    copy-on-write table a no-op that says so), under the connections' lock.

    :param options: ``hoodie.*`` options for Java (templated), over the connections'; not
        checked against this project's keys (Java checks its own)
    :param spark_submit, spark_home, python, hudi_bundle, jars: the Java set-up, as for
        :class:`~airflow_hudi_occ.provider.operators.java_write.HudiJavaWriteOperator` (else the
        table connection's ``java`` extra)
    :param spark_env: environment of the job
    :param application: another build of ``spark/java_service_job.py`` (e.g. a ``local://``
        path in a cluster image)
    Other arguments as :class:`HudiTableServiceOperator`.
    """

    SERVICES = ("clean", "archive", "cluster", "compact")
    check_option_keys = False  # Java checks its own keys
    ui_color = "#ffe0f0"

    def __init__(self, *, service: str, options: dict[str, Any] | None = None,
                 spark_submit: str | None = None, spark_home: str | None = None, python: str | None = None,
                 hudi_bundle: str | None = None, jars: list[str] | str | None = None,
                 spark_env: dict[str, str] | None = None, **kwargs):
        if service == "rollback":
            raise ConfigError("HudiJavaTableServiceOperator has no rollback: under the LAZY policy "
                              "Java rolls failed writes back inside its clean", key="service", value=service,
                              remedy="use service='clean' (Java) or HudiTableServiceOperator(service='rollback')")
        # Java checks its own keys: the base checks the service name only
        super().__init__(service=service, options=None, **kwargs)
        self.options = options or {}
        self.spark_submit = spark_submit
        self.spark_home = spark_home
        self.python = python
        self.hudi_bundle = hudi_bundle
        self.jars = jars
        self.spark_env = spark_env or {}
        self.spark_conf = {**java_job.SPARK_CONF, **self.spark_conf}

    # -- the services, each one Java job -----------------------------------------------------------

    def _clean(self, table, config, options, hook) -> dict:
        out = self._run_java("clean", table, options, hook)
        return {"service": "clean", **out, "clean_instant": out.get("instant")}

    def _archive(self, table, config, options, hook) -> dict:
        return {"service": "archive", **self._run_java("archive", table, options, hook)}

    def _cluster(self, table, config, options, hook) -> dict:
        out = self._run_java("cluster", table, options, hook, instant=self.instant)
        return {"service": "cluster", **out, "scheduled": out.get("instant")}

    def _compact(self, table, config, options, hook) -> dict:
        if table.config.table_type != MERGE_ON_READ:
            msg = f"{table.base_uri} is {table.config.table_type}: nothing to compact"
            self.log.info(msg)
            return {"service": "compact", "scheduled": None, "message": msg}
        pending = [i.requested_time for i in table.timeline().pending_compactions()]
        out = self._run_java("compact", table, options, hook, instant=self.instant,
                             or_pending=pending[0] if pending else None)
        return {"service": "compact", **out, "scheduled": out.get("instant"), "executed": out.get("instant")}

    def _run_java(self, service: str, table, options, hook, *, instant: str | None = None,
                  or_pending: str | None = None) -> dict:
        """One spark-submit of the Java service job; what it did, read from the timeline."""
        extras = hook.connection.extra_dejson if hook.connection is not None else {}
        try:
            setup = java_job.JavaSetup.resolve(extras, spark_submit=self.spark_submit, spark_home=self.spark_home,
                                               python=self.python, bundle=self.hudi_bundle, jars=self.jars)
        except ValueError as e:
            raise ConfigError(str(e), key=java_job.CONN_EXTRA,
                              remedy='e.g. {"java": {"spark_submit": "/opt/spark/bin/spark-submit"}}') from e
        try:
            folder = java_job.DefaultsFolder(java_job.occ_options(options))
        except ValueError as e:
            raise ConfigError(str(e), key="options", remedy="give that option on one line") from e
        args = [table.base_uri, service, *(["--instant", str(instant)] if instant else []),
                *(["--or-pending", str(or_pending)] if or_pending else [])]
        before = Table.open(table.base_uri, hook.storage_options or None).timeline()
        lines: collections.deque = collections.deque(maxlen=2000)
        t0 = time.monotonic()
        try:
            self._job_hook = HudiSparkJobHook(
                conn_id=self.spark_conn_id,
                name=f"hudi-occ java {service} {os.path.basename(table.base_uri.rstrip('/'))}",
                application_args=args, on_line=lines.append, ship_package=False,
                **setup.job_settings(self._run_spark_conf or self.spark_conf, self.spark_env, folder,
                                     table_path=table.base_uri, storage_options=hook.storage_options))
            self.log.info("Java Hudi %s on %s", service, table.base_uri)
            code = self._job_hook.run(self.application or JAVA_SERVICE_APP)
        finally:
            folder.remove()
        after = Table.open(table.base_uri, hook.storage_options or None).timeline()
        out = {"engine": "java", **java_job.service_outcome(before, after, service),
               "seconds": round(time.monotonic() - t0, 3)}
        if code == EXIT_OK:
            return out
        failure = java_job.read_failure(lines)
        if out.get("instant") or (service == "archive" and out.get("archived")):
            self.log.warning("the Java %s job exited %s after its work was done: %s", service, code, out)
            return out
        where = out.get("pending", [None])[0]
        if failure.conflict:
            raise RetryableError(f"Java's {service} {where or ''} yielded to a conflicting write "
                                 f"({failure.java_class}): {failure.message[:1000]}",
                                 remedy="the next run schedules again (Java rolls back the failed plan)")
        if code < 0 or not failure.java_class:  # killed, or no exception said why: Airflow's retries
            tail = "\n".join(failure.tail[-5:])
            raise AirflowException(f"the Java {service} job ended with exit {code}; last lines:\n{tail}")
        raise java_job.JavaJobError(f"Java's {service} on {table.base_uri} failed: {failure.java_class}: "
                                    f"{failure.message[:2000]}", java_class=failure.java_class,
                                    service=service, instant=where)
