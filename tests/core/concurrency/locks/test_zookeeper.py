"""What only a real ZooKeeper server can show: sessions that expire, a server that goes away
and comes back, ephemeral nodes of a killed process, ACLs, and the node names other lock
clients (kazoo's plain Lock, Curator) must recognise."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import logging
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
import time

import psutil
import pytest
from kazoo.client import KazooClient

from airflow_hudi_occ.core.config import LockConfig
from airflow_hudi_occ.core.errors import (ConfigError, LockAcquireTimeoutError, LockError, LockLostError,
                                         LockServiceUnreachableError)
from airflow_hudi_occ.core.concurrency.locks import get_lock_provider
from airflow_hudi_occ.core.concurrency.locks.base import LockManager
from airflow_hudi_occ.core.concurrency.locks.zookeeper import ZookeeperBasedLockProvider, connect_string
from airflow_hudi_occ.testing import unreachable
from airflow_hudi_occ.testing.zookeeper import expire_session

from .conftest import ZK_SESSION_TIMEOUT_MS, zk_lock_config

CURATOR_NODE = re.compile(r"^_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-lock-\d{10}$")


def _provider(config: LockConfig, lock_key: str | None = None) -> ZookeeperBasedLockProvider:
    return get_lock_provider(config, base_path="/unused", table_name="tbl", lock_key=lock_key)


def _wait_until(predicate, bound_s: float, what: str):
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"not within {bound_s}s: {what}")


@pytest.fixture
def zk(zk_server):
    client = KazooClient(hosts=zk_server.hosts)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def test_connect_string_adds_the_port_only_where_missing():
    assert connect_string("zk1,zk2:2182,zk3", 2181) == "zk1:2181,zk2:2182,zk3:2181"
    assert connect_string("zk1:1/chroot/x", 2181) == "zk1:1/chroot/x"
    assert connect_string("[::1],[::2]:5", 7) == "[::1]:7,[::2]:5"


def test_lock_path_and_missing_settings():
    config = LockConfig(provider="zookeeper", zk_url="h", zk_base_path="/hudi/locks")
    assert _provider(config).lock_path == "/hudi/locks/tbl"
    keyed = dataclasses.replace(config, zk_lock_key="shared_key")
    assert _provider(keyed).lock_path == "/hudi/locks/shared_key"
    assert _provider(keyed, lock_key="p=1/fg").lock_path == "/hudi/locks/shared_key.p=1%2Ffg"
    with pytest.raises(ConfigError, match="hoodie.write.lock.zookeeper.url"):
        _provider(dataclasses.replace(config, zk_url=""))


def test_nodes_have_curators_names_and_carry_the_owner(zk_server, zk):
    lock = _provider(zk_lock_config(zk_server.hosts))
    assert lock.try_acquire(5)
    children = zk.get_children(lock.lock_path)
    assert len(children) == 1 and CURATOR_NODE.match(children[0]), children
    data, stat = zk.get(f"{lock.lock_path}/{children[0]}")
    assert data.decode() == lock.owner
    assert stat.ephemeralOwner == lock.client.client_id[0]
    lock.release()
    assert zk.get_children(lock.lock_path) == []
    lock.close()


def test_session_expiry_while_holding_is_a_lost_lock(zk_server):
    config = zk_lock_config(zk_server.hosts)
    holder, other = _provider(config), _provider(config)
    lost = threading.Event()
    reasons = []

    def on_lost(provider, reason):
        reasons.append(reason)
        lost.set()

    holder.add_lost_listener(on_lost)
    assert holder.try_acquire(5)
    assert other.try_acquire(0.2) is False
    expire_session(holder.client)
    assert lost.wait(10), "lost listener not called after the session expired"
    assert "expired" in reasons[0]
    assert holder.is_held() is False
    with pytest.raises(LockLostError, match="expired"):
        holder.check_held()
    # The ephemeral node went with the session: the lock is free for someone else.
    assert other.try_acquire(5)
    holder.release()  # quiet: there is nothing of ours left to delete
    assert other.is_held(), "releasing the lost lock must not touch the new holder's node"
    assert holder.try_acquire(0.2) is False
    other.release()
    # The same provider works again on the new session.
    assert holder.try_acquire(5)
    assert holder.is_held()
    holder.release()
    assert len(reasons) == 1
    holder.close()
    other.close()


def test_manager_check_held_fails_after_expiry(zk_server):
    config = zk_lock_config(zk_server.hosts)
    manager = LockManager(_provider(config), config)
    with pytest.raises(LockLostError):
        with manager.locked():
            expire_session(manager.provider.client)
            manager.check_held()  # what the commit path does before completing an instant
    assert not manager.is_held()
    manager.close()


def test_server_stop_suspends_and_a_restart_lets_writers_continue(own_zk_server):
    # a session long enough to outlive a server restart on a loaded machine (a JVM start can
    # take several seconds there): the claim is about a suspension that ends in time
    config = zk_lock_config(own_zk_server.hosts, zk_session_timeout_ms=15000)
    holder, other = _provider(config), _provider(config)
    lost = []
    holder.add_lost_listener(lambda provider, reason: lost.append(reason))
    assert holder.try_acquire(5)
    own_zk_server.stop()
    _wait_until(lambda: not holder.is_held(), 10, "holder distrusts its lock while disconnected")
    with pytest.raises(LockLostError, match="connection"):
        holder.check_held()
    assert other.try_acquire(0.2) is False  # cannot even reach the server
    own_zk_server.start()
    # The session survived the restart (the server reloads it), so did our node: valid again.
    _wait_until(holder.is_held, 30, "holder trusts its lock again after reconnecting")
    assert lost == [], "a suspension that ends in time is not a loss"
    assert other.try_acquire(0.3) is False
    holder.release()
    assert other.try_acquire(5), "a new acquire works after the restart"
    other.release()
    holder.close()
    other.close()


def test_an_ensemble_that_goes_away_is_unreachable_not_contention(own_zk_server):
    """Connected once, then the server stops: the manager does not wait out its 50 retries for
    a lock nobody holds, and says the server is gone."""
    config = zk_lock_config(own_zk_server.hosts, wait_time_ms=1000, client_num_retries=50,
                            client_wait_time_ms_between_retry=100)
    provider = _provider(config)
    assert provider.try_acquire(5)
    provider.release()
    own_zk_server.stop()
    manager = LockManager(provider, config)
    start = time.monotonic()
    with pytest.raises(LockServiceUnreachableError) as exc:
        manager.acquire()
    assert time.monotonic() - start < 30 and exc.value.attempts == 2
    assert "(connection refused): the connection was lost" in exc.value.message
    provider.close()


def test_release_while_the_server_is_down_does_not_leave_the_node_behind(own_zk_server):
    config = zk_lock_config(own_zk_server.hosts, zk_session_timeout_ms=2000)
    holder, other = _provider(config), _provider(config)
    assert holder.try_acquire(5)
    own_zk_server.stop(kill=True)
    _wait_until(lambda: not holder.is_held(), 10, "holder notices the server is gone")
    holder.release()  # cannot delete the node: must end the session instead
    own_zk_server.start()
    # Without that, the holder's client would reconnect, revive the session and its node.
    assert other.try_acquire(20), "the node of the released lock blocked the next writer"
    other.release()
    holder.close()
    other.close()


_HOLDER = textwrap.dedent("""
    import json, sys, time
    from airflow_hudi_occ.core.config import LockConfig
    from airflow_hudi_occ.core.concurrency.locks import get_lock_provider
    lock = get_lock_provider(LockConfig(**json.loads(sys.argv[1])), base_path="/unused",
                             table_name="tbl")
    assert lock.try_acquire(10)
    print("ACQUIRED", flush=True)
    time.sleep(600)
""")


def test_lock_of_a_killed_process_is_freed_by_its_session_timeout(zk_server):
    config = zk_lock_config(zk_server.hosts)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, json.dumps(dataclasses.asdict(config))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "ACQUIRED", proc.stderr.read() if proc.poll() is not None else line
        waiter = _provider(config)
        assert waiter.try_acquire(0.3) is False, "the other process holds the lock"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        # No release ever comes: only the session timeout frees the ephemeral node.
        assert waiter.try_acquire(ZK_SESSION_TIMEOUT_MS / 1000 * 5)
        waiter.release()
        waiter.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_digest_auth(zk_server, zk):
    config = zk_lock_config(zk_server.hosts, zk_auth="alice:secret")
    alice = _provider(config)
    assert alice.try_acquire(5)
    acls, _ = zk.get_acls(alice.lock_path)
    # the server masks the digest for clients that may not administer the node
    assert any(a.id.scheme == "digest" and a.id.id.startswith("alice:") and a.perms == 31
               for a in acls), acls
    assert all(a.perms == 1 for a in acls if a.id.scheme == "world"), "others may only read"

    alice_again = _provider(config)
    assert alice_again.try_acquire(0.2) is False  # the same credentials contend normally
    for auth in ("", "alice:wrong"):
        stranger = _provider(dataclasses.replace(config, zk_auth=auth))
        with pytest.raises(LockError, match="refused") as exc:
            stranger.try_acquire(0.5)
        assert "hoodie.write.lock.zookeeper.auth" in exc.value.remedy
        stranger.close()
    assert alice.is_held()
    alice.release()
    assert alice_again.try_acquire(5)
    alice_again.release()
    alice.close()
    alice_again.close()


def test_a_writer_with_auth_leaves_the_shared_parents_open_to_other_tables(zk_server):
    """kazoo creates missing parents with the client's ACL: a first writer with credentials
    made the base path read-only, and every other table's writer without them was refused
    ("ZooKeeper refused an unauthenticated client"). Only the lock node carries the ACL."""
    base = f"/test-{uuid.uuid4().hex[:10]}/hudi/locks"
    alice = _provider(zk_lock_config(zk_server.hosts, zk_auth="alice:secret", zk_base_path=base,
                                     zk_lock_key="alices_table"))
    assert alice.try_acquire(5)
    other = _provider(zk_lock_config(zk_server.hosts, zk_base_path=base, zk_lock_key="other_table"))
    assert other.try_acquire(5)  # no auth, another table, the same base path
    other.release()
    alice.release()
    other.close()
    alice.close()


def test_malformed_auth_is_a_config_error():
    with pytest.raises(ConfigError, match="user:password"):
        _provider(LockConfig(provider="zookeeper", zk_url="h", zk_auth="nocolon"))


def test_plain_kazoo_lock_holders_are_respected(zk_server, zk):
    config = zk_lock_config(zk_server.hosts)
    lock = _provider(config)
    kazoo_lock = zk.Lock(lock.lock_path, "plain-kazoo")
    assert kazoo_lock.acquire(timeout=5)
    assert lock.try_acquire(0.3) is False
    assert lock.current_owner() == "plain-kazoo"
    kazoo_lock.release()
    assert lock.try_acquire(5)
    lock.release()
    lock.close()


def test_keyed_lock_parent_is_removed_after_release(zk_server, zk):
    config = zk_lock_config(zk_server.hosts)
    lock = _provider(config, lock_key="p=1/fg-1")
    assert lock.try_acquire(5)
    assert zk.exists(lock.lock_path)
    lock.release()
    assert zk.exists(lock.lock_path) is None, "per-key nodes would pile up in ZooKeeper"
    assert lock.try_acquire(5), "and the key can be locked again"
    lock.release()
    lock.close()


def test_unreachable_server_fails_the_attempt_with_the_reason(zk_server):
    from airflow_hudi_occ.testing.zookeeper import free_port
    config = zk_lock_config(f"127.0.0.1:{free_port()}", zk_connection_timeout_ms=300,
                            wait_time_ms=100, client_num_retries=1,
                            client_wait_time_ms_between_retry=0)
    manager = LockManager(_provider(config), config, sleep=lambda s: None)
    with pytest.raises(LockServiceUnreachableError, match="could not connect|unreachable") as exc:
        manager.acquire()
    assert exc.value.attempts == 2
    manager.close()


@pytest.fixture
def silent_listener():
    """A loopback port that accepts TCP connections and never says a word (a hung server, a
    firewall's tarpit): the case a connect timeout alone does not catch."""
    with unreachable.silent_listener() as port:
        yield port


def _kazoo_records(caplog):
    return [r for r in caplog.records if r.name.startswith("kazoo") and r.levelno >= logging.WARNING]


def _unreachable(config: LockConfig, caplog) -> tuple[LockServiceUnreachableError, float]:
    """The error a lock manager's acquire() gives up with on ``config``, and the seconds to it
    (kazoo's log captured from DEBUG on, for :func:`_kazoo_records`); the manager is closed."""
    manager = LockManager(_provider(config), config)
    caplog.set_level(logging.DEBUG, logger="kazoo")
    start = time.monotonic()
    try:
        with pytest.raises(LockServiceUnreachableError) as exc:
            manager.acquire()
        return exc.value, time.monotonic() - start
    finally:
        manager.close()


@pytest.mark.parametrize("connection_timeout_ms", [
    pytest.param(None, marks=pytest.mark.slow, id="defaults"),  # 22 s: two 10 s timeouts
    pytest.param(1500, id="short-timeout")])
def test_a_refusing_port_fails_with_the_defaults_within_30s_naming_host_and_port(caplog, connection_timeout_ms):
    """Hudi's defaults would wait about 55 minutes; ours give up on a dead ensemble after two
    connection timeouts, say why, and do not blame another writer. The default run takes a
    short connection timeout (the same path, 3 s); ``--slow`` also runs Hudi's other defaults
    with ours (the 22 s the bound documents)."""
    from airflow_hudi_occ.testing.zookeeper import free_port
    port = free_port()
    extra = {} if connection_timeout_ms is None else {"zk_connection_timeout_ms": connection_timeout_ms}
    config = LockConfig(provider="zookeeper", zk_url="127.0.0.1", zk_port=port, **extra)  # defaults otherwise
    error, took = _unreachable(config, caplog)
    assert took < 30, f"took {took:.0f}s"
    assert f"ZooKeeper unreachable at 127.0.0.1:{port} (connection refused)" in error.message
    assert error.endpoint == f"127.0.0.1:{port}"
    assert "another writer" not in str(error)
    assert not _kazoo_records(caplog), "kazoo's reconnect lines must stay out of the log"


def test_a_silent_listener_is_told_apart_from_a_refusing_port(silent_listener, caplog):
    config = zk_lock_config(f"127.0.0.1:{silent_listener}", zk_connection_timeout_ms=1500,
                            wait_time_ms=60_000, client_num_retries=50)
    error, took = _unreachable(config, caplog)
    assert took < 30, "two connection timeouts and a pause, not 50 retries"
    assert (f"ZooKeeper unreachable at 127.0.0.1:{silent_listener} (accepts connections but did "
            "not answer as ZooKeeper)") in error.message
    assert error.attempts == 2
    assert not _kazoo_records(caplog)


def _sockets_to(port: int) -> list:
    """This process's TCP sockets to ``port`` (any state)."""
    return sorted(c.laddr for c in psutil.Process().net_connections("tcp")
                  if c.raddr and c.raddr[1] == port)


def test_a_silent_listener_fails_with_the_defaults_within_30s(silent_listener, caplog):
    """Issue 40: with Hudi's 60 s session timeout, stopping a kazoo client that gave up
    connecting blocked about 50 s (kazoo's thread reads the handshake for the whole session
    timeout), so two attempts took 122 s while the message said "within 10s". Now two 10 s
    connection attempts and the pause between them: about 22 s, no thread or socket left."""
    config = LockConfig(provider="zookeeper", zk_url="127.0.0.1", zk_port=silent_listener)  # defaults
    before = {t.ident for t in threading.enumerate()}
    error, took = _unreachable(config, caplog)
    assert took < 30, f"took {took:.0f}s"
    assert (f"ZooKeeper unreachable at 127.0.0.1:{silent_listener} (accepts connections but did "
            "not answer as ZooKeeper) within 10s") in error.message
    assert error.attempts == 2
    assert not _kazoo_records(caplog)
    assert not [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    assert not _sockets_to(silent_listener)


@pytest.mark.parametrize("where", ["silent_listener", "unanswered_connect"])
def test_a_client_that_never_connected_stops_at_once(where):
    """Hudi's 60 s session timeout with a 1 s connection timeout: the stop used to wait out
    the session timeout (59 s) in kazoo's connect or handshake; now the client's sockets are
    shut down and its thread ends within the attempt's bound."""
    with getattr(unreachable, where)() as port:
        config = zk_lock_config(f"127.0.0.1:{port}", zk_connection_timeout_ms=1000,
                                zk_session_timeout_ms=60_000)
        provider = _provider(config)
        before = {t.ident for t in threading.enumerate()}
        sockets_before = _sockets_to(port)  # the helper's own, filling the backlog
        start = time.monotonic()
        assert provider.try_acquire(1) is False
        took = time.monotonic() - start
        assert took < 30, f"took {took:.0f}s"
        assert not [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
        assert _sockets_to(port) == sockets_before
        why = ("accepts connections but did not answer as ZooKeeper" if where == "silent_listener"
               else "no answer to connect within 1s")
        assert provider.unreachable == (f"127.0.0.1:{port}", f"ZooKeeper unreachable at 127.0.0.1:"
                                        f"{port} ({why}) within 1s (hoodie.write.lock.zookeeper."
                                        "connection_timeout_ms)")
        provider.close()


def test_a_connected_client_is_still_closed_politely(zk_server, zk):
    """The bounded stop must not cut a live session short: closing a connected client ends
    its session on the server, so its lock node is gone at once (not after the session
    timeout)."""
    config = zk_lock_config(zk_server.hosts, zk_session_timeout_ms=30_000)
    provider = _provider(config)
    assert provider.try_acquire(5)
    assert len(zk.get_children(provider.lock_path)) == 1
    provider.close()
    assert zk.get_children(provider.lock_path) == []


def test_the_unconnected_client_is_stopped_after_a_failed_attempt():
    """kazoo keeps reconnecting after start() gives up; the provider must stop that client,
    or it retries (and logs) until the process exits."""
    from airflow_hudi_occ.testing.zookeeper import free_port
    config = zk_lock_config(f"127.0.0.1:{free_port()}", zk_connection_timeout_ms=300)
    provider = _provider(config)
    before = {t.name for t in threading.enumerate()}
    assert provider.try_acquire(0.5) is False
    assert provider.unreachable is not None
    _wait_until(lambda: not [t for t in threading.enumerate()
                             if t.name not in before and t.is_alive()], 5,
                "the kazoo client's threads to end")
    provider.close()


def test_a_wait_for_a_held_lock_is_logged_once_with_its_holder(zk_server, caplog):
    config = zk_lock_config(zk_server.hosts, wait_time_ms=400, client_num_retries=2,
                            client_wait_time_ms_between_retry=50)
    holder, waiter = _provider(config), _provider(config)
    assert holder.try_acquire(5)
    manager = LockManager(waiter, config)
    caplog.set_level(logging.INFO, logger="airflow_hudi_occ")
    with pytest.raises(LockAcquireTimeoutError) as exc:
        manager.acquire()
    waits = [r.getMessage() for r in caplog.records if "waiting for lock" in r.getMessage()]
    assert len(waits) == 1, waits  # three attempts, one line: not a line per attempt
    host, pid = holder.owner.split(":")[:2]
    assert f"held by pid {pid} on {host}, taken " in waits[0]
    assert f"pid {pid} on {host}" in exc.value.message
    assert not isinstance(exc.value, LockServiceUnreachableError)
    holder.release()
    holder.close()
    waiter.close()
