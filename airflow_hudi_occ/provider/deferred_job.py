"""A write job submitted detached, and how its outcome is read without its stdout.

Why: a deferrable :class:`~airflow_hudi_occ.provider.operators.write.HudiWriteOperator`
gives its worker slot back while Spark runs. So spark-submit must outlive the task's worker
process: it starts in its own session (its process group holds spark-submit, the JVM and, in
client mode, the Python driver and workers), under ``/bin/sh`` that appends its output to a log
file and writes its exit status to a file when it ends. :class:`DetachedJob` is what the
operator hands to the trigger (JSON): the session leader's pid *and start time* (a pid alone
may be reused by another process by the time the trigger looks), the host, the two files, the
writer id the job was given (``--writer-id``) and, once known, the attempt's instant.

The outcome is read from the table, not from stdout (:func:`check_job`): the instant completed
on the timeline is a commit; the attempt log record (``core/commit/attempt_log.py``) written by
the job under the writer id says conflict / aborted / error; a record still ``running`` whose
driver is gone (the local process ended, or on a cluster its heartbeat expired) is a failed
job. That holds in cluster deploy mode too, where the driver and its stdout are elsewhere: the
local process is then only spark-submit, and the table alone decides. The log's result line, when
this host can read it, only adds detail (the write stats) to a commit.

A job that another operator launched (the external launcher, ``provider/launchers/external.py``:
EMR, Dataproc, Databricks, Kubernetes, or a local ``SparkSubmitOperator``) has no process here
(:func:`external_job`: pid 0): it is followed like a driver on a cluster, by its writer id in the
attempt log and its instant's heartbeat, unless its operator returned when the job ended, which
:meth:`DetachedJob.mark_ended` records as the exit file a detached spark-submit would leave.

Errors: :func:`check_job` raises what storage raises (the trigger reports it as ``failed``);
killing (:meth:`DetachedJob.kill`) never raises.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

import psutil

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.concurrency.heartbeat import is_expired
from airflow_hudi_occ.core.concurrency.process_identity import ProcessIdentity
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import TableNotFoundError
from airflow_hudi_occ.core.job_protocol import (BEGIN_PREFIX, EXIT_ERROR, EXIT_OK, EXIT_RETRYABLE,
                                                RESULT_PREFIX, last_payload)
from airflow_hudi_occ.core.job_secrets import remove_quietly
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider.process_tree import kill_session_tree
from airflow_hudi_occ.spark.submit.master import check_master_reachable

#: trigger event statuses
COMMITTED = "committed"
CONFLICT = "conflict"
FAILED = "failed"
ALREADY_COMMITTED = "already_committed"

#: appends the job's output to $HUDI_OCC_JOB_LOG and, when spark-submit ends, writes its exit
#: status to $HUDI_OCC_JOB_EXIT (atomically: a reader never sees a half-written number)
_WRAPPER = ('"$@" >>"$HUDI_OCC_JOB_LOG" 2>&1 </dev/null; rc=$?; '
            'echo $rc >"$HUDI_OCC_JOB_EXIT.tmp" && mv "$HUDI_OCC_JOB_EXIT.tmp" "$HUDI_OCC_JOB_EXIT"')


def jobs_dir() -> str:
    """Where detached jobs keep their log and exit files: ``$HUDI_OCC_JOBS_DIR``, else
    ``$AIRFLOW_HOME/hudi_occ_jobs`` (the triggerer of a client-mode job must see this folder)."""
    d = os.environ.get("HUDI_OCC_JOBS_DIR") or os.path.join(
        os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow"), "hudi_occ_jobs")
    os.makedirs(d, mode=0o700, exist_ok=True)
    return d


@dataclass
class DetachedJob:
    pid: int
    create_time: float
    host: str
    log_path: str
    exit_path: str
    writer_id: str
    started_at: float
    driver_on_cluster: bool = False
    instant: str | None = None
    secrets_file: str | None = None
    extra: dict = field(default_factory=dict)
    #: seconds :meth:`kill` leaves the job after SIGTERM (its launcher's: a Spark Connect
    #: client rolls back in that time, a spark-submit driver's JVM takes its job down at once)
    kill_grace_s: float = 5.0

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "DetachedJob":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    # -- the local process -------------------------------------------------------------------

    @property
    def local(self) -> bool:
        return self.host == socket.gethostname()

    def _process(self) -> psutil.Process | None:
        """The session leader if it is still ours (same pid AND start time) and not a zombie."""
        if self.pid <= 0:  # launched by another operator: no process of ours
            return None
        if not ProcessIdentity(self.host, self.pid, self.create_time).alive():
            return None
        try:
            return psutil.Process(self.pid)
        except psutil.Error:
            return None

    def alive(self) -> bool | None:
        """Whether spark-submit still runs; None when this host cannot tell (another host, or a
        job another operator launched that has not been marked ended)."""
        if not self.local:
            return None
        if self.pid <= 0:
            return False if self.exit_code() is not None else None
        return self.exit_code() is None and self._process() is not None

    def mark_ended(self, code: int, note: str = "") -> None:
        """The job ended with ``code`` (its operator returned or failed): ``note`` into its log
        (what the failure said), then its exit file, as the detached wrapper leaves them."""
        with open(self.log_path, "a") as f:
            f.write(note)
        with open(self.exit_path + ".tmp", "w") as f:
            f.write(f"{code}\n")
        os.replace(self.exit_path + ".tmp", self.exit_path)

    def exit_code(self) -> int | None:
        try:
            with open(self.exit_path) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def log_tail(self, chars: int = 3000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - chars))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def _log_payload(self, prefix: str) -> dict | None:
        try:
            with open(self.log_path, errors="replace") as f:
                return last_payload(f, prefix)
        except OSError:
            return None

    def began(self) -> dict | None:
        return self._log_payload(BEGIN_PREFIX)

    def result(self) -> dict | None:
        return self._log_payload(RESULT_PREFIX)

    def kill(self, grace_s: float | None = None) -> list[int]:
        """SIGTERM the job's process group (and descendants that left it), SIGKILL what outlives
        ``grace_s`` (default: the job's own :attr:`kill_grace_s`, which its launcher sets to
        the time the job needs to stop: for a Spark Connect client its cancel, the wait for
        the cancelled tasks and its rollback, ``job_protocol.stop_grace_s``; a shorter grace
        would cut that rollback short); the pids that were running. A job killed before it
        rolled back leaves its instant pending, for the next writer's lazy rollback once its
        heartbeat expired."""
        root = self._process()
        if root is None:
            return []
        pids = kill_session_tree(root, self.kill_grace_s if grace_s is None else grace_s)
        remove_quietly(self.secrets_file)
        return pids


def start_detached(hook, application: str, *, writer_id: str, directory: str | None = None) -> DetachedJob:
    """Start ``hook``'s spark-submit (a :class:`HudiSparkJobHook`) in its own session, output to
    a log file; return the job's record at once."""
    check_master_reachable(hook.master)  # as the synchronous path: fail now, naming the fix
    secrets_file = hook.write_job_secrets()
    return start_command(hook._build_spark_submit_command(application), hook._env or {},
                         writer_id=writer_id, driver_on_cluster=hook._driver_on_cluster,
                         secrets_file=secrets_file, directory=directory)


def start_command(cmd: list[str], env: dict[str, str], *, writer_id: str, driver_on_cluster: bool = False,
                  secrets_file: str | None = None, directory: str | None = None,
                  kill_grace_s: float = 5.0) -> DetachedJob:
    """Start ``cmd`` (a job that prints the engine's BEGIN/RESULT lines: spark-submit, or the
    engine's entry point as a Spark Connect client) detached in its own session, with ``env``
    over this process's environment, output to a log file; return the job's record at once
    (``kill_grace_s``: see :attr:`DetachedJob.kill_grace_s`)."""
    directory = directory or jobs_dir()
    stem = os.path.join(directory, f"{time.strftime('%Y%m%dT%H%M%S')}-{writer_id.replace('/', '_')}")
    log_path, exit_path = stem + ".log", stem + ".exit"
    env = {**os.environ, **env, "HUDI_OCC_JOB_LOG": log_path, "HUDI_OCC_JOB_EXIT": exit_path}
    open(log_path, "a").close()
    sp = subprocess.Popen(["/bin/sh", "-c", _WRAPPER, "hudi-occ-job", *cmd], env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        create_time = psutil.Process(sp.pid).create_time()
    except psutil.Error:
        create_time = 0.0
    return DetachedJob(pid=sp.pid, create_time=create_time, host=socket.gethostname(),
                       log_path=log_path, exit_path=exit_path, writer_id=writer_id,
                       started_at=time.time(), driver_on_cluster=driver_on_cluster,
                       secrets_file=secrets_file, kill_grace_s=kill_grace_s)


def external_job(writer_id: str, directory: str | None = None) -> DetachedJob:
    """The record of a job another operator launches (no process here: pid 0), with the log and
    exit files :meth:`DetachedJob.mark_ended` fills when that operator returns."""
    directory = directory or jobs_dir()
    stem = os.path.join(directory, f"{time.strftime('%Y%m%dT%H%M%S')}-{writer_id.replace('/', '_')}")
    open(stem + ".log", "a").close()
    return DetachedJob(pid=0, create_time=0.0, host=socket.gethostname(), log_path=stem + ".log",
                       exit_path=stem + ".exit", writer_id=writer_id, started_at=time.time())


def heartbeat_options(options: dict) -> dict:
    """What a trigger needs of the write options: the heartbeat's settings (no credential)."""
    return {k: v for k, v in options.items() if k.startswith("hoodie.client.heartbeat.")}


# -- the outcome, from the table -------------------------------------------------------------


def _instant_floor(t: float) -> str:
    """An instant time (yyyyMMddHHmmssSSS, UTC) a minute before ``t``: records older than the
    job cannot be its own."""
    return datetime.fromtimestamp(t - 60, timezone.utc).strftime("%Y%m%d%H%M%S%f")[:17]


def find_instant(table, job: DetachedJob) -> str | None:
    """The instant the job began: its ``HUDI_OCC_BEGIN`` line where this host can read it, else
    the attempt record carrying its writer id (cluster mode)."""
    began = job.began() if job.local else None
    if began and began.get("instant"):
        return str(began["instant"])
    for rec in attempt_log.read_records(table, since=_instant_floor(job.started_at)):
        if rec.writer_id == job.writer_id:
            return rec.instant
    return None




def _event(status: str, job: DetachedJob, **kw: Any) -> dict:
    return {"status": status, "instant": job.instant, "writer_id": job.writer_id,
            "exit_code": job.exit_code(), **{k: v for k, v in kw.items() if v is not None}}


def _from_record(table, job: DetachedJob, rec: attempt_log.AttemptRecord | None) -> dict | None:
    """The outcome the table gives: the timeline first (a completed instant is a commit, whatever
    else happened), then the attempt record's outcome; None while undecided."""
    inst = table.timeline().get(job.instant)
    if inst is not None and inst.is_completed:
        extra = {}
        res = job.result() if job.local else None
        if res and str(res.get("instant")) == job.instant:
            extra = {k: v for k, v in res.items() if k not in ("status",)}
        return _event(COMMITTED, job, **{**extra, "outcome": (res or {}).get("outcome") or COMMITTED,
                                         "completion_time": inst.completion_time})
    if rec is None or rec.outcome == attempt_log.RUNNING:
        return None
    if rec.outcome == attempt_log.COMMITTED:  # record ahead of the timeline's rename? look again
        return None
    if rec.error == "BatchAlreadyCommittedError":
        return _event(ALREADY_COMMITTED, job, message=rec.message)
    if rec.outcome in (attempt_log.CONFLICT, attempt_log.ABORTED):
        return _event(CONFLICT, job, other_instant=rec.other_instant, file_groups=rec.file_groups,
                      seconds_discarded=rec.seconds_discarded, files_discarded=rec.files_discarded,
                      error=rec.error, message=rec.message)
    return _event(FAILED, job, error=rec.error, message=rec.message)


def _ended_without_instant(job: DetachedJob, code: int | None) -> dict:
    """spark-submit ended before any instant of this writer appeared: a usage error, a failed
    preflight, a batch found already committed, a JVM that never started."""
    res = job.result() or {}
    err = res.get("error") or {}
    if code == EXIT_OK:
        return _event(ALREADY_COMMITTED if res.get("outcome") in (None, "already_committed") else COMMITTED,
                      job, **{k: v for k, v in res.items() if k not in ("status",)})
    if code == EXIT_RETRYABLE:
        return _event(CONFLICT, job, error=err.get("error"), message=err.get("message"))
    return _event(FAILED, job, error=err.get("error") or "JobFailed",
                  message=err.get("message") or f"spark-submit exited {code} before beginning an "
                  f"instant; its log ends:\n{job.log_tail(1500)}", remedy=err.get("remedy"))


def check_job(table_path: str, storage_options: dict | None, job: DetachedJob,
              options: dict | None = None, begin_timeout_s: float = 900.0) -> dict | None:
    """One look at a detached write; an event dict when it ended, else None. Sets
    ``job.instant`` once found."""
    alive = job.alive() if not job.driver_on_cluster else None
    if alive is False:
        remove_quietly(job.secrets_file)  # a job that never started did not delete it
    try:
        table = Table.open(table_path, storage_options or None)
    except TableNotFoundError:
        table = None
    if table is not None and job.instant is None:
        job.instant = find_instant(table, job)
    if job.instant is None:
        if alive is False:
            return _ended_without_instant(job, job.exit_code())
        if alive is None and time.time() - job.started_at > begin_timeout_s:
            return _event(FAILED, job, error="JobNotStarted",
                          message=f"no instant of writer {job.writer_id} after {begin_timeout_s:.0f} s")
        return None
    event = _from_record(table, job, attempt_log.read_record(table, job.instant))
    if event is not None or alive:
        return event
    if alive is False:
        # the process ended: the job's last words reached the table before it exited, so one
        # more look decides; still running there means it died mid-write
        event = _from_record(table, job, attempt_log.read_record(table, job.instant))
        if event is not None:
            return event
        code = job.exit_code()
        return _event(FAILED, job, error="DriverDied",
                      message=f"the Spark driver ended (exit {code if code is not None else 'unknown: killed'}) "
                              f"leaving instant {job.instant} pending (rolled back lazily by the next "
                              f"writer); its log ends:\n{job.log_tail(1500)}")
    cfg = WriteConfig.from_options(dict(options or {}))
    if is_expired(table, job.instant, cfg.heartbeat):  # another host or a cluster driver
        return _event(FAILED, job, error="HeartbeatExpired",
                      message=f"the heartbeat of instant {job.instant} expired: its driver is gone")
    return None


def exit_code_for(event: dict) -> int:
    """The job exit code the synchronous path would have seen for this event."""
    return {COMMITTED: EXIT_OK, ALREADY_COMMITTED: EXIT_OK, CONFLICT: EXIT_RETRYABLE}.get(
        event.get("status"), event.get("exit_code") or EXIT_ERROR)
