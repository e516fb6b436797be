"""One contract, every provider: the same tests run against the in-process lock, the file
lock on a temporary directory and the ZooKeeper lock on a real server.

Mutual exclusion is checked the way a lost update would show it: contenders read a counter,
yield, and write it back incremented; any overlap loses increments. A second, direct check
creates an "inside" marker exclusively on entry, which fails at once if two are inside.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from airflow_hudi_occ.core.config import LockConfig
from airflow_hudi_occ.core.errors import (
    LockAcquireTimeoutError,
    LockLostError,
    LockNotHeldError,
    LockReentryError,
    RetryableError,
    UnknownLockProviderError,
)
from airflow_hudi_occ.core.concurrency.locks import get_lock_provider, resolve_provider_class
from airflow_hudi_occ.core.concurrency.locks import base as lock_base
from airflow_hudi_occ.core.concurrency.locks.base import LockManager, LockProvider
from airflow_hudi_occ.core.concurrency.locks.filesystem import FileSystemBasedLockProvider
from airflow_hudi_occ.core.concurrency.locks.inprocess import InProcessLockProvider

# -- the contract ------------------------------------------------------------------------------


def test_acquire_release_and_validity(make_provider):
    lock = make_provider()
    assert not lock.is_held()
    assert lock.try_acquire(5)
    assert lock.is_held()
    lock.check_held()
    lock.release()
    assert not lock.is_held()
    with pytest.raises(LockNotHeldError):
        lock.check_held()
    # the same object can take the lock again after releasing it
    assert lock.try_acquire(5)
    lock.release()


def test_contended_try_acquire_times_out_with_false(make_provider):
    holder, waiter = make_provider(), make_provider()
    assert holder.try_acquire(5)
    assert waiter.try_acquire(0) is False
    assert waiter.try_acquire(0.3) is False
    assert waiter.current_owner() == holder.owner
    holder.release()
    assert waiter.try_acquire(5)
    waiter.release()


def test_waiter_gets_the_lock_when_the_holder_releases(make_provider):
    holder, waiter = make_provider(), make_provider()
    assert holder.try_acquire(5)
    result = {}
    started = threading.Event()

    def wait_for_it():
        started.set()
        result["got"] = waiter.try_acquire(20)

    t = threading.Thread(target=wait_for_it)
    t.start()
    started.wait(5)
    time.sleep(0.2)  # give the waiter time to queue (not a correctness bound)
    assert "got" not in result, "waiter acquired while the holder held the lock"
    holder.release()
    t.join(25)
    assert result.get("got") is True
    waiter.release()


def test_not_reentrant(make_provider):
    lock = make_provider()
    assert lock.try_acquire(5)
    with pytest.raises(LockReentryError) as exc:
        lock.try_acquire(0)
    assert exc.value.lock == lock.name
    assert lock.is_held(), "a refused re-entry must not disturb the held lock"
    lock.release()


def test_release_without_holding(make_provider):
    lock = make_provider()
    with pytest.raises(LockNotHeldError):
        lock.release()
    assert lock.try_acquire(5)
    lock.release()
    with pytest.raises(LockNotHeldError):
        lock.release()


def test_release_by_another_contender_is_refused(make_provider):
    holder, other = make_provider(), make_provider()
    assert holder.try_acquire(5)
    with pytest.raises(LockNotHeldError):
        other.release()
    assert holder.is_held()
    holder.release()


def test_different_keys_do_not_exclude_each_other(make_provider):
    table = make_provider()
    fg1 = make_provider(lock_key="p=1/fg-1")
    fg2 = make_provider(lock_key="p=1/fg-2")
    fg1_again = make_provider(lock_key="p=1/fg-1")
    assert fg1.try_acquire(5)
    assert fg2.try_acquire(0.5), "another key must not be blocked"
    assert table.try_acquire(0.5), "the table-wide lock is a different lock from any key's"
    assert fg1_again.try_acquire(0.2) is False, "the same key must be blocked"
    assert fg1.name != fg2.name != table.name
    for lock in (fg1, fg2, table):
        lock.release()
    assert fg1_again.try_acquire(5)
    fg1_again.release()


def test_keys_that_differ_only_by_escaping_are_different_locks(make_provider):
    a = make_provider(lock_key="a/b")
    b = make_provider(lock_key="a%2Fb")
    assert a.try_acquire(5)
    assert b.try_acquire(0.5)
    a.release()
    b.release()


def test_mutual_exclusion_between_threads(make_provider, tmp_path):
    threads, cycles = 4, 15
    counter = {"value": 0}
    inside = {"now": 0, "max": 0}
    errors = []

    def worker():
        lock = make_provider()
        try:
            for _ in range(cycles):
                assert lock.try_acquire(30), "could not get the lock within 30 s"
                try:
                    inside["now"] += 1
                    inside["max"] = max(inside["max"], inside["now"])
                    value = counter["value"]
                    time.sleep(0.001)  # invite a lost update if exclusion is broken
                    counter["value"] = value + 1
                    inside["now"] -= 1
                finally:
                    lock.release()
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(120)
    assert not errors, errors
    assert inside["max"] == 1
    assert counter["value"] == threads * cycles


_WORKER = textwrap.dedent("""
    import json, os, sys, time
    from airflow_hudi_occ.core.config import LockConfig
    from airflow_hudi_occ.core.concurrency.locks import get_lock_provider

    args = json.loads(sys.argv[1])
    lock = get_lock_provider(LockConfig(**args["config"]), base_path=args["base_path"],
                             table_name=args["table_name"])
    counter, marker = args["counter"], args["marker"]
    for _ in range(args["cycles"]):
        if not lock.try_acquire(60):
            sys.exit("could not get the lock within 60 s")
        try:
            # exclusive create: fails at once if another process is inside
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            os.close(fd)
            with open(counter) as f:
                value = int(f.read())
            time.sleep(0.002)
            with open(counter, "w") as f:
                f.write(str(value + 1))
            os.unlink(marker)
        finally:
            lock.release()
    lock.close()
""")


def test_mutual_exclusion_between_processes(make_provider, tmp_path):
    if not make_provider.crosses_processes:
        # Not a skip: the in-process lock must NOT exclude other processes (it cannot), and
        # this proves the lock is really held here while another process gets "its" lock.
        holder = make_provider()
        assert holder.try_acquire(5)
        other = subprocess.run(
            [sys.executable, "-c", "import sys\nfrom airflow_hudi_occ.core.config import LockConfig\n"
             "from airflow_hudi_occ.core.concurrency.locks import get_lock_provider\n"
             "p = get_lock_provider(LockConfig(provider='inprocess'), base_path=sys.argv[1], table_name='tbl')\n"
             "sys.exit(0 if p.try_acquire(0) else 3)", make_provider.base_path],
            capture_output=True, text=True, timeout=60)
        assert other.returncode == 0, other.stderr
        assert make_provider().try_acquire(0) is False, "but it does exclude this process"
        holder.release()
        return
    processes, cycles = 3, 10
    counter = tmp_path / "counter"
    counter.write_text("0")
    args = {"config": dataclasses.asdict(make_provider.config), "base_path": make_provider.base_path,
            "table_name": make_provider.table_name, "counter": str(counter),
            "marker": str(tmp_path / "inside"), "cycles": cycles}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, json.dumps(args)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(processes)]
    failures = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        if p.returncode != 0:
            failures.append(err[-2000:])
    assert not failures, failures
    assert int(counter.read_text()) == processes * cycles


# -- LockManager -------------------------------------------------------------------------------


def _manager_config(config: LockConfig, **changes) -> LockConfig:
    return dataclasses.replace(config, wait_time_ms=50, client_num_retries=2,
                               client_wait_time_ms_between_retry=1000, **changes)


def test_manager_gives_up_with_a_timeout_error_naming_lock_owner_and_attempts(make_provider):
    holder, waiter = make_provider(), make_provider()
    assert holder.try_acquire(5)
    slept = []
    manager = LockManager(waiter, _manager_config(make_provider.config), sleep=slept.append)
    with pytest.raises(LockAcquireTimeoutError) as exc:
        manager.acquire()
    err = exc.value
    assert isinstance(err, RetryableError)
    assert err.lock == waiter.name
    assert err.owner == holder.owner
    assert err.attempts == 3 == manager.attempts_used  # first try + client_num_retries
    assert slept == [1.0, 1.0], "sleeps between attempts, none after the last"
    assert holder.owner in str(err) and "3 attempts" in str(err)
    assert err.to_dict()["attempts"] == 3
    assert not waiter.is_held()
    holder.release()


def test_manager_retries_until_the_holder_lets_go(make_provider):
    holder, waiter = make_provider(), make_provider()
    assert holder.try_acquire(5)
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        holder.release()  # the other writer finishes while we back off

    manager = LockManager(waiter, _manager_config(make_provider.config), sleep=sleep)
    with manager.locked() as m:
        assert m is manager
        assert manager.attempts_used == 2
        assert waiter.is_held()
        manager.check_held()
    assert slept == [1.0]
    assert not waiter.is_held()


def test_work_while_waiting_runs_only_during_the_wait(make_provider, monkeypatch):
    """``locked(while_waiting=...)``: the work runs in its own thread while another writer
    holds the lock, again every interval, a failing call does not stop it or the wait, and
    nothing runs once the lock is ours (the commit reads ahead while it waits: issue 43)."""
    monkeypatch.setattr(lock_base, "WAIT_WORK_INTERVAL_S", 0.05)
    holder, waiter = make_provider(), make_provider()
    manager = LockManager(waiter, dataclasses.replace(_manager_config(make_provider.config), wait_time_ms=20_000))
    calls: list[tuple[float, bool]] = []

    def work():
        calls.append((time.monotonic(), waiter.is_held()))
        if len(calls) == 2:
            raise OSError("a read failed")  # logged; the next call still comes

    with manager.locked(while_waiting=work):  # free: no wait, no work
        pass
    assert calls == []
    assert holder.try_acquire(5)
    releaser = threading.Timer(1.0, holder.release)
    releaser.start()
    try:
        with manager.locked(while_waiting=work):
            got_at = time.monotonic()
            time.sleep(0.4)  # a call under way may end now; no new one starts
    finally:
        releaser.join()
    before = [t for t, _ in calls if t < got_at]
    assert len(before) >= 3, calls  # every ~50 ms for ~1 s
    assert not any(held for t, held in calls if t < got_at), "work ran while the waiter held the lock"
    assert len(calls) - len(before) <= 1, calls  # at most one woke as the wait ended
    assert 2 <= manager.wait_work_done < len(before), (manager.wait_work_done, calls)


def test_locked_releases_when_the_block_fails(make_provider):
    manager = LockManager(make_provider(), _manager_config(make_provider.config))
    with pytest.raises(RuntimeError, match="boom"):
        with manager.locked():
            raise RuntimeError("boom")
    assert not manager.is_held()
    other = make_provider()
    assert other.try_acquire(5), "the lock must be free after the failed block"
    other.release()


def test_manager_check_held_reports_a_lost_lock():
    class Flaky(InProcessLockProvider):
        """In-process lock whose validity the test controls (the real losses are tested per
        provider in test_zookeeper / test_filesystem)."""
        valid = True

        def _validity(self):
            if not self.valid:
                self._mark_lost("pulled by the test")
                return "pulled by the test"
            return None

    lock = Flaky(LockConfig(provider="inprocess"), base_path=f"/flaky-{os.getpid()}-{time.time_ns()}")
    seen = []
    manager = LockManager(lock, LockConfig(provider="inprocess"))
    manager.add_lost_listener(lambda provider, reason: seen.append((provider, reason)))
    manager.acquire()
    manager.check_held()
    lock.valid = False
    with pytest.raises(LockLostError, match="pulled by the test"):
        manager.check_held()
    assert seen == [(lock, "pulled by the test")]
    assert not manager.is_held()
    assert len(seen) == 1, "listeners run once per acquisition"
    manager.release()  # releasing a lost lock is allowed and quiet


# -- choosing a provider -----------------------------------------------------------------------


@pytest.mark.parametrize("value, expected", [
    ("zookeeper", "ZookeeperBasedLockProvider"),
    ("ZooKeeper", "ZookeeperBasedLockProvider"),
    ("file_system", "FileSystemBasedLockProvider"),
    ("FILESYSTEM", "FileSystemBasedLockProvider"),
    ("in_process", "InProcessLockProvider"),
    ("org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider", "ZookeeperBasedLockProvider"),
    ("org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider", "FileSystemBasedLockProvider"),
    ("org.apache.hudi.client.transaction.lock.InProcessLockProvider", "InProcessLockProvider"),
    ("airflow_hudi_occ.core.concurrency.locks.inprocess:InProcessLockProvider", "InProcessLockProvider"),
    ("airflow_hudi_occ.core.concurrency.locks.filesystem.FileSystemBasedLockProvider", "FileSystemBasedLockProvider"),
])
def test_provider_names_resolve(value, expected):
    assert resolve_provider_class(value).__name__ == expected


@pytest.mark.parametrize("value", [
    "redis",
    "org.apache.hudi.client.transaction.lock.DynamoDBBasedLockProvider",
    "os.path:join",
    "no_such_module_xyz:Provider",
    "",
])
def test_unknown_provider_names_are_refused_with_the_valid_ones(value):
    with pytest.raises(UnknownLockProviderError) as exc:
        resolve_provider_class(value)
    message = str(exc.value)
    assert repr(value) in message
    for name in ("zookeeper", "filesystem", "inprocess",
                 "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider"):
        assert name in message
    assert exc.value.key == "hoodie.write.lock.provider"


def test_hudi_options_select_and_configure_the_provider(tmp_path):
    config = LockConfig.from_options({
        "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider",
        "hoodie.write.lock.filesystem.path": str(tmp_path / "locks"),
        "hoodie.write.lock.filesystem.expire": "5",
    })
    lock = get_lock_provider(config, base_path=str(tmp_path / "t"), table_name="t")
    assert isinstance(lock, FileSystemBasedLockProvider)
    assert isinstance(lock, LockProvider)
    assert lock.lock_path == str(tmp_path / "locks" / "lock")
    assert lock.expire_minutes == 5


def test_custom_provider_by_dotted_path(tmp_path):
    config = LockConfig(provider=f"{__name__}:CountingProvider")
    lock = get_lock_provider(config, base_path=str(tmp_path), table_name="t", lock_key="k")
    assert isinstance(lock, CountingProvider)
    assert lock.lock_key == "k"
    assert lock.try_acquire(1)
    lock.release()
    assert lock.calls == ["acquire", "release"]


class CountingProvider(InProcessLockProvider):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = []

    def _try_acquire(self, timeout_s):
        self.calls.append("acquire")
        return super()._try_acquire(timeout_s)

    def _release(self):
        self.calls.append("release")
        super()._release()


def test_the_holder_counts_the_writers_waiting_behind_it(make_provider):
    """``waiting()``: the writers blocked on the lock now, the holder not counted, or None where
    the provider cannot tell (the file-system lock); what puts the metadata table's compaction
    off while others queue (issue 43)."""
    holder = make_provider()
    assert holder.try_acquire(5)
    if make_provider.kind == "filesystem":
        assert holder.waiting() is None
        holder.release()
        return
    assert holder.waiting() == 0
    waiters = [make_provider() for _ in range(2)]
    threads = [threading.Thread(target=lambda w=w: w.try_acquire(30) and w.release()) for w in waiters]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 15
    while holder.waiting() != 2:
        assert time.monotonic() < deadline, f"the holder sees {holder.waiting()} waiters, not 2"
        time.sleep(0.05)
    holder.release()
    for t in threads:
        t.join(40)
    assert holder.try_acquire(5)
    deadline = time.monotonic() + 15
    while holder.waiting() != 0:  # a waiter's place in a line may go a moment after its release
        assert time.monotonic() < deadline, f"{holder.waiting()} waiters left after all went"
        time.sleep(0.05)
    holder.release()
