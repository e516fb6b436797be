"""The attempt log as history: rows with their fate on the timeline and their retries linked,
from tables written by the real writer (losers really rolled back)."""

from __future__ import annotations

import json

from airflow_hudi_occ.core.inspection.attempt_history import attempt_of, list_attempts
from airflow_hudi_occ.core.table.table import Table
from tests.core.inspection.test_timeline_view import make_concurrent_runs_table, make_contended_table


def test_every_attempt_with_its_fate_and_retries(tmp_path):
    got = make_contended_table(str(tmp_path / "events"))
    table = Table.open(str(tmp_path / "events"))
    doc = list_attempts(table, table.timeline())
    json.dumps(doc)
    rows = {r["instant"]: r for r in doc["attempts"]}
    assert list(rows) == sorted(rows) and set(rows) == {got["seed"], got["loser"], got["winner"], got["retry"]}
    loser = rows[got["loser"]]
    assert (loser["outcome"], loser["other_instant"], loser["dag_id"], loser["task_id"]) == \
        ("conflict", got["winner"], "ingest", "upsert")
    assert loser["timeline_state"] == "rolled back" and loser["rolled_back_by"] > got["winner"]
    assert loser["file_groups"] and loser["files_discarded"] >= 1
    assert (loser["retried_by"], rows[got["retry"]]["retry_of"]) == (got["retry"], got["loser"])
    assert rows[got["winner"]]["timeline_state"] == "completed" and rows[got["winner"]]["retry_of"] is None


def test_filters_keep_the_links_and_limit_keeps_the_newest(tmp_path):
    got = make_contended_table(str(tmp_path / "events"))
    table = Table.open(str(tmp_path / "events"))
    tl = table.timeline()
    [c] = list_attempts(table, tl, outcomes=["conflict"])["attempts"]
    assert c["instant"] == got["loser"] and c["retried_by"] == got["retry"]  # the retry is filtered out
    ingest = list_attempts(table, tl, dag_id="ingest")
    assert [r["instant"] for r in ingest["attempts"]] == [got["loser"], got["retry"]] and ingest["records"] == 4
    newest = list_attempts(table, tl, limit=2)
    assert [r["instant"] for r in newest["attempts"]] == [got["winner"], got["retry"]]
    assert newest["truncated"] is True and newest["matched"] == 4
    assert list_attempts(table, tl, instant=got["winner"])["attempts"][0]["outcome"] == "committed"


def test_one_attempt_with_its_winner_and_retry(tmp_path):
    got = make_contended_table(str(tmp_path / "events"))
    table = Table.open(str(tmp_path / "events"))
    a = attempt_of(table, table.timeline(), got["loser"])
    assert a["winner"]["instant"] == got["winner"] and a["winner"]["task_id"] == "rewrite"
    assert a["retry"]["instant"] == got["retry"] and a["retry"]["outcome"] == "committed"
    assert attempt_of(table, table.timeline(), "20000101000000000") is None


def test_the_pruned_summary_rides_along(tmp_path):
    got = make_concurrent_runs_table(str(tmp_path / "runs"))
    table = Table.open(str(tmp_path / "runs"))
    doc = list_attempts(table, table.timeline())
    assert doc["pruned"]["count"] == 1 and got["old_loser"] not in {r["instant"] for r in doc["attempts"]}
    # the old retry stays (committed, on the timeline) without the loser it retried
    assert {got["old_retry"], got["loser"], got["winner"], got["retry"]} <= {r["instant"] for r in doc["attempts"]}
