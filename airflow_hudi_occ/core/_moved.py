"""The module paths of release 0.1, kept importable for one release with a DeprecationWarning.

0.2 arranged ``core`` in sub-packages that read as the commit pipeline (``format`` ->
``table`` -> ``concurrency`` -> ``commit`` -> ``services`` -> ``inspection``). Code that still
imports ``airflow_hudi_occ.core.transaction`` (and so on) gets a module that looks names up
in their new homes; the warning names the new path. Removed in 0.3.

Later moves within the new tree are kept the same way, for one release after their move:
``concurrency.marker_names`` and ``concurrency.marker_files`` became modules of the
``concurrency.markers`` package (issue 29), whose ``__init__`` keeps every name the old
``concurrency.markers`` module had, so that path needs no entry here.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings

_C = "airflow_hudi_occ.core"

#: old module -> the new modules its names now live in (the first is the one to import from)
MOVED: dict[str, tuple[str, ...]] = {
    f"{_C}.storage": (f"{_C}.format.storage",),
    f"{_C}.instant": (f"{_C}.format.instant",),
    f"{_C}.instant_time": (f"{_C}.format.instant_time",),
    f"{_C}.metadata": (f"{_C}.format.metadata",),
    f"{_C}.schema": (f"{_C}.format.schema",),
    f"{_C}.base_file": (f"{_C}.format.base_file", f"{_C}.format.layout"),
    f"{_C}.bucket_index": (f"{_C}.format.bucket_index",),
    f"{_C}.timeline": (f"{_C}.table.timeline",),
    f"{_C}.file_group": (f"{_C}.table.file_system_view", f"{_C}.format.layout"),
    f"{_C}.heartbeat": (f"{_C}.concurrency.heartbeat",),
    f"{_C}.markers": (f"{_C}.concurrency.markers",),
    f"{_C}.concurrency.marker_names": (f"{_C}.concurrency.markers.names",),
    f"{_C}.concurrency.marker_files": (f"{_C}.concurrency.markers.files",),
    f"{_C}.locks": (f"{_C}.concurrency.locks",),
    f"{_C}.locks.base": (f"{_C}.concurrency.locks.base",),
    f"{_C}.locks.filesystem": (f"{_C}.concurrency.locks.filesystem",),
    f"{_C}.locks.inprocess": (f"{_C}.concurrency.locks.inprocess",),
    f"{_C}.locks.zookeeper": (f"{_C}.concurrency.locks.zookeeper",),
    f"{_C}.conflict": (f"{_C}.concurrency.conflict", f"{_C}.concurrency.clustering_gate"),
    f"{_C}.early_conflict": (f"{_C}.concurrency.early_conflict",),
    f"{_C}.abort_signal": (f"{_C}.concurrency.abort_signal",),
    f"{_C}.transaction": (f"{_C}.commit.transaction", f"{_C}.commit.recovery",
                          f"{_C}.commit.pipeline", f"{_C}.concurrency.locks"),
    f"{_C}.recovery": (f"{_C}.commit.recovery", f"{_C}.commit.staging"),
    f"{_C}.retry": (f"{_C}.commit.retry",),
    f"{_C}.attempt_log": (f"{_C}.commit.attempt_log",),
    f"{_C}.writer": (f"{_C}.commit.writer",),
    f"{_C}.rollback": (f"{_C}.commit.rollback", f"{_C}.table.timeline"),
    f"{_C}.clean": (f"{_C}.services.clean", f"{_C}.table.time_travel"),
    f"{_C}.clustering": (f"{_C}.services.clustering", f"{_C}.table.file_system_view",
                           f"{_C}.concurrency.clustering_gate"),
    f"{_C}.timeline_view": (f"{_C}.inspection.timeline_view",),
    f"{_C}.cli": ("airflow_hudi_occ.cli", "airflow_hudi_occ.cli.app", "airflow_hudi_occ.cli.context"),
}


def _proxy(old: str, homes: tuple[str, ...]) -> types.ModuleType:
    modules = [importlib.import_module(h) for h in homes]
    mod = types.ModuleType(old, f"Moved to {homes[0]} (deprecated path, removed in 0.3).")

    def __getattr__(name: str):
        for m in modules:
            try:
                return getattr(m, name)
            except AttributeError:
                continue
        raise AttributeError(f"module {old!r} has no attribute {name!r} (it moved to {homes[0]})")

    mod.__getattr__ = __getattr__
    mod.__all__ = sorted({n for m in modules for n in getattr(m, "__all__", ())})
    mod.__path__ = []  # so that old sub-modules (locks.base) resolve through this finder too
    return mod


class _Loader(importlib.abc.Loader):
    def __init__(self, homes: tuple[str, ...]):
        self.homes = homes

    def create_module(self, spec):
        warnings.warn(f"{spec.name} is deprecated: import from {self.homes[0]}",
                      DeprecationWarning, stacklevel=4)
        return _proxy(spec.name, self.homes)

    def exec_module(self, module) -> None:
        pass


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        homes = MOVED.get(fullname)
        if homes is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Loader(homes), is_package=True)


def install() -> None:
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
