"""The engine on each Spark line it installs beside (issue 42 item 1): the smoke
(airflow_hudi_occ/testing/spark_line_smoke.py) runs in that line's venv
(scripts/install-spark-lines.sh; 4.2 is the project's .venv) as a subprocess, and what it
wrote is read back here by hudi-rs and compared with the model; on 3.5 Java Hudi reads it too,
in the smoke's own session (Hudi's Spark 3.5 bundle, scripts/install-java-hudi.sh).

A line without its venv fails naming the script (these tests never skip)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_hudi_occ.testing.spark_line_smoke import STEPS, model as smoke_model
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key

ROOT = Path(__file__).resolve().parents[2]
LINES_DIR = Path(os.environ.get("HUDI_OCC_SPARK_LINES_DIR") or ROOT / ".work" / "spark-lines")
#: the line's tested PySpark (constraints/spark-<line>.txt)
VERSIONS = {p.stem.removeprefix("spark-"): next(line.split("==")[1].strip() for line in p.read_text().splitlines()
                                                if line.startswith("pyspark=="))
            for p in (ROOT / "constraints").glob("spark-*.txt")}


def line_python(line: str) -> str:
    if line == "4.2":
        return sys.executable
    python = LINES_DIR / line / "venv" / "bin" / "python"
    if not python.exists():
        raise AssertionError(f"no venv for Spark {line} at {python.parent.parent}: run "
                             f"scripts/install-spark-lines.sh {line}")
    return str(python)


def hudi_jar() -> str:
    setup = ROOT / ".work" / "java-hudi" / "setup.json"
    if not setup.is_file():
        raise AssertionError(f"{setup} is missing: run scripts/install-java-hudi.sh")
    return json.loads(setup.read_text())["hudi_jar"]


def model(table: str) -> dict:
    return smoke_model([step[1:] for step in STEPS if step[0] == table])


def smoke(line: str, work: Path) -> dict:
    args = [line_python(line), "-m", "airflow_hudi_occ.testing.spark_line_smoke", str(work)]
    if line == "3.5":
        args += ["--hudi-jar", hudi_jar()]
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYSPARK_PYTHON=args[0])
    env.pop("SPARK_REMOTE", None)
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-6000:]
    line_out = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
    assert line_out, p.stdout[-2000:] + p.stderr[-4000:]
    return json.loads(line_out[-1][len("RESULT "):])


def check(line: str, tmp_path: Path) -> None:
    res = smoke(line, tmp_path)
    assert res["pyspark"] == res["jars"] == VERSIONS[line], res
    outcomes = [w.get("outcome") for w in res["writes"]]
    assert outcomes == ["committed"] * len(STEPS), res["writes"]
    winner, retried = res["writes"][3], res["writes"][4]
    assert res["loser"]["error"] == "EarlyConflictError", res["loser"]
    assert res["loser"]["other_instant"] == winner["instant"]
    assert res["loser"]["stopped_before_job"] is True, res["loser"]
    assert retried["attempt"] == 2 and retried["instant"] > winner["instant"]
    assert res["writes"][2]["stats"]["deletes"] == 100
    cols = ["id", "p", "ts", "v"]
    assert rows_by_key(hudi_read(str(tmp_path / "cow")), columns=cols) == model("cow")
    assert rows_by_key(hudi_read(str(tmp_path / "mor")), columns=cols) == model("mor")
    if line == "3.5":  # Java Hudi's reading, in the smoke's session
        assert {r["id"]: r for r in res["java_rows"]} == model("cow")


@pytest.mark.parametrize("line", ["3.5", "4.0"])
def test_the_engine_writes_reads_and_races_on_the_spark_line(line, tmp_path):
    check(line, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("line", ["4.1", "4.2"])
def test_the_engine_on_the_other_spark_lines(line, tmp_path):
    check(line, tmp_path)


#: the engine's suite as a line runs it: tests/spark's default run, but for what is not the
#: line's (the Connect server of 4.2's wheel, run by .venv; the S3 server's tests, whose
#: store is not the line's; Java Hudi's services, which run on their own Spark 3.5)
NOT_THE_LINES = ("tests/spark/test_writer_connect.py", "tests/spark/test_s3.py",
                 "tests/spark/test_java_service_job.py")


@pytest.mark.slow
@pytest.mark.parametrize("line", ["3.5", "4.0", "4.1"])
def test_the_engines_suite_passes_on_the_spark_line(line):
    """tests/spark (its default run) with the line's interpreter and PySpark: every engine
    test that passes on 4.2 (.venv) passes on the line."""
    python = line_python(line)
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYSPARK_PYTHON=python)
    for k in ("HUDI_OCC_SLOW", "SPARK_REMOTE", "PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS"):
        env.pop(k, None)
    p = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/spark",
                        *(f"--ignore={f}" for f in NOT_THE_LINES)],
                       cwd=ROOT, capture_output=True, text=True, env=env, timeout=3600)
    summary = (p.stdout.strip().splitlines() or [""])[-1]
    print(f"Spark {line} engine suite: {summary}")
    assert p.returncode == 0, p.stdout[-8000:] + p.stderr[-3000:]
