"""A Python writer and a Java Hudi writer must exclude each other on the same ZooKeeper lock.

Java Hudi's ZookeeperBasedLockProvider is Curator's InterProcessMutex on
``<base_path>/<lock_key>``. A few lines of Java (``java/HoldCuratorMutex.java``) hold that
very mutex on the real test server, and the test proves both directions: Python waits while
Java holds, and Java waits while Python holds. kazoo's default Lock fails both (its nodes and
Curator's do not see each other), which is why this test exists.

The JDK and Curator come from Debian (``scripts/install-zookeeper.sh``); when they are
missing this test fails and says how to install them instead of skipping silently.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from airflow_hudi_occ.core.concurrency.locks import get_lock_provider

from .conftest import zk_lock_config

JAVA_SOURCE = Path(__file__).parent / "java" / "HoldCuratorMutex.java"
_JARS = ("curator-recipes", "curator-framework", "curator-client", "zookeeper", "zookeeper-jute",
         "guava", "slf4j-api", "slf4j-nop")
_BOUND_S = 30  # generous upper bound for a JVM to start and answer; never a timing assertion


def _classpath() -> list[str]:
    jars = [f"/usr/share/java/{name}.jar" for name in _JARS]
    missing = [j for j in jars if not os.path.exists(j)]
    if missing or not shutil.which("javac") or not shutil.which("java"):
        pytest.fail("the Curator interop test needs javac and Debian's Curator/ZooKeeper jars "
                    f"(missing: {', '.join(missing) or 'javac/java'}); run "
                    "scripts/install-zookeeper.sh as root (and install a JDK if javac is missing)")
    return jars


@pytest.fixture(scope="module")
def java_program(tmp_path_factory):
    jars = _classpath()
    out = tmp_path_factory.mktemp("curator-java")
    done = subprocess.run(["javac", "-cp", ":".join(jars), "-d", str(out), str(JAVA_SOURCE)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"javac failed:\n{done.stderr}"
    return ":".join([str(out), *jars])


class JavaWriter:
    """A running HoldCuratorMutex, read line by line without blocking the test forever."""

    def __init__(self, classpath: str, hosts: str, path: str, wait_ms: int):
        self.proc = subprocess.Popen(
            ["java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", classpath, "HoldCuratorMutex",
             hosts, path, str(wait_ms)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put("<EOF>")

    def next_line(self, bound_s: float = _BOUND_S) -> str:
        try:
            return self.lines.get(timeout=bound_s)
        except queue.Empty:
            return "<NO ANSWER>"

    def no_line_yet(self) -> bool:
        return self.lines.empty()

    def release(self) -> str:
        self.proc.stdin.write("release\n")
        self.proc.stdin.flush()
        return self.next_line()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        return self.proc.stderr.read()


@pytest.fixture
def lock_setup(zk_server, java_program):
    config = zk_lock_config(zk_server.hosts)
    writers: list[JavaWriter] = []
    providers = []

    def java(wait_ms: int) -> JavaWriter:
        path = f"{config.zk_base_path}/tbl"
        w = JavaWriter(java_program, zk_server.hosts, path, wait_ms)
        writers.append(w)
        return w

    def python():
        p = get_lock_provider(config, base_path="/unused", table_name="tbl")
        providers.append(p)
        return p

    yield java, python
    for p in providers:
        p.close()
    for w in writers:
        w.stop()


def test_python_waits_while_java_holds(lock_setup):
    java, python = lock_setup
    holder = java(wait_ms=10_000)
    assert holder.next_line() == "ACQUIRED", holder.stop()
    lock = python()
    assert lock.try_acquire(0.5) is False, "Python acquired while Java held the mutex"
    assert lock.current_owner() is not None  # Java's node, as seen by the Python side
    got = {}
    waiter = threading.Thread(target=lambda: got.setdefault("ok", lock.try_acquire(_BOUND_S)))
    waiter.start()
    assert holder.release() == "RELEASED"
    waiter.join(_BOUND_S + 5)
    assert got.get("ok") is True, "Python did not get the lock after Java released it"
    assert lock.is_held()
    lock.release()


def test_java_waits_while_python_holds(lock_setup):
    java, python = lock_setup
    lock = python()
    assert lock.try_acquire(5)
    impatient = java(wait_ms=500)
    assert impatient.next_line() == "TIMEOUT", "Java acquired while Python held the lock"
    patient = java(wait_ms=-1)
    assert patient.next_line() == "WAITING", patient.stop()
    assert patient.no_line_yet()
    lock.release()
    assert patient.next_line() == "ACQUIRED", "Java did not get the mutex after Python released"
    assert lock.try_acquire(0.3) is False, "and Python now waits for Java again"
    assert patient.release() == "RELEASED"
    assert lock.try_acquire(_BOUND_S)
    lock.release()
