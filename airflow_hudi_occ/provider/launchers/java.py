"""A user's own Java Hudi job (``df.write.format("hudi")``) as the attempt's job.

Each attempt is one spark-submit of ``application`` (a PySpark script or a JAR with
``java_class``) whose Java Hudi reads the project's options from a ``hudi-defaults.conf``
written for that attempt (``provider/java_job.py``): the lock from the connections, OCC, LAZY
failed writes, early conflict detection on direct markers, and the commit-metadata prefix that
stamps the commit with the attempt's writer id and batch key. The job has no
``HUDI_OCC_BEGIN`` / ``HUDI_OCC_RESULT`` lines: the outcome is read from the table.

- committed: a completed write carries the attempt's writer id (even if the job exited
  non-zero after its commit; that is logged);
- conflict: no such commit, and Hudi's ``HoodieWriteConflictException`` or
  ``HoodieEarlyConflictDetectionException`` in the driver's output: retried on a fresh instant
  (Java's failed instant is rolled back lazily by the next writer's clean once its heartbeat
  expired: LAZY);
- anything else fails the task quoting the job's own exception (exit 1: no Airflow retry).

While the job runs, its instant (Hudi's heartbeat-client log line) is published as ours is:
XCom ``hudi_occ_running_instant`` and a running record in the table's attempt log, so the
early-conflict sensor can watch it; an abort signal for it ends the Spark application (a
conflict: retried). Each attempt whose instant is known is recorded in the attempt log with the
task's labels, so the timeline page names the DAG and task of Java attempts as of ours.

Deferred: the job runs detached, the worker publishes its instant (Hudi's heartbeat line in
the job's log) and defers; the trigger only waits for the instant to complete or the process
to end, and :meth:`JavaHudiLauncher.outcome` decides as above from the table and the job's log
(an abort signal does not end a deferred Java job: docs/java-engine.md).

Errors: a malformed ``java`` extra of the table connection, or an option that cannot be
written on one line of ``hudi-defaults.conf``, is a ``ConfigError`` before any job starts.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.concurrency import abort_signal
from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.job_protocol import EXIT_ERROR, EXIT_OK, EXIT_RETRYABLE
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider import deferred_job, java_job
from airflow_hudi_occ.provider.hooks.hudi_occ import HudiOccHook, HudiSparkJobHook
from airflow_hudi_occ.provider.launchers.base import Launched, Launcher, writer_id
from airflow_hudi_occ.provider.launchers.spark_submit import SparkSubmitLauncher
from airflow_hudi_occ.spark.submit.table_creation import open_or_create_table

if TYPE_CHECKING:
    from airflow_hudi_occ.provider.attempt_loop import WriteRun


class JavaHudiLauncher(SparkSubmitLauncher):
    """Run a user's Java Hudi datasource job (PySpark script or JAR) as each attempt.

    :param application: the PySpark script or JAR that writes with ``format("hudi")`` to the
        table (templated); it needs no change: the OCC options reach it through Hudi's
        ``hudi-defaults.conf``
    :param application_args: its arguments (templated)
    :param java_class: the main class of a JAR application
    :param spark_submit: the spark-submit of the Spark that runs Java Hudi (a path)
    :param spark_home: that Spark's home (``SPARK_HOME`` of the job)
    :param python: the interpreter of a PySpark script (driver and workers)
    :param hudi_bundle: a bundle jar path (``--jars``) or Maven coordinate (``--packages``);
        default: the table connection's ``java.bundle``, else none when ``spark_conf`` or
        ``$SPARK_CONF_DIR/spark-defaults.conf`` gives ``spark.jars``/``spark.jars.packages``,
        else :data:`~airflow_hudi_occ.provider.java_job.DEFAULT_BUNDLE`
    :param jars: more jars for the job (``--jars``), e.g. Hadoop's s3a connector and the AWS
        SDK (:data:`~airflow_hudi_occ.provider.java_job.S3A_JARS`) for an S3 table, whose
        connection's endpoint and credentials then reach the job as Hadoop ``fs.s3a.*``
        settings and environment (``java_job.hadoop_store_settings``); default: the table
        connection's ``java.jars``

    ``spark_conn_id``, ``spark_conf``, ``spark_env``, ``poll_interval``, ``instant_wait_s``
    as :class:`~airflow_hudi_occ.provider.launchers.spark_submit.SparkSubmitLauncher`.
    """

    template_fields: Sequence[str] = ("application", "application_args", "spark_conf")
    takes_source = False

    def __init__(self, *, application: str, application_args: list[str] | None = None,
                 java_class: str | None = None, spark_submit: str | None = None,
                 spark_home: str | None = None, python: str | None = None, hudi_bundle: str | None = None,
                 jars: list[str] | str | None = None, **spark: Any):
        if not application or not str(application).strip():
            raise ConfigError("application must name the PySpark script or JAR that writes with "
                              "the Hudi datasource", key="application",
                              remedy="pass application='/jobs/write_orders.py'")
        super().__init__(application=application, **spark)
        self.spark_conf = {**java_job.SPARK_CONF, **self.spark_conf}
        self.application_args = list(application_args or [])
        self.java_class = java_class
        self.spark_submit = spark_submit
        self.spark_home = spark_home
        self.python = python
        self.hudi_bundle = hudi_bundle
        self.jars = jars
        self.setup: java_job.JavaSetup | None = None
        self.conf_dir: java_job.DefaultsFolder | None = None
        self.started_ms = 0

    def check_arguments(self, task_id: str, *, source: Any, source_format: Any, operation: Any,
                        options: Any) -> None:
        """No source: the Java job reads its own input; its ``hoodie.*`` options are not checked
        against this project's keys (Java checks its own)."""
        if source is not None:
            raise ConfigError("the Java Hudi job takes no source: the job decides it", key="source",
                              remedy="remove source= (the application writes what it writes)")

    def check_options(self, hook: HudiOccHook, options: dict) -> None:
        """Java checks its own keys; the file that carries them takes one line each. No typed
        config of ours: the heartbeat keys admission needs are read on their own."""
        extras = hook.connection.extra_dejson if hook.connection is not None else {}
        try:
            self.setup = java_job.JavaSetup.resolve(
                extras, spark_submit=self.spark_submit, spark_home=self.spark_home, python=self.python,
                bundle=self.hudi_bundle, jars=self.jars)
        except ValueError as e:
            raise ConfigError(str(e), key=java_job.CONN_EXTRA,
                              remedy='e.g. {"java": {"spark_submit": "/opt/spark/bin/spark-submit"}}') from e
        try:
            java_job.render_defaults(java_job.java_options(options, writer_id="w", batch_key="b", attempt=1))
        except ValueError as e:
            raise ConfigError(str(e), key="options", remedy="give that option on one line") from e
        return None

    def create_for_first_write(self, run: "WriteRun") -> Table | None:
        """A Java first write is admitted as ours is: the table the job expects is made before
        admission (``java_job.first_write_table_options``: the options' table name and keys,
        Java's table version), create-if-absent, so of Java first writers racing, one makes it
        and the others wait for each other. Without a table name and record key in the options
        only the user's script knows the table: Java makes its own and its first writes race
        (docs/concurrency.md)."""
        opts = java_job.first_write_table_options(run.options)
        if opts is None:
            self.log.info("the options name no table and record key (%s, %s): Java Hudi makes "
                          "the table on its first write, which is not admitted",
                          "hoodie.table.name", "hoodie.datasource.write.recordkey.field")
            return None
        table = open_or_create_table(run.table_path, opts, run.storage_options or None)
        self.log.info("table %s (%s, version %d) made before its first Java write (or found made by "
                      "a rival): its first writers are admitted one at a time", table.name,
                      table.base_uri, table.version)
        return table

    def java_hook(self, run: "WriteRun", n: int, *, on_line=None) -> HudiSparkJobHook:
        return HudiSparkJobHook(
            conn_id=self.spark_conn_id,
            name=f"hudi-occ java {run.labels['dag_id']}.{run.labels['task_id']} attempt {n}",
            application_args=[str(a) for a in self.application_args], java_class=self.java_class,
            on_line=on_line, ship_package=False,
            **self.setup.job_settings(self.run_conf or self.spark_conf, self.spark_env, self.conf_dir,
                                      table_path=run.table_path, storage_options=run.storage_options))

    def defaults_folder(self, run: "WriteRun", n: int, wid: str) -> java_job.DefaultsFolder:
        self.conf_dir = java_job.DefaultsFolder(java_job.java_options(
            run.options, writer_id=wid, batch_key=run.batch_key, attempt=n, checkpoint=run.checkpoint))
        return self.conf_dir

    def run_attempt(self, run: "WriteRun", n: int, on_began: Callable[[dict], None]) -> Launched:
        """One spark-submit of the user's job; its outcome read from the table. While it runs,
        the instant it began (its heartbeat client's line) is published as ours is (XCom, a
        running record in the attempt log), and an abort signal for it (the early-conflict
        sensor's) ends the Spark application: a conflict, retried on a fresh instant."""
        wid = writer_id(run, n)
        self.defaults_folder(run, n, wid)
        before = java_job.instants_on(run.table_path, run.storage_options)
        lines: collections.deque = collections.deque(maxlen=2000)
        state: dict = {"instant": None, "aborted": None}
        done = threading.Event()
        started_ms = int(time.time() * 1000)

        def on_line(line: str) -> None:
            lines.append(line)
            if state["instant"] is None and (inst := java_job.began_instant(line)):
                state["instant"] = inst
                on_began({"instant": inst, "attempt": n, "writer_id": wid})
                self.log_attempt(run, n, wid, {"instant": inst, "outcome": attempt_log.RUNNING}, started_ms)
                threading.Thread(target=self.watch_abort, args=(run, inst, state, done),
                                 name=f"hudi-occ abort watch {inst}", daemon=True).start()

        t0 = time.time()
        try:
            self.hook = self.java_hook(run, n, on_line=on_line)
            self.log.info("attempt %d: Java Hudi job %s as writer %s", n, self.application, wid)
            code = self.hook.run(self.application)
        finally:
            done.set()
            self.conf_dir.remove()
        seconds = round(time.time() - t0, 3)
        code, result = self.decide(run, code, wid, list(lines), before, seconds, state)
        self.log_attempt(run, n, wid, result, started_ms)
        return Launched(code, {}, result, seconds)

    def watch_abort(self, run: "WriteRun", instant: str, state: dict, done: threading.Event) -> None:
        """Until the job ends: an abort signal for its instant ends the Spark application."""
        try:
            table = Table.open(run.table_path, run.storage_options or None)
        except Exception:  # noqa: BLE001 - no table: nothing to watch
            return
        while not done.wait(1.0):
            info = abort_signal.abort_reason(table, instant)
            if info:
                state["aborted"] = info
                self.log.warning("instant %s is signalled to stop (%s): ending its Spark application",
                                 instant, str(info.get("reason"))[:300])
                if self.hook is not None:
                    self.hook.kill_tree()
                return

    def decide(self, run: "WriteRun", code: int, wid: str, lines: list[str], before: set,
               seconds: float, state: dict) -> tuple[int, dict]:
        """``(exit code, result)`` of an attempt from the table (the commit carrying the writer
        id) and, for a failure, the job's output (a conflict, or its own exception)."""
        inst, meta = java_job.find_writer_commit(run.table_path, run.storage_options, wid)
        if inst is not None:
            if code != EXIT_OK:
                self.log.warning("the Java job exited %s after its commit %s completed: the batch "
                                 "is written", code, inst.requested_time)
            run.operation = (meta.operation_type or "unknown").lower()
            stats = meta.write_stats()
            return EXIT_OK, {"outcome": "committed", "instant": inst.requested_time,
                             "completion_time": inst.completion_time, "writer_id": wid,
                             "stats": {"operation": run.operation, "files": len(stats),
                                       "records": sum(s.num_writes for s in stats),
                                       "file_groups": len({(s.partition_path, s.file_id) for s in stats})}}
        if self.killed:
            return code or EXIT_ERROR, {}
        failure = java_job.read_failure(lines)
        new = java_job.new_pending_writes(run.table_path, run.storage_options, before)
        instant = state.get("instant") or failure.instant or (new[0] if len(new) == 1 else None)
        if state.get("aborted"):
            err = abort_signal.error_for(instant, state["aborted"])
            failure.conflict, failure.java_class = True, type(err).__name__
            failure.message = f"stopped by an abort signal: {err}"
            failure.other_instant = getattr(err, "other_instant", None) or None
        if failure.conflict:
            groups, files = java_job.discarded_work(run.table_path, run.storage_options, instant) if instant else ([], 0)
            return EXIT_RETRYABLE, {"outcome": "conflict", "instant": instant, "writer_id": wid,
                                    "other_instant": failure.other_instant, "file_groups": groups,
                                    "files_discarded": files, "seconds_discarded": seconds,
                                    "error": {"error": failure.java_class, "message": failure.message[:2000],
                                              "remedy": "retried with a fresh instant"}}
        if code == EXIT_OK:
            err = {"error": "NoCommitFromJavaJob",
                   "message": f"the job exited 0, but no completed commit on {run.table_path} carries "
                              f"writer id {wid}",
                   "remedy": "the application must write to this table with format('hudi') and must not "
                             f"set its own {java_job.COMMITMETA_PREFIX_KEY} (that overrides the operator's)"}
            return EXIT_ERROR, {"outcome": "error", "instant": instant, "error": err}
        if not failure.java_class:
            tail = "\n".join(failure.tail[-5:])
            err = {"error": "JavaJobFailed", "message": f"no exception in its output; last lines:\n{tail}",
                   "remedy": "read the job's log above"}
        else:
            err = {"error": failure.java_class, "message": failure.message[:2000],
                   "remedy": "fix the cause the job names (its log is above); the attempt's instant, if "
                             "any, is rolled back lazily by the next writer"}
        return code, {"outcome": "error", "instant": instant, "error": err}

    def log_attempt(self, run: "WriteRun", n: int, wid: str, result: dict, started_ms: int) -> None:
        """The attempt in the table's attempt log, labelled with the task (best effort)."""
        if not result.get("instant"):
            return
        try:
            table = Table.open(run.table_path, run.storage_options or None)
        except Exception:  # noqa: BLE001 - no table
            return
        err = result.get("error") or {}
        attempt_log.write_record(table, attempt_log.AttemptRecord(
            instant=result["instant"], operation=run.operation, outcome=result.get("outcome") or "error",
            writer_id=wid, attempt=n, batch_key=run.batch_key, checkpoint=run.checkpoint,
            labels={**run.labels, "engine": "java"}, started_at_ms=started_ms,
            completion_time=result.get("completion_time"), error=err.get("error") if result.get("outcome") != "committed" else None,
            message=err.get("message"), other_instant=result.get("other_instant"),
            file_groups=result.get("file_groups") or [], files_discarded=result.get("files_discarded") or 0,
            seconds_discarded=result.get("seconds_discarded") or 0.0))

    # -- deferred: the job detached, the trigger waits for it, the table decides ----------------

    def start(self, run: "WriteRun", n: int) -> tuple[deferred_job.DetachedJob, dict]:
        """Attempt ``n``'s Java job started detached (``provider/deferred_job.py``: its own
        session, log and exit files), with its ``hudi-defaults.conf``; what the outcome needs
        later travels with the deferral: the conf folder (removed as soon as the instant is
        known: Hudi read it before it began one), the newest instant before the job, the start."""
        wid = writer_id(run, n)
        folder = self.defaults_folder(run, n, wid)
        self.started_ms = int(time.time() * 1000)
        before = java_job.instants_on(run.table_path, run.storage_options)
        try:
            job = deferred_job.start_detached(self.java_hook(run, n), self.application, writer_id=wid)
        except BaseException:
            folder.remove()
            raise
        return job, {"conf_dir": folder.path, "newest_before": max(before, default=""),
                     "started_ms": self.started_ms}

    def wait_for_instant(self, run: "WriteRun", job: deferred_job.DetachedJob) -> str | None:
        """The instant Hudi's heartbeat line names in the job's log, waited for up to
        ``instant_wait_s``; None if it takes longer (the table decides at the end either way)."""
        deadline = time.time() + self.instant_wait_s
        while time.time() < deadline and not self.killed:
            instant = java_job.began_in(java_job.log_lines(job.log_path))
            if instant or job.alive() is False:
                self.conf_dir.remove()
                return instant
            time.sleep(0.5)
        return None

    def on_running(self, run: "WriteRun", job: deferred_job.DetachedJob, n: int) -> None:
        """The running record in the attempt log, so the early-conflict sensor, the timeline
        page and the trigger see the attempt."""
        if job.instant:
            self.log_attempt(run, n, job.writer_id, {"instant": job.instant, "outcome": attempt_log.RUNNING},
                             self.started_ms)

    def outcome(self, run: "WriteRun", n: int, event: dict, seconds: float, kept: dict):
        """The trigger only waited (until the instant completed or the process ended): the
        outcome is read as in the synchronous path, from the table (the commit carrying the
        writer id) and, for a failure, from the job's log (conflict or its own error)."""
        java_job.remove_folder(kept.get("conf_dir"))
        detached = deferred_job.DetachedJob.from_json(kept["detached"])
        lines = java_job.log_lines(detached.log_path) if detached.local else []
        code = detached.exit_code()
        if code is None:
            code = deferred_job.exit_code_for(event)
        newest = kept.get("newest_before") or ""
        before = {t for t in java_job.instants_on(run.table_path, run.storage_options) if t <= newest}
        state = {"instant": event.get("instant") or detached.instant or java_job.began_in(lines), "aborted": None}
        code, result = self.decide(run, code, detached.writer_id, lines, before, seconds, state)
        self.log_attempt(run, n, detached.writer_id, result, int(kept.get("started_ms") or 0))
        return None, code, result
