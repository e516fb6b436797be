"""A private PostgreSQL cluster as a local process, for Airflow's metadata database at scale.

Why: ``airflow standalone`` on SQLite runs one writer at a time against its database, so a
run of 16 mapped tasks at once measures SQLite's lock, not the scheduler (issue 43, item 5:
``scripts/scale-backfill.sh``). This starts Debian's PostgreSQL (the ``postgresql`` package,
``/usr/lib/postgresql/<major>/bin``) on a data folder of its own, on 127.0.0.1 and a free port,
with ``pg_ctl``: no systemd unit, no Debian cluster (``pg_createcluster``) touched.

Idempotent: the first :meth:`PostgresServer.start` runs ``initdb`` (user ``airflow``, a
password generated once and kept 0600 beside the data folder, scram-sha-256 on TCP); later ones
reuse the folder, and a cluster already running on it is adopted (and left running by
:meth:`stop` unless this object started it). As root the server runs as the ``postgres`` user
(PostgreSQL refuses to run as root), which then owns the data folder.

Errors: a missing PostgreSQL raises :class:`PostgresNotInstalledError` naming the package; a
server that does not start raises ``RuntimeError`` with the end of its log.

Usage::

    pg = PostgresServer(".work/scale-backfill/postgres").start()
    url = pg.url(pg.fresh_database("airflow_scale"))   # postgresql+psycopg2://airflow:...@127.0.0.1:P/airflow_scale
    ...
    pg.stop()

From a shell: ``python -m airflow_hudi_occ.testing.postgres start|stop|status|url --dir D``.
"""

from __future__ import annotations

import argparse
import glob
import os
import pwd
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

USER = "airflow"
#: the Debian package that installs ``/usr/lib/postgresql/<major>/bin``
PACKAGE = "postgresql"


class PostgresNotInstalledError(RuntimeError):
    """No PostgreSQL server binaries on this machine."""


def bin_dir() -> Path:
    """The newest ``/usr/lib/postgresql/<major>/bin`` holding ``initdb`` and ``pg_ctl``
    (``HUDI_OCC_POSTGRES_BIN`` overrides)."""
    env = os.environ.get("HUDI_OCC_POSTGRES_BIN")
    found = [env] if env else sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                                     key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0)
    for d in reversed(found):
        if os.access(os.path.join(d, "initdb"), os.X_OK) and os.access(os.path.join(d, "pg_ctl"), os.X_OK):
            return Path(d)
    raise PostgresNotInstalledError(
        f"PostgreSQL's server binaries (initdb, pg_ctl) are not installed: apt-get install {PACKAGE} "
        "(scripts/scale-backfill.sh installs it), or point HUDI_OCC_POSTGRES_BIN at their folder")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """One cluster in ``directory`` (``data/``, ``password``, ``port``, ``postgres.log``)."""

    def __init__(self, directory: str | os.PathLike, *, port: int | None = None,
                 max_connections: int = 300):
        self.dir = Path(directory).resolve()
        self.data = self.dir / "data"
        self.log = self.dir / "postgres.log"
        self._port = port
        self.max_connections = max_connections
        self.started_here = False
        self.bin = bin_dir()

    # -- who runs it ---------------------------------------------------------------------------

    @property
    def _as_root(self) -> bool:
        return os.geteuid() == 0

    def _run(self, tool: str, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        """A server tool, as the ``postgres`` user when we are root."""
        cmd = [str(self.bin / tool), *args]
        if self._as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd="/")
        if check and out.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)} exited {out.returncode}: {out.stdout[-1500:]}"
                               f"{out.stderr[-1500:]}{self.log_tail()}")
        return out

    def log_tail(self, n: int = 2000) -> str:
        return ("\n--- " + str(self.log) + ":\n" + self.log.read_text(errors="replace")[-n:]) if self.log.exists() else ""

    # -- state kept beside the data folder -------------------------------------------------------

    @property
    def password(self) -> str:
        f = self.dir / "password"
        if not f.exists():
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(24))
        return f.read_text().strip()

    @property
    def port(self) -> int:
        f = self.dir / "port"
        if self._port is None:
            self._port = int(f.read_text()) if f.exists() else _free_port()
        return self._port

    def url(self, database: str = "postgres", driver: str = "psycopg2") -> str:
        """The SQLAlchemy URL (``postgresql+<driver>://``) of ``database``."""
        return f"postgresql+{driver}://{USER}:{self.password}@127.0.0.1:{self.port}/{database}"

    # -- lifecycle -------------------------------------------------------------------------------

    def initialised(self) -> bool:
        return (self.data / "PG_VERSION").exists()

    def running(self) -> bool:
        return self.initialised() and self._run("pg_ctl", "status", "-D", str(self.data), check=False).returncode == 0

    def _init(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        pwfile = self.dir / "pwfile.tmp"
        pwfile.write_text(self.password + "\n")
        try:
            if self._as_root:
                pg = pwd.getpwnam("postgres")
                os.chmod(self.dir, 0o755)
                if subprocess.run(["runuser", "-u", "postgres", "--", "test", "-x", str(self.dir)]).returncode:
                    raise RuntimeError(f"the postgres user cannot reach {self.dir} (a parent folder is "
                                       "closed to other users): choose a folder under one it can enter")
                os.chown(pwfile, pg.pw_uid, pg.pw_gid)
                self.data.mkdir(mode=0o700, exist_ok=True)
                os.chown(self.data, pg.pw_uid, pg.pw_gid)
                self.log.touch()
                os.chown(self.log, pg.pw_uid, pg.pw_gid)
            self._run("initdb", "-D", str(self.data), "-U", USER, f"--pwfile={pwfile}", "-E", "UTF8",
                      "--locale=C", "--auth-local=trust", "--auth-host=scram-sha-256", timeout=300)
        finally:
            pwfile.unlink(missing_ok=True)

    def start(self, timeout_s: float = 60.0) -> "PostgresServer":
        """Initialise once, start unless running; returns when it accepts connections."""
        if not self.initialised():
            self._init()
        if self.running():
            return self
        port = self.port
        with socket.socket() as s:  # the kept port taken by something else: take another
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                self._port = port = _free_port()
        (self.dir / "port").write_text(str(port))
        # the socket in the data folder (postgres owns it); loopback TCP only
        opts = (f"-p {port} -c listen_addresses=127.0.0.1 -k {self.data} "
                f"-c max_connections={self.max_connections} -c shared_buffers=64MB")
        self._run("pg_ctl", "start", "-D", str(self.data), "-l", str(self.log), "-o", opts, "-w",
                  "-t", str(int(timeout_s)), timeout=timeout_s + 30)
        self.started_here = True
        deadline = time.time() + timeout_s
        while self._run("pg_isready", "-h", "127.0.0.1", "-p", str(port), check=False).returncode != 0:
            if time.time() > deadline:
                raise RuntimeError(f"PostgreSQL did not accept connections on 127.0.0.1:{port} in "
                                   f"{timeout_s:.0f} s{self.log_tail()}")
            time.sleep(0.2)
        return self

    def stop(self, *, force: bool = False) -> None:
        """Stop the server if this object started it (or ``force``): a fast shutdown."""
        if (self.started_here or force) and self.running():
            self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", timeout=90)
        self.started_here = False

    def psql(self, sql: str, database: str = "postgres") -> str:
        """One statement through ``psql`` over TCP, as ``airflow``; its output (unaligned)."""
        env = dict(os.environ, PGPASSWORD=self.password)
        out = subprocess.run([str(self.bin / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, "-d", database,
                              "-v", "ON_ERROR_STOP=1", "-At", "-c", sql],
                             capture_output=True, text=True, env=env, timeout=120)
        if out.returncode != 0:
            raise RuntimeError(f"psql {sql!r} exited {out.returncode}: {out.stderr[-1500:]}")
        return out.stdout

    def fresh_database(self, name: str) -> str:
        """``name`` dropped (with its connections) and created empty; returns ``name``."""
        if not name.replace("_", "").isalnum():
            raise ValueError(f"database name {name!r}: letters, digits and '_' only")
        self.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        self.psql(f"CREATE DATABASE {name} OWNER {USER}")
        return name

    def __enter__(self) -> "PostgresServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=["start", "stop", "status", "url"])
    ap.add_argument("--dir", required=True, help="the cluster's folder (data/, password, port, postgres.log)")
    ap.add_argument("--database", default="postgres", help="url: the database named")
    args = ap.parse_args(argv)
    pg = PostgresServer(args.dir)
    if args.action == "start":
        pg.start()
        print(f"PostgreSQL {pg.bin.parent.name} on 127.0.0.1:{pg.port}, data {pg.data}")
    elif args.action == "stop":
        pg.stop(force=True)
        print("stopped")
    elif args.action == "status":
        print("running" if pg.running() else "stopped")
    else:
        print(pg.url(args.database))
    return 0


if __name__ == "__main__":
    sys.exit(main())
