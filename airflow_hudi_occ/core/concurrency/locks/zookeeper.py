"""Hudi's ZookeeperBasedLockProvider, written with kazoo and compatible with Java writers.

Java Hudi locks ``<hoodie.write.lock.zookeeper.base_path>/<lock_key>`` with Curator's
``InterProcessMutex``: each contender creates an ephemeral sequential child
``_c_<uuid>-lock-<10-digit sequence>`` and the lowest sequence holds the lock. kazoo's own
``Lock`` names its nodes ``<hex>__lock__<seq>``; Curator sorts those by their whole name and
kazoo ignores Curator's nodes, so the two would not exclude each other. This module's recipe
creates nodes in Curator's exact form and counts both Curator's and kazoo's nodes as
contenders, so a Python writer and a Java writer exclude each other in both directions.

Session handling is what makes a ZooKeeper lock safe or not:

- SUSPENDED (connection dropped, session maybe alive): the lock is not trustworthy;
  ``is_held()`` is False and ``check_held()`` raises ``LockLostError``, but the lock is not
  given up: if the client reconnects to the same session, our node is still there and
  nobody else can have acquired in between, so the lock is valid again.
- LOST (session expired): the ephemeral node is gone and someone else may hold the lock:
  lost for good. The lost listeners run (on a short-lived thread, because kazoo's event
  thread must not block) and ``check_held()`` raises ``LockLostError`` until release.
- ``is_held()`` also asks the server that our node still exists and belongs to our session.

A release that cannot reach the server closes the client instead, so that the session, and
with it the node, ends on the server rather than lingering after a reconnect.

Per-key locks (``lock_key=...``, used for per-file-group locks) live beside the table's lock,
at ``<base_path>/<table key>.<percent-encoded key>``, and their parent node is deleted after
release when empty, because kazoo has no container nodes and there can be very many keys.

A server that is not there: the client is given ``connection_timeout_ms`` to connect, then
stopped (kazoo would otherwise retry in the background for ever), and the attempt reports
the cause in :attr:`~LockProvider.unreachable`, found by one TCP probe per host: "connection
refused", "no answer to connect" or "accepts connections but never answered as ZooKeeper". The
lock manager turns that into ``LockServiceUnreachableError`` naming host:port, instead of
waiting out the contention budget. kazoo logs a warning on every reconnect attempt (dozens a
second against a refusing port); our clients log through the ``kazoo.client.hudi_occ``
logger, kept at ERROR, and this module says once, in its own words, what the connection did.

Stopping a client is bounded too. kazoo's ``stop()`` waits for its connection thread, and that
thread waits on the server for as long as the session timeout allows (Hudi's default: 60 s):
its TCP connect and the session handshake each get the whole session timeout. Against a
server that accepts connections and never answers, every stop of a client that gave up
connecting blocked about 50 s (a lock attempt with the defaults took 122 s instead of 22 s).
Our clients run on :class:`AbortableHandler`, which keeps the client's sockets and can shut
them down: an unconnected client is stopped after its sockets are shut (the thread's blocked
connect or read returns at once, it finds the client stopped and ends), and a connected one is
stopped politely (the server closes the session and drops its ephemeral nodes) with the same
shutdown as a fallback after ``connection_timeout_ms``. No thread or socket outlives the stop.

Errors: a server that refuses our credentials raises ``LockError`` (a retry cannot fix it);
connection failures make ``try_acquire`` return False with the cause in ``last_failure``.
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
import time
import uuid
import weakref

from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    LockTimeout,
    NoAuthError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
)
from kazoo.handlers import utils as kazoo_handler_utils
from kazoo.handlers.threading import KazooTimeoutError, SequentialThreadingHandler
from kazoo.protocol.states import KazooState
from kazoo.recipe.lock import Lock as _KazooLock
from kazoo.security import OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, make_digest_acl

from airflow_hudi_occ.core.config import ZK_AUTH, ZK_LOCK_KEY, ZK_URL, LockConfig
from airflow_hudi_occ.core.errors import ConfigError, LockError, LockServiceUnreachableError
from airflow_hudi_occ.core.format.storage import Storage
from airflow_hudi_occ.core.concurrency.locks.base import LockHolder, LockProvider, encode_lock_key

log = logging.getLogger(__name__)

#: kazoo's connection loop logs a warning per reconnect attempt; our clients log here instead,
#: where only errors pass (what the connection did is logged once by this module)
KAZOO_LOG = logging.getLogger("kazoo.client.hudi_occ")
KAZOO_LOG.setLevel(logging.ERROR)

#: what Curator's InterProcessMutex puts between the protection prefix and the sequence
CURATOR_LOCK_NAME = "-lock-"


def connect_string(zk_url: str, zk_port: int) -> str:
    """``zk_url`` with ``zk_port`` added to every host that names no port (chroot kept)."""
    hosts, slash, chroot = zk_url.strip().partition("/")
    out = []
    for host in hosts.split(","):
        host = host.strip()
        if not host:
            continue
        has_port = ("]:" in host) if host.startswith("[") else (":" in host)
        out.append(host if has_port else f"{host}:{zk_port}")
    return ",".join(out) + (slash + chroot if slash else "")


def _host_ports(hosts: str) -> list[tuple[str, int]]:
    out = []
    for item in hosts.partition("/")[0].split(","):
        host, _, port = item.strip().rpartition(":")
        if host and port.isdigit():
            out.append((host.strip("[]"), int(port)))
    return out


def probe(hosts: str, timeout_s: float) -> str:
    """Why nobody answered at ``hosts``, host by host, from one TCP connect each: "connection
    refused", "no answer to connect within Xs" or "accepts connections but did not answer as
    ZooKeeper" (the client's session handshake is what timed out then)."""
    causes = []
    for host, port in _host_ports(hosts):
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                why = "accepts connections but did not answer as ZooKeeper"
        except socket.timeout:
            why = f"no answer to connect within {timeout_s:g}s"
        except ConnectionRefusedError:
            why = "connection refused"
        except OSError as e:
            why = e.strerror or errno.errorcode.get(e.errno or 0, str(e))
        causes.append(f"{host}:{port} ({why})")
    return "; ".join(causes) or hosts


class AbortableHandler(SequentialThreadingHandler):
    """kazoo's threading handler, plus :meth:`shut_down_sockets`: shut down every socket the client opened
    and refuse new ones, so that its connection thread, blocked in a connect or a read on a
    server that does not answer, returns at once instead of after the session timeout.

    ``shutdown()`` (not ``close()``) is what wakes a thread blocked on a socket: a pending
    connect fails, a ``select``/``recv`` sees the end of the stream. kazoo takes either as a
    dropped connection, and its loop ends when it finds the client stopped. Sockets are
    registered before they connect (kazoo's ``create_tcp_connection`` is given this handler's
    :class:`_Sockets` as its socket module), so a connect to a host that never answers is
    cut short as well."""

    def __init__(self):
        super().__init__()
        self._sockets: weakref.WeakSet = weakref.WeakSet()
        self._aborted = False
        self._sockets_lock = threading.Lock()

    def create_connection(self, *args, **kwargs):
        sock = kazoo_handler_utils.create_tcp_connection(_Sockets(self.register), *args, **kwargs)
        return self.register(sock)  # an SSL socket is a new object around the registered one

    def register(self, sock: socket.socket) -> socket.socket:
        with self._sockets_lock:
            if not self._aborted:
                self._sockets.add(sock)
                return sock
        sock.close()
        raise ConnectionAbortedError(errno.ECONNABORTED, "the ZooKeeper client is being stopped")

    def shut_down_sockets(self) -> None:
        with self._sockets_lock:
            self._aborted = True
            sockets = list(self._sockets)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # not connected (yet), or closed already: nothing to wake
                pass


class _Sockets:
    """What kazoo's ``create_tcp_connection`` uses of the ``socket`` module, with each socket
    handed to ``register`` before it connects (``socket.create_connection`` makes its socket
    inside, out of reach)."""

    def __init__(self, register):
        self._register = register

    def __getattr__(self, name):  # constants and the rest: the socket module's own
        return getattr(socket, name)

    def socket(self, *args, **kwargs) -> socket.socket:
        return self._register(socket.socket(*args, **kwargs))

    def create_connection(self, address, timeout=None) -> socket.socket:
        error: OSError | None = None
        for family, kind, proto, _, sockaddr in socket.getaddrinfo(address[0], address[1], 0,
                                                                    socket.SOCK_STREAM):
            sock = self.socket(family, kind, proto)
            try:
                sock.settimeout(timeout)
                sock.connect(sockaddr)
                return sock
            except OSError as e:
                sock.close()
                error = e
        raise error or OSError(errno.EADDRNOTAVAIL, f"no address for {address[0]}")


def stop_client(client: KazooClient, bound_s: float) -> None:
    """Stop and close ``client`` within about ``bound_s`` (plus kazoo's retry pause, under
    2 s), leaving no thread and no socket behind. A connected client is stopped politely, so
    the server ends the session and drops its ephemeral nodes at once; one that is not
    connected has no session to end, so its sockets are shut down first."""
    handler = client.handler
    abortable = isinstance(handler, AbortableHandler)
    timer = None
    if abortable and not client.connected:
        handler.shut_down_sockets()
    elif abortable:
        timer = threading.Timer(bound_s, handler.shut_down_sockets)
        timer.daemon = True
        timer.start()
    try:
        client.stop()
        client.close()
    except Exception:  # already broken: nothing more to free
        log.debug("closing the ZooKeeper client failed", exc_info=True)
    finally:
        if timer is not None:
            timer.cancel()


class _DeadlineEvent:
    """kazoo's Lock waits the full timeout again after every predecessor change; waiting only
    for what is left of one deadline keeps ``try_acquire(t)`` within ``t``."""

    def __init__(self, event, deadline: float | None, on_wait=None):
        self._event = event
        self._deadline = deadline
        self._on_wait = on_wait

    def set(self):
        self._event.set()

    def clear(self):
        self._event.clear()

    def is_set(self):
        return self._event.is_set()

    def wait(self, timeout=None):
        # kazoo waits here only when a predecessor holds the lock: the wait starts
        if self._on_wait is not None:
            self._on_wait()
        if self._deadline is not None:
            left = max(0.0, self._deadline - time.monotonic())
            timeout = left if timeout is None else min(timeout, left)
        return self._event.wait(timeout)


class CuratorCompatibleLock(_KazooLock):
    """kazoo's lock recipe with Curator's node names (``_c_<uuid>-lock-<seq>``).

    kazoo compares contenders by the 10-digit sequence after the node name, as Curator does
    (Curator sorts by what follows the last ``lock-``); the ``_c_<uuid>`` prefix is Curator's
    protection id, which also lets kazoo find its node again after a connection loss during
    create.
    """

    _NODE_NAME = CURATOR_LOCK_NAME
    _EXCLUDE_NAMES = [CURATOR_LOCK_NAME, "__lock__"]  # Curator's and plain kazoo's contenders

    def __init__(self, client, path, identifier=None, *, deadline: float | None = None,
                 on_wait=None):
        super().__init__(client, path, identifier)
        self.prefix = f"_c_{uuid.uuid4()}{self._NODE_NAME}"
        self.create_path = self.path + "/" + self.prefix
        self.wake_event = _DeadlineEvent(self.wake_event, deadline, on_wait)


def _session_id(client: KazooClient) -> int | None:
    """The client's session id, also while disconnected (``client_id`` is None then, but the
    session may well be alive on the server, holding our ephemeral node)."""
    if client.client_id is not None:
        return client.client_id[0]
    return getattr(client, "_session_id", None)


class ZookeeperBasedLockProvider(LockProvider):
    provider_name = "zookeeper"

    def __init__(self, config: LockConfig, *, base_path: str = "", table_name: str = "",
                 storage: Storage | None = None, lock_key: str | None = None):
        if not config.zk_url:
            raise ConfigError("the ZooKeeper lock provider needs a ZooKeeper address",
                              key=ZK_URL.key, value=config.zk_url,
                              remedy=f"set {ZK_URL.key} (host[:port][,host[:port]...])")
        table_key = config.zk_lock_key or table_name
        if not table_key:
            raise ConfigError("the ZooKeeper lock provider needs a lock key", key=ZK_LOCK_KEY.key,
                              remedy=f"set {ZK_LOCK_KEY.key} or the table name")
        self.hosts = connect_string(config.zk_url, config.zk_port)
        zk_base = "/" + config.zk_base_path.strip("/") if config.zk_base_path.strip("/") else ""
        self.table_lock_path = f"{zk_base}/{table_key.strip('/')}"
        self.lock_key = lock_key
        self.lock_path = (self.table_lock_path if not lock_key
                          else f"{self.table_lock_path}.{encode_lock_key(lock_key)}")
        self.session_timeout_s = max(0.001, config.zk_session_timeout_ms / 1000.0)
        self.connection_timeout_s = max(0.001, config.zk_connection_timeout_ms / 1000.0)
        self._auth = config.zk_auth or ""
        if self._auth and ":" not in self._auth:
            raise ConfigError("ZooKeeper digest credentials must look like user:password",
                              key=ZK_AUTH.key, value="<hidden>")
        super().__init__(name=f"zookeeper://{self.hosts}{self.lock_path}")
        self._client: KazooClient | None = None
        self._client_lock = threading.Lock()
        self._connected = threading.Event()
        self._node_path: str | None = None
        self._session_id: int | None = None

    # -- connection ----------------------------------------------------------------------

    def _new_client(self) -> KazooClient:
        kwargs = {}
        if self._auth:
            user, _, password = self._auth.partition(":")
            kwargs["auth_data"] = [("digest", self._auth)]
            # Nodes we create can be changed only by these credentials; others may look.
            kwargs["default_acl"] = [make_digest_acl(user, password, all=True), *READ_ACL_UNSAFE]
        client = KazooClient(
            hosts=self.hosts, timeout=self.session_timeout_s, logger=KAZOO_LOG,
            handler=AbortableHandler(),  # a bounded stop (module docstring)
            # reconnect fast after a server restart: the session may still be alive
            connection_retry={"max_tries": -1, "delay": 0.05, "backoff": 2, "max_delay": 1.0},
            **kwargs)
        client.add_listener(self._on_state)
        return client

    def _on_state(self, state) -> bool:
        # Runs on kazoo's connection thread: flags only, never block or call ZooKeeper here.
        if state == KazooState.CONNECTED:
            self._connected.set()
        else:
            if self._connected.is_set() and self._node_path is not None:
                log.warning("ZooKeeper connection to %s %s while holding %s: the lock is not "
                            "trusted until the session reconnects", self.hosts, state.lower(),
                            self.lock_path)
            self._connected.clear()
        if state == KazooState.LOST and self._node_path is not None:
            session = f"0x{self._session_id:x}" if self._session_id is not None else "?"
            threading.Thread(target=self._mark_lost, name="zk-lock-lost", daemon=True,
                             args=(f"ZooKeeper session {session} expired",)).start()
        return False  # stay registered

    def _connected_client(self, deadline: float) -> KazooClient | None:
        with self._client_lock:
            if self._client is None:
                client = self._new_client()
                # not start(timeout): on a timeout it stops the client itself, unbounded
                client.start_async().wait(self.connection_timeout_s)
                if not client.connected:
                    # kazoo keeps retrying in the background: stop it, or the thread
                    # reconnects (and logs) until the process ends
                    stop_client(client, self.connection_timeout_s)
                    cause = probe(self.hosts, min(2.0, self.connection_timeout_s))
                    self.last_failure = (f"could not connect to ZooKeeper at {self.hosts} within "
                                         f"{self.connection_timeout_s:g}s: {cause}")
                    self.unreachable = (self.hosts, f"ZooKeeper unreachable at {cause} within "
                                        f"{self.connection_timeout_s:g}s "
                                        "(hoodie.write.lock.zookeeper.connection_timeout_ms)")
                    return None
                self._client = client
                self._connected.set()
            client = self._client
        if not self._connected.wait(max(0.0, deadline - time.monotonic())):
            # connected once, lost since (the ensemble went away): kazoo keeps reconnecting in
            # the background, and the manager gives up after two such attempts, naming why
            cause = probe(self.hosts, min(2.0, self.connection_timeout_s))
            self.last_failure = f"not connected to ZooKeeper at {self.hosts} (state {client.state})"
            self.unreachable = (self.hosts, f"ZooKeeper unreachable at {cause}: the connection was "
                                f"lost and not re-established (state {client.state})")
            return None
        return client

    def _stop_client(self) -> None:
        with self._client_lock:
            client, self._client = self._client, None
        self._connected.clear()
        if client is not None:
            stop_client(client, self.connection_timeout_s)

    @property
    def client(self) -> KazooClient | None:
        """The live kazoo client, if any (tests use it to expire the session)."""
        return self._client

    # -- the contract ----------------------------------------------------------------------

    def _try_acquire(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        client = self._connected_client(deadline)
        if client is None:
            return False
        if self._auth:
            # kazoo creates every missing node with the client's ACL: the shared parents (the
            # base path, /hudi) made by a writer with credentials would be read-only to every
            # other table's writers. Only the lock node and its children carry ours.
            parent = self.lock_path.rsplit("/", 1)[0]
            if parent:
                try:
                    client.ensure_path(parent, acl=OPEN_ACL_UNSAFE)
                except NoAuthError:  # made read-only before: the lock node's create says so
                    pass
        while True:
            lock = CuratorCompatibleLock(client, self.lock_path, self.owner, deadline=deadline,
                                         on_wait=self._busy)
            remaining = max(0.0, deadline - time.monotonic())
            try:
                if timeout_s > 0:
                    got = lock.acquire(blocking=True, timeout=remaining)
                else:
                    got = lock.acquire(blocking=False)
            except LockTimeout:
                return False
            except NoNodeError:
                # A per-key parent was deleted (empty) by a releasing writer between our
                # ensure_path and create: make it again while time is left.
                if time.monotonic() < deadline:
                    continue
                return False
            except NoAuthError as e:
                raise LockError(
                    f"ZooKeeper refused {'our credentials' if self._auth else 'an unauthenticated client'} "
                    f"on {self.lock_path}", lock=self.name,
                    remedy=f"set {ZK_AUTH.key} to the digest user:password that owns the lock path") from e
            except (ConnectionLoss, ConnectionClosedError, SessionExpiredError,
                    KazooTimeoutError) as e:
                self.last_failure = f"ZooKeeper connection problem while acquiring: {e!r}"
                return False
            if not got:
                return False
            self._session_id = _session_id(client)
            self._node_path = f"{self.lock_path}/{lock.node}"
            return True

    def _validity(self) -> str | None:
        client, node = self._client, self._node_path
        if client is None or node is None:
            return "no ZooKeeper client"
        if not self._connected.is_set() or client.state != KazooState.CONNECTED:
            return f"ZooKeeper connection is {client.state}: cannot prove the lock is still ours"
        client_id = client.client_id
        if client_id is None:
            return "ZooKeeper connection is not live: cannot prove the lock is still ours"
        if client_id[0] != self._session_id:
            reason = f"ZooKeeper session 0x{(self._session_id or 0):x} was replaced"
            self._mark_lost(reason)
            return reason
        try:
            stat = client.exists_async(node).get(timeout=self.connection_timeout_s)
        except (KazooException, KazooTimeoutError) as e:
            return f"cannot check lock node {node}: {e!r}"
        if stat is None:
            reason = f"lock node {node} is gone"
            self._mark_lost(reason)
            return reason
        if stat.ephemeralOwner != self._session_id:
            reason = f"lock node {node} belongs to session 0x{stat.ephemeralOwner:x}"
            self._mark_lost(reason)
            return reason
        return None

    def _release(self) -> None:
        node, self._node_path = self._node_path, None
        session, self._session_id = self._session_id, None
        client = self._client
        if node is None or client is None:
            return
        if _session_id(client) != session:
            return  # the session ended, and its ephemeral node with it
        try:
            if not self._connected.is_set():
                raise ConnectionLoss("not connected")
            client.delete_async(node).get(timeout=self.connection_timeout_s)
        except NoNodeError:
            return
        except (KazooException, KazooTimeoutError) as e:
            # If we keep the session, a reconnect would revive our node and block everyone.
            log.warning("could not delete lock node %s (%r); closing the ZooKeeper session so "
                        "the server drops it", node, e)
            self._stop_client()
            return
        if self.lock_key:
            try:
                client.delete_async(self.lock_path).get(timeout=self.connection_timeout_s)
            except (NotEmptyError, NoNodeError):
                pass
            except (KazooException, KazooTimeoutError):
                log.debug("could not remove empty lock parent %s", self.lock_path, exc_info=True)

    def _contenders(self) -> list[tuple[str, str]] | None:
        """``(sequence, node)`` of every contender under the lock path (Curator's and kazoo's
        nodes), lowest first: the holder, then the waiters; None when not connected."""
        client = self._client
        if client is None or not self._connected.is_set():
            return None
        try:
            children = client.get_children_async(self.lock_path).get(timeout=self.connection_timeout_s)
        except NoNodeError:
            return []
        contenders = []
        for child in children:
            for name in CuratorCompatibleLock._EXCLUDE_NAMES:
                idx = child.rfind(name)
                seq = child[idx + len(name):] if idx >= 0 else ""
                if len(seq) == 10 and seq.isdigit():
                    contenders.append((seq, child))
                    break
        return sorted(contenders)

    def waiting(self) -> int | None:
        """The contenders after the holder (one ``getChildren``), Java's as well as ours."""
        contenders = self._contenders()
        return None if contenders is None else max(0, len(contenders) - 1)

    def _first_contender(self) -> tuple[str, object] | None:
        """The data and stat of the lowest-sequence node under the lock path (the holder)."""
        contenders = self._contenders()
        if not contenders:
            return None
        client = self._client
        first = contenders[0][1]
        try:
            data, stat = client.get_async(f"{self.lock_path}/{first}").get(timeout=self.connection_timeout_s)
        except NoNodeError:
            return None
        text = (data or b"").decode("utf-8", errors="replace")
        return text or first, stat

    def current_owner(self) -> str | None:
        found = self._first_contender()
        return None if found is None else found[0]

    def holder(self) -> LockHolder | None:
        """The holder's node data (our writers: host:pid:thread:uuid) and the node's creation
        time; connects first when this provider has no client yet (the CLI asks so), within
        the connection timeout, and raises :class:`LockServiceUnreachableError` if nobody answers."""
        if self._client is None:
            if self._connected_client(time.monotonic() + self.connection_timeout_s) is None:
                endpoint, cause = self.unreachable or (self.hosts, self.last_failure or "")
                raise LockServiceUnreachableError(
                    f"lock service unreachable: {cause}", lock=self.name, endpoint=endpoint,
                    cause=cause)
        found = self._first_contender()
        if found is None:
            return None
        owner, stat = found
        return LockHolder.from_owner(self.provider_name, owner,
                                     acquired_at=getattr(stat, "ctime", 0) / 1000.0 or None)

    def close(self) -> None:
        super().close()
        self._stop_client()
