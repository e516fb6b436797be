"""The benchmark suite runs and reports consistent figures (``python -m bench --quick``).

Structure and sanity only: every declared figure is present, finite and positive, and its
ratio is computed from the value and baseline stored beside it. Timings are never asserted
(house rule: speed is measured in bench/, not asserted in tests), so neither is any verdict.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import shutil

import pytest

from bench import BENCHMARKS, run_all
from bench.__main__ import main
from bench.runner import format_table, to_json
from airflow_hudi_occ.testing.zookeeper import ZOOKEEPER_JAR

HAVE_ZOOKEEPER = os.path.exists(ZOOKEEPER_JAR) and shutil.which("java") is not None
# the Spark benchmark (about 45 s even quick: a session, then every write path) and the Java
# metadata-table one (three Java Hudi JVMs) run with --slow; the Spark engine's paths are
# tested in tests/spark, the metadata-table rules in tests/interop/test_java_metadata_table.py;
# the catalog sync one starts a Hive Metastore (about 20 s), tested in tests/core/catalog
SLOW_BENCHMARKS = ("spark_write", "java_metadata_table", "catalog_sync")
SELECTED = [n for n in BENCHMARKS if (n != "zk_lock" or HAVE_ZOOKEEPER)
            and (n not in SLOW_BENCHMARKS or os.environ.get("HUDI_OCC_SLOW") == "1")]


@pytest.fixture(scope="module")
def quick_run():
    # default places: tmpfs for the tables (building them on a slow disk takes longer than
    # the whole quick run), the system temp dir for the fsync-bound file lock
    return run_all(quick=True, only=SELECTED)


def expected_names() -> set[str]:
    names = set()
    for n in SELECTED:
        names |= set(importlib.import_module(BENCHMARKS[n]).figure_names(quick=True))
    return names


def test_every_benchmark_ran_without_error(quick_run):
    assert quick_run["errors"] == [], [e["traceback"] for e in quick_run["errors"]]
    assert quick_run["run"]["quick"] is True
    assert quick_run["run"]["benchmarks"] == SELECTED


def test_every_declared_figure_is_present_once(quick_run):
    names = [f.name for f in quick_run["figures"]]
    assert len(names) == len(set(names))
    assert set(names) == expected_names()
    assert {f.benchmark for f in quick_run["figures"]} == set(SELECTED)


def test_figures_are_finite_positive_and_ratios_come_from_the_same_run(quick_run):
    for f in quick_run["figures"]:
        assert f.unit in ("ms", "requests"), f.name
        assert math.isfinite(f.value) and f.value >= 0, f.name
        assert math.isfinite(f.baseline_value) and f.baseline_value > 0, f.name
        assert math.isfinite(f.ratio) and f.ratio >= 0, f.name
        assert f.ratio == pytest.approx(f.value / f.baseline_value, rel=1e-12), f.name
        assert f.verdict in ("ok", "MISS", "info"), f.name
        assert (f.verdict == "info") == (f.target is None), f.name
        if f.target is not None:
            # headline figures: a real measurement on both sides (never a zero)
            assert f.value > 0 and f.target > 0, f.name
        if f.baseline_published:
            assert f.baseline_value == 179.0 and "RFC-56" in f.details["source"], f.name


def test_headline_values_share_their_run_measurements(quick_run):
    by_name = {f.name: f for f in quick_run["figures"]}
    # the RFC-56 comparison and the floor comparison divide the same measured value
    for label in ("1500", "10k"):
        for kind in ("simple_check", "async_cold", "async_warm"):
            a = by_name[f"ecd.{label}.{kind}.vs_rfc56"]
            b = by_name[f"ecd.{label}.{kind}.vs_floor"]
            assert a.value == b.value
            assert b.details["floor"]["median_ms"] == pytest.approx(b.baseline_value, abs=1e-6)
            assert a.details["sanity_conflict_detected"] == {"simple": True, "async": True}
    commit = by_name["commit.latency.2000_vs_100"]
    samples = commit.details["latency_ms"]
    assert len(samples["100"]) == len(samples["2000"]) == commit.details["runs"]
    assert commit.details["breakdown_median_ms"]["2000"]["timeline_load"] > 0


def test_json_and_table_carry_every_figure(quick_run, tmp_path):
    doc = json.loads(json.dumps(to_json(quick_run)))
    assert len(doc["figures"]) == len(quick_run["figures"])
    for f in doc["figures"]:
        for key in ("name", "value", "baseline", "baseline_value", "ratio", "target", "verdict"):
            assert key in f
        assert f["ratio"] == pytest.approx(f["value"] / f["baseline_value"], rel=1e-12)
    table = format_table(quick_run["figures"])
    for f in quick_run["figures"]:
        assert f.name in table


def test_command_line_writes_json(tmp_path, capsys):
    out = tmp_path / "results.json"
    assert main(["--quick", "--only", "fs_lock", "--json", str(out), "--dir", str(tmp_path),
                 "--silent"]) == 0
    doc = json.loads(out.read_text())
    declared = importlib.import_module("bench.fs_lock").figure_names(quick=True)
    assert [f["name"] for f in doc["figures"]] == declared
    printed = capsys.readouterr().out
    assert "fs.lock.acquire_release.vs_bare" in printed and "verdict" in printed


def test_unknown_benchmark_is_refused():
    with pytest.raises(SystemExit):
        run_all(quick=True, only=["nope"])
