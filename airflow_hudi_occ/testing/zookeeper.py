"""A real, single-node ZooKeeper server for tests, started from Debian's ``zookeeper`` package.

The ZooKeeper lock is only as good as its behaviour on a real server: ephemeral nodes that
vanish with their session, sessions that expire while a client is cut off, sequence numbers
shared with Java (Curator) writers. A fake cannot show any of that, so the lock tests start
this server (once per test session) instead.

The server listens on a free port of 127.0.0.1, keeps its data in ``workdir`` (so
:meth:`ZooKeeperServer.restart` brings back the same sessions and nodes, as a real restart
would) and runs with a short ``tickTime`` so that short session timeouts are allowed and
expiry tests finish in a second or two.

Errors: :class:`ZooKeeperNotInstalledError` when the package is missing (run
``scripts/install-zookeeper.sh``); :class:`ZooKeeperStartError` when the server does not
answer ``ruok`` in time (its log is quoted in the message).

Usage::

    with ZooKeeperServer(tmp_path) as zk:
        client = KazooClient(hosts=zk.hosts)
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
_CLASSPATH_JARS = (ZOOKEEPER_JAR, "/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar")
INSTALL_HINT = "run scripts/install-zookeeper.sh (as root) to install Debian's zookeeper package"


class ZooKeeperNotInstalledError(RuntimeError):
    """Debian's zookeeper package (or java) is not on this machine."""


class ZooKeeperStartError(RuntimeError):
    """The server process did not come up (or died); the message carries its log tail."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def four_letter_word(host: str, port: int, word: str = "ruok", timeout: float = 1.0) -> bytes:
    """Send one of ZooKeeper's four-letter commands and return the whole answer."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode("ascii"))
        chunks = []
        while True:
            data = s.recv(4096)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks)


class ZooKeeperServer:
    """One ``ZooKeeperServerMain`` JVM on 127.0.0.1.

    ``tick_time_ms`` bounds the session timeouts clients may ask for: the server accepts
    ``min_session_timeout_ms``..``max_session_timeout_ms`` (defaults 2 and 20 ticks, as
    ZooKeeper's own rule) and silently clamps anything outside.
    """

    def __init__(self, workdir: str | os.PathLike, *, port: int | None = None,
                 tick_time_ms: int = 200, min_session_timeout_ms: int | None = None,
                 max_session_timeout_ms: int | None = None, start_timeout_s: float = 30.0,
                 extra_config: dict[str, Any] | None = None, java: str | None = None):
        self.workdir = Path(workdir)
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms or 2 * tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms or 100 * tick_time_ms
        self.start_timeout_s = start_timeout_s
        self.extra_config = dict(extra_config or {})
        self.java = java or shutil.which("java")
        self.conf_dir = self.workdir / "conf"
        self.data_dir = self.workdir / "data"
        self.log_path = self.workdir / "zookeeper.log"
        self._proc: subprocess.Popen | None = None
        self._log_file = None
        self._lock = threading.Lock()

    # -- facts -------------------------------------------------------------------------------

    @property
    def hosts(self) -> str:
        """The connect string for kazoo / Curator."""
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def is_ok(self) -> bool:
        try:
            return four_letter_word(self.host, self.port, "ruok") == b"imok"
        except OSError:
            return False

    def log_tail(self, n: int = 40) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(lines[-n:])

    # -- lifecycle ---------------------------------------------------------------------------

    def _check_installed(self) -> None:
        missing = [j for j in _CLASSPATH_JARS if not os.path.exists(j)]
        if missing:
            raise ZooKeeperNotInstalledError(
                f"ZooKeeper is not installed: missing {', '.join(missing)}; {INSTALL_HINT}")
        if not self.java:
            raise ZooKeeperNotInstalledError(f"no 'java' on PATH; {INSTALL_HINT}")

    def _write_config(self) -> Path:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = {
            "tickTime": self.tick_time_ms,
            "initLimit": 10,
            "syncLimit": 5,
            "dataDir": str(self.data_dir),
            "clientPort": self.port,
            "clientPortAddress": self.host,
            "minSessionTimeout": self.min_session_timeout_ms,
            "maxSessionTimeout": self.max_session_timeout_ms,
            # every test client comes from 127.0.0.1; the default cap (60) is too low
            "maxClientCnxns": 0,
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok,stat,srvr,mntr,cons",
            # tests do not need fsync durability and it costs seconds on slow disks
            "forceSync": "no",
            **self.extra_config,
        }
        cfg = self.conf_dir / "zoo.cfg"
        cfg.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
        (self.conf_dir / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, CONSOLE\n"
            "log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1} - %m%n\n")
        return cfg

    def start(self) -> "ZooKeeperServer":
        with self._lock:
            if self.running:
                return self
            self._check_installed()
            cfg = self._write_config()
            classpath = ":".join([str(self.conf_dir), *_CLASSPATH_JARS])
            cmd = [self.java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                   "-Dzookeeper.jmx.log4j.disable=true", "-cp", classpath,
                   "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)]
            self._log_file = open(self.log_path, "ab")
            # its own process group, so stop() reaches the JVM and nothing else
            self._proc = subprocess.Popen(cmd, stdout=self._log_file, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True)
            deadline = time.monotonic() + self.start_timeout_s
            while time.monotonic() < deadline:
                if self._proc.poll() is not None:
                    self._close_log()
                    raise ZooKeeperStartError(
                        f"ZooKeeper exited with code {self._proc.returncode} on port {self.port}:\n"
                        f"{self.log_tail()}")
                if self.is_ok():
                    return self
                time.sleep(0.05)
            self._stop_locked(kill=True)
            raise ZooKeeperStartError(
                f"ZooKeeper did not answer ruok on {self.hosts} within {self.start_timeout_s}s:\n"
                f"{self.log_tail()}")

    def stop(self, *, kill: bool = False, timeout_s: float = 10.0) -> None:
        """Stop the server; ``kill=True`` is a crash (SIGKILL) rather than a shutdown."""
        with self._lock:
            self._stop_locked(kill=kill, timeout_s=timeout_s)

    def _stop_locked(self, *, kill: bool = False, timeout_s: float = 10.0) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=timeout_s)
        self._proc = None
        self._close_log()
        # Until the port stops answering, a client could still reach the dying server.
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.is_ok():
            time.sleep(0.05)

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def restart(self, *, kill: bool = False) -> "ZooKeeperServer":
        """Stop and start again on the same port and data directory (sessions survive)."""
        self.stop(kill=kill)
        return self.start()

    def __enter__(self) -> "ZooKeeperServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ZooKeeperServer({self.hosts}, running={self.running}, workdir={str(self.workdir)!r})"


def expire_session(client, hosts: str | None = None, *, wait_s: float | None = 10.0) -> None:
    """Make the server expire ``client``'s session, as a long network partition would.

    A second connection that presents the same session id and password takes the session
    over; closing it ends the session on the server, which deletes its ephemeral nodes. When
    ``client`` reconnects it is told the session expired and goes LOST. With ``wait_s``, this
    returns only after ``client`` has seen LOST (``TimeoutError`` otherwise).
    """
    from kazoo.client import KazooClient
    from kazoo.protocol.states import KazooState

    lost = threading.Event()

    def _listener(state):
        if state == KazooState.LOST:
            lost.set()
        return lost.is_set()  # kazoo removes a listener that returns True

    if wait_s is not None:
        client.add_listener(_listener)
    session_id, password = client.client_id
    if hosts is None:
        hosts = ",".join(f"{h}:{p}" for h, p in client.hosts)
    other = KazooClient(hosts=hosts, client_id=(session_id, password),
                        timeout=client._session_timeout / 1000.0)
    other.start(timeout=10)
    other.stop()
    other.close()
    if wait_s is not None:
        if not lost.wait(wait_s):
            client.remove_listener(_listener)
            raise TimeoutError(f"session 0x{session_id:x} was closed but the client never saw LOST")
