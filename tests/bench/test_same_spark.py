"""bench/same_spark.py (issue 31, item 2) runs end to end on its own Spark 3.5 venv and reports
every figure with a ratio from the same run, each table read back exactly. Timings are never
asserted (house rule). The run needs the bench set-up (scripts/install-spark35-bench.sh, which
scripts/bootstrap.sh runs for `scripts/test.sh --slow`) and Java Hudi: slow. Without the set-up it says which script to run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(args, **env):
    return subprocess.run([sys.executable, "-m", "bench.same_spark", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=3000,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def test_a_missing_set_up_names_the_install_script(tmp_path):
    out = _run(["--rows", "10"], HUDI_OCC_SPARK35_BENCH_DIR=str(tmp_path / "none"))
    assert out.returncode == 2
    assert "scripts/install-spark35-bench.sh" in out.stderr


@pytest.mark.slow
def test_a_tiny_run_reports_every_figure_from_exact_tables(tmp_path):
    rows = 2000
    out = _run(["--rows", str(rows), "--reps", "1", "--commits", "2", "--json", str(tmp_path / "r.json"),
                "--dir", str(tmp_path)])
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["run"]["spark"].startswith("3.5") and doc["run"]["rows"] == rows
    figs = {f["name"]: f for f in doc["figures"]}
    other = "bloom" if next(iter(f for f in doc["figures"] if "java_default_index" in f))[
        "java_default_index"] == "SIMPLE" else "simple"
    assert set(figs) == {
        "same_spark.bulk_insert.vs_java_hudi", "same_spark.bulk_insert.vs_java_hudi_same_codec",
        "same_spark.upsert.vs_java_hudi_same_codec", "same_spark.bulk_insert.vs_delta",
        "same_spark.bulk_insert.vs_df_write_parquet", "same_spark.bulk_insert.java_hudi_vs_df_write_parquet",
        "same_spark.bulk_insert.delta_vs_df_write_parquet", "same_spark.upsert.vs_java_hudi_default_index",
        f"same_spark.upsert.vs_java_hudi_{other}_index", "same_spark.upsert.vs_delta_merge",
        "same_spark.virtual_keys.bulk_insert.vs_df_write_parquet", "same_spark.virtual_keys.bulk_insert.vs_delta",
        "same_spark.doomed.time_to_stop.vs_java_hudi",
        "same_spark.small_commits.core_vs_java_hudi", "same_spark.small_commits.spark_vs_java_hudi"}
    for f in figs.values():
        assert f["value_ms"] > 0 and f["baseline_ms"] > 0, f["name"]
        assert f["ratio"] == pytest.approx(f["value_ms"] / f["baseline_ms"], abs=2e-3), f["name"]
        assert f["name"] in out.stdout
    # every Hudi table read by hudi-rs and by Java Hudi: every row, every key once
    bulk = figs["same_spark.bulk_insert.vs_java_hudi"]["reads"]
    assert bulk["ours"] == bulk["java"] == {k: rows for k in ("hudi_rs_rows", "hudi_rs_keys", "java_rows", "java_keys")}
    assert bulk["delta"] == {"delta_rows": rows}
    up = figs["same_spark.upsert.vs_delta_merge"]
    assert set(up["reads"]["ours"].values()) == {rows + up["new_rows"]}
    virtual = figs["same_spark.virtual_keys.bulk_insert.vs_df_write_parquet"]["reads"]
    assert set(virtual["ours"].values()) == {rows} and virtual["delta"] == {"delta_rows": rows}
    # Java at its default codec and at ours, both read back exactly
    assert bulk["java_same_codec"] == bulk["ours"]
    assert figs["same_spark.bulk_insert.vs_java_hudi"]["java_default_codec"] == "gzip"
    # peak memory per writer: a JVM heap that really was used, within the JVM's resident set
    for name in ("same_spark.bulk_insert.vs_java_hudi", "same_spark.upsert.vs_delta_merge"):
        mem = figs[name]["peak_memory_mb"]
        assert set(mem) >= {"ours", "delta"} and all(m["jvm_rss"] >= m["jvm_heap"] > 0 for m in mem.values()), mem
    # our engine's Arrow tasks run in Python workers: they were seen
    assert figs["same_spark.bulk_insert.vs_java_hudi"]["peak_memory_mb"]["ours"]["python_workers_rss"] > 0
    # the profile: where our time went, stage by stage
    assert {"planning", "writing", "committing"} <= set(figs["same_spark.bulk_insert.vs_java_hudi"]["profile_ours_s"][0])
