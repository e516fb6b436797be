"""Running the benchmarks, printing the table and writing the JSON.

A benchmark that fails does not hide the others: its error is recorded (and printed), the
rest still run, and the command exits non-zero.
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable

from .common import Figure, default_base_dir, describe_dir, fmt_value

#: name -> module, in the order they run
BENCHMARKS: dict[str, str] = {
    "early_conflict": "bench.early_conflict",
    "commit_latency": "bench.commit_latency",
    "zk_lock": "bench.zk_lock",
    "fs_lock": "bench.fs_lock",
    "spark_write": "bench.spark_write",
    "peers": "bench.peers",
    "mor": "bench.mor",
    "java_metadata_table": "bench.java_metadata_table",
    "metadata_listing": "bench.metadata_listing",
    "scale": "bench.scale",
    "catalog_sync": "bench.catalog_sync",
}


@dataclass
class Context:
    quick: bool = False
    base_dir: str | None = None
    log: Callable[[str], None] = field(default=lambda msg: None)

    #: the directory given with --dir, if any (then every benchmark uses it)
    explicit_dir: str | None = None

    @property
    def storage(self) -> str:
        return describe_dir(self.base_dir)

    @property
    def disk_dir(self) -> str | None:
        """Where a benchmark whose cost is durability (fsync) runs: the system temp dir,
        because fsync on tmpfs is free and would flatter it; --dir overrides."""
        return self.explicit_dir


def select(only: list[str] | None) -> list[str]:
    if not only:
        return list(BENCHMARKS)
    unknown = [n for n in only if n not in BENCHMARKS]
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {unknown}; choose from {list(BENCHMARKS)}")
    return [n for n in BENCHMARKS if n in only]


def run_all(*, quick: bool = False, only: list[str] | None = None, base_dir: str | None = None,
            log: Callable[[str], None] | None = None) -> dict:
    """Run the selected benchmarks; returns ``{"run": ..., "figures": [...], "errors": [...]}``
    with the :class:`Figure` objects (use :func:`to_json` for the JSON form)."""
    names = select(only)
    explicit = base_dir
    if base_dir is not None:
        os.makedirs(base_dir, exist_ok=True)
    else:
        base_dir = default_base_dir()
    ctx = Context(quick=quick, base_dir=base_dir, log=log or (lambda msg: None),
                  explicit_dir=explicit)
    figures: list[Figure] = []
    errors: list[dict] = []
    durations: dict[str, float] = {}
    started = time.time()
    for name in names:
        t0 = time.perf_counter()
        ctx.log(f"== {name}")
        try:
            module = importlib.import_module(BENCHMARKS[name])
            figures += module.run(ctx)
        except Exception as e:  # one broken benchmark must not hide the others' figures
            errors.append({"benchmark": name, "error": f"{type(e).__name__}: {e}",
                           "traceback": traceback.format_exc()})
            ctx.log(f"!! {name} failed: {type(e).__name__}: {e}")
        durations[name] = round(time.perf_counter() - t0, 3)
    return {
        "run": {
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
            "quick": quick,
            "benchmarks": names,
            "duration_s": round(time.time() - started, 3),
            "benchmark_duration_s": durations,
            "storage": ctx.storage,
            "storage_fsync_bound": describe_dir(ctx.disk_dir),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "figures": figures,
        "errors": errors,
    }


def to_json(result: dict) -> dict:
    return {**result, "figures": [f.to_json() for f in result["figures"]]}


def write_json(result: dict, path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(to_json(result), f, indent=2, sort_keys=False)
        f.write("\n")


def format_table(figures: list[Figure]) -> str:
    rows = [("name", "value", "baseline", "ratio", "target", "verdict")]
    for fig in figures:
        base = f"{fig.baseline} {fmt_value(fig.baseline_value, fig.unit)}"
        rows.append((fig.name, fmt_value(fig.value, fig.unit), base, f"{fig.ratio:.3f}",
                     fig.target_text, fig.verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for k, r in enumerate(rows):
        cells = [c.ljust(w) if i in (0, 2, 4, 5) else c.rjust(w)
                 for i, (c, w) in enumerate(zip(r, widths))]
        lines.append("  ".join(cells).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
