"""A real Spark standalone cluster on 127.0.0.1: a master and workers from the installed pyspark.

Why a real one: local mode hides what a cluster changes. Executors there are separate JVMs
started by a worker, with the worker's environment, running the Python the driver names (or
``python3`` on the worker's PATH); code the driver can import is not on their path unless it
is shipped. The harness therefore starts the master and workers with a clean environment (no
PYTHONPATH, a PATH of the system's folders only, and optionally a ``python3`` of our choosing
first), so a test that passes proves the shipping, not the machine.

``python_without_package`` makes such a ``python3``: a venv that sees the dependencies of
the running interpreter (pyarrow, fastavro, kazoo, ...) but not ``airflow_hudi_occ``; with
``with_dependencies=False`` it sees nothing, like a bare worker.

:meth:`SparkStandaloneCluster.stop` ends every process the cluster started (executors and
their Python workers included, listed before the signal) and checks none survives.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

import psutil

from airflow_hudi_occ.testing.airflow_standalone import remember, survivors


def spark_home() -> str:
    import pyspark
    return os.path.dirname(pyspark.__file__)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def python_without_package(folder: str | os.PathLike, *, with_dependencies: bool = True) -> str:
    """A ``python3`` that cannot import ``airflow_hudi_occ``; with ``with_dependencies`` it
    sees this interpreter's site-packages as a plain folder (so the editable install's import
    hook, a ``.pth`` file there, is not run). Returns the interpreter's path."""
    folder = Path(folder)
    python = folder / "bin" / "python3"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               check=True, capture_output=True, text=True).stdout.strip())
    pth = site / "_hudi_occ_test_deps.pth"
    if with_dependencies:
        pth.write_text(sysconfig.get_path("purelib") + "\n")
    elif pth.exists():
        pth.unlink()
    probe = subprocess.run([str(python), "-c", "import airflow_hudi_occ"], capture_output=True,
                           env=clean_env(), cwd=folder)  # not the checkout: "" is on sys.path
    if probe.returncode == 0:
        raise RuntimeError(f"{python} can import airflow_hudi_occ: it would prove nothing")
    return str(python)


def clean_env(path_first: str | None = None, **extra: str) -> dict[str, str]:
    """What a freshly provisioned worker has: no PYTHONPATH, no venv, system PATH."""
    path = "/usr/local/bin:/usr/bin:/bin"
    if path_first:
        path = path_first + os.pathsep + path
    env = {"PATH": path, "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8"}
    for k in ("JAVA_HOME", "TMPDIR"):
        if os.environ.get(k):
            env[k] = os.environ[k]
    env.update(extra)
    return env


class SparkStandaloneCluster:
    """``start()`` a master and ``workers`` workers on 127.0.0.1; ``stop()`` them all."""

    def __init__(self, workdir: str | os.PathLike, *, workers: int = 1, cores: int = 1,
                 memory: str = "1g", worker_python: str | None = None):
        self.workdir = Path(workdir)
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.worker_python = worker_python
        self.port = free_port()
        self.ui_port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self._procs: list[subprocess.Popen] = []
        self._logs: list = []
        self.seen_pids: dict[int, float] = {}

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def _spawn(self, name: str, args: list[str], env: dict) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "w")
        self._logs.append(log)
        cmd = [os.path.join(spark_home(), "bin", "spark-class"), *args]
        p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir,
                             start_new_session=True)  # its own group: stop() signals it whole
        self._procs.append(p)
        return p

    def _env(self) -> dict[str, str]:
        bin_dir = os.path.dirname(self.worker_python) if self.worker_python else None
        return clean_env(bin_dir, SPARK_HOME=spark_home(), SPARK_LOCAL_IP="127.0.0.1",
                         SPARK_LOG_DIR=str(self.workdir / "logs"),
                         SPARK_PID_DIR=str(self.workdir / "pids"))

    def start(self, timeout: float = 90.0) -> "SparkStandaloneCluster":
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = self._env()
        self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(self.port), "--webui-port", str(self.ui_port)], env)
        for i in range(self.workers):
            wdir = self.workdir / f"worker{i}"
            wdir.mkdir(exist_ok=True)
            self._spawn(f"worker{i}", ["org.apache.spark.deploy.worker.Worker", self.master_url,
                                       "--host", "127.0.0.1", "--cores", str(self.cores),
                                       "--memory", self.memory, "--webui-port", str(free_port()),
                                       "--work-dir", str(wdir)], env)
        deadline = time.time() + timeout
        while time.time() < deadline:
            for p in self._procs:
                if p.poll() is not None:
                    self.stop()
                    raise RuntimeError(f"a Spark daemon exited ({p.args[1]}): {self.log_tail()}")
            state = self.state()
            if state and sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE") >= self.workers:
                return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the Spark cluster did not come up in {timeout:.0f} s: {self.log_tail()}")

    def state(self) -> dict | None:
        """The master's JSON status (workers, active and completed applications)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return None

    def processes(self) -> list[psutil.Process]:
        """Every live process of the cluster: daemons, executors, their Python workers."""
        out = []
        for p in self._procs:
            try:
                root = psutil.Process(p.pid)
                out += [root] + root.children(recursive=True)
            except psutil.NoSuchProcess:
                pass
        remember(self.seen_pids, out)
        return out

    def stop(self, grace_s: float = 10.0) -> None:
        procs = self.processes()  # before the signal: orphans cannot be found afterwards
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for p in self._procs:
                try:
                    os.killpg(p.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            for q in procs:
                try:
                    q.send_signal(sig)
                except psutil.NoSuchProcess:
                    pass
            _, procs = psutil.wait_procs(procs, timeout=grace_s if sig == signal.SIGTERM else 5)
            if not procs:
                break
        for p in self._procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
        for log in self._logs:
            log.close()
        self._procs, self._logs = [], []

    def survivors(self) -> list[int]:
        """Pids ever seen in the cluster that still run (none after :meth:`stop`)."""
        return survivors(self.seen_pids)

    def log_tail(self, n: int = 4000) -> str:
        out = []
        for f in sorted(self.workdir.glob("*.log")):
            out.append(f"--- {f.name}\n" + f.read_text(errors="replace")[-n:])
        return "\n".join(out)

    def executor_logs(self) -> str:
        """Every executor's stderr (the workers' work dirs), for assertions and failures."""
        return "\n".join(f"--- {f}\n" + f.read_text(errors="replace")
                         for f in sorted(self.workdir.glob("worker*/app-*/*/stderr")))


def spark_submit() -> str:
    """The spark-submit of this interpreter's pyspark (a venv's bin, or SPARK_HOME's)."""
    return shutil.which("spark-submit", path=os.path.dirname(sys.executable)) or \
        os.path.join(spark_home(), "bin", "spark-submit")
