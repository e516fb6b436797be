"""core/__init__.py: the small public API (``from airflow_hudi_occ.core import Table, ...``)
hands out the objects of the modules that define them, imported on first use."""

from __future__ import annotations

import subprocess
import sys


def test_the_top_level_api_is_the_defining_modules_objects():
    import airflow_hudi_occ.core as core
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.table.table import Table
    assert (core.Table, core.WriteConfig, core.ArrowTableWriter) == (Table, WriteConfig, ArrowTableWriter)
    assert set(core.__all__) <= set(dir(core))
    for name in core.__all__:
        assert getattr(core, name).__name__ == name


def test_importing_core_loads_no_more_than_the_errors():
    """The names beyond the errors load on first use: a Spark executor that needs only the
    format pays for nothing else (and importing core installs no import hook)."""
    code = ("import sys, airflow_hudi_occ.core\n"
            "print(sorted(m for m in sys.modules if m.startswith('airflow_hudi_occ.core.')))\n"
            "print(len(sys.meta_path))")
    base = subprocess.run([sys.executable, "-c", "import sys; print(len(sys.meta_path))"],
                          capture_output=True, text=True, timeout=120)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded, hooks = out.stdout.strip().splitlines()
    assert loaded == "['airflow_hudi_occ.core.errors']"
    assert hooks == base.stdout.strip()
