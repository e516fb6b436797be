"""The README's main command, end to end (small): concurrent writer processes, then the
independent reader's check inside the demo decides the exit code."""

import re

from airflow_hudi_occ.testing import demo


def test_demo_runs_and_verifies(tmp_path, capsys):
    rc = demo.main(["--table", str(tmp_path / "demo"), "--writers", "3", "--batches", "2"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "0 duplicates, 0 committed keys missing, 0 unexpected keys" in out
    assert "6 batches committed, 0 gave up" in out
    # admitted before each attempt (issue 43, item 4): at most one lost attempt per commit
    lost = float(re.search(r"([0-9.]+) lost attempts per commit", out).group(1))
    assert "admitted before each attempt" in out and lost <= 1.0, out


def test_the_airflow_demo_gives_its_admission_policy_to_the_table_connection(tmp_path, monkeypatch):
    """``scripts/demo.sh --on-overlap go`` is the run before admission (each write starts at
    once), for the before/after comparison of issue 33; with ZooKeeper both settings ride on
    the one table connection."""
    import json

    from airflow_hudi_occ.core.config import ADMISSION_ON_OVERLAP
    from airflow_hudi_occ.provider.hooks.hudi_occ import HudiOccHook
    from airflow_hudi_occ.testing.airflow_demo import _env

    env = _env(tmp_path, "127.0.0.1:2181", True, "go")
    conn = json.loads(env["AIRFLOW_CONN_HUDI_OCC_DEFAULT"])
    assert conn["extra"]["options"] == {ADMISSION_ON_OVERLAP.key: "go"}
    assert conn["extra"]["lock_provider"] == "zookeeper"
    assert "AIRFLOW_CONN_HUDI_OCC_DEFAULT" not in _env(tmp_path, None, True)
    for k in ("AIRFLOW_CONN_HUDI_OCC_DEFAULT", "AIRFLOW_CONN_HUDI_ZOOKEEPER_DEFAULT"):
        monkeypatch.setenv(k, env[k])
    opts = HudiOccHook("hudi_occ_default", table_path=str(tmp_path / "t")).write_options()
    assert opts[ADMISSION_ON_OVERLAP.key] == "go"
