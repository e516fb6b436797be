"""Instant times: 17-digit ``yyyyMMddHHmmssSSS`` milliseconds, unique across writers.

Uniqueness across processes comes from *where* a time is generated: under the table lock
(:meth:`InstantTimeGenerator.new_time` is called by the transaction while it holds the lock).
Two more rules close the remaining gaps, as in Hudi 1.x's ``WAIT_TO_ADJUST_SKEW`` generator:

- within a process, times strictly increase (at least 1 ms apart), even if the clock stalls
  or steps backwards;
- after reading the clock, the generator waits ``max_expected_clock_skew_ms`` before handing
  the time out, so that any time generated later, on any machine whose clock is within that
  skew, is larger (TrueTime-style commit wait).

The generator also never returns a time at or below the latest instant already on the timeline
(``floor``), which covers a clock that is behind the table's history.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from typing import Callable

FORMAT = "%Y%m%d%H%M%S"


def format_ms(epoch_ms: int) -> str:
    dt = datetime.fromtimestamp(epoch_ms / 1000.0, tz=timezone.utc)
    return dt.strftime(FORMAT) + f"{epoch_ms % 1000:03d}"


def parse_ms(instant_time: str) -> int:
    """Epoch milliseconds of a 17-digit (or legacy 14-digit, second precision) instant time."""
    if len(instant_time) == 14:
        instant_time += "000"
    if len(instant_time) != 17 or not instant_time.isdigit():
        raise ValueError(f"not an instant time: {instant_time!r}")
    dt = datetime.strptime(instant_time[:14], FORMAT).replace(tzinfo=timezone.utc)
    return int(dt.timestamp()) * 1000 + int(instant_time[14:])


class InstantTimeGenerator:
    """Strictly increasing instant times; ``clock`` and ``sleep`` are injectable for tests."""

    def __init__(self, max_clock_skew_ms: int = 200, *, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep):
        self.max_clock_skew_ms = max_clock_skew_ms
        self._clock = clock
        self._sleep = sleep
        self._last_ms = 0
        self._mutex = threading.Lock()

    def new_time(self, floor: str | None = None) -> str:
        """A new time greater than every time this generator gave and than ``floor``."""
        with self._mutex:
            now = int(self._clock() * 1000)
            candidate = max(now, self._last_ms + 1)
            if floor:
                candidate = max(candidate, parse_ms(floor) + 1)
            if self.max_clock_skew_ms > 0:
                self._sleep(self.max_clock_skew_ms / 1000.0)
            self._last_ms = candidate
            return format_ms(candidate)


_DEFAULT: dict[int, InstantTimeGenerator] = {}
_DEFAULT_LOCK = threading.Lock()


def process_generator(max_clock_skew_ms: int) -> InstantTimeGenerator:
    """One generator per process and skew setting, so times from every table object in this
    process are strictly increasing relative to each other."""
    with _DEFAULT_LOCK:
        gen = _DEFAULT.get(max_clock_skew_ms)
        if gen is None:
            gen = _DEFAULT[max_clock_skew_ms] = InstantTimeGenerator(max_clock_skew_ms)
        return gen
