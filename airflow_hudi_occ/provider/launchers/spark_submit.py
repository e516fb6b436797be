"""The engine's job (``spark/job.py``) through spark-submit: the write operator's default launcher.

Why spark-submit: the Airflow Spark provider's hook already knows the connection's master,
deploy mode and binary; ``HudiSparkJobHook`` adds what an optimistic writer needs (its own
process session so ``on_kill`` ends the whole tree, the ``HUDI_OCC_BEGIN`` / ``HUDI_OCC_RESULT``
lines read as they come, exit 75 as an outcome, credentials off the command line, the package
shipped to the executors). A synchronous attempt reads the job's result line; a deferred one
runs detached (``provider/deferred_job.py``) and the trigger reads the table.

Errors: a master that does not answer is refused before spark-submit starts
(``check_master_reachable``: a ``ConfigError`` with the fix); credentials that cannot reach a
driver on the cluster likewise (``HudiSparkJobHook.write_job_secrets``).
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

from airflow_hudi_occ.provider import admission, deferred_job
from airflow_hudi_occ.provider.hooks.hudi_occ import HudiSparkJobHook
from airflow_hudi_occ.provider.launchers.base import Launched, Launcher, job_arguments, writer_id
from airflow_hudi_occ.provider.spark_jobs import (DEFAULT_SPARK_CONF, SPARK_APP, JobOutput, application_for,
                                                  with_parent_job)
from airflow_hudi_occ.spark.submit.master import check_master_reachable

if TYPE_CHECKING:
    from airflow_hudi_occ.provider.attempt_loop import WriteRun


class SparkSubmitLauncher(Launcher):
    """Each attempt is one spark-submit of the engine's job.

    :param spark_conn_id: the Spark connection (``local[*]`` when it does not exist, or a
        cluster master; its deploy mode, binary, queue as the Spark provider reads them)
    :param spark_conf: Spark conf for the job (templated), over the project's defaults
    :param spark_env: environment variables for spark-submit and a client-mode driver
    :param application: the spark-submit application (templated; default: the engine's
        ``airflow_hudi_occ/spark/job.py``, or ``$HUDI_OCC_SPARK_APPLICATION``)
    :param poll_interval: seconds between the trigger's looks at a deferred job
    :param instant_wait_s: how long the worker waits for a deferred attempt's instant before
        it defers (to push it to XCom first)
    """

    template_fields: Sequence[str] = ("spark_conf", "application")

    def __init__(self, *, spark_conn_id: str = "spark_default", spark_conf: dict[str, Any] | None = None,
                 spark_env: dict[str, str] | None = None, application: str | None = None,
                 poll_interval: float = 5.0, instant_wait_s: float = 60.0):
        super().__init__(poll_interval=poll_interval, instant_wait_s=instant_wait_s)
        self.spark_conn_id = spark_conn_id
        self.spark_conf = {**DEFAULT_SPARK_CONF, **(spark_conf or {})}
        self.spark_env = dict(spark_env or {})
        self.application = application
        self.hook: HudiSparkJobHook | None = None
        self.run_conf: dict | None = None

    def attach(self, task, context) -> None:
        super().attach(task, context)
        self.run_conf = with_parent_job(self.spark_conf, context)

    def env(self) -> dict[str, str]:
        """spark-submit's environment: the worker's PYTHONPATH (the package's own checkout, in
        development) and ``spark_env``; PYSPARK_PYTHON is the hook's choice (local master only)."""
        env = {}
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        env.update({k: str(v) for k, v in self.spark_env.items()})
        return env

    def job_hook(self, run: "WriteRun", n: int, *, extra_args: list[str] | None = None,
                 on_line=None) -> HudiSparkJobHook:
        """The Spark job hook of attempt ``n``, built when the attempt is launched (never at
        DAG parse time): the task's Spark connection and conf, the job's arguments."""
        return HudiSparkJobHook(
            conf=self.run_conf or self.spark_conf, conn_id=self.spark_conn_id, env_vars=self.env(),
            name=f"hudi-occ {run.labels['dag_id']}.{run.labels['task_id']} attempt {n}",
            application_args=job_arguments(run, n) + list(extra_args or []),
            on_line=on_line, storage_options=run.storage_options)

    def check_reachable(self, run: "WriteRun") -> None:
        check_master_reachable(self.job_hook(run, 1).master)

    def run_attempt(self, run: "WriteRun", n: int, on_began: Callable[[dict], None]) -> Launched:
        """spark-submit one attempt; the BEGIN line publishes the running instant at once (and
        links the admission request to it: the instant blocks from now on, with the request's
        reach until its inflight file declares its file groups)."""

        def began(payload: dict) -> None:
            on_began(payload)
            admission.link(run.table_path, run.storage_options, run.request_id, payload.get("instant"))

        out = JobOutput(on_begin=began)
        self.hook = self.job_hook(run, n, on_line=out)
        t0 = time.time()
        code = self.hook.run(application_for(self.application, SPARK_APP))
        return Launched(code, out.began, out.result, round(time.time() - t0, 3))

    def start(self, run: "WriteRun", n: int) -> tuple[deferred_job.DetachedJob, dict]:
        wid = writer_id(run, n)
        hook = self.job_hook(run, n, extra_args=["--writer-id", wid])
        return deferred_job.start_detached(hook, application_for(self.application, SPARK_APP), writer_id=wid), {}

    def kill(self) -> None:
        super().kill()
        if self.hook is not None:
            self.hook.on_kill()
