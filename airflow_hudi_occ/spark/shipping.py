"""Shipping the engine to executors: the package as a zip for ``--py-files``, and the check
that executors can import it.

Why: a Spark executor runs its own Python worker, on another machine, with that machine's
interpreter. Nothing guarantees ``airflow_hudi_occ`` is installed there, and a version that is
installed may not be the driver's. Spark's answer for pure-Python code is ``--py-files`` (or
``SparkContext.addPyFile``): the file is copied to every executor and put at the front of its
Python path, so the driver's exact code wins over anything installed on the worker.
Dependencies with native parts (pyarrow, fastavro, kazoo) cannot travel in a zip; for
executors that lack them, ship a packed virtualenv with ``spark.archives`` (docs/deployment.md, "On a
cluster").

On Spark Connect (spark/session.py) the same zip is a session artifact
(``addArtifacts(..., pyfile=True)``), and the check below runs the same way on the server's
executors.

The zip itself (built once per content, cached, renamed into place) is
:mod:`airflow_hudi_occ.spark.submit.package`, which the submitter uses without pyspark.

Errors: :func:`check_executors_import` raises
:class:`~airflow_hudi_occ.spark.submit.errors.EngineNotShippedError` naming the executor's import
error and the fix; it runs before any instant exists, so a failure leaves nothing on the table.
"""

from __future__ import annotations

import airflow_hudi_occ

from airflow_hudi_occ.spark.submit.errors import EngineNotShippedError
from airflow_hudi_occ.spark.submit.package import PACKAGE, package_zip

#: what executors import: the executor task's module pulls in core's merge, parquet, markers
EXECUTOR_MODULE = "airflow_hudi_occ.spark.executor"


#: the probe's report, one row per task (mapInArrow: the same route on a classic session, on
#: Spark Connect, which has no RDDs, and on every Spark line)
PROBE_DDL = ("ok boolean, version string, file string, python string, python_version string, "
             "error string, missing string")


def _probe_for(package: str, module: str):
    """The executor side of the check, as a closure: cloudpickle sends it by value, so an
    executor that cannot import this package can still run it and say why."""

    def probe(batches):
        import importlib
        import sys

        import pyarrow as pa
        for _ in batches:
            pass
        try:
            pkg = importlib.import_module(package)
            importlib.import_module(module)
            row = {"ok": True, "version": getattr(pkg, "__version__", None), "file": pkg.__file__,
                   "python": sys.executable, "python_version": sys.version.split()[0],
                   "error": None, "missing": None}
        except BaseException as e:  # noqa: BLE001 - reported to the driver, not raised there
            row = {"ok": False, "version": None, "file": None, "error": f"{type(e).__name__}: {e}",
                   "missing": getattr(e, "name", None), "python": sys.executable,
                   "python_version": sys.version.split()[0]}
        schema = pa.schema([("ok", pa.bool_())] + [(k, pa.string()) for k in
                           ("version", "file", "python", "python_version", "error", "missing")])
        yield pa.RecordBatch.from_pylist([row], schema=schema)
    return probe


def check_executors_import(spark, *, tasks: int | None = None) -> dict:
    """Import the engine on executors (one tiny job) and raise
    :class:`EngineNotShippedError` if they cannot, or import another version than the
    driver's. Returns what one executor reported."""
    from airflow_hudi_occ.spark.compat import default_parallelism
    n = tasks or max(1, min(default_parallelism(spark), 8))
    try:
        rows = spark.range(0, n, 1, n).mapInArrow(_probe_for(PACKAGE, EXECUTOR_MODULE), PROBE_DDL).collect()
        reports = [r.asDict() for r in rows]
    except Exception as e:  # noqa: BLE001 - the worker could not even start Python
        raise EngineNotShippedError(
            "the executors could not run the import check: " + _first_line(e),
            cause=_first_line(e), remedy=_remedy(None)) from e
    bad = [r for r in reports if not r["ok"]]
    if bad:
        r = bad[0]
        raise EngineNotShippedError(
            f"executors cannot import {EXECUTOR_MODULE} ({r['error']}; executor Python "
            f"{r['python']} {r['python_version']}); nothing was written",
            cause=r["error"], missing=r.get("missing"), python=r["python"], remedy=_remedy(r.get("missing")))
    versions = {r["version"] for r in reports}
    if versions != {airflow_hudi_occ.__version__}:
        raise EngineNotShippedError(
            f"executors import {PACKAGE} {sorted(map(str, versions))} from "
            f"{reports[0]['file']}, the driver runs {airflow_hudi_occ.__version__}; nothing was written",
            cause="version mismatch", python=reports[0]["python"], remedy=_remedy(PACKAGE))
    return reports[0]


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    for line in text.splitlines():
        if "Error" in line and ("ModuleNotFound" in line or "ImportError" in line or "No such file" in line):
            return line.strip()[:500]
    return (text.splitlines() or [type(e).__name__])[0][:500]


def _remedy(missing: str | None) -> str:
    if missing and (missing == PACKAGE or missing.startswith(PACKAGE + ".")):
        return (f"ship the package with --py-files {package_zip()} (HudiWriteOperator and the "
                "hook do this unless ship_package=False), or install the driver's version on "
                "every worker")
    return ("the executors' Python lacks a dependency"
            + (f" ({missing})" if missing else "")
            + ": install pyarrow, fastavro, fsspec and kazoo on every worker, or ship a packed "
            "virtualenv with spark.archives (venv-pack -o env.tar.gz; --conf "
            "spark.archives=env.tar.gz#env --conf spark.pyspark.python=./env/bin/python), or "
            "point spark.pyspark.python / PYSPARK_PYTHON at an interpreter that has them "
            "(docs/deployment.md, 'On a cluster')")
