"""Hudi's FileSystemBasedLockProvider: a lock file created only if absent.

The lock is ``<hoodie.write.lock.filesystem.path or <base>/.hoodie>/lock`` (per-key locks:
``lock.<encoded key>``), created with :meth:`Storage.create_if_absent`, so exactly one writer
can create it. It records its holder: ``{"owner", "host", "pid", "pid_started_at",
"pid_namespace", "acquired_at_ms", "expire_minutes"}``, so that a waiter can say who is in the way (pid, host,
age) and tell a live holder from a dead one. Java Hudi writers create the same file with
``create(overwrite=false)``, so the two exclude each other.

A writer killed with SIGKILL never deletes its lock file. Two rules take such a lock over:

- its holder is provably dead: it ran on this host, in this pid namespace, and its process
  (pid and start time) is gone. Checked at once, whatever the expiry, because nothing can be lost by it;
- ``hoodie.write.lock.filesystem.expire`` minutes (0 = never, as in Hudi) have passed, by the
  newer of the file's modification time and its ``acquired_at_ms`` (both clocks must agree it
  is stale). The only rule for a holder on another host, or a file without a holder (Java's).

The takeover is race-free between waiters: a waiter that judges the lock stale must first
create ``<lock>.takeover-<hash of the stale content>`` (create-if-absent); only the one that
creates it re-reads the lock, deletes it if it is still the very content judged stale, and
removes the token. The others keep waiting and then compete for the new lock file as usual, so
two waiters never both delete a lock (one of them the other's fresh one). A waiter killed
between creating and removing its token leaves it behind; the next waiter removes a token
whose creator is provably dead, and otherwise waits names it.

Known limit, shared with Hudi's own provider: a live writer that holds the lock past the
expiry may be taken over. That is caught where it matters: the holder's :meth:`is_held`
re-reads the file and fails once it is no longer ours (or once our own lock has expired), and
the commit path calls ``check_held()`` right before completing an instant.

The lock file must be created atomically by the storage itself. On a store without
conditional writes (opened with ``assume_locked_creates=True``, which trusts a *lock* to make
creates safe) the lock file would be a check-then-write, so two writers could both hold it:
the provider refuses such a store with :class:`ConfigError` at construction.

Errors: :class:`ConfigError` for a store without atomic creates; storage errors pass through
(``OSError``); a lock found taken over is reported by ``check_held()`` as ``LockLostError``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import logging
import time
from typing import Callable

from airflow_hudi_occ.core.config import FS_LOCK_PATH, LOCK_PROVIDER, LockConfig
from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.format.storage import Storage
from airflow_hudi_occ.core.concurrency.locks.base import LockHolder, LockProvider, encode_lock_key, parse_owner_id
from airflow_hudi_occ.core.concurrency.process_identity import ProcessIdentity

log = logging.getLogger(__name__)

LOCK_FILE_NAME = "lock"
#: waits between attempts to take the lock: they double from the first to the cap. Measured
#: with 4 processes committing to the same keys (bench/peers.py, overlapping): a 20 ms cap
#: gave more conflicts and a longer run than this one in 3 runs of 3. A writer napping while
#: another finishes its begin -> write -> commit is backoff, and backoff is what OCC needs.
MIN_POLL_S = 0.01
MAX_POLL_S = 0.2
#: a lock file judged held by a live process is not read again for this long while it stays
#: the same file (inode and modification time): a waiter polls every 10-200 ms, and a pid check
#: per poll would cost more than the wait it saves
RECHECK_HOLDER_S = 1.0
TAKEOVER_TOKEN_INFIX = ".takeover-"


def lock_file_name(lock_key: str | None) -> str:
    return LOCK_FILE_NAME if not lock_key else f"{LOCK_FILE_NAME}.{encode_lock_key(lock_key)}"


def _identity(doc: dict) -> ProcessIdentity | None:
    """The holder's process as the lock file records it (older files: from the owner id)."""
    host, pid = doc.get("host"), doc.get("pid")
    if not (isinstance(host, str) and isinstance(pid, int)):
        host, pid = parse_owner_id(doc.get("owner") if isinstance(doc.get("owner"), str) else None)
    if not host or pid is None:
        return None
    started = doc.get("pid_started_at")
    namespace = doc.get("pid_namespace")
    return ProcessIdentity(host, pid, float(started) if isinstance(started, (int, float)) else None,
                           str(namespace) if namespace is not None else None)


def _parse(data: bytes) -> dict:
    """The lock file's fields; {} for a file written by someone else (e.g. Java Hudi)."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


class FileSystemBasedLockProvider(LockProvider):
    provider_name = "filesystem"

    def __init__(self, config: LockConfig, *, base_path: str, table_name: str = "",
                 storage: Storage | None = None, lock_key: str | None = None,
                 wall_clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        if config.fs_path:
            options = storage.storage_options if storage is not None else None
            self.storage = Storage(config.fs_path, options)
            lock_dir = self.storage.root
        else:
            self.storage = storage if storage is not None else Storage(base_path)
            lock_dir = self.storage.path(".hoodie")
        if not self.storage.atomic_creates:
            raise ConfigError(
                f"the filesystem lock provider cannot lock on '{self.storage.protocol}' storage "
                f"({self.storage.base_uri}): it has no atomic create-if-absent, so taking the lock "
                "would be a check-then-write and two writers could both hold it",
                key=LOCK_PROVIDER.key, value=config.provider,
                remedy=f"set {LOCK_PROVIDER.key} to zookeeper (writers in several processes or "
                       "hosts) or inprocess (writers in one process), or point "
                       f"{FS_LOCK_PATH.key} at local storage or S3")
        self.lock_key = lock_key
        self.lock_path = f"{lock_dir.rstrip('/')}/{lock_file_name(lock_key)}"
        self.expire_minutes = max(0, int(config.fs_expire_minutes))
        self._wall_clock = wall_clock
        self._monotonic = monotonic
        self._sleep = sleep
        self._acquired_monotonic: float | None = None
        #: ((inode, mtime_ns), when) of the lock file last judged held by a live process
        self._judged: tuple[tuple, float] | None = None
        name = self.lock_path if self.storage.is_local else f"{self.storage.protocol}://{self.lock_path.lstrip('/')}"
        super().__init__(name=name)

    # -- acquire ---------------------------------------------------------------------------

    def _content(self) -> bytes:
        me = ProcessIdentity.current()
        return json.dumps({
            "owner": self.owner,
            "host": me.host,
            "pid": me.pid,
            "pid_started_at": me.started_at,
            "pid_namespace": me.pid_namespace,
            "acquired_at_ms": int(self._wall_clock() * 1000),
            "expire_minutes": self.expire_minutes,
        }, sort_keys=True).encode("utf-8")

    def _try_acquire(self, timeout_s: float) -> bool:
        deadline = self._monotonic() + timeout_s
        local = self.storage.is_local
        delay = MIN_POLL_S
        reported = False
        while True:
            if not (local and self._known_live()):
                try:
                    self.storage.create_if_absent(self.lock_path, self._content(), durable=False)
                except FileExistsError:
                    if self._take_over_if_stale():
                        continue  # compete for the file again at once
                else:
                    self._acquired_monotonic = self._monotonic()
                    return True
            if not reported:
                reported = True
                self._busy()
            remaining = deadline - self._monotonic()
            if remaining <= 0:
                return False
            self._sleep(min(delay, remaining))
            delay = min(delay * 2, MAX_POLL_S)

    def _stat_key(self) -> tuple | None:
        try:
            st = os.stat(self.lock_path)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns

    def _known_live(self) -> bool:
        """One ``stat`` instead of an attempt on a local disk: an attempt writes, links and
        unlinks a temporary copy of the lock file, then reads it and checks its holder. While
        the file is the one last judged live (same inode and mtime), judged less than
        :data:`RECHECK_HOLDER_S` ago and too young to expire, that work is skipped."""
        judged = self._judged
        if judged is None or self._monotonic() - judged[1] > RECHECK_HOLDER_S:
            return False
        try:
            st = os.stat(self.lock_path)
        except FileNotFoundError:
            return False
        if (st.st_ino, st.st_mtime_ns) != judged[0]:
            return False
        return self.expire_minutes <= 0 or self._wall_clock() - st.st_mtime <= self.expire_minutes * 60

    def _age_s(self, data: bytes) -> float | None:
        """Seconds since the lock was last known alive, or None if the file is gone."""
        try:
            newest = self.storage.mtime(self.lock_path)
        except FileNotFoundError:
            return None
        acquired_ms = _parse(data).get("acquired_at_ms")
        if isinstance(acquired_ms, (int, float)):
            newest = max(newest, acquired_ms / 1000.0)
        return self._wall_clock() - newest

    def _stale_reason(self, data: bytes) -> str | None:
        """Why the lock file holding ``data`` may be taken over, or None while it may not."""
        doc = _parse(data)
        identity = _identity(doc)
        if identity is not None and identity.alive() is False:
            return (f"its holder, pid {identity.pid} on {identity.host}, is no longer running "
                    "(it died without releasing the lock)")
        if self.expire_minutes <= 0:
            return None
        age = self._age_s(data)
        if age is None or age <= self.expire_minutes * 60:
            return None
        return (f"it is {age:.0f}s old, past hoodie.write.lock.filesystem.expire "
                f"({self.expire_minutes} min)")

    def _take_over_if_stale(self) -> bool:
        """Delete the lock file if it is stale, as the one waiter holding the takeover token
        for it; True if the file is gone now (compete for it again)."""
        key = self._stat_key() if self.storage.is_local else None
        try:
            data = self.storage.read(self.lock_path)
        except FileNotFoundError:
            return True
        why = self._stale_reason(data)
        if why is None:
            if key is not None:
                self._judged = (key, self._monotonic())
            return False
        token = f"{self.lock_path}{TAKEOVER_TOKEN_INFIX}{hashlib.sha256(data).hexdigest()[:16]}"
        try:
            self.storage.create_if_absent(token, self._content(), durable=False)
        except FileExistsError:
            self._clear_dead_token(token)
            return False  # another waiter is taking it over: wait for its lock, then compete
        try:
            # Delete only the very lock judged stale: it is never re-created with the same
            # content (the owner id is unique), and no other waiter deletes it meanwhile.
            try:
                if self.storage.read(self.lock_path) != data:
                    return False
            except FileNotFoundError:
                return True
            log.warning("taking over lock %s from %s: %s", self.name,
                        self._holder_of(data).describe(self._wall_clock()), why)
            self.storage.delete(self.lock_path)
            return True
        finally:
            self.storage.delete(token)

    def _clear_dead_token(self, token: str) -> None:
        """A takeover token whose creator died before removing it would block the takeover
        for good: remove it (only that very token) once its creator is provably gone."""
        try:
            data = self.storage.read(token)
        except FileNotFoundError:
            return
        identity = _identity(_parse(data))
        if identity is None or identity.alive() is not False:
            return
        try:
            if self.storage.read(token) == data:
                log.warning("removing takeover token %s left by pid %s on %s, which died",
                            token, identity.pid, identity.host)
                self.storage.delete(token)
        except FileNotFoundError:
            pass

    def _holder_of(self, data: bytes) -> LockHolder:
        doc = _parse(data)
        owner = str(doc.get("owner") or "unknown (lock file without owner)")
        identity = _identity(doc)
        acquired_ms = doc.get("acquired_at_ms")
        acquired_at = acquired_ms / 1000.0 if isinstance(acquired_ms, (int, float)) else None
        if acquired_at is None:
            try:
                acquired_at = self.storage.mtime(self.lock_path)
            except FileNotFoundError:
                pass
        return LockHolder(self.provider_name, owner, identity.host if identity else None,
                          identity.pid if identity else None, acquired_at)

    # -- held --------------------------------------------------------------------------------

    def _read_owner(self) -> str | None:
        return _parse(self.storage.read(self.lock_path)).get("owner")

    def _validity(self) -> str | None:
        try:
            owner = self._read_owner()
        except FileNotFoundError:
            reason = f"lock file {self.lock_path} was deleted"
            self._mark_lost(reason)
            return reason
        except OSError as e:  # cannot prove we hold it; maybe we still do
            return f"cannot read lock file {self.lock_path}: {e}"
        if owner != self.owner:
            reason = f"lock file {self.lock_path} now belongs to {owner or 'another writer'}"
            self._mark_lost(reason)
            return reason
        if self.expire_minutes > 0 and self._acquired_monotonic is not None:
            held_s = self._monotonic() - self._acquired_monotonic
            if held_s > self.expire_minutes * 60:
                reason = (f"held for {held_s:.0f}s, past hoodie.write.lock.filesystem.expire "
                          f"({self.expire_minutes} min): other writers may take it over")
                self._mark_lost(reason)
                return reason
        return None

    def _release(self) -> None:
        try:
            owner = self._read_owner()
        except FileNotFoundError:
            log.warning("lock file %s vanished before %s released it", self.lock_path, self.owner)
            return
        finally:
            self._acquired_monotonic = None
        if owner != self.owner:
            # Someone took it over after expiry: their lock, not ours to delete.
            log.warning("not deleting %s: it now belongs to %s, not %s", self.lock_path, owner,
                        self.owner)
            return
        self.storage.delete(self.lock_path)

    def current_owner(self) -> str | None:
        holder = self.holder()
        return None if holder is None else holder.owner

    def holder(self) -> LockHolder | None:
        """The lock file's holder, and (``stale``) why the next writer would take it over: a
        ``kill -9``ed holder still "holds" the file, and saying only who would send the reader
        after a process that is gone."""
        try:
            data = self.storage.read(self.lock_path)
        except FileNotFoundError:
            return None
        return dataclasses.replace(self._holder_of(data), stale=self._stale_reason(data))
