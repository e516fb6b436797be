"""The test run's JVM settings (airflow_hudi_occ/testing/jvm.py): spark-submit's JVM maps the
archive scripts/bootstrap.sh built, and a JVM of another class path ignores it quietly."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from airflow_hudi_occ.testing import jvm

JAVA_HUDI_SPARK = Path(__file__).resolve().parents[2] / ".work" / "java-hudi" / "venv"


def version_of(spark_home: Path, opts: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(spark_home / "bin" / "spark-submit"), "--version"], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, SPARK_SUBMIT_OPTS=opts))


def test_spark_submits_jvm_maps_the_archive():
    archive = jvm.archive_path()
    assert archive is not None and archive.is_file(), "no archive: run scripts/bootstrap.sh"
    opts = jvm.spark_submit_opts()
    assert f"-XX:SharedArchiveFile={archive}" in opts and all(o in opts for o in jvm.FAST_START)
    # -Xshare:on: a JVM that cannot map the archive stops instead of starting without it
    p = version_of(jvm.spark_home(), f"{opts} -Xshare:on")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "version" in p.stdout + p.stderr


def test_a_jvm_of_another_class_path_starts_without_it_and_says_nothing():
    other = next(JAVA_HUDI_SPARK.glob("lib/python*/site-packages/pyspark"))  # PySpark 3.5
    opts = jvm.spark_submit_opts()
    refused = version_of(other, f"{opts} -Xshare:on")
    assert refused.returncode != 0 and "mismatch" in refused.stdout + refused.stderr  # it is another class path
    p = version_of(other, opts)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "cds" not in (p.stdout + p.stderr).lower() and "archive" not in (p.stdout + p.stderr).lower()


def test_without_an_archive_only_the_start_settings(monkeypatch, tmp_path):
    monkeypatch.setattr(jvm, "archive_path", lambda: tmp_path / "absent.jsa")
    assert jvm.spark_submit_opts() == " ".join(jvm.FAST_START)
