"""``python -m bench.compare --against REF BENCH [-- ARGS]``: this tree's figures against REF's.

Why: a change must not slow what it did not mean to touch (issue 41 item 4: honoring Hudi's
options must not slow the defaults). The question is "is this package slower than the one at
REF", so everything else is held equal: the SAME benchmark code (this tree's ``bench/``) runs
against each tree's ``airflow_hudi_occ``, in the same call, on the same machine, alternately.

How: REF is checked out into a temporary ``git worktree`` (removed at the end). Each source tree
gets a shim directory holding only its ``airflow_hudi_occ`` (REF's: a link into the worktree;
this tree's: a copy taken at the start, uncommitted changes included); a run puts
the shim first on ``PYTHONPATH`` and this tree's root after it (for ``bench``), with
``PYTHONSAFEPATH=1`` so that no process (the benchmark, its workers started with ``-m`` from
this tree's root, Spark's Python workers) puts a working directory with another package
before it. Before the runs, each tree is asked which package it imports, and the call stops
if it is not the one meant.

``BENCH`` is a name of ``python -m bench`` (``peers``, ``mor``, ...: run as ``python -m bench
--only BENCH``) or ``same_spark`` (``bench.same_spark`` under the PySpark 3.5 bench venv, its
arguments after ``--``). ``--rounds`` whole runs per tree (3 by default), the trees alternating
with the order flipped every round (after, before; before, after; ...) so a drift of the
machine's speed falls on both. One run at a time: each is a whole benchmark process.

Printed per figure: the median over the rounds of each tree's value (the benchmark's own
median of its repetitions), ``after/before`` = the median of the per-round ratios (paired, as
the rounds alternate) with their range, and each tree's ratio to the benchmark's in-run
baseline (a peer measured in the same process: the change cannot move it, so it shows the
machine's drift). Everything goes to ``bench/out/compare-BENCH.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "airflow_hudi_occ"


def worktree_add(ref: str, where: str) -> str:
    """REF checked out (detached) at ``where``; returns the commit it resolved to."""
    found = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=ROOT,
                           capture_output=True, text=True)
    if found.returncode != 0:
        raise SystemExit(f"--against {ref}: not a commit of this repository (git rev-parse found none)")
    commit = found.stdout.strip()
    subprocess.run(["git", "worktree", "add", "--detach", "--quiet", where, commit], cwd=ROOT,
                   check=True)
    return commit


def worktree_remove(where: str) -> None:
    subprocess.run(["git", "worktree", "remove", "--force", where], cwd=ROOT, check=False)
    subprocess.run(["git", "worktree", "prune"], cwd=ROOT, check=False)


def shim(tree: str, where: str, *, copy: bool = False) -> str:
    """A directory holding only ``airflow_hudi_occ``: a link to ``tree``'s package, or with
    ``copy`` a copy of it taken now (this tree's package is frozen at the start, so an edit
    made while the rounds run does not reach half of them)."""
    os.makedirs(where)
    src, dst = os.path.join(tree, PACKAGE), os.path.join(where, PACKAGE)
    if copy:
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        os.symlink(src, dst)
    return where


def env_for(shim_dir: str, python: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([shim_dir, str(ROOT)]), "PYTHONSAFEPATH": "1",
           "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python}
    env.pop("SPARK_HOME", None)
    return env


def imported_from(python: str, env: dict, cwd: str) -> tuple[str, str]:
    """Where ``python`` under ``env`` imports the package and ``bench`` from."""
    out = subprocess.run([python, "-c", f"import {PACKAGE}, bench; print({PACKAGE}.__file__); "
                          "print(bench.__file__)"], env=env, cwd=cwd, check=True, capture_output=True,
                         text=True).stdout.split()
    return os.path.realpath(out[0]), os.path.realpath(out[1])


def command(bench: str, python: str, json_path: str, extra: list[str]) -> list[str]:
    if bench == "same_spark":
        return [python, "-m", "bench.same_spark", "--json", json_path, *extra]
    return [python, "-m", "bench", "--only", bench, "--json", json_path, "-q", *extra]


def figures_of(bench: str, json_path: str) -> dict[str, dict]:
    """name -> {"value", "baseline"} in seconds or the benchmark's unit."""
    data = json.loads(Path(json_path).read_text())
    if data.get("errors"):
        raise RuntimeError(f"{bench} reported errors: {[e['error'] for e in data['errors']]}")
    out = {}
    for f in data["figures"]:
        if "value_ms" in f:  # bench.same_spark's records
            out[f["name"]] = {"value": f["value_ms"] / 1000, "baseline": f["baseline_ms"] / 1000,
                              "unit": "s", "baseline_name": f["baseline"]}
        else:
            out[f["name"]] = {"value": f["value"], "baseline": f["baseline_value"], "unit": f["unit"],
                              "baseline_name": f["baseline"]}
    return out


def summarize(runs: dict[str, list[dict]]) -> list[dict]:
    """Per figure: each tree's median, the paired after/before ratios, the in-run ratios."""
    names = [n for n in runs["after"][0] if all(n in r for tree in runs.values() for r in tree)]
    rows = []
    for n in names:
        a = [r[n]["value"] for r in runs["after"]]
        b = [r[n]["value"] for r in runs["before"]]
        pairs = [x / y for x, y in zip(a, b) if y]
        rows.append({
            "name": n, "unit": runs["after"][0][n]["unit"], "baseline_name": runs["after"][0][n]["baseline_name"],
            "before": statistics.median(b), "after": statistics.median(a),
            "after_over_before": statistics.median(pairs) if pairs else None,
            "pair_ratios": [round(p, 3) for p in pairs],
            "before_vs_baseline": statistics.median(r[n]["value"] / r[n]["baseline"] for r in runs["before"]),
            "after_vs_baseline": statistics.median(r[n]["value"] / r[n]["baseline"] for r in runs["after"]),
            "before_values": b, "after_values": a})
    return rows


def format_rows(rows: list[dict]) -> str:
    head = ("figure", "before", "after", "after/before", "pairs (min-max)", "vs baseline: before", "after")
    lines = [head]
    for r in rows:
        p = r["pair_ratios"]
        lines.append((r["name"], f"{r['before']:.4g} {r['unit']}", f"{r['after']:.4g} {r['unit']}",
                      f"{r['after_over_before']:.3f}", f"{min(p):.3f}-{max(p):.3f}",
                      f"{r['before_vs_baseline']:.3f}", f"{r['after_vs_baseline']:.3f}"))
    widths = [max(len(x[i]) for x in lines) for i in range(len(head))]
    out = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(x, widths)))
           for x in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    from .runner import BENCHMARKS
    ap = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("bench", choices=[*BENCHMARKS, "same_spark"])
    ap.add_argument("--against", required=True, metavar="REF", help="the git revision to compare with")
    ap.add_argument("--rounds", type=int, default=3, help="whole runs per tree (>= 3: medians)")
    ap.add_argument("--json", default=None, help="default: bench/out/compare-BENCH.json")
    args = ap.parse_args(argv)
    if args.rounds < 3:
        ap.error("--rounds must be at least 3 (a median of fewer says nothing about noise)")
    if args.bench == "same_spark":
        from .same_spark import load_setup
        python = load_setup()["python"]
    else:
        python = sys.executable
    json_out = args.json or str(ROOT / "bench" / "out" / f"compare-{args.bench}.json")
    t0 = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t0:7.1f}s] {msg}", file=sys.stderr, flush=True)

    tmp = tempfile.mkdtemp(prefix="hudi-occ-compare-")
    before_tree = os.path.join(tmp, "before")
    try:
        commit = worktree_add(args.against, before_tree)
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", PACKAGE],
                                    cwd=ROOT, capture_output=True, text=True).stdout.strip())
        trees = {"after": str(ROOT), "before": before_tree}
        envs, imports = {}, {}
        for label, tree in trees.items():
            where = shim(tree, os.path.join(tmp, f"shim-{label}"), copy=label == "after")
            envs[label] = env_for(where, python)
            pkg, bench = imported_from(python, envs[label], tmp)
            want = os.path.realpath(os.path.join(where, PACKAGE))
            if os.path.dirname(pkg) != want or not bench.startswith(str(ROOT / "bench") + os.sep):
                raise SystemExit(f"{label}: imports {pkg} and {bench}; expected {want} ({tree}'s "
                                 f"package) and {ROOT / 'bench'}")
            imports[label] = os.path.dirname(pkg)
            log(f"{label}: {PACKAGE} from {imports[label]}")
        runs: dict[str, list[dict]] = {"after": [], "before": []}
        for r in range(args.rounds):
            for label in (("after", "before") if r % 2 == 0 else ("before", "after")):
                out = os.path.join(tmp, f"{label}-{r}.json")
                cmd = command(args.bench, python, out, extra)
                log(f"round {r + 1}/{args.rounds}, {label}: {' '.join(cmd[1:])}")
                started = time.perf_counter()
                proc = subprocess.run(cmd, env=envs[label], cwd=tmp, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True)
                if proc.returncode != 0 or not os.path.exists(out):
                    raise SystemExit(f"{label} run failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
                runs[label].append(figures_of(args.bench, out))
                log(f"round {r + 1}, {label}: {time.perf_counter() - started:.0f}s")
        rows = summarize(runs)
        result = {"bench": args.bench, "args": extra, "rounds": args.rounds, "python": python,
                  "after": {"tree": str(ROOT), "commit": head, "uncommitted_package_changes": dirty},
                  "before": {"ref": args.against, "commit": commit}, "imported_from": imports,
                  "load_average_end": os.getloadavg(), "duration_s": round(time.perf_counter() - t0, 1),
                  "figures": rows}
        os.makedirs(os.path.dirname(os.path.abspath(json_out)), exist_ok=True)
        Path(json_out).write_text(json.dumps(result, indent=1))
        print(f"{args.bench}: after = {head[:10]}{' (+ uncommitted changes)' if dirty else ''}, "
              f"before = {args.against} ({commit[:10]}); {args.rounds} alternating rounds each, medians")
        print(format_rows(rows))
        print(f"figures written to {os.path.relpath(json_out)}")
        return 0
    finally:
        worktree_remove(before_tree)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
