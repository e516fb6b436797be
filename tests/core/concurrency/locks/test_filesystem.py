"""The file lock's own risks: a writer killed while holding it (stale lock file), and a
takeover after expiry that the former holder must notice before it commits."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from airflow_hudi_occ.core.config import LockConfig
from airflow_hudi_occ.core.errors import LockLostError
from airflow_hudi_occ.core.concurrency.locks import get_lock_provider
from airflow_hudi_occ.core.concurrency.locks.filesystem import FileSystemBasedLockProvider
from airflow_hudi_occ.core.format.storage import Storage


def _provider(tmp_path, expire_minutes=0, **kwargs) -> FileSystemBasedLockProvider:
    config = LockConfig(provider="filesystem", fs_expire_minutes=expire_minutes)
    return FileSystemBasedLockProvider(config, base_path=str(tmp_path / "table"), **kwargs)


def _plant_lock(path, *, owner="deadhost:4242:MainThread:0", age_s=0.0, content=None):
    """A lock file as a writer that died ``age_s`` seconds ago would have left it."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    then = time.time() - age_s
    if content is None:
        content = json.dumps({"owner": owner, "acquired_at_ms": int(then * 1000),
                              "expire_minutes": 1})
    with open(path, "w") as f:
        f.write(content)
    os.utime(path, (then, then))


def _owner_in(path):
    with open(path) as f:
        return json.load(f)["owner"]


def test_lock_file_location_and_content(tmp_path):
    lock = _provider(tmp_path, expire_minutes=3)
    assert lock.lock_path == str(tmp_path / "table" / ".hoodie" / "lock")
    assert lock.try_acquire(1)
    with open(lock.lock_path) as f:
        doc = json.load(f)
    assert doc["owner"] == lock.owner
    assert doc["expire_minutes"] == 3
    assert abs(doc["acquired_at_ms"] / 1000 - time.time()) < 600  # a plausible epoch-ms stamp
    lock.release()
    assert not os.path.exists(lock.lock_path)


def test_configured_directory_and_keyed_file_names(tmp_path):
    config = LockConfig(provider="filesystem", fs_path=str(tmp_path / "elsewhere"))
    table = get_lock_provider(config, base_path=str(tmp_path / "t"), table_name="t")
    keyed = get_lock_provider(config, base_path=str(tmp_path / "t"), table_name="t",
                              lock_key="dt=2024-01-01/fg-1")
    assert table.lock_path == str(tmp_path / "elsewhere" / "lock")
    assert keyed.lock_path == str(tmp_path / "elsewhere" / "lock.dt=2024-01-01%2Ffg-1")


def test_lock_uses_the_given_storage(tmp_path):
    storage = Storage(str(tmp_path / "table"))
    lock = FileSystemBasedLockProvider(LockConfig(), base_path="ignored-when-storage-given",
                                       storage=storage)
    assert lock.lock_path == storage.path(".hoodie", "lock")


def test_stale_lock_of_a_dead_writer_is_taken_over_after_expiry(tmp_path):
    lock = _provider(tmp_path, expire_minutes=1)
    _plant_lock(lock.lock_path, age_s=120)
    assert lock.try_acquire(2)
    assert _owner_in(lock.lock_path) == lock.owner
    assert lock.is_held()
    lock.release()


def test_stale_lock_is_kept_forever_when_expiry_is_off(tmp_path):
    lock = _provider(tmp_path, expire_minutes=0)
    _plant_lock(lock.lock_path, age_s=10 * 24 * 3600)
    assert lock.try_acquire(0.3) is False
    assert _owner_in(lock.lock_path) == "deadhost:4242:MainThread:0"
    assert lock.current_owner() == "deadhost:4242:MainThread:0"


def test_young_lock_is_not_taken_over(tmp_path):
    lock = _provider(tmp_path, expire_minutes=1)
    _plant_lock(lock.lock_path, age_s=20)
    assert lock.try_acquire(0.3) is False
    assert _owner_in(lock.lock_path) == "deadhost:4242:MainThread:0"


def test_both_clocks_must_call_a_lock_stale(tmp_path):
    """An old mtime with a recent acquired_at (or the reverse) is not yet stale: taking over a
    live writer's lock is worse than waiting a little longer."""
    lock = _provider(tmp_path, expire_minutes=1)
    recent = json.dumps({"owner": "live:1:T:0", "acquired_at_ms": int(time.time() * 1000)})
    _plant_lock(lock.lock_path, age_s=600, content=recent)
    assert lock.try_acquire(0.3) is False


def test_java_written_lock_file_expires_by_modification_time(tmp_path):
    lock = _provider(tmp_path, expire_minutes=1)
    _plant_lock(lock.lock_path, age_s=120, content='{"lockCreateTime":"x","lockThreadName":"main"}')
    assert lock.current_owner() == "unknown (lock file without owner)"
    assert lock.try_acquire(2)
    lock.release()


def test_release_deletes_only_our_own_lock(tmp_path):
    lock = _provider(tmp_path)
    assert lock.try_acquire(1)
    _plant_lock(lock.lock_path, owner="thief:1:T:0")  # replaced behind our back
    lock.release()  # must not raise, and must not delete the other writer's lock
    assert _owner_in(lock.lock_path) == "thief:1:T:0"


def test_takeover_after_expiry_is_noticed_by_the_former_holder(tmp_path):
    lost = []
    holder = _provider(tmp_path, expire_minutes=1)
    holder.add_lost_listener(lambda provider, reason: lost.append(reason))
    assert holder.try_acquire(1)
    assert holder.is_held()
    # A writer whose clock is two minutes ahead sees the holder's lock as expired.
    later = _provider(tmp_path, expire_minutes=1, wall_clock=lambda: time.time() + 120)
    assert later.try_acquire(2)
    assert _owner_in(holder.lock_path) == later.owner
    assert holder.is_held() is False
    with pytest.raises(LockLostError, match="belongs to"):
        holder.check_held()
    assert len(lost) == 1 and later.owner in lost[0]
    holder.release()  # quiet, and the new owner's lock stays
    assert later.is_held()
    later.release()


def test_own_lock_past_expiry_is_not_trusted(tmp_path):
    now = [1000.0]
    lock = _provider(tmp_path, expire_minutes=1, monotonic=lambda: now[0])
    assert lock.try_acquire(1)
    now[0] += 59
    assert lock.is_held()
    now[0] += 2
    assert lock.is_held() is False
    with pytest.raises(LockLostError, match="expire"):
        lock.check_held()
    lock.release()
    assert not os.path.exists(lock.lock_path), "still ours on disk, so release deletes it"


def test_deleted_lock_file_is_a_lost_lock(tmp_path):
    lock = _provider(tmp_path)
    assert lock.try_acquire(1)
    os.unlink(lock.lock_path)
    with pytest.raises(LockLostError, match="deleted"):
        lock.check_held()
    lock.release()


# -- the holder on record, dead holders, race-free takeover -----------------------------------

_HOLD_SCRIPT = textwrap.dedent("""
    import sys, time
    from airflow_hudi_occ.core.config import LockConfig
    from airflow_hudi_occ.core.concurrency.locks.filesystem import FileSystemBasedLockProvider
    lock = FileSystemBasedLockProvider(LockConfig(provider="filesystem"), base_path=sys.argv[1])
    assert lock.try_acquire(5)
    print("held", flush=True)
    time.sleep(600)
""")

_RACE_SCRIPT = textwrap.dedent("""
    import json, logging, os, sys, time
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    from airflow_hudi_occ.core.config import LockConfig
    from airflow_hudi_occ.core.concurrency.locks.base import LockManager
    from airflow_hudi_occ.core.concurrency.locks.filesystem import FileSystemBasedLockProvider
    base, go, out = sys.argv[1:4]
    config = LockConfig(provider="filesystem", wait_time_ms=20000, client_num_retries=0)
    manager = LockManager(FileSystemBasedLockProvider(config, base_path=base), config)
    open(out + ".ready", "w").close()
    while not os.path.exists(go):
        time.sleep(0.001)
    manager.acquire()
    start = time.time()
    time.sleep(0.3)
    end = time.time()
    manager.release()
    with open(out, "w") as f:
        json.dump([start, end], f)
""")


def _env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[4]), os.environ.get("PYTHONPATH", "")])}


def _kill9_holder(base: Path) -> int:
    """A real writer process that takes the table lock and is then killed with SIGKILL."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLD_SCRIPT, str(base)], stdout=subprocess.PIPE,
                            text=True, env=_env())
    assert proc.stdout.readline().strip() == "held"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    return proc.pid


def test_the_lock_file_records_its_holder(tmp_path):
    lock = _provider(tmp_path)
    assert lock.try_acquire(1)
    with open(lock.lock_path) as f:
        doc = json.load(f)
    assert (doc["host"], doc["pid"]) == (socket.gethostname(), os.getpid())
    assert abs(doc["pid_started_at"] - psutil.Process().create_time()) < 0.05
    holder = _provider(tmp_path).holder()
    assert (holder.provider, holder.host, holder.pid, holder.owner) == (
        "filesystem", socket.gethostname(), os.getpid(), lock.owner)
    assert 0 <= holder.age_s() < 60
    lock.release()
    assert _provider(tmp_path).holder() is None


def test_the_lock_of_a_kill9ed_holder_is_taken_over_without_expiry(tmp_path, caplog):
    base = tmp_path / "table"
    pid = _kill9_holder(base)
    lock = _provider(tmp_path, expire_minutes=0)
    holder = lock.holder()
    assert holder.pid == pid
    # what `hudi-occ show` says of it (issue 40): gone, so the next writer takes it over
    assert holder.stale == (f"its holder, pid {pid} on {socket.gethostname()}, is no longer "
                            "running (it died without releasing the lock)")
    caplog.set_level(logging.WARNING, logger="airflow_hudi_occ")
    start = time.monotonic()
    assert lock.try_acquire(10)
    assert time.monotonic() - start < 5
    assert _owner_in(lock.lock_path) == lock.owner
    takeovers = [r.getMessage() for r in caplog.records if "taking over lock" in r.getMessage()]
    assert len(takeovers) == 1
    assert f"pid {pid} on {socket.gethostname()}" in takeovers[0]
    assert "no longer running" in takeovers[0]
    lock.release()


def test_a_reused_pid_does_not_keep_a_dead_holders_lock(tmp_path):
    """Our own pid with another start time: the pid was reused, the holder is gone."""
    lock = _provider(tmp_path)
    content = json.dumps({"owner": "x", "host": socket.gethostname(), "pid": os.getpid(),
                          "pid_started_at": psutil.Process().create_time() - 3600,
                          "acquired_at_ms": int(time.time() * 1000)})
    _plant_lock(lock.lock_path, content=content)
    assert lock.try_acquire(2)
    lock.release()


def test_a_dead_pid_of_another_pid_namespace_is_not_taken_over(tmp_path):
    """A container sharing our host name (host networking) has pids of its own: a pid that is
    free here may be a live writer there, so only the expiry may take its lock over."""
    lock = _provider(tmp_path, expire_minutes=0)
    dead = _kill9_holder(tmp_path / "table")
    doc = json.loads(Path(lock.lock_path).read_text())
    assert doc["pid"] == dead and doc["pid_namespace"] == str(os.stat("/proc/self/ns/pid").st_ino)
    Path(lock.lock_path).write_text(json.dumps({**doc, "pid_namespace": "4026531999"}))
    assert lock.try_acquire(0.5) is False
    Path(lock.lock_path).write_text(json.dumps(doc))
    assert lock.try_acquire(2), "the same dead holder in our namespace is taken over"
    lock.release()


def test_a_live_holder_on_this_host_is_waited_for(tmp_path):
    holder = _provider(tmp_path)
    assert holder.try_acquire(1)
    waiter = _provider(tmp_path, expire_minutes=0)
    assert waiter.holder().stale is None
    assert waiter.try_acquire(0.5) is False
    assert _owner_in(holder.lock_path) == holder.owner
    holder.release()


def test_a_waiter_holding_the_takeover_token_keeps_the_others_out(tmp_path):
    """The token is what makes the takeover race-free: while another (live) waiter holds it
    for this stale content, nobody else deletes the lock."""
    base = tmp_path / "table"
    pid = _kill9_holder(base)
    lock = _provider(tmp_path)
    with open(lock.lock_path, "rb") as f:
        stale = f.read()
    token = f"{lock.lock_path}.takeover-{hashlib.sha256(stale).hexdigest()[:16]}"
    with open(token, "wb") as f:
        f.write(_provider(tmp_path)._content())  # a live waiter (this process) is taking over
    assert lock.try_acquire(0.5) is False
    assert json.loads(stale)["pid"] == pid and _owner_in(lock.lock_path) != lock.owner
    os.unlink(token)
    assert lock.try_acquire(2)
    lock.release()


def test_a_takeover_token_left_by_a_dead_waiter_is_cleared(tmp_path):
    base = tmp_path / "table"
    _kill9_holder(base)
    lock = _provider(tmp_path)
    with open(lock.lock_path, "rb") as f:
        stale = f.read()
    token = f"{lock.lock_path}.takeover-{hashlib.sha256(stale).hexdigest()[:16]}"
    with open(token, "wb") as f:
        f.write(stale)  # a token whose creator is the dead process
    assert lock.try_acquire(3)
    assert not os.path.exists(token)
    lock.release()


def test_two_waiting_processes_take_over_a_dead_holders_lock_once(tmp_path):
    """Four real processes wait on the lock of a SIGKILLed writer and are released at the same
    instant: exactly one takes it over, and they hold it one after another, never together.
    (With the takeover token removed from the provider this failed 2 runs in 5: two waiters
    took over, and one deleted the other's fresh lock.)"""
    base = tmp_path / "table"
    _kill9_holder(base)
    go = tmp_path / "go"
    outs = [tmp_path / f"out{i}.json" for i in range(4)]
    procs = [subprocess.Popen([sys.executable, "-c", _RACE_SCRIPT, str(base), str(go), str(out)],
                              stderr=subprocess.PIPE, text=True, env=_env()) for out in outs]
    deadline = time.monotonic() + 60
    while not all(Path(f"{out}.ready").exists() for out in outs):  # every one spins on "go"
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "waiters did not start"
        time.sleep(0.05)
    go.touch()
    logs = [p.communicate(timeout=60)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, logs
    assert sum(log.count("taking over lock") for log in logs) == 1, logs
    spans = sorted(json.loads(out.read_text()) for out in outs)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert end <= start, f"two processes held the lock at once: {spans}"


def test_a_contended_wait_names_the_holder_and_its_age(tmp_path, caplog):
    from airflow_hudi_occ.core.concurrency.locks.base import LockManager
    from airflow_hudi_occ.core.errors import LockAcquireTimeoutError
    holder = _provider(tmp_path)
    assert holder.try_acquire(1)
    config = LockConfig(provider="filesystem", wait_time_ms=300, client_num_retries=1,
                        client_wait_time_ms_between_retry=0)
    manager = LockManager(FileSystemBasedLockProvider(config, base_path=str(tmp_path / "table")), config)
    caplog.set_level(logging.INFO, logger="airflow_hudi_occ")
    with pytest.raises(LockAcquireTimeoutError) as exc:
        manager.acquire()
    me = re.compile(rf"held by pid {os.getpid()} on {re.escape(socket.gethostname())}, taken \d+s ago")
    waits = [r.getMessage() for r in caplog.records if "waiting for lock" in r.getMessage()]
    assert len(waits) == 1 and me.search(waits[0]), waits
    assert me.search(exc.value.message) and exc.value.owner == holder.owner
    holder.release()
