"""The engine's job (``spark/job.py``) as a Spark Connect client: each attempt is one
``python -m airflow_hudi_occ.spark.job`` on the worker, its session ``SPARK_REMOTE``'s server.

Why a process of its own and not a session in the task: PySpark builds Connect or classic
columns by a process-wide switch, and the provider never imports pyspark (docs/architecture.md,
the layer rule); a subprocess in its own session is also what ``on_kill`` can end whole. The
client process is the driver side (options, the lock, the instant, the early checks, the commit
or the rollback, the attempt record); the server's executors do the data work and receive the
package as a session artifact (``spark/session.py``). So everything the attempt loop needs is
what the spark-submit route gives: the ``HUDI_OCC_BEGIN`` / ``HUDI_OCC_RESULT`` lines read as
they come (:class:`~airflow_hudi_occ.provider.spark_jobs.JobOutput`), exit 75 for a conflict,
a detached run for the trigger (``deferred_job.start_command``).

Credentials: the URL (its ``token=``) only in the job's environment (``SPARK_REMOTE``), the
secret options and the table's storage options in a 0600 file named by the environment
(``core/job_secrets.py``), never on the command line. ``kill`` sends SIGTERM first and waits
``kill_grace_s``: the job turns it into an interrupt of its server-side job by tag and a
rollback (``spark/job.py``, ``stop_on_sigterm``), since the server would otherwise run the write
on without its driver.

Errors: no URL (neither ``remote`` nor the connection) is a ``ConfigError`` naming both, raised
before any instant exists; a server that does not answer is refused before a first write makes
the table (:meth:`ConnectLauncher.check_reachable`).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence
from urllib.parse import urlparse

import psutil

from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.job_protocol import stop_grace_s
from airflow_hudi_occ.core.job_secrets import (SECRETS_FILE_ENV, JobSecrets, remove_quietly,
                                               split_secret_options, write_secrets_file)
from airflow_hudi_occ.provider import admission, deferred_job
from airflow_hudi_occ.provider.hooks.hudi_occ import mask_secrets
from airflow_hudi_occ.provider.launchers.base import (Launched, Launcher, attempt_options, job_arguments,
                                                      writer_id)
from airflow_hudi_occ.provider.process_tree import kill_session_tree
from airflow_hudi_occ.provider.spark_jobs import JobOutput

if TYPE_CHECKING:
    from airflow_hudi_occ.provider.attempt_loop import WriteRun

#: the engine's entry point, run by ``python -m``
JOB_MODULE = "airflow_hudi_occ.spark.job"
#: Spark Connect's default port (``sc://host`` without one)
DEFAULT_PORT = 15002


class ConnectLauncher(Launcher):
    """Each attempt is the engine's job as a client of a Spark Connect server.

    :param spark_connect_conn_id: the Airflow Spark provider's ``spark_connect`` connection
        (its URL by ``SparkConnectHook.get_connection_url``: host, port, token, ``use_ssl``)
    :param remote: the server's URL instead (``sc://host:15002``, templated)
    :param spark_conf: runtime SQL settings of the job's session (templated; ``--conf k=v``:
        a Connect client cannot set the server's static ones)
    :param python: the interpreter that runs the client (default: the worker's); it needs the
        package and PySpark's Connect client (``airflow-hudi-occ[connect]``)
    :param kill_grace_s: seconds ``on_kill`` (and the trigger's kill of a deferred attempt)
        leaves the job, after SIGTERM, to interrupt its server-side job and roll back, before
        SIGKILL; default: the bound of that stop (``job_protocol.stop_grace_s``: its cancel,
        the wait for the cancelled tasks' Python workers at Spark's default
        ``spark.python.task.killTimeout`` of 2 s, and the rollback; 34.5 s). A server with a
        longer kill timeout (its own setting: a client cannot change it) needs that much more.
    :param poll_interval: seconds between the trigger's looks at a deferred job
    :param instant_wait_s: how long the worker waits for a deferred attempt's instant
    """

    template_fields: Sequence[str] = ("remote", "spark_conf")

    def __init__(self, *, spark_connect_conn_id: str | None = "spark_connect_default",
                 remote: str | None = None, spark_conf: dict[str, Any] | None = None,
                 python: str | None = None, kill_grace_s: float | None = None, poll_interval: float = 5.0,
                 instant_wait_s: float = 60.0):
        super().__init__(poll_interval=poll_interval, instant_wait_s=instant_wait_s)
        self.spark_connect_conn_id = spark_connect_conn_id
        self.remote = remote
        self.spark_conf = dict(spark_conf or {})
        self.python = python
        self.kill_grace_s = kill_grace_s
        self.proc: subprocess.Popen | None = None

    def stop_grace_s(self) -> float:
        """``kill_grace_s``, or the bound of the job's own stop (see the class)."""
        return stop_grace_s() if self.kill_grace_s is None else float(self.kill_grace_s)

    def url(self) -> str:
        """The server's URL: ``remote``, else the connection's; registered with the masker."""
        url = self.remote
        if not url and self.spark_connect_conn_id:
            from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
            try:
                url = SparkConnectHook(conn_id=self.spark_connect_conn_id).get_connection_url()
            except Exception as e:  # noqa: BLE001 - AirflowNotFoundException, a bad host
                raise ConfigError(f"no Spark Connect URL: the connection {self.spark_connect_conn_id!r} "
                                  f"gives none ({e})", key="spark_connect_conn_id",
                                  remedy="create a spark_connect connection (host, port, token) or pass "
                                         "remote='sc://host:15002'") from e
        if not url or not str(url).startswith("sc://"):
            raise ConfigError(f"the Spark Connect URL must start with sc://, got {url!r}", key="remote",
                              remedy="pass remote='sc://host:15002' or fix the connection's host")
        mask_secrets({"token": p.split("=", 1)[1] for p in str(url).split(";") if p.lower().startswith("token=")})
        return str(url)

    def command(self, run: "WriteRun", n: int, extra_args: Sequence[str] = ()) -> tuple[list[str], JobSecrets]:
        """Attempt ``n``'s command line (no credential on it) and what goes in the secrets file."""
        public, secret = split_secret_options(attempt_options(run, n))
        conf = [a for k, v in self.spark_conf.items() for a in ("--conf", f"{k}={v}")]
        cmd = [self.python or sys.executable, "-m", JOB_MODULE, *conf,
               *job_arguments(run, n, options=public), *extra_args]
        secrets = JobSecrets(secret, dict(run.storage_options or {}))
        mask_secrets(secrets.options, secrets.storage_options)
        return cmd, secrets

    def env(self, secrets_file: str | None) -> dict[str, str]:
        env = {"SPARK_REMOTE": self.url()}
        if secrets_file:
            env[SECRETS_FILE_ENV] = secrets_file  # the path only: the file is 0600
        return env

    def check_reachable(self, run: "WriteRun") -> None:
        """Before a first write makes the table: the server accepts a connection."""
        parsed = urlparse(self.url().split(";", 1)[0].replace("sc://", "http://", 1))
        host, port = parsed.hostname or "localhost", parsed.port or DEFAULT_PORT
        try:
            with socket.create_connection((host, port), timeout=3.0):
                return
        except OSError as e:
            raise ConfigError(f"no Spark Connect server answers at {host}:{port} ({e.strerror or e}); "
                              "nothing was written", key="remote",
                              remedy="start the server (sbin/start-connect-server.sh) or fix the URL") from e

    def run_attempt(self, run: "WriteRun", n: int, on_began: Callable[[dict], None]) -> Launched:
        """One client process to its end; its lines go to the task log, the BEGIN line
        publishes the running instant at once (and links the admission request to it)."""

        def began(payload: dict) -> None:
            on_began(payload)
            admission.link(run.table_path, run.storage_options, run.request_id, payload.get("instant"))

        out = JobOutput(on_begin=began)
        cmd, secrets = self.command(run, n)
        secrets_file = write_secrets_file(secrets) if secrets else None
        t0 = time.time()
        try:
            self.proc = subprocess.Popen(cmd, env={**os.environ, **self.env(secrets_file)}, text=True,
                                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, start_new_session=True)
            for line in self.proc.stdout:
                line = line.rstrip("\n")
                self.log.info("%s", line)
                out(line)
            code = self.proc.wait()
        finally:
            remove_quietly(secrets_file)  # the job deleted it on reading, if it started
        return Launched(code, out.began, out.result, round(time.time() - t0, 3))

    def start(self, run: "WriteRun", n: int) -> tuple[deferred_job.DetachedJob, dict]:
        wid = writer_id(run, n)
        cmd, secrets = self.command(run, n, ["--writer-id", wid])
        secrets_file = write_secrets_file(secrets) if secrets else None
        return deferred_job.start_command(cmd, self.env(secrets_file), writer_id=wid,
                                          secrets_file=secrets_file, kill_grace_s=self.stop_grace_s()), {}

    def kill(self) -> None:
        super().kill()
        if self.proc is not None and self.proc.poll() is None:
            try:
                pids = kill_session_tree(psutil.Process(self.proc.pid), self.stop_grace_s())
            except psutil.NoSuchProcess:
                pids = []
            self.log.info("stopped the Spark Connect client: %s", pids)
