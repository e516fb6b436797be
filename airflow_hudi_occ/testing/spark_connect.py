"""A real Spark Connect server for tests, started from the jar that ships in PySpark's wheel.

Why a real one: what the engine must survive on Connect (no SparkContext in the client, the
package arriving as an artifact, jobs cancelled by tag from another client thread, the data
work in the server's Python workers) is the server's behaviour; a fake would only repeat our
assumptions. PySpark 4's wheel carries ``jars/spark-connect_2.13-<version>.jar``, so no
download is needed: ``spark-submit --class ...SparkConnectServer <that jar>``.

The server runs ``local[2]`` on 127.0.0.1 and a free port; its executors' Python is
``python`` (default: this interpreter, which has the engine's dependencies, as a cluster's
workers would through a packed venv), and its environment is this process's, minus
``PYTHONPATH`` unless ``keep_pythonpath``: the engine must then reach the server's workers
the way it reaches a remote one, as the client's session artifact.

Errors: ``RuntimeError`` (from :class:`~.server_process.ServerProcess`) naming the tail of the
server's log when it exits or does not listen within ``start_timeout_s``;
:class:`SparkConnectJarMissing` when the installed PySpark has no Connect jar (PySpark 3.5).

Usage::

    with SparkConnectServer() as server:
        spark = connect_session(server.url)
"""

from __future__ import annotations

import glob
import os
import socket
import sys

from airflow_hudi_occ.testing.server_process import ServerProcess
from airflow_hudi_occ.testing.zookeeper import free_port

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


class SparkConnectJarMissing(RuntimeError):
    """The installed PySpark ships no ``spark-connect_*.jar`` (3.5 does not: its server is a
    Maven package)."""


def connect_jar() -> str:
    """The Connect server's jar in the installed PySpark's ``jars/``."""
    import pyspark
    jars = sorted(glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "spark-connect_*.jar")))
    if not jars:
        raise SparkConnectJarMissing(
            f"PySpark {pyspark.__version__} at {os.path.dirname(pyspark.__file__)} ships no "
            "spark-connect_*.jar: run the Connect tests with PySpark 4.x")
    return jars[-1]


def spark_submit() -> str:
    """The ``spark-submit`` beside this interpreter (the venv's), else the one on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    return here if os.path.exists(here) else "spark-submit"


class SparkConnectServer:
    """One ``SparkConnectServer`` JVM (``local[2]`` by default) listening on 127.0.0.1:``port``."""

    def __init__(self, *, port: int | None = None, master: str = "local[2]", python: str | None = None,
                 conf: dict[str, str] | None = None, start_timeout_s: float = 120.0,
                 keep_pythonpath: bool = False):
        self.port = port or free_port()
        self.master = master
        self.python = python or sys.executable
        self.conf = {"spark.connect.grpc.binding.address": "127.0.0.1",
                     "spark.connect.grpc.binding.port": str(self.port),
                     "spark.ui.enabled": "false", "spark.log.level": "WARN",
                     "spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "2",
                     "spark.sql.session.timeZone": "UTC", **(conf or {})}
        self.start_timeout_s = start_timeout_s
        self.keep_pythonpath = keep_pythonpath
        self._server: ServerProcess | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        args = [spark_submit(), "--master", self.master, "--class", SERVER_CLASS]
        for k, v in self.conf.items():
            args += ["--conf", f"{k}={v}"]
        return args + [connect_jar()]

    def start(self) -> "SparkConnectServer":
        env = dict(os.environ, PYSPARK_PYTHON=self.python, PYSPARK_DRIVER_PYTHON=self.python)
        env.pop("SPARK_REMOTE", None)
        if not self.keep_pythonpath:
            env.pop("PYTHONPATH", None)

        def listening():
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        self._server = ServerProcess(self.command(), what=f"Spark Connect server on port {self.port}",
                                     ready=listening, timeout_s=self.start_timeout_s, poll_s=0.25, env=env)
        self._server.start()
        return self

    def log(self) -> str:
        return self._server.errors() if self._server is not None else ""

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> "SparkConnectServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


__all__ = ["SparkConnectServer", "SparkConnectJarMissing", "connect_jar", "SERVER_CLASS"]
