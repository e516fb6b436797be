"""Writer heartbeats: how other processes tell a slow writer from a dead one.

A heartbeat is the empty file ``.hoodie/.heartbeat/<instant>``; its modification time is the
last beat. A background thread rewrites it every ``hoodie.client.heartbeat.interval_in_ms``.
The writer is dead once its beat is older than interval x ``tolerable.misses``; a missing file
counts as dead. Lazy rollback, early conflict detection and the CLI all ask :func:`is_expired`.

A stopped heartbeat is never restarted for the same instant (Hudi's rule): once a writer has
stopped beating, others may have started rolling it back.

The writer itself checks :meth:`Heartbeat.check_alive` before committing, because a process
paused longer than the expiry (GC, SIGSTOP, a laptop lid) may already have been rolled back.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from airflow_hudi_occ.core.config import HeartbeatConfig
from airflow_hudi_occ.core.errors import HeartbeatExpiredError, InstantStateError


def heartbeat_path(table, instant_time: str) -> str:
    return table.storage.path(".hoodie", ".heartbeat", instant_time)


def last_beat(table, instant_time: str) -> float | None:
    """Epoch seconds of the last beat, or None if there is no heartbeat file."""
    try:
        return table.storage.mtime(heartbeat_path(table, instant_time))
    except FileNotFoundError:
        return None


def is_expired(table, instant_time: str, config: HeartbeatConfig, *,
               now: float | None = None) -> bool:
    beat = last_beat(table, instant_time)
    if beat is None:
        return True
    now = time.time() if now is None else now
    return (now - beat) * 1000 > config.expiry_ms


def heartbeat_age_s(table, instant_time: str, *, now: float | None = None) -> float | None:
    beat = last_beat(table, instant_time)
    if beat is None:
        return None
    return (time.time() if now is None else now) - beat


def delete_heartbeat(table, instant_time: str) -> None:
    table.storage.delete(heartbeat_path(table, instant_time))


def list_heartbeats(table) -> list[str]:
    return sorted(n for n in table.storage.list_names(table.heartbeat_dir) if n.isdigit())


class Heartbeat:
    """The heartbeat of one instant, beaten by a daemon thread while the write runs."""

    def __init__(self, table, instant_time: str, config: HeartbeatConfig | None = None, *,
                 clock: Callable[[], float] = time.time):
        self.table = table
        self.instant_time = instant_time
        self.config = config or HeartbeatConfig()
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._last_own_beat: float | None = None
        self.beat_errors = 0
        self.lapsed = False

    def start(self) -> "Heartbeat":
        if self._stopped:
            raise InstantStateError(f"the heartbeat of {self.instant_time} was stopped and cannot "
                                    "be restarted", instant=self.instant_time,
                                    remedy="start a new instant")
        if self._thread is not None:
            return self
        self.beat()
        self._thread = threading.Thread(target=self._run, name=f"hudi-heartbeat-{self.instant_time}",
                                        daemon=True)
        self._thread.start()
        return self

    def beat(self) -> None:
        now = self._clock()
        if self._last_own_beat is not None and (now - self._last_own_beat) * 1000 > self.config.expiry_ms:
            # We were paused past expiry: others may have judged us dead in between, so a
            # fresh beat must not resurrect this instant.
            self.lapsed = True
        self.table.storage.touch(heartbeat_path(self.table, self.instant_time))
        self._last_own_beat = now

    def _run(self) -> None:
        interval = self.config.interval_ms / 1000.0
        while not self._stop.wait(interval):
            try:
                self.beat()
            except Exception:  # storage hiccup: the next beat may succeed; expiry is the judge
                self.beat_errors += 1

    def stop(self, *, delete: bool = True) -> None:
        self._stopped = True
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        if delete:
            delete_heartbeat(self.table, self.instant_time)

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._stopped

    def check_alive(self) -> None:
        """Raise HeartbeatExpiredError if others may consider this writer dead."""
        if self.lapsed or (self._last_own_beat is not None and
                           (self._clock() - self._last_own_beat) * 1000 > self.config.expiry_ms) \
                or is_expired(self.table, self.instant_time, self.config, now=self._clock()):
            raise HeartbeatExpiredError(
                f"the heartbeat of instant {self.instant_time} expired (older than "
                f"{self.config.expiry_ms} ms); another writer may roll it back",
                instant=self.instant_time)
