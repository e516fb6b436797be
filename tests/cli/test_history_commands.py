"""``hudi-occ attempts`` and ``hudi-occ conflicts`` for a loser already rolled back: the attempt
log read back on tables whose conflicts really happened (and were really rolled back)."""

from __future__ import annotations

import json

import pytest

from airflow_hudi_occ.cli import main
from airflow_hudi_occ.core.services.clean import run_clean
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS
from tests.core.inspection.test_timeline_view import make_contended_table


@pytest.fixture
def events(tmp_path):
    path = str(tmp_path / "events")
    return path, make_contended_table(path)


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return rc, out, err


def test_attempts_lists_outcome_winner_fate_and_retry(events, capsys):
    path, got = events
    [rollback] = [i.requested_time for i in Table.open(path).timeline() if i.action.value == "rollback"]
    rc, out, _ = run(capsys, "attempts", path)
    assert rc == 0
    lines = {ln.split()[0]: ln for ln in out.splitlines()[1:] if ln[:17].isdigit()}
    assert list(lines) == [got["seed"], got["loser"], got["winner"], got["retry"]]
    loser = lines[got["loser"]]
    assert " conflict " in loser and "ingest \u203a upsert run manual__1" in loser
    assert got["winner"] in loser and " p0/" in loser and got["retry"] in loser
    assert f"rolled back by {rollback}" in loser
    assert got["loser"] in lines[got["retry"]] and " committed " in lines[got["retry"]]
    assert "4 attempts (4 recorded" in out

    rc, out, _ = run(capsys, "attempts", path, "--outcome", "conflict", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["matched"] == 1 and doc["records"] == 4
    [row] = doc["attempts"]
    assert (row["instant"], row["other_instant"], row["retried_by"], row["timeline_state"]) == \
        (got["loser"], got["winner"], got["retry"], "rolled back")


@pytest.mark.parametrize("argv, says", [
    (["--limit", "0"], "--limit 0 lists nothing"),
    (["--limit", "-1"], "--limit -1 lists nothing"),
    (["--limit", "ten"], "invalid int value"),
    (["--outcome", "lost"], "invalid choice"),
    (["--instant", "123"], "is not an instant time"),
    (["--instant", "20000101000000000"], "no record of instant 20000101000000000"),
])
def test_attempts_refuses_what_cannot_be_answered(events, capsys, argv, says):
    path, _got = events
    rc, out, err = run(capsys, "attempts", path, *argv)
    assert rc == 2 and out == "" and says in err and "remedy:" in err


def test_conflicts_of_a_rolled_back_loser_answers_from_the_attempt_log(events, capsys):
    path, got = events
    [rollback] = [i.requested_time for i in Table.open(path).timeline() if i.action.value == "rollback"]
    rc, out, err = run(capsys, "conflicts", path, "--instant", got["loser"])
    assert rc == 3, err  # it aborted: as for a pending instant that would
    assert f"not on the timeline: rolled back by {rollback})" in out
    assert f"lost to    {got['winner']} (backfill \u203a rewrite run bf__1 try 1, committed)" in out
    assert f"retried as {got['retry']} (committed)" in out and "file groups 1: p0/" in out
    assert f"verdict: {got['loser']} ABORTED (conflict against {got['winner']})" in out
    rc, out, _ = run(capsys, "conflicts", path, "--instant", got["loser"], "--json")
    doc = json.loads(out)
    assert rc == 3 and doc["source"] == "attempt_log" and doc["would_abort"] is True
    assert doc["attempt"]["winner"]["instant"] == got["winner"]


def test_conflicts_still_answers_after_a_clean_retaining_one_commit(events, capsys):
    path, got = events
    run_clean(Table.open(path), {**FAST_WRITE_OPTIONS, "hoodie.clean.commits.retained": "1"})
    rc, out, _ = run(capsys, "conflicts", path, "--instant", got["loser"])
    assert rc == 3 and "ABORTED (conflict" in out
    rc, out, _ = run(capsys, "attempts", path, "--outcome", "conflict")
    assert rc == 0 and got["loser"] in out


def test_conflicts_of_an_instant_nobody_recorded_names_both_places_to_look(events, capsys):
    path, _got = events
    rc, out, err = run(capsys, "conflicts", path, "--instant", "20000101000000000")
    assert rc == 2 and "is not on the timeline" in err and "hudi-occ attempts TABLE" in err
