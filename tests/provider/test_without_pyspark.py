"""The provider needs no pyspark: every module ``provider.yaml`` names (operators, sensors,
triggers, hooks) and the DAG-parse checks import in a fresh interpreter where ``import
pyspark`` fails, and bring no engine module along (only ``spark.submit``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.provider.conftest import REPO

MODULES = ["airflow_hudi_occ.provider.operators.write", "airflow_hudi_occ.provider.operators.table_service",
           "airflow_hudi_occ.provider.sensors.hudi_occ",
           "airflow_hudi_occ.provider.triggers.hudi_occ", "airflow_hudi_occ.provider.hooks.hudi_occ",
           "airflow_hudi_occ.provider.arguments", "airflow_hudi_occ.provider.deferred_job",
           "airflow_hudi_occ.provider.operators.java_write", "airflow_hudi_occ.provider.launchers.external"]


def test_the_provider_imports_without_pyspark():
    probe = ('import importlib, json, sys\nsys.modules["pyspark"] = None\n'
             'for m in sys.argv[1:]:\n    importlib.import_module(m)\n'
             'print(json.dumps(sorted(m for m in sys.modules if m.startswith("airflow_hudi_occ.spark"))))')
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run([sys.executable, "-c", probe, *MODULES], capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    loaded = json.loads(p.stdout.strip().splitlines()[-1])
    assert [m for m in loaded if not m.startswith("airflow_hudi_occ.spark.submit")] == ["airflow_hudi_occ.spark"]
