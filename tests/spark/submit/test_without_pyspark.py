"""The submit side imports and works where pyspark cannot be imported (an Airflow worker, the
triggerer): each of its modules is imported in a fresh interpreter whose ``sys.modules`` maps
``pyspark`` to None, so any ``import pyspark`` there raises ImportError."""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import airflow_hudi_occ.spark.submit as submit

REPO = Path(__file__).resolve().parents[3]

PROBE = r"""
import importlib, json, sys
sys.modules["pyspark"] = None  # `import pyspark` (or pyspark.sql) now raises ImportError
for name in sys.argv[1:]:
    importlib.import_module(name)
from airflow_hudi_occ.spark.submit.conf import default_conf
from airflow_hudi_occ.spark.submit.options import SparkWriteOptions
from airflow_hudi_occ.spark.submit.master import master_addresses
o = SparkWriteOptions.from_options({"hoodie.datasource.write.recordkey.field": "id"})
print(json.dumps({"loaded": sorted(m for m in sys.modules if m.startswith("airflow_hudi_occ.spark")),
                  "operation": o.operation, "local": "spark.driver.memory" in default_conf("local[1]"),
                  "addresses": master_addresses("spark://a:7078,b")}))
"""


def submit_modules() -> list[str]:
    return sorted(f"{submit.__name__}.{m.name}" for m in pkgutil.iter_modules(submit.__path__))


def run_without_pyspark(*modules: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run([sys.executable, "-c", PROBE, *modules], capture_output=True, text=True,
                       env=env, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_the_submit_side_needs_no_pyspark():
    mods = submit_modules()
    assert {"airflow_hudi_occ.spark.submit.options", "airflow_hudi_occ.spark.submit.master",
            "airflow_hudi_occ.spark.submit.conf", "airflow_hudi_occ.spark.submit.package",
            "airflow_hudi_occ.spark.submit.source", "airflow_hudi_occ.spark.submit.errors"} <= set(mods)
    out = run_without_pyspark(*mods)
    # it works, and nothing of the engine proper came along
    assert out["operation"] == "upsert" and out["local"] is True
    assert out["addresses"] == [["a", 7078], ["b", 7077]]
    assert [m for m in out["loaded"] if not m.startswith("airflow_hudi_occ.spark.submit")] == \
        ["airflow_hudi_occ.spark"]


def test_the_probe_sees_an_import_of_pyspark():
    """The check is live: the engine's session module needs pyspark to make a session."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-c", 'import sys; sys.modules["pyspark"] = None\n'
                        "from airflow_hudi_occ.spark.session import local_session\n"
                        "local_session()"], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode != 0 and "No module named 'pyspark.sql'" in p.stderr, p.stderr[-2000:]
