"""Hudi's FileSystemBasedLockProvider: a lock file created only if absent.

The lock is ``<hoodie.write.lock.filesystem.path or <base>/.hoodie>/lock`` (per-key locks:
``lock.<encoded key>``), created with :meth:`Storage.create_if_absent`, so exactly one writer
can create it; it holds ``{"owner", "acquired_at_ms", "expire_minutes"}``. Java Hudi writers
create the same file with ``create(overwrite=false)``, so the two exclude each other.

Expiry (``hoodie.write.lock.filesystem.expire`` minutes, 0 = never) exists because a writer
killed with SIGKILL never deletes its lock file; without expiry, the table would stay locked
until someone deletes it by hand. A waiter that finds the file older than that (by the newer
of its modification time and its ``acquired_at_ms``, so that both clocks must agree it is
stale) deletes it and competes to create it again.

Known limits, shared with Hudi's own provider: taking over an expired lock is a
read-compare-delete, not one atomic step; and a live writer that holds the lock past the
expiry may be taken over. Both are caught where it matters: the holder's :meth:`is_held`
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

import json
import logging
import time
from typing import Callable

from airflow_hudi_occ.core.config import FS_LOCK_PATH, LOCK_PROVIDER, LockConfig
from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.format.storage import Storage
from airflow_hudi_occ.core.concurrency.locks.base import LockProvider, encode_lock_key

log = logging.getLogger(__name__)

LOCK_FILE_NAME = "lock"
#: waits between attempts to create the lock file: they double from the first to the cap. A
#: commit holds the lock for milliseconds, so on a local disk (an attempt is one ``open``) a
#: waiter polls often: a waiter asleep for 200 ms leaves the lock idle for most of that time
#: while other writers queue. An object store bills and throttles requests, so it backs off.
MIN_POLL_S = 0.01
MAX_POLL_S = 0.2
MIN_POLL_LOCAL_S = 0.001
MAX_POLL_LOCAL_S = 0.02


def lock_file_name(lock_key: str | None) -> str:
    return LOCK_FILE_NAME if not lock_key else f"{LOCK_FILE_NAME}.{encode_lock_key(lock_key)}"


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
        name = self.lock_path if self.storage.is_local else f"{self.storage.protocol}://{self.lock_path.lstrip('/')}"
        super().__init__(name=name)

    # -- acquire ---------------------------------------------------------------------------

    def _content(self) -> bytes:
        return json.dumps({
            "owner": self.owner,
            "acquired_at_ms": int(self._wall_clock() * 1000),
            "expire_minutes": self.expire_minutes,
        }, sort_keys=True).encode("utf-8")

    def _try_acquire(self, timeout_s: float) -> bool:
        deadline = self._monotonic() + timeout_s
        local = self.storage.is_local
        delay, cap = (MIN_POLL_LOCAL_S, MAX_POLL_LOCAL_S) if local else (MIN_POLL_S, MAX_POLL_S)
        while True:
            try:
                self.storage.create_if_absent(self.lock_path, self._content(), durable=False)
            except FileExistsError:
                if self._break_if_expired():
                    continue  # compete for the file again at once
            else:
                self._acquired_monotonic = self._monotonic()
                return True
            remaining = deadline - self._monotonic()
            if remaining <= 0:
                return False
            self._sleep(min(delay, remaining))
            delay = min(delay * 2, cap)

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

    def _break_if_expired(self) -> bool:
        """Delete a lock file older than the expiry; True if the file is gone now."""
        try:
            data = self.storage.read(self.lock_path)
        except FileNotFoundError:
            return True
        if self.expire_minutes <= 0:
            return False
        age = self._age_s(data)
        if age is None:
            return True
        if age <= self.expire_minutes * 60:
            return False
        # Delete only the very lock we judged stale: if its owner released it and another
        # writer re-created it since our read, the content differs and it is left alone.
        try:
            if self.storage.read(self.lock_path) != data:
                return False
        except FileNotFoundError:
            return True
        log.warning("taking over expired lock %s (owner %s, %.0fs old, expire %d min)",
                    self.name, _parse(data).get("owner", "unknown"), age, self.expire_minutes)
        self.storage.delete(self.lock_path)
        return True

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
        try:
            data = self.storage.read(self.lock_path)
        except FileNotFoundError:
            return None
        return _parse(data).get("owner") or "unknown (lock file without owner)"
