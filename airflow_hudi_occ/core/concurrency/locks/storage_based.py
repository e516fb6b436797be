"""Hudi's StorageBasedLockProvider (RFC-91): a renewed lease in one JSON file on the table's storage.

Why a lease and not a lock file that is created and deleted: on an object store a writer that
dies leaves its file behind, and only time can tell the others that it is gone. Hudi 1.0.2+
therefore keeps ``<base>/.hoodie/.locks/table_lock.json`` holding
``{"expired": false, "validUntil": <epoch ms>, "owner": "<id>"}``; the holder renews
``validUntil`` every ``hoodie.write.lock.storage.renew.interval.secs`` (30) by
``validity.timeout.secs`` (300) from now, and releases by writing ``"expired": true``. Every
write of the file is conditional on the version the writer read (S3: ``If-Match`` on the
ETag, ``If-None-Match: *`` for the first one), so of two waiters that saw the same expired
lease only one replaces it. Because the file, its place and its fields are Hudi's, a Java
writer with ``StorageBasedLockProvider`` and ours exclude each other on the same S3 table.

Per-key locks (``lock_key``, an extension of ours for per-file-group locks) live beside it as
``table_lock.<encoded key>.json``.

Clocks: a waiter treats a lease as free once its own clock is past ``validUntil`` plus
500 ms (Hudi's ``CLOCK_DRIFT_BUFFER_MS``); the holder stops trusting its own lease 500 ms
*before* ``validUntil``, by its wall clock and by its monotonic clock since it last wrote the
lease (a stall longer than the validity, a VM frozen and its clock stepped back, is caught by
either), so with clocks within 500 ms of each other there is never a moment when both believe
they hold it. That is why ``check_held`` answers from what the holder knows, as Hudi's
``StorageBasedLockProvider`` does (``isLockStillValid`` on its own last lease, no read): a
storage request under the table lock costs every writer of the table its latency (issue 43),
and a re-read would prove only what the clocks already prove. A lease rewritten by someone
else is noticed by the renewer's conditional write (``If-Match`` fails: the loss is reported
and ``check_held`` raises from then on); a takeover is named by one read on the way out.

Requests: an uncontended acquire of a lease this process released last is one conditional
write (the version of its release is remembered: no read first); a release is one.

Waiting: a writer that finds the lease held joins a waiting line beside it
(``waiting_line.py``: a ticket per waiter, oldest first). The first waiter reads the lease at
10 ms, then twice as long after each read up to :data:`FRONT_POLL_S` (it takes the lease
next; each pause is a gap in which nobody holds the lock); the second reads it every
``FRONT_POLL_S`` too (it is first as soon as the first takes the lease: it was every 1 s, and
a commit's first hold, about 0.1 s, was over before it knew), to take a lease the first leaves
free for ``HANDOFF_S``; the next :data:`READERS_AHEAD` - 1 read it every
:data:`NEAR_POLL_S` (0.5 s), so each learns from the lease's owner that a waiter ahead took the
lock and moves up without listing the line (with only two readers the line ran dry between
turns: at 8 writers the lock lay free a third of the time with writers waiting), and takes a
lease left free for ``HANDOFF_S`` times its place; the others read nothing but the line, every
``LISTING_S``. Pauses are jittered by a quarter either way. Why: every read is a request every
other writer of the table pays for at the store and in CPU. At 32 writers on the scale bench
each waiter read the lease, and those that had waited longest more often (the lease has no
queue: without favouring them the p99 writer waited past the lock's bound), so waiters made
about 185 of a commit's 351 requests and the holder's own requests queued behind them
(docs/benchmarks.md, "Scale"). When the store refuses a ticket the waiter reads the lease as
Hudi's provider does, from 10 ms up to the 1 s cap, more often the longer it has waited (the cap
divided by ``1 + waited / 10 s``, down to 100 ms).

Errors: :class:`ConfigError` for settings Hudi refuses (validity under 10 s or under ten
renewal intervals) and for a backend without conditional overwrites; storage errors while
waiting are reported as the reason of the failed attempt (``last_failure``), not raised.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from typing import Callable

from airflow_hudi_occ.core.config import (
    LOCK_PROVIDER,
    STORAGE_LOCK_RENEW_S,
    STORAGE_LOCK_VALIDITY_S,
    LockConfig,
)
from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.format.storage import Storage
from airflow_hudi_occ.core.format.versioned import (
    VersionConflictError,
    put_if_version,
    read_versioned,
    supports_versioned_writes,
)
from airflow_hudi_occ.core.concurrency.locks.base import LockProvider, encode_lock_key
from airflow_hudi_occ.core.concurrency.locks.waiting_line import HANDOFF_S, LISTING_S, WaitingLine, waiters

log = logging.getLogger(__name__)

LOCKS_FOLDER = ".hoodie/.locks"
TABLE_LOCK_FILE = "table_lock.json"
#: Hudi's CLOCK_DRIFT_BUFFER_MS: how far two writers' clocks may disagree
CLOCK_DRIFT_MS = 500
MIN_POLL_S = 0.01

#: lease file -> the version of the expired lease this process's last release wrote there: the
#: next acquire in this process (any provider object: a transaction makes its own) tries it
#: first, one conditional write and no read, and reads only when someone wrote since
_RELEASED: dict[str, str] = {}
_RELEASED_LOCK = threading.Lock()
#: the fastest an aged waiter reads the lease (see the module doc, "Waiting")
AGED_POLL_S = 0.1
#: waiting this long halves a waiter's pause between reads (twice as long: a third, ...)
AGING_S = 10.0
#: each pause is its nominal length times a factor in this range
JITTER = (0.75, 1.25)
#: the longest pause of the first waiter in the line between its reads of the lease: it is
#: the one that takes the lease next, and every pause is a gap in which nobody holds the lock
FRONT_POLL_S = 0.2
#: the waiters this far from the front (and nearer) read the lease: each learns from the
#: lease's owner that a waiter ahead took the lock, and so moves up, without listing the line
READERS_AHEAD = 3
#: ... those behind the first two read it this often
NEAR_POLL_S = 0.5


def lock_file_name(lock_key: str | None) -> str:
    return TABLE_LOCK_FILE if not lock_key else f"table_lock.{encode_lock_key(lock_key)}.json"


def encode_lease(*, expired: bool, valid_until_ms: int, owner: str) -> bytes:
    """The lease as Hudi's ``StorageLockData`` serialises it (Jackson, field order kept)."""
    return json.dumps({"expired": expired, "validUntil": int(valid_until_ms), "owner": owner},
                      separators=(",", ":")).encode("utf-8")


def decode_lease(data: bytes) -> dict | None:
    """The lease's fields, or None when the file is not a lease Hudi could read either."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("expired"), bool) \
            or not isinstance(doc.get("validUntil"), int) or not isinstance(doc.get("owner"), str):
        return None
    return doc


def check_storage_lock_settings(config: LockConfig) -> None:
    """Hudi's own checks (``StorageBasedLockConfig``), so a config both sides accept."""
    validity, renew = config.storage_validity_s, config.storage_renew_s
    problem = None
    if renew < 1:
        problem = f"{STORAGE_LOCK_RENEW_S.key}={renew} is under 1 second"
    elif validity < 10:
        problem = f"{STORAGE_LOCK_VALIDITY_S.key}={validity} is under 10 seconds"
    elif validity < 10 * renew:
        problem = (f"{STORAGE_LOCK_VALIDITY_S.key}={validity} is under ten times "
                   f"{STORAGE_LOCK_RENEW_S.key}={renew}")
    if problem:
        raise ConfigError(f"invalid storage lock settings: {problem}", key=STORAGE_LOCK_VALIDITY_S.key,
                          value=validity,
                          remedy=f"keep {STORAGE_LOCK_VALIDITY_S.key} >= 10 and >= 10 x "
                                 f"{STORAGE_LOCK_RENEW_S.key} (Hudi's defaults: 300 and 30)")


class StorageBasedLockProvider(LockProvider):
    provider_name = "storage"
    acquired_on_table_storage = True

    def __init__(self, config: LockConfig, *, base_path: str, table_name: str = "",
                 storage: Storage | None = None, lock_key: str | None = None,
                 wall_clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        check_storage_lock_settings(config)
        self.storage = storage if storage is not None else Storage(base_path)
        if not supports_versioned_writes(self.storage):
            raise ConfigError(
                f"the storage lock provider cannot lock on '{self.storage.protocol}' storage "
                f"({self.storage.base_uri}): it needs conditional overwrites (S3 If-Match)",
                key=LOCK_PROVIDER.key, value=config.provider,
                remedy=f"set {LOCK_PROVIDER.key} to zookeeper, or keep the table on S3 or local storage")
        self.lock_key = lock_key
        self.lock_path = self.storage.path(LOCKS_FOLDER, lock_file_name(lock_key))
        self.validity_ms = int(config.storage_validity_s) * 1000
        self.renew_s = float(config.storage_renew_s)
        self._wall_ms = lambda: int(wall_clock() * 1000)
        self._monotonic = monotonic
        self._sleep = sleep
        #: the longest pause between two reads of a held lease (Hudi's 1 s by default)
        self.poll_cap_s = max(MIN_POLL_S, config.wait_time_ms_between_retry / 1000.0)
        #: monotonic time this provider began to wait for the lease (None: not waiting); kept
        #: across the manager's attempts, so the aging counts the whole wait
        self._waiting_since: float | None = None
        #: this waiter's ticket in the line (None: not waiting, or the store refused one)
        self._line: WaitingLine | None = None
        self._line_refused = False
        #: the lease's owner at the last read that found it held; when a second waiter first
        #: found it free
        self._holder_seen: str | None = None
        self._free_seen_at: float | None = None
        self._io = threading.Lock()  # one conditional write at a time (renewer vs caller)
        self._version: str | None = None
        self._valid_until_ms = 0
        #: monotonic time of the last lease write of ours (acquire or renewal)
        self._written_at = 0.0
        self._stop: threading.Event | None = None
        self._renewer: threading.Thread | None = None
        name = self.lock_path if self.storage.is_local else \
            f"{self.storage.protocol}://{self.lock_path.lstrip('/')}"
        super().__init__(name=name)

    # -- acquire -----------------------------------------------------------------------------

    def _try_acquire(self, timeout_s: float) -> bool:
        now = self._monotonic()
        deadline = now + timeout_s
        if self._waiting_since is None:
            self._waiting_since = now
        delay = MIN_POLL_S
        while True:
            if self._reads_lease() and self._attempt():
                # the ticket goes at release, not now: a request now would be one more in the
                # hold of every commit that waited (the others know the holder's ticket)
                self._waiting_since = None
                self._start_renewer()
                return True
            now = self._monotonic()
            remaining = deadline - now
            if remaining <= 0:
                return False
            cap = self._line_step()
            if cap is None:  # no line (the store refused a ticket): Hudi's way, with aging
                cap = self.poll_cap(now - self._waiting_since)
            # the one that takes the lease next reads soon after its first try, those behind
            # it at their steady pace
            ramps = self._line is None or self._line.ahead == 0
            pause = min(delay, cap) if ramps else cap
            self._sleep(min(pause * random.uniform(*JITTER), remaining))
            delay = min(pause * 2, cap)

    # -- the waiting line (waiting_line.py) ---------------------------------------------------

    def _reads_lease(self) -> bool:
        """The first :data:`READERS_AHEAD` + 1 in the line read the lease (the first to take
        it; the others to move up when it names one ahead, and to take a lease left free
        too long); the others only list the line."""
        return self._line is None or self._line.ahead <= READERS_AHEAD

    def _line_step(self) -> float | None:
        """Join the line after the first failed attempt, list it when due, keep the ticket
        alive; the longest pause before the next step for this place in the line (None: no
        line, wait as Hudi does)."""
        if self._line is None:
            if self._line_refused:
                return None
            line = WaitingLine(self.storage, self.lock_path, self.owner,
                               wall_clock=lambda: self._wall_ms() / 1000.0, monotonic=self._monotonic)
            try:
                line.join()
            except OSError as e:
                log.info("cannot join the waiting line of %s (%s): waiting by reading the lease", self.name, e)
                self._line_refused = True
                return None
            self._line = line
        try:
            if self._line.due():
                self._line.refresh(self._holder_seen)
            self._line.keep_alive()
        except OSError as e:  # the line orders, it does not decide: wait on what we know
            self.last_failure = f"cannot list the waiting line {self._line.folder}: {e}"
        if self._line.ahead >= 2:
            self._busy()  # the manager's "still waiting" lines
        ahead = self._line.ahead
        return FRONT_POLL_S if ahead <= 1 else NEAR_POLL_S if ahead <= READERS_AHEAD else LISTING_S

    def _leave_line(self, *, in_background: bool = False) -> None:
        line, self._line = self._line, None
        self._free_seen_at = None
        if line is None or line.ticket is None:
            return
        if in_background:  # not a request on the writer's way: it goes on with its commit
            threading.Thread(target=line.leave, daemon=True, name="storage-lock-leave-line").start()
        else:
            line.leave()

    def waiting(self) -> int | None:
        """The live tickets in the waiting line but ours (one listing); waiters in their first
        attempt, and Java's provider (it takes no ticket), are not seen."""
        return waiters(self.storage, self.lock_path, self.owner)

    def end_wait(self) -> None:
        """The manager gave up: leave the line, and the next wait starts afresh."""
        self._waiting_since = None
        self._leave_line()

    def poll_cap(self, waited_s: float) -> float:
        """The longest pause between reads after waiting ``waited_s`` (see "Waiting" above)."""
        aged = self.poll_cap_s / (1.0 + max(0.0, waited_s) / AGING_S)
        return max(min(AGED_POLL_S, self.poll_cap_s), aged)

    def _read(self) -> tuple[dict | None, bytes | None, str | None]:
        """(lease, raw bytes, version); all None when there is no lock file."""
        try:
            data, version = read_versioned(self.storage, self.lock_path)
        except FileNotFoundError:
            return None, None, None
        return decode_lease(data), data, version

    def _free(self, lease: dict | None, raw: bytes | None) -> bool:
        if raw is None:
            return True
        if lease is None:
            self.last_failure = (f"{self.lock_path} is not a lease Hudi writes "
                                 f"({raw[:80]!r}); delete it if no writer is running")
            return False
        return lease["expired"] or self._wall_ms() > lease["validUntil"] + CLOCK_DRIFT_MS

    def _attempt(self) -> bool:
        with _RELEASED_LOCK:
            released = _RELEASED.pop(self.name, None)
        if released is not None and self._write_lease(released):
            return True  # the lease we expired last was still ours to take: no read needed
        try:
            lease, raw, version = self._read()
        except OSError as e:  # cannot tell who holds it: not ours, try again later
            self.last_failure = f"cannot read {self.lock_path}: {e}"
            return False
        if not self._free(lease, raw):
            self._holder_seen = lease["owner"] if lease else None
            self._free_seen_at = None
            if self._line is not None and self._holder_seen:
                self._line.holder_seen(self._holder_seen)
            self._busy()  # held: the manager logs the wait (once, then every 30 s)
            return False
        if self._line is not None and self._line.ahead > 0:
            # free, but another waiter is ahead: its turn, unless it leaves the lease free
            now = self._monotonic()
            if self._free_seen_at is None:
                self._free_seen_at = now
            if now - self._free_seen_at < HANDOFF_S * self._line.ahead:  # the k-th back: k handoffs
                return False
        if lease is not None and not lease["expired"]:
            log.warning("taking over the lapsed lease %s of %s (valid until %d, now %d)",
                        self.name, lease["owner"], lease["validUntil"], self._wall_ms())
        return self._write_lease(version)

    def _write_lease(self, version: str | None) -> bool:
        """Take the lease at ``version`` (None: no file yet); False if someone wrote it first."""
        written_at = self._monotonic()
        valid_until = self._wall_ms() + self.validity_ms
        try:
            with self._io:
                self._version = put_if_version(
                    self.storage, self.lock_path,
                    encode_lease(expired=False, valid_until_ms=valid_until, owner=self.owner), version)
                self._valid_until_ms, self._written_at = valid_until, written_at
        except VersionConflictError:
            return False  # another waiter won the same lease
        except OSError as e:
            self.last_failure = f"cannot write {self.lock_path}: {e}"
            return False
        return True

    # -- renewal -----------------------------------------------------------------------------

    def _start_renewer(self) -> None:
        stop = threading.Event()
        self._stop = stop
        self._renewer = threading.Thread(target=self._renew_loop, args=(stop,), daemon=True,
                                         name=f"storage-lock-renewer-{self.owner[-12:]}")
        self._renewer.start()

    def _renew_loop(self, stop: threading.Event) -> None:
        while not stop.wait(self.renew_s):
            if not self._renew(stop):
                return

    def _renew(self, stop: threading.Event) -> bool:
        """Extend the lease; False once it is gone for good (then the loss is reported)."""
        with self._io:
            if stop.is_set() or self._version is None:
                return False
            written_at = self._monotonic()
            valid_until = self._wall_ms() + self.validity_ms
            try:
                self._version = put_if_version(
                    self.storage, self.lock_path,
                    encode_lease(expired=False, valid_until_ms=valid_until, owner=self.owner),
                    self._version)
                self._valid_until_ms, self._written_at = valid_until, written_at
                return True
            except VersionConflictError:
                reason = f"lease {self.lock_path} was rewritten by another writer"
            except OSError as e:  # transient, perhaps: the lease lasts ten renewals
                log.warning("could not renew %s (%s); retrying in %.0fs", self.name, e, self.renew_s)
                return True
        self._mark_lost(reason)
        return False

    def _stop_renewer(self) -> None:
        if self._stop is not None:
            self._stop.set()
        if self._renewer is not None and self._renewer is not threading.current_thread():
            self._renewer.join(timeout=max(5.0, self.renew_s))
        self._stop = self._renewer = None

    # -- held --------------------------------------------------------------------------------

    def _validity(self) -> str | None:
        """None while the lease is ours by both clocks (no storage request: see the module
        doc); else why not, the current owner named by one read."""
        with self._io:
            version, valid_until = self._version, self._valid_until_ms
            if version is None:
                return "not acquired"
            now = self._wall_ms()
            held_ms = int((self._monotonic() - self._written_at) * 1000)
            if now <= valid_until - CLOCK_DRIFT_MS and held_ms <= self.validity_ms - CLOCK_DRIFT_MS:
                return None
            reason = (f"lease {self.lock_path} ran out at {valid_until} (now {now}, "
                      f"{held_ms} ms since it was last written): renewals failed or stalled, so "
                      "another writer may have taken it over")
        try:
            lease, raw, current = self._read()
            if current != version:
                reason += (f"; it now belongs to "
                           f"{(lease or {}).get('owner') or 'nobody (deleted)'}")
        except OSError:  # the reason above stands
            pass
        self._mark_lost(reason)
        return reason

    def _release(self) -> None:
        self._stop_renewer()
        with self._io:
            version, self._version = self._version, None
            if version is None:
                return
            try:
                released = put_if_version(
                    self.storage, self.lock_path,
                    encode_lease(expired=True, valid_until_ms=self._valid_until_ms, owner=self.owner),
                    version)
                with _RELEASED_LOCK:
                    _RELEASED[self.name] = released
            except VersionConflictError:
                # Taken over after our lease lapsed: theirs now, not ours to expire.
                log.warning("not expiring %s: it was rewritten by another writer", self.name)
        self._leave_line(in_background=True)

    def _mark_lost(self, reason: str) -> None:
        if self._stop is not None:
            self._stop.set()
        super()._mark_lost(reason)

    def current_owner(self) -> str | None:
        try:
            lease, raw, _ = self._read()
        except OSError:
            return None
        if raw is None or self._free(lease, raw):
            return None
        return lease["owner"] if lease else "unknown (not a Hudi lease)"

    def close(self) -> None:
        super().close()
        self._stop_renewer()
        self._leave_line()


__all__ = ["StorageBasedLockProvider", "decode_lease", "encode_lease", "lock_file_name",
           "check_storage_lock_settings", "TABLE_LOCK_FILE", "LOCKS_FOLDER", "CLOCK_DRIFT_MS"]
