"""The 0.1 module paths still import, warn, and give the same objects as their new homes."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from airflow_hudi_occ.core import _moved

OLD_NAMES = [
    ("airflow_hudi_occ.core.transaction", "WriteTransaction", "airflow_hudi_occ.core.commit.transaction"),
    ("airflow_hudi_occ.core.transaction", "prepare_batch", "airflow_hudi_occ.core.commit.pipeline"),
    ("airflow_hudi_occ.core.transaction", "table_lock_manager", "airflow_hudi_occ.core.concurrency.locks"),
    ("airflow_hudi_occ.core.recovery", "stage_commit", "airflow_hudi_occ.core.commit.staging"),
    ("airflow_hudi_occ.core.rollback", "pending_rollback_for", "airflow_hudi_occ.core.table.timeline"),
    ("airflow_hudi_occ.core.writer", "ArrowTableWriter", "airflow_hudi_occ.core.commit.writer"),
    ("airflow_hudi_occ.core.locks.zookeeper", "ZookeeperBasedLockProvider",
     "airflow_hudi_occ.core.concurrency.locks.zookeeper"),
    ("airflow_hudi_occ.core.conflict", "check_not_in_pending_clustering",
     "airflow_hudi_occ.core.concurrency.clustering_gate"),
    ("airflow_hudi_occ.core.clean", "check_as_of_readable", "airflow_hudi_occ.core.table.time_travel"),
    ("airflow_hudi_occ.core.cli", "main", "airflow_hudi_occ.cli"),
    ("airflow_hudi_occ.core.table", "Table", "airflow_hudi_occ.core.table.table"),
    ("airflow_hudi_occ.core.concurrency.marker_names", "parse_marker",
     "airflow_hudi_occ.core.concurrency.markers.names"),
    ("airflow_hudi_occ.core.concurrency.marker_files", "read_marker_file",
     "airflow_hudi_occ.core.concurrency.markers.files"),
    ("airflow_hudi_occ.core.markers", "markers_for", "airflow_hudi_occ.core.concurrency.markers.write_markers"),
]


@pytest.mark.parametrize("old, name, new", OLD_NAMES, ids=lambda v: v if isinstance(v, str) else None)
def test_old_path_resolves_to_the_new_object(old, name, new):
    mod = importlib.import_module(old)
    assert getattr(mod, name) is getattr(importlib.import_module(new), name)


def test_every_old_module_imports_with_a_deprecation_warning_naming_the_new_path():
    code = ("import importlib, warnings\n"
            "from airflow_hudi_occ.core import _moved\n"
            "bad = []\n"
            "for old, homes in _moved.MOVED.items():\n"
            "    with warnings.catch_warnings(record=True) as w:\n"
            "        warnings.simplefilter('always')\n"
            "        importlib.import_module(old)\n"
            "    if not any(issubclass(x.category, DeprecationWarning) and homes[0] in str(x.message) for x in w):\n"
            "        bad.append(old)\n"
            "print(bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_a_name_that_never_existed_is_an_attribute_error_naming_the_new_home():
    mod = importlib.import_module("airflow_hudi_occ.core.markers")
    with pytest.raises(AttributeError, match="concurrency.markers"):
        mod.no_such_name  # noqa: B018


def test_the_top_level_api():
    import airflow_hudi_occ.core as core
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.table.table import Table
    assert (core.Table, core.WriteConfig, core.ArrowTableWriter) == (Table, WriteConfig, ArrowTableWriter)
    assert set(core.__all__) <= set(dir(core))
    assert len(_moved.MOVED) >= 28
