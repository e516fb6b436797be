"""What every benchmark shares: the :class:`Figure` record, timing helpers, work directories.

House rule: speed is measured, not timed. A figure is never a bare number; it is a ratio of
something this library does to a baseline measured in the same run on the same machine and
storage (a bare kazoo lock loop, ``os.listdir`` over the same folders, the same commit on a
short timeline) or, where the comparison is with Apache Hudi itself, to Hudi's published
number, named as such. ``ratio`` is always ``value / baseline_value``, computed here from the
two numbers stored beside it, so a reader of ``results.json`` can check it.

Timing: ``time.perf_counter`` around each call, warm-up calls first, the median of the
samples reported (the minimum and p90 are kept in ``details``). Nothing here is asserted by a
test; the smoke test checks only that the figures exist and are consistent.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator


@dataclass
class Figure:
    """One measured value against one baseline from the same run."""

    name: str
    benchmark: str
    description: str
    value: float
    unit: str
    baseline: str
    baseline_value: float
    #: "max" means the ratio should be at most ``target``; None means informational only
    target: float | None = None
    #: True when the baseline is a published figure rather than a measurement of this run
    baseline_published: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        if self.baseline_value == 0:
            return math.inf
        return self.value / self.baseline_value

    @property
    def verdict(self) -> str:
        if self.target is None:
            return "info"
        return "ok" if self.ratio <= self.target else "MISS"

    @property
    def target_text(self) -> str:
        return "-" if self.target is None else f"<= {self.target:g}"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ratio"] = self.ratio
        out["verdict"] = self.verdict
        out["target_text"] = self.target_text
        return out


# --- timing ----------------------------------------------------------------------------------


@dataclass
class Samples:
    """Per-call durations in seconds."""

    seconds: list[float]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.seconds) * 1000.0

    @property
    def min_ms(self) -> float:
        return min(self.seconds) * 1000.0

    @property
    def p90_ms(self) -> float:
        s = sorted(self.seconds)
        return s[min(len(s) - 1, int(round(0.9 * (len(s) - 1))))] * 1000.0

    def summary(self) -> dict[str, float]:
        return {"n": len(self.seconds), "median_ms": round(self.median_ms, 6),
                "min_ms": round(self.min_ms, 6), "p90_ms": round(self.p90_ms, 6)}


def exit_on_sigterm() -> None:
    """A bench stopped with SIGTERM (kill, a timeout) leaves through its context managers, so
    the S3 servers, proxies and writer processes it started stop with it (a plain SIGTERM
    would leave them running)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def sample(fn: Callable[[], Any], *, n: int, warmup: int = 3,
           setup: Callable[[], Any] | None = None) -> Samples:
    """Call ``fn`` ``warmup`` times untimed, then ``n`` times timed one by one.

    ``setup`` (untimed) runs before every call, for measurements that need a cold state.
    """
    for _ in range(warmup):
        if setup is not None:
            setup()
        fn()
    out = []
    for _ in range(n):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return Samples(out)


def sample_pair(ours: Callable[[], Any], base: Callable[[], Any], *, n: int, warmup: int = 3,
                blocks: int = 5, setup_ours: Callable[[], Any] | None = None,
                setup_base: Callable[[], Any] | None = None) -> tuple[Samples, Samples]:
    """Sample two functions in alternating blocks, so that drift (page cache, CPU frequency,
    a noisy neighbour) hits both alike instead of whichever happened to run second."""
    blocks = max(1, min(blocks, n))
    per = [n // blocks + (1 if i < n % blocks else 0) for i in range(blocks)]
    a: list[float] = []
    b: list[float] = []
    for i, k in enumerate(per):
        w = warmup if i == 0 else 1
        a += sample(ours, n=k, warmup=w, setup=setup_ours).seconds
        b += sample(base, n=k, warmup=w, setup=setup_base).seconds
    return Samples(a), Samples(b)


# --- where the tables live ----------------------------------------------------------------------


def default_base_dir() -> str | None:
    """tmpfs when there is one, else the system temp dir.

    Building the large cases means creating 100,000 marker files and 30,000 timeline files;
    on a journaling disk of a small VM that alone takes minutes (about 1 ms per create here).
    Reads, which are what the figures measure, come from the page cache on either, and every
    baseline is measured on the same storage as the figure it divides. ``--dir`` overrides.
    """
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        return shm
    return None


def fs_type(path: str) -> str:
    """The file system type of ``path`` (from /proc/mounts), for the run header."""
    try:
        real = os.path.realpath(path)
        best, kind = "", "unknown"
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 3:
                    continue
                mount = parts[1]
                inside = real == mount or real.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best):
                    best, kind = parts[1], parts[2]
        return kind
    except OSError:
        return "unknown"


def describe_dir(path: str | None) -> str:
    """``"<fs type> (<dir>)"`` of where a benchmark builds its files (None: the temp dir)."""
    where = path or tempfile.gettempdir()
    return f"{fs_type(where)} ({where})"


@contextlib.contextmanager
def work_dir(base: str | None, name: str) -> Iterator[str]:
    d = tempfile.mkdtemp(prefix=f"hudi-occ-bench-{name}-", dir=base)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def fmt_ms(ms: float) -> str:
    if not math.isfinite(ms):
        return str(ms)
    if ms >= 100:
        return f"{ms:.0f} ms"
    if ms >= 10:
        return f"{ms:.1f} ms"
    if ms >= 1:
        return f"{ms:.2f} ms"
    if ms >= 0.01:
        return f"{ms:.3f} ms"
    return f"{ms * 1000:.2f} us"


def fmt_value(value: float, unit: str) -> str:
    return fmt_ms(value) if unit == "ms" else f"{value:g} {unit}"
