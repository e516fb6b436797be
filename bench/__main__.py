"""``python -m bench [--quick] [--only NAME[,NAME]] [--json PATH] [--dir DIR]``"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

from .common import exit_on_sigterm
from .runner import BENCHMARKS, format_table, run_all, write_json

DEFAULT_JSON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out", "results.json")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=(
        "Benchmarks of airflow_hudi_occ. Every figure is a ratio against a baseline measured "
        "in the same run (or Hudi's published number, marked as such)."))
    ap.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    ap.add_argument("--only", action="append", metavar="NAME",
                    help="run only these benchmarks (repeat or comma-separate): "
                         + ", ".join(BENCHMARKS))
    ap.add_argument("--json", metavar="PATH", default=DEFAULT_JSON,
                    help="where to write every figure as JSON (default: bench/out/results.json)")
    ap.add_argument("--dir", metavar="DIR", default=None,
                    help="where to build the benchmark tables (default: /dev/shm if present, "
                         "else the system temp dir)")
    ap.add_argument("-q", "--silent", action="store_true", help="no progress lines on stderr")
    args = ap.parse_args(argv)
    exit_on_sigterm()
    only = [n.strip() for arg in (args.only or []) for n in arg.split(",") if n.strip()] or None

    # The library warns about every early conflict it finds and kazoo about every dropped
    # connection; the benchmarks provoke both on purpose (sanity checks, server shutdown).
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    t0 = time.perf_counter()

    def log(msg: str) -> None:
        if not args.silent:
            print(f"[{time.perf_counter() - t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

    result = run_all(quick=args.quick, only=only, base_dir=args.dir, log=log)
    run = result["run"]
    print(f"airflow_hudi_occ bench ({'quick' if run['quick'] else 'full'}): tables on "
          f"{run['storage']}, file lock on {run['storage_fsync_bound']}; python {run['python']}, "
          f"{run['cpus']} cpus, {run['duration_s']:.1f}s")
    print("ratio = value / baseline; the baseline is measured in this run unless it says "
          "'published'.\n")
    print(format_table(result["figures"]))
    for err in result["errors"]:
        print(f"\nERROR in {err['benchmark']}: {err['error']}\n{err['traceback']}", file=sys.stderr)
    if args.json:
        write_json(result, args.json)
        print(f"\nfigures written to {os.path.relpath(args.json)}")
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
