"""The package as a zip for spark-submit's ``--py-files``: built once per content, cached.

Why: a Spark executor runs its own Python, on another machine; nothing guarantees the package
is installed there, or in the driver's version. ``--py-files`` puts the driver's exact code at
the front of every executor's path (``spark.shipping`` has the whole story and the executors'
import check).

The zip is built once per package content: its name carries the version and a hash of every
file, so an edited checkout gets a new zip and an unchanged one reuses the cached file. It is
written to a temporary name and renamed into place, so two tasks building it at the same time
never see (or ship) half a file; both produce the same bytes (fixed timestamps), so whichever
rename wins is right. Errors are the file system's (``OSError``), raised to the caller.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

import airflow_hudi_occ

#: the package directory whose content is shipped
PACKAGE_DIR = Path(airflow_hudi_occ.__file__).resolve().parent
PACKAGE = PACKAGE_DIR.name
#: where built zips are kept (default: ``$XDG_CACHE_HOME/airflow_hudi_occ`` or ``~/.cache/...``)
CACHE_ENV = "HUDI_OCC_CACHE_DIR"
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
