"""The command line's own checks and its error paths: a negative count, an object store that
refuses or never answers (a normal error naming the endpoint, not "a bug in hudi-occ"), and
credentials that come from the environment or a file instead of argv."""

from __future__ import annotations

import pytest

from airflow_hudi_occ.cli import main


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("value", ["-1", "x", "1.5"])
def test_a_limit_that_is_not_a_count_is_a_usage_error_naming_it(table, capsys, value):
    rc, out, err = run(capsys, "timeline", table.base_uri, "--limit", value)
    assert rc == 2 and out == ""
    assert f"error: argument --limit: expected a whole number, 0 or more, got {value!r}" in err


def test_a_limit_of_zero_is_still_allowed(table, capsys):
    rc, out, _ = run(capsys, "timeline", table.base_uri, "--limit", "0")
    assert rc == 0 and "no instants" in out
