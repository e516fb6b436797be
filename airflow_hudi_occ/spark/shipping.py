"""Shipping the engine to executors: the package as a zip for ``--py-files``, and the check
that executors can import it.

Why: a Spark executor runs its own Python worker, on another machine, with that machine's
interpreter. Nothing guarantees ``airflow_hudi_occ`` is installed there, and a version that is
installed may not be the driver's. Spark's answer for pure-Python code is ``--py-files`` (or
``SparkContext.addPyFile``): the file is copied to every executor and put at the front of its
Python path, so the driver's exact code wins over anything installed on the worker.
Dependencies with native parts (pyarrow, fastavro, kazoo) cannot travel in a zip; for
executors that lack them, ship a packed virtualenv with ``spark.archives`` (README, "On a
cluster").

The zip is built once per package content: its name carries the version and a hash of every
file, so an edited checkout gets a new zip and an unchanged one reuses the cached file. It is
written to a temporary name and renamed into place, so two tasks building it at the same time
never see (or ship) half a file; both produce the same bytes (fixed timestamps), so whichever
rename wins is right.

Errors: :func:`check_executors_import` raises
:class:`~airflow_hudi_occ.spark.errors.EngineNotShippedError` naming the executor's import
error and the fix; it runs before any instant exists, so a failure leaves nothing on the table.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

import airflow_hudi_occ

from airflow_hudi_occ.spark.errors import EngineNotShippedError

#: the package directory whose content is shipped
PACKAGE_DIR = Path(airflow_hudi_occ.__file__).resolve().parent
PACKAGE = PACKAGE_DIR.name
#: where built zips are kept (default: ``$XDG_CACHE_HOME/airflow_hudi_occ`` or ``~/.cache/...``)
CACHE_ENV = "HUDI_OCC_CACHE_DIR"
#: what executors import: the executor task's module pulls in core's merge, parquet, markers
EXECUTOR_MODULE = "airflow_hudi_occ.spark.executor"
#: a file's timestamp inside the zip: fixed, so equal content gives equal bytes
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
#: the web UI's built assets are large and never imported on an executor
_SKIP_DIRS = {"__pycache__", "node_modules"}
_SKIP_SUFFIXES = (".pyc", ".pyo")


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "airflow_hudi_occ"


def _package_files(root: Path) -> list[tuple[str, Path]]:
    """``(name in the zip, file)`` for every file of the package, sorted (the hash and the
    zip's order depend on it)."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for f in sorted(files):
            if f.endswith(_SKIP_SUFFIXES) or f.startswith("."):
                continue
            path = Path(folder) / f
            out.append((f"{root.name}/{path.relative_to(root).as_posix()}", path))
    return sorted(out)


def content_hash(files: list[tuple[str, Path]]) -> str:
    h = hashlib.sha256()
    for name, path in files:
        h.update(name.encode() + b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def package_zip(directory: str | os.PathLike | None = None, *, root: Path = PACKAGE_DIR) -> Path:
    """The zip of the package (built now if this content has none yet), for ``--py-files``."""
    files = _package_files(root)
    digest = content_hash(files)[:16]
    folder = Path(directory) if directory is not None else cache_dir()
    target = folder / f"{root.name}-{airflow_hudi_occ.__version__}-{digest}.zip"
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, path in files:
                info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, path.read_bytes())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)  # atomic: a reader sees no file or the whole file
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return target


def is_local_master(master: str | None) -> bool:
    """Local mode: executors are threads of the driver's JVM and start the driver's Python."""
    return bool(master) and str(master).strip().startswith("local")


def _probe_for(package: str, module: str):
    """The executor side of the check, as a closure: cloudpickle sends it by value, so an
    executor that cannot import this package can still run it and say why."""

    def probe(_):
        import importlib
        import sys
        try:
            pkg = importlib.import_module(package)
            importlib.import_module(module)
            yield {"ok": True, "version": getattr(pkg, "__version__", None), "file": pkg.__file__,
                   "python": sys.executable, "python_version": sys.version.split()[0]}
        except BaseException as e:  # noqa: BLE001 - reported to the driver, not raised there
            yield {"ok": False, "error": f"{type(e).__name__}: {e}",
                   "missing": getattr(e, "name", None), "python": sys.executable,
                   "python_version": sys.version.split()[0]}
    return probe


def check_executors_import(spark, *, tasks: int | None = None) -> dict:
    """Import the engine on executors (one tiny job) and raise
    :class:`EngineNotShippedError` if they cannot, or import another version than the
    driver's. Returns what one executor reported."""
    sc = spark.sparkContext
    n = tasks or max(1, min(sc.defaultParallelism, 8))
    try:
        reports = sc.parallelize(range(n), n).mapPartitions(_probe_for(PACKAGE, EXECUTOR_MODULE)).collect()
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
            "(README, 'On a cluster')")
