"""``airflow standalone`` as a process this harness owns: started, asked through the REST API,
stopped with every process it started.

Why one class: the local topology (``testing/topology.py``) and the demo's ``--ui`` mode
(``testing/airflow_demo.py``) both run the example DAGs through a real scheduler, and both must
end the whole tree: the executor's task processes, spark-submit and the Spark drivers it starts
(spark-submit runs in a session of its own, so a signal to Airflow's process group misses it).

Airflow 3.3's standalone runs the api-server, scheduler, dag-processor and triggerer, with the
``LocalExecutor`` on the SQLite database (Airflow 3 tasks reach the database only through the
api-server's execution API, so several task processes run at once: ``[core] parallelism``), or
on PostgreSQL given its URL (``standalone_env(database_url=...)``; ``testing/postgres.py``
runs a private cluster), which the scale backfill needs (``testing/scale_backfill.py``).

Errors: an Airflow that exits or does not become healthy raises ``RuntimeError`` with its log
tail; so do REST calls answered with an error, and runs that do not finish in time.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil

TERMINAL = ("success", "failed")
#: where SimpleAuthManager writes the passwords it generates (``[core]
#: simple_auth_manager_passwords_file``'s default, in AIRFLOW_HOME)
GENERATED_PASSWORDS = "simple_auth_manager_passwords.json.generated"


class AirflowStandalone:
    """``start()``, the REST API as ``user`` (a password given, else the generated one),
    ``stop()``; ``survivors`` lists any process seen that outlived ``stop()``."""

    def __init__(self, home: str | os.PathLike, env: dict[str, str], port: int, *, bin_dir: str,
                 log_path: str | os.PathLike, user: str = "admin", password: str | None = None):
        self.home = Path(home)
        self.env = env
        self.port = port
        self.bin_dir = bin_dir
        self.log_path = Path(log_path)
        self.user = user
        self._password = password
        self.proc: subprocess.Popen | None = None
        #: every process seen, with its start time (a pid is reused within an hour of tasks)
        self.seen_pids: dict[int, float] = {}
        self._log = None
        self._token: str | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _bin(self, name: str) -> str:
        return os.path.join(self.bin_dir, name)

    # -- lifecycle -------------------------------------------------------------------------------

    def cli(self, *args: str, timeout: float = 600) -> str:
        out = subprocess.run([self._bin("airflow"), *args], env=self.env, cwd=self.home,
                             capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            raise RuntimeError(f"airflow {' '.join(args)} failed: {out.stdout[-2000:]}{out.stderr[-2000:]}")
        return out.stdout

    def start(self, timeout_s: float = 240.0) -> "AirflowStandalone":
        self.home.mkdir(parents=True, exist_ok=True)
        self.cli("db", "migrate")
        self._log = open(self.log_path, "w+")
        # its own session: stop() signals the group, and the task processes are found as
        # descendants (spark-submit runs in a session of its own, see stop())
        self.proc = subprocess.Popen([self._bin("airflow"), "standalone"], env=self.env, cwd=self.home,
                                     stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        self.wait_healthy(timeout_s)
        return self

    def wait_healthy(self, timeout_s: float = 240.0) -> None:
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            self.check_alive()
            try:
                status, body = self.http("GET", "/api/v2/monitor/health", auth=False)
                health = json.loads(body) if status == 200 else {}
                if all(health.get(k, {}).get("status") == "healthy"
                       for k in ("metadatabase", "scheduler", "triggerer", "dag_processor")):
                    return
            except (OSError, ValueError):
                pass
            time.sleep(1)
        raise RuntimeError(f"Airflow did not become healthy in {timeout_s:.0f} s: {self.log_tail()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"airflow standalone exited ({self.proc.returncode}): {self.log_tail()}")

    def log_tail(self, n: int = 5000) -> str:
        if self._log is None:
            return self.log_path.read_text(errors="replace")[-n:] if self.log_path.exists() else ""
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-n:]

    def processes(self) -> list[psutil.Process]:
        """Airflow and every descendant (task runners, spark-submit, Spark drivers); each one
        seen is remembered for :attr:`survivors`."""
        out = []
        if self.proc is not None:
            try:
                root = psutil.Process(self.proc.pid)
                out = [root] + root.children(recursive=True)
            except psutil.NoSuchProcess:
                pass
        remember(self.seen_pids, out)
        return out

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM to Airflow's group and to every descendant found before the signal (orphans
        cannot be found afterwards), SIGKILL to what is left after ``grace_s``."""
        if self.proc is not None:
            procs = self.processes()
            for sig, grace in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10)):
                for pid in {self.proc.pid} | {p.pid for p in procs}:
                    try:
                        os.killpg(pid, sig) if pid == self.proc.pid else os.kill(pid, sig)
                    except (ProcessLookupError, PermissionError):
                        pass
                _, procs = psutil.wait_procs(procs, timeout=grace)
                if not procs:
                    break
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
            self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    @property
    def survivors(self) -> list[int]:
        return survivors(self.seen_pids)

    # -- the REST API ----------------------------------------------------------------------------

    def password(self) -> str:
        """The given password, else the one SimpleAuthManager generated for ``user``."""
        if self._password is None:
            self._password = json.loads((self.home / GENERATED_PASSWORDS).read_text())[self.user]
        return self._password

    def http(self, method: str, path: str, body: dict | None = None, *, auth: bool = True,
             timeout: float = 30.0):
        headers = {"Content-Type": "application/json"}
        if auth:
            headers["Authorization"] = f"Bearer {self.token()}"
        req = urllib.request.Request(self.base_url + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def token(self) -> str:
        if self._token is None:
            status, body = self.http("POST", "/auth/token", {"username": self.user, "password": self.password()},
                                     auth=False)
            if status not in (200, 201):
                raise RuntimeError(f"POST /auth/token answered {status}: {body[:500]!r}")
            self._token = json.loads(body)["access_token"]
        return self._token

    def api(self, method: str, path: str, body: dict | None = None) -> dict:
        """One API call. A GET that gets no answer in time is asked again, up to
        :data:`GET_TRIES` times: on a machine busy with 16 Spark tasks starting at once the API
        server answered a poll after more than 30 s, and a harness that gave up on that poll
        took the whole 90-day run down with it."""
        for attempt in range(1, GET_TRIES + 1):
            try:
                status, raw = self.http(method, path, body)
                break
            except (TimeoutError, urllib.error.URLError, ConnectionError) as e:
                if method != "GET" or attempt == GET_TRIES:
                    raise RuntimeError(f"{method} {path}: no answer from the Airflow API at {self.base_url} "
                                       f"({type(e).__name__}: {e}; {attempt} tries)") from e
                time.sleep(5)
        if status >= 300:
            raise RuntimeError(f"{method} {path} answered {status}: {raw[:1000]!r}")
        return json.loads(raw) if raw else {}

    def wait_for_dags(self, dag_ids, timeout_s: float = 300.0) -> None:
        """Until the DAG processor has parsed them (the API answers 404 before)."""
        deadline = time.time() + timeout_s
        missing = list(dag_ids)
        while time.time() < deadline:
            self.check_alive()
            missing = [d for d in dag_ids if self.http("GET", f"/api/v2/dags/{d}")[0] != 200]
            if not missing:
                return
            time.sleep(2)
        errors = self.http("GET", "/api/v2/importErrors")[1][:3000]
        raise RuntimeError(f"DAGs {missing} not parsed in {timeout_s:.0f} s; import errors: {errors!r}")

    def trigger(self, dag_id: str, run_id: str) -> None:
        self.api("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
        self.api("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"dag_run_id": run_id, "logical_date": None})

    def runs(self, dag_id: str) -> list[dict]:
        """Every run of ``dag_id`` (paged: a DAG scheduled every minute has hundreds)."""
        out: list[dict] = []
        while True:
            page = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns?limit=100&offset={len(out)}")
            out += page["dag_runs"]
            if not page["dag_runs"] or len(out) >= page.get("total_entries", len(out)):
                return out

    def wait_for_runs(self, dag_ids, timeout_s: float) -> dict[str, list[dict]]:
        """Until every run of ``dag_ids`` (the triggered ones, and any the scheduler created
        on unpausing) is finished."""
        deadline = time.time() + timeout_s
        while True:
            self.check_alive()
            self.processes()  # remember every Spark driver seen, for the orphan check
            runs = {d: self.runs(d) for d in dag_ids}
            if all(r["state"] in TERMINAL for rs in runs.values() for r in rs):
                return runs
            if time.time() > deadline:
                raise RuntimeError(f"DAG runs not finished in {timeout_s:.0f} s: "
                                   f"{ {d: [(r['dag_run_id'], r['state']) for r in rs] for d, rs in runs.items()} }")
            time.sleep(3)

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str]:
        tis = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {t["task_id"]: t["state"] for t in tis}


#: how many times :meth:`AirflowStandalone.api` asks a GET that got no answer (30 s each)
GET_TRIES = 4


def remember(seen: dict[int, float], processes) -> None:
    """Add ``processes`` to ``seen`` (pid -> start time), for :func:`survivors`."""
    for p in processes:
        try:
            seen.setdefault(p.pid, p.create_time())
        except psutil.NoSuchProcess:
            pass


def survivors(seen: dict[int, float]) -> list[int]:
    """The processes of ``seen`` (pid -> start time) still running: a zombie is over (only its
    parent has not reaped it), and a pid that now names a process started later is another
    process (a 90-day backfill's run starts thousands; one of its pids came back as a kernel
    thread)."""
    out = []
    for pid, started in seen.items():
        try:
            p = psutil.Process(pid)
            if abs(p.create_time() - started) < 1.0 and p.status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def standalone_env(home: str | os.PathLike, port: int, *, database_url: str | None = None,
                   parallelism: int = 4) -> dict[str, str]:
    """The settings the harnesses give ``airflow standalone``: loopback on ``port``, quick DAG
    parsing and scheduling, ``parallelism`` tasks at once, and only the runs they trigger (an
    unpaused ingestion DAG would otherwise add a run every 10 minutes). ``database_url``: the
    metadata database (a SQLAlchemy URL, e.g. :meth:`.postgres.PostgresServer.url`), else SQLite
    in ``home``; with PostgreSQL the mapped tasks of a large backfill really run at once."""
    env = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "false",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__API__PORT": str(port), "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        # one secret for every component (each signs or checks the others' tokens)
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
        "AIRFLOW__CORE__PARALLELISM": str(parallelism),
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
    }
    if database_url:
        env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = database_url
    return env


__all__ = ["AirflowStandalone", "GENERATED_PASSWORDS", "TERMINAL", "standalone_env", "survivors", "remember"]
