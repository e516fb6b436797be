"""Hudi's InProcessLockProvider: writers that share one Python process (threads).

One ``threading.Lock`` per (table base path, lock key) in a module-level registry, so any
two provider objects for the same table and key exclude each other, and nothing outside
this process is excluded at all: use it only when every writer of the table is a thread of
this process (tests, a single Airflow worker running several tasks as threads). The lock
cannot be lost while held.
"""

from __future__ import annotations

import os
import threading

from airflow_hudi_occ.core.config import LockConfig
from airflow_hudi_occ.core.format.storage import Storage
from airflow_hudi_occ.core.concurrency.locks.base import LockProvider


class _Slot:
    __slots__ = ("lock", "owner", "waiters")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: str | None = None
        self.waiters = 0  # threads blocked in _try_acquire (read without a lock: a hint)


_REGISTRY: dict[tuple[str, str], _Slot] = {}
_REGISTRY_LOCK = threading.Lock()


def _slot(base_path: str, key: str) -> _Slot:
    with _REGISTRY_LOCK:
        slot = _REGISTRY.get((base_path, key))
        if slot is None:
            slot = _REGISTRY[(base_path, key)] = _Slot()
        return slot


def _normalise(base_path: str) -> str:
    # "/t", "/t/" and "t" relative to the cwd are one table and must share one lock
    if "://" not in base_path:
        base_path = os.path.abspath(os.path.expanduser(base_path))
    return base_path.rstrip("/") or "/"


class InProcessLockProvider(LockProvider):
    provider_name = "inprocess"
    visible_to_other_processes = False

    def __init__(self, config: LockConfig, *, base_path: str, table_name: str = "",
                 storage: Storage | None = None, lock_key: str | None = None):
        self.base_path = _normalise(base_path)
        self.lock_key = lock_key or ""
        suffix = f"#{self.lock_key}" if self.lock_key else ""
        super().__init__(name=f"inprocess://{self.base_path}{suffix}")
        self._slot = _slot(self.base_path, self.lock_key)

    def _try_acquire(self, timeout_s: float) -> bool:
        got = self._slot.lock.acquire(blocking=False)
        if not got and timeout_s > 0:
            self._busy()  # held: the manager logs the wait and starts its work for it
            with _REGISTRY_LOCK:
                self._slot.waiters += 1
            try:
                got = self._slot.lock.acquire(timeout=timeout_s)
            finally:
                with _REGISTRY_LOCK:
                    self._slot.waiters -= 1
        if got:
            self._slot.owner = self.owner
        return got

    def _release(self) -> None:
        self._slot.owner = None
        self._slot.lock.release()

    def _validity(self) -> str | None:
        return None

    def current_owner(self) -> str | None:
        return self._slot.owner

    def waiting(self) -> int | None:
        return self._slot.waiters
