"""The lock-provider contract and Hudi's client-side retry loop around it.

Hudi serialises the critical section of an optimistic-concurrency commit (conflict check,
then writing the completed instant) with one table-wide lock. A provider implements a
few primitives (:meth:`LockProvider._try_acquire`, :meth:`~LockProvider._release`,
:meth:`~LockProvider._validity`); the bookkeeping every provider must get the same way
(no re-entry, release-without-holding, loss notification) lives here once.

A held lock can stop being trustworthy without this process doing anything: a ZooKeeper
session expires, a file lock expires and is taken over. Callers must therefore call
:meth:`LockProvider.check_held` (or :meth:`LockManager.check_held`) immediately before the
action the lock protects; it raises :class:`LockLostError`, and the right reaction is to
abandon the commit (a retry with a fresh instant time may succeed).

Every wait is bounded and said out loud: :class:`LockManager` logs once when it starts
waiting (what for, who holds it, how long it will wait at most), then at most every
:data:`WAIT_LOG_INTERVAL_S`, not on every poll.

A wait need not be idle. On an object store every request made under the lock is paid by
every other writer, and what a commit reads there grows with the commits that land while it
waits (their metadata, their metadata-table logs: issue 43). ``locked(while_waiting=fn)``
runs ``fn`` in a thread of its own while the lock is held by someone else, first after
:data:`WAIT_WORK_INTERVAL_S` and then as often, so the caller can read those into its caches
and find them there once it holds the lock. The work only reads and only fills caches of
immutable things; it stops when the wait ends (a call under way finishes on its own, its
result unused), and its failures are logged, never raised: it saves requests, it decides
nothing.

Errors: :class:`LockReentryError` (acquire while held), :class:`LockNotHeldError` (release or
check without an acquire), :class:`LockLostError` (held but no longer valid),
:class:`LockAcquireTimeoutError` from :class:`LockManager` when every attempt failed because
someone else held the lock, :class:`LockServiceUnreachableError` when the lock service itself
did not answer on :data:`UNREACHABLE_ATTEMPTS` attempts in a row (a provider says so through
:attr:`LockProvider.unreachable`): waiting out the whole contention budget for a server that
is not there would only hide the cause.
Anything else a provider raises (for example, ZooKeeper refusing our credentials) is a
configuration problem that retrying will not fix, and is not retried.
"""

from __future__ import annotations

import abc
import contextlib
import logging
import os
import random
import socket
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass
from typing import Callable, Iterator

from airflow_hudi_occ.core.config import LockConfig
from airflow_hudi_occ.core.errors import (
    LockAcquireTimeoutError,
    LockError,
    LockLostError,
    LockNotHeldError,
    LockReentryError,
    LockServiceUnreachableError,
)

log = logging.getLogger(__name__)

LostListener = Callable[["LockProvider", str], None]

#: a wait is logged when it starts, then at most this often while it lasts
WAIT_LOG_INTERVAL_S = 30.0
#: attempts in a row on which the lock service did not answer before the manager gives up
UNREACHABLE_ATTEMPTS = 2
#: how often ``while_waiting`` runs during a wait (jittered by a quarter, so waiters that
#: began together do not read together): at 20-50 ms a request a call that finds nothing new
#: costs one listing; the longer the pause, the more of the commits landing meanwhile are left
#: to read under the lock (docs/benchmarks.md, "Scale")
WAIT_WORK_INTERVAL_S = 3.0


def make_owner_id() -> str:
    """host:pid:thread:uuid: enough to find the holder of a lock that is in the way."""
    return (f"{socket.gethostname()}:{os.getpid()}:{threading.current_thread().name}:"
            f"{uuid.uuid4().hex[:12]}")


def parse_owner_id(owner: str | None) -> tuple[str | None, int | None]:
    """``(host, pid)`` of an owner id made by :func:`make_owner_id`; ``(None, None)`` for an
    id written by someone else (a Java writer's Curator node, a hand-made file)."""
    parts = (owner or "").split(":")
    if len(parts) >= 4 and parts[1].isdigit():
        return parts[0] or None, int(parts[1])
    return None, None


@dataclass(frozen=True)
class LockHolder:
    """Who holds a lock, as far as its provider can tell: for wait logs, errors and the CLI."""

    provider: str
    owner: str
    host: str | None = None
    pid: int | None = None
    #: epoch seconds when the holder took the lock, when the provider records it
    acquired_at: float | None = None
    #: why the next writer takes this lock over instead of waiting (its holder is provably
    #: dead, or the lock expired), when the provider can tell; None: the holder counts as live
    stale: str | None = None

    @classmethod
    def from_owner(cls, provider: str, owner: str, acquired_at: float | None = None) -> "LockHolder":
        host, pid = parse_owner_id(owner)
        return cls(provider, owner, host, pid, acquired_at)

    def age_s(self, now: float | None = None) -> float | None:
        if self.acquired_at is None:
            return None
        return max(0.0, (time.time() if now is None else now) - self.acquired_at)

    def describe(self, now: float | None = None) -> str:
        who = (f"pid {self.pid} on {self.host}" if self.pid is not None and self.host
               else self.owner)
        age = self.age_s(now)
        return who + (f", taken {age:.0f}s ago" if age is not None else "")

    def to_dict(self, now: float | None = None) -> dict:
        age = self.age_s(now)
        return {"provider": self.provider, "owner": self.owner, "host": self.host,
                "pid": self.pid, "acquired_at": self.acquired_at,
                "age_s": None if age is None else round(age, 1), "stale": self.stale}


def encode_lock_key(key: str) -> str:
    """A per-key lock name that is one path component and differs for every distinct key.

    Percent-encoding (with ``%`` itself encoded) is injective, so ``a/b`` and ``a%2Fb`` never
    share a lock; ``=`` stays readable because Hive-style partitions are full of it.
    """
    return urllib.parse.quote(key, safe="=,")


def _holder_with_owner(holder: LockHolder | None) -> str:
    if holder is None:
        return "unknown"
    described = holder.describe()
    return described if described == holder.owner else f"{described}; owner {holder.owner}"


class LockProvider(abc.ABC):
    """One lock (a table, or one key of it) as seen by one writer.

    An instance is one contender: two writers that must exclude each other each use their own
    instance (even inside one process). Not re-entrant, as in Hudi.
    """

    #: short name used by :func:`~airflow_hudi_occ.core.concurrency.locks.get_lock_provider`
    provider_name: str = ""
    #: whether another process can see who holds the lock (False: the in-process lock)
    visible_to_other_processes: bool = True
    #: whether taking the lock is a request to the table's own storage (the storage lock's
    #: lease): a writer then sends its last request before the lock with it, both costing the
    #: same round trip; with a lock answered faster (ZooKeeper, a local file) that request
    #: would only be waited for inside the hold
    acquired_on_table_storage: bool = False

    def __init__(self, *, name: str, owner: str | None = None):
        self.name = name
        self.owner = owner or make_owner_id()
        #: why the last try_acquire failed without contention (connectivity), for error messages
        self.last_failure: str | None = None
        #: set by a provider when the last try_acquire failed because the lock service did not
        #: answer (not because the lock was held): ``(endpoint, cause)``
        self.unreachable: tuple[str, str] | None = None
        #: called (no arguments) by a provider when an attempt finds the lock held by another
        #: writer and starts to wait; :class:`LockManager` sets it to log the wait
        self.on_busy: Callable[[], None] | None = None
        self._state_lock = threading.RLock()
        self._held = False
        self._lost_reason: str | None = None
        self._listeners: list[LostListener] = []

    # -- primitives each provider implements ---------------------------------------------

    @abc.abstractmethod
    def _try_acquire(self, timeout_s: float) -> bool:
        """Try to become the holder within ``timeout_s`` (0 = one attempt, no waiting)."""

    @abc.abstractmethod
    def _release(self) -> None:
        """Give the lock up; called only after a successful acquire, also after a loss
        (then best effort: it must not raise because the lock is already gone)."""

    @abc.abstractmethod
    def _validity(self) -> str | None:
        """None while the held lock is still ours and trustworthy, else the reason it is not.

        A provider that finds the lock gone for good calls :meth:`_mark_lost` as well.
        """

    def current_owner(self) -> str | None:
        """Who holds the lock now, if the provider can tell (for error messages)."""
        return None

    def holder(self) -> LockHolder | None:
        """Who holds the lock now, with what the provider knows of the holder (host, pid,
        since when); None when it is free. Providers that record more override this."""
        owner = self.current_owner()
        return None if owner is None else LockHolder.from_owner(self.provider_name, owner)

    def waiting(self) -> int | None:
        """How many other writers wait for this lock now, or None when this provider cannot
        tell. Asked by the holder, to put off work that can wait while others queue behind it
        (the metadata table's compaction, ``core/commit/metadata_services``); it may cost a
        request."""
        return None

    def end_wait(self) -> None:
        """The manager gave up waiting (every attempt failed): forget what the wait kept (a
        place in a line). Providers that keep nothing between attempts need not override."""

    def _busy(self) -> None:
        """Providers call this when an attempt finds the lock held and starts waiting."""
        callback = self.on_busy
        if callback is not None:
            callback()

    def close(self) -> None:
        """Release (best effort) and free connections; the object may be reused afterwards."""
        with self._state_lock:
            if self._held:
                try:
                    self.release()
                except Exception:  # closing must not fail because the lock is unreachable
                    log.warning("could not release %s while closing", self.name, exc_info=True)

    # -- the contract ----------------------------------------------------------------------

    def try_acquire(self, timeout_s: float) -> bool:
        with self._state_lock:
            if self._held:
                raise LockReentryError(f"lock {self.name} is already held by this provider "
                                       f"(owner {self.owner})", lock=self.name, owner=self.owner)
        self.last_failure = None
        self.unreachable = None
        got = self._try_acquire(max(0.0, float(timeout_s)))
        if got:
            with self._state_lock:
                self._held = True
                self._lost_reason = None
        return got

    def release(self) -> None:
        with self._state_lock:
            if not self._held:
                raise LockNotHeldError(f"lock {self.name} is not held by {self.owner}",
                                       lock=self.name, owner=self.owner)
            try:
                self._release()
            finally:
                self._held = False
                self._lost_reason = None

    def is_held(self) -> bool:
        """Held by this object AND still valid right now (may ask the lock service)."""
        return self._invalid_reason() is None

    def check_held(self) -> None:
        """Raise unless the lock is held and valid; call it right before the guarded action."""
        reason = self._invalid_reason()
        if reason is None:
            return
        with self._state_lock:
            held = self._held
        if not held:
            raise LockNotHeldError(f"lock {self.name} is not held by {self.owner}",
                                   lock=self.name, owner=self.owner)
        raise LockLostError(f"lock {self.name} is no longer held by {self.owner}: {reason}",
                            lock=self.name, owner=self.owner)

    def add_lost_listener(self, callback: LostListener) -> None:
        """``callback(provider, reason)`` runs once per acquisition when the lock is lost for
        good, on whichever thread notices (a ZooKeeper event thread, or the caller of
        :meth:`is_held`). It must not block."""
        with self._state_lock:
            self._listeners.append(callback)

    def remove_lost_listener(self, callback: LostListener) -> None:
        with self._state_lock:
            if callback in self._listeners:
                self._listeners.remove(callback)

    # -- helpers for providers -------------------------------------------------------------

    @property
    def lost_reason(self) -> str | None:
        return self._lost_reason

    def _invalid_reason(self) -> str | None:
        with self._state_lock:
            if not self._held:
                return "not acquired"
            if self._lost_reason is not None:
                return self._lost_reason
        return self._validity()

    def _mark_lost(self, reason: str) -> None:
        """Record a permanent loss and tell the listeners (once per acquisition)."""
        with self._state_lock:
            if not self._held or self._lost_reason is not None:
                return
            self._lost_reason = reason
            listeners = list(self._listeners)
        log.warning("lock %s lost by %s: %s", self.name, self.owner, reason)
        for cb in listeners:
            try:
                cb(self, reason)
            except Exception:  # one bad listener must not hide the loss from the others
                log.exception("lock-lost listener %r failed", cb)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, owner={self.owner!r}, held={self._held})"


class LockManager:
    """Hudi's ``LockManager.lock()``: retry ``try_acquire`` a bounded number of times.

    Each attempt waits up to ``wait_time_ms`` inside the provider; between attempts the
    manager sleeps ``client_wait_time_ms_between_retry``. As in Hudi (``retryCount <=
    maxRetries``), ``client_num_retries`` counts retries AFTER the first attempt, so at most
    ``client_num_retries + 1`` attempts are made; :attr:`attempts_used` reports how many.
    ``sleep`` and ``clock`` are injectable so that tests need not wait.
    """

    def __init__(self, provider: LockProvider, config: LockConfig, *,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic):
        self.provider = provider
        self.config = config
        self._sleep = sleep
        self._clock = clock
        self.max_attempts = max(0, int(config.client_num_retries)) + 1
        self.attempts_used = 0
        self.waited_s = 0.0
        #: calls of the last acquire's ``while_waiting`` that finished before the lock was ours
        self.wait_work_done = 0

    @property
    def name(self) -> str:
        return self.provider.name

    @property
    def acquired_on_table_storage(self) -> bool:
        return self.provider.acquired_on_table_storage

    @property
    def bound_s(self) -> float:
        """The longest :meth:`acquire` waits for a held lock (every attempt and every pause)."""
        wait_s = max(0, self.config.wait_time_ms) / 1000.0
        between_s = max(0, self.config.client_wait_time_ms_between_retry) / 1000.0
        return self.max_attempts * wait_s + (self.max_attempts - 1) * between_s

    def _holder_text(self) -> str:
        try:
            holder = self.provider.holder()
        except Exception:  # who holds it is a detail; the wait itself must not fail over it
            return "an unknown holder"
        return holder.describe() if holder is not None else "nobody any more"

    def acquire(self, while_waiting: Callable[[], None] | None = None) -> None:
        """Take the lock (Hudi's retry loop); ``while_waiting``: work for the wait (see the
        module's docstring), run in a thread from the first time the lock is found held."""
        wait_s = max(0, self.config.wait_time_ms) / 1000.0
        between_s = max(0, self.config.client_wait_time_ms_between_retry) / 1000.0
        start = self._clock()
        self.attempts_used = 0
        logged_at: list[float] = []

        def report_wait() -> None:
            # once when the wait starts, then at most every WAIT_LOG_INTERVAL_S: a person
            # watching a stuck task learns what it waits for without a line per poll
            now = self._clock()
            if logged_at and now - logged_at[-1] < WAIT_LOG_INTERVAL_S:
                return
            if not logged_at:
                log.info("waiting for lock %s, held by %s; giving up after %.0fs "
                         "(hoodie.write.lock.wait_time_ms x (client.num_retries + 1) + pauses)",
                         self.name, self._holder_text(), self.bound_s)
            else:
                log.info("still waiting for lock %s after %.0fs (attempt %d of %d), held by %s",
                         self.name, now - start, self.attempts_used, self.max_attempts,
                         self._holder_text())
            logged_at.append(now)

        work = _WaitWork(while_waiting, self.name) if while_waiting is not None else None

        def on_busy() -> None:
            report_wait()
            if work is not None:
                work.start()

        unreachable_in_a_row = 0
        self.provider.on_busy = on_busy
        try:
            for attempt in range(1, self.max_attempts + 1):
                self.attempts_used = attempt
                if self.provider.try_acquire(wait_s):
                    self.waited_s = self._clock() - start
                    if logged_at:
                        log.info("got lock %s after waiting %.1fs", self.name, self.waited_s)
                    return
                if self.provider.unreachable is not None:
                    unreachable_in_a_row += 1
                    endpoint, cause = self.provider.unreachable
                    if unreachable_in_a_row >= UNREACHABLE_ATTEMPTS or attempt == self.max_attempts:
                        self._raise_unreachable(start, endpoint, cause)
                    log.warning("lock service for %s did not answer (%s); one more try in %.1fs",
                                self.name, cause, between_s)
                else:
                    unreachable_in_a_row = 0
                    report_wait()
                if attempt < self.max_attempts:
                    self._sleep(between_s)
        finally:
            self.provider.on_busy = None
            if work is not None:
                self.wait_work_done = work.stop()
        self.provider.end_wait()
        self.waited_s = self._clock() - start
        try:
            holder = self.provider.holder()
        except Exception:  # the error we are about to raise matters more than who holds it
            holder = None
        detail = f"; last attempt: {self.provider.last_failure}" if self.provider.last_failure else ""
        err = LockAcquireTimeoutError(
            f"could not acquire lock {self.name} after {self.attempts_used} attempts over "
            f"{self.waited_s:.1f}s (held by {_holder_with_owner(holder)}){detail}",
            lock=self.name, owner=holder.owner if holder else None)
        err.attempts = self.attempts_used
        err.waited_s = round(self.waited_s, 3)
        err.requested_by = self.provider.owner
        raise err

    def _raise_unreachable(self, start: float, endpoint: str, cause: str) -> None:
        self.provider.end_wait()
        self.waited_s = self._clock() - start
        err = LockServiceUnreachableError(
            f"lock service unreachable: {cause} (lock {self.name}; {self.attempts_used} "
            f"attempts over {self.waited_s:.1f}s); no other writer is known to hold the lock",
            lock=self.name, endpoint=endpoint, cause=cause)
        err.attempts = self.attempts_used
        err.waited_s = round(self.waited_s, 3)
        err.requested_by = self.provider.owner
        raise err

    def others_waiting(self) -> int | None:
        """The provider's :meth:`LockProvider.waiting`; None when it cannot tell or the
        question fails (what asks only puts work off, it must not fail the holder)."""
        try:
            return self.provider.waiting()
        except Exception as e:  # noqa: BLE001 - a hint, never a failure of the holder
            log.debug("could not count the waiters of %s: %s", self.name, e)
            return None

    def release(self) -> None:
        self.provider.release()

    def is_held(self) -> bool:
        return self.provider.is_held()

    def check_held(self) -> None:
        self.provider.check_held()

    def add_lost_listener(self, callback: LostListener) -> None:
        self.provider.add_lost_listener(callback)

    @contextlib.contextmanager
    def locked(self, while_waiting: Callable[[], None] | None = None, *,
               release_with: Callable[[Callable[[], None]], None] | None = None) -> Iterator["LockManager"]:
        """Hold the lock for the block; release it even when the block fails. ``while_waiting``:
        see :meth:`acquire`. ``release_with``: after a block that succeeded, called with the
        release instead of releasing, to send it beside work that needs neither the lock nor
        to wait for its release (the clean-up after a commit: one round trip, not two)."""
        self.acquire(while_waiting)
        try:
            yield self
        except BaseException:
            try:
                self.release()
            except LockError:  # never hide the block's own error behind a release problem
                log.warning("releasing %s after a failure also failed", self.name, exc_info=True)
            raise
        else:
            if release_with is not None:
                release_with(self.release)
            else:
                self.release()

    def close(self) -> None:
        self.provider.close()


class _WaitWork:
    """``while_waiting`` run in a daemon thread every :data:`WAIT_WORK_INTERVAL_S` (jittered)
    from :meth:`start` until :meth:`stop`; a failed call is logged and the next one tried."""

    def __init__(self, fn: Callable[[], None], lock_name: str):
        self._fn = fn
        self._lock_name = lock_name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._done = 0

    def start(self) -> None:
        if self._thread is not None or self._stop.is_set():
            return
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"lock-wait-work-{self._lock_name}")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(WAIT_WORK_INTERVAL_S * random.uniform(0.75, 1.25)):
            try:
                self._fn()
            except Exception as e:  # noqa: BLE001 - it only saves requests; the holder reads what it lacks
                log.debug("work while waiting for lock %s failed (the commit reads it under the lock): %s",
                          self._lock_name, e)
                continue
            if not self._stop.is_set():
                self._done += 1

    def stop(self) -> int:
        """Stop before the next call (one under way finishes on its own); how many finished."""
        self._stop.set()
        return self._done


__all__ = ["LockHolder", "LockProvider", "LockManager", "LostListener", "encode_lock_key", "make_owner_id",
           "parse_owner_id", "UNREACHABLE_ATTEMPTS", "WAIT_LOG_INTERVAL_S"]
