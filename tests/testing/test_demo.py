"""The README's main command, end to end (small): concurrent writer processes, then the
independent reader's check inside the demo decides the exit code."""

from airflow_hudi_occ.testing import demo


def test_demo_runs_and_verifies(tmp_path, capsys):
    rc = demo.main(["--table", str(tmp_path / "demo"), "--writers", "3", "--batches", "2"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "0 duplicates, 0 committed keys missing, 0 unexpected keys" in out
    assert "6 batches committed, 0 gave up" in out
