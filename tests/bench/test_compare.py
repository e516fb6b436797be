"""bench/compare.py: one benchmark run alternately against this tree's package and REF's, from a
temporary git worktree that is removed afterwards. Structure only (house rule: timings are
measured in bench/, never asserted): each tree really imported its own package, every figure
has a median of each tree's rounds and the paired ratios, the rounds alternated."""

from __future__ import annotations

import importlib
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def compare(*args, tmp_path):
    return subprocess.run([sys.executable, "-m", "bench.compare", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_a_quick_benchmark_against_head_from_a_removed_worktree(tmp_path):
    out = tmp_path / "compare.json"
    r = compare("fs_lock", "--against", "HEAD", "--json", str(out), "--", "--quick", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(out.read_text())
    after, before = res["imported_from"]["after"], res["imported_from"]["before"]
    # this tree's package as copied at the start; REF's from the worktree
    assert after.endswith(os.sep + os.path.join("shim-after", "airflow_hudi_occ"))
    assert before.endswith(os.sep + os.path.join("before", "airflow_hudi_occ"))
    assert os.path.dirname(os.path.dirname(after)) == os.path.dirname(os.path.dirname(before))
    assert not os.path.exists(before) and not os.path.exists(after)  # the worktree and copy are gone
    listed = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=ROOT, capture_output=True,
                            text=True).stdout
    assert os.path.dirname(before) not in listed
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert res["before"]["commit"] == head
    names = set(importlib.import_module("bench.fs_lock").figure_names(quick=True))
    assert {f["name"] for f in res["figures"]} == names
    for f in res["figures"]:
        assert len(f["before_values"]) == len(f["after_values"]) == 3
        assert f["before"] == statistics.median(f["before_values"])
        pairs = [a / b for a, b in zip(f["after_values"], f["before_values"])]
        assert f["after_over_before"] == statistics.median(pairs)
    # alternating, the order flipped each round: after, before; before, after; after, before
    order = [line.split(", ")[1].split(":")[0] for line in r.stderr.splitlines() if "/3, " in line]
    assert order == ["after", "before", "before", "after", "after", "before"]
    assert "after/before" in r.stdout


def test_fewer_than_three_rounds_or_an_unknown_ref_is_refused_before_anything_runs(tmp_path):
    r = compare("fs_lock", "--against", "HEAD", "--rounds", "2", tmp_path=tmp_path)
    assert r.returncode != 0 and "at least 3" in r.stderr
    r = compare("fs_lock", "--against", "no-such-ref-xyz", tmp_path=tmp_path)
    assert r.returncode != 0 and "no-such-ref-xyz: not a commit" in r.stderr
    assert "round 1" not in r.stderr
