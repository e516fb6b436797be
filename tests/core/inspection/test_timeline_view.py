"""The timeline read model joins timeline, attempt log, rollbacks, heartbeats and markers.

Tables here are written by the real Arrow writer with real overlapping transactions: the
loser's instant is really rolled back, so the model must find it through the attempt log and
the rollback that names it, not through the timeline.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import WriteConflictError
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.inspection.timeline_view import build_timeline_view
from airflow_hudi_occ.core.commit.transaction import WriteTransaction
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS

def _cfg(**labels) -> WriteConfig:
    return WriteConfig.from_options({**FAST_WRITE_OPTIONS, attempt_log.LABELS_OPTION: json.dumps(labels)})


def _rows(ids, value, p="p0"):
    return pa.table({"id": list(ids), "p": [p] * len(ids), "value": [value] * len(ids),
                     "ts": [1] * len(ids)})


def make_contended_table(path: str) -> dict:
    """A table with a seed commit, then an ingestion write that loses to a backfill committing
    in the middle of it (same file group) and succeeds on its retry with a fresh instant.

    Returns the instants involved, for assertions. Used by the UI tests too.
    """
    table = Table.create(path, "events", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    seed = ArrowTableWriter(table, _cfg(dag_id="seed", task_id="load", run_id="r0", try_number="1"),
                            writer_id="seed").write(_rows(range(20), "seed"))
    out = {"seed": seed.instant.requested_time}
    ingest_labels = dict(dag_id="ingest", task_id="upsert", run_id="manual__1", try_number="1")
    backfill = ArrowTableWriter(table, _cfg(dag_id="backfill", task_id="rewrite", run_id="bf__1",
                                            try_number="1"), writer_id="backfill")

    def backfill_commits_first(tx):
        out["loser"] = tx.instant_time
        res = backfill.write(_rows(range(10), "backfill"), batch_key="bf-batch")
        out["winner"] = res.instant.requested_time

    ingest = ArrowTableWriter(table, _cfg(**ingest_labels), writer_id="ingest")
    with pytest.raises(WriteConflictError):
        ingest.write(_rows(range(5), "ingest-1"), batch_key="ingest-batch", attempt=1,
                     before_commit=backfill_commits_first)
    res = ingest.write(_rows(range(5), "ingest-2"), batch_key="ingest-batch", attempt=2)
    out["retry"] = res.instant.requested_time
    return out


def test_conflict_retry_and_writers(tmp_path):
    got = make_contended_table(str(tmp_path / "events"))
    table = Table.open(str(tmp_path / "events"))
    assert table.timeline().get(got["loser"]) is None  # really rolled back
    view = build_timeline_view(table, name="events")
    json.dumps(view)  # plain JSON all the way down
    rows = {r["instant"]: r for r in view["instants"]}

    loser = rows[got["loser"]]
    assert loser["outcome"] == "conflict" and loser["class"] == "outcome-conflict"
    assert loser["on_timeline"] is False and loser["other_instant"] == got["winner"]
    assert loser["writer"]["dag_id"] == "ingest" and loser["writer"]["task_id"] == "upsert"
    assert loser["file_groups"] and all(fg.startswith("p0/") for fg in loser["file_groups"])
    assert loser["rolled_back_by"] is not None and rows[loser["rolled_back_by"]]["action"] == "rollback"
    assert loser["start_ms"] <= loser["end_ms"]
    assert loser["retried_by"] == got["retry"]

    winner = rows[got["winner"]]
    assert winner["outcome"] == "committed" and winner["lane"] == "backfill \u203a rewrite"
    assert winner["end_ms"] > winner["start_ms"] and winner["end_kind"] == "completed"
    assert rows[got["retry"]]["outcome"] == "committed"
    assert rows[got["retry"]]["retry_of"] == got["loser"]
    assert rows[got["retry"]]["writer"]["attempt"] == 2

    [c] = view["conflicts"]
    assert (c["instant"], c["other_instant"], c["retried_by"]) == (got["loser"], got["winner"],
                                                                   got["retry"])
    assert c["other_lane"] == "backfill \u203a rewrite" and c["seconds_discarded"] >= 0
    assert c["file_groups"] == loser["file_groups"]

    [r] = view["retries"]
    assert r["key"] == "ingest/upsert/manual__1"
    assert [a["outcome"] for a in r["attempts"]] == ["conflict", "committed"]
    assert [a["attempt"] for a in r["attempts"]] == [1, 2] and r["final_outcome"] == "committed"

    lanes = {lane["lane"]: lane for lane in view["lanes"]}
    assert lanes["ingest \u203a upsert"]["conflicts"] == 1 and lanes["ingest \u203a upsert"]["committed"] == 1
    assert view["live_writers"] == []
    assert view["summary"]["conflict"] == 1 and view["summary"]["committed"] == 3


def test_live_writer_holds_partitions(tmp_path, table):
    cfg = _cfg(dag_id="ingest", task_id="upsert", run_id="r", try_number="1")
    ArrowTableWriter(table, cfg).write(_rows(range(3), "seed"))
    tx = WriteTransaction(table, cfg, writer_id="live")
    tx.begin()
    try:
        tx.create_marker("p7", "fg9-0_0-0-0_%s.parquet" % tx.instant_time, "CREATE")
        view = build_timeline_view(table)
        [w] = view["live_writers"]
        assert w["instant"] == tx.instant_time and w["status"] == "alive"
        assert w["partitions"] == ["p7"] and w["file_groups"] == ["p7/fg9-0"]
        assert 0 <= w["heartbeat_age_s"] < 60
        row = next(r for r in view["instants"] if r["instant"] == tx.instant_time)
        assert row["outcome"] == "running" and row["end_kind"] == "now"
        assert row["end_ms"] == view["now_ms"]
        # The same pending instant, judged after its heartbeat expired, is stale, not live.
        later = build_timeline_view(table, now=view["now_ms"] / 1000 + 3600)
        assert later["live_writers"] == []
        assert next(r for r in later["instants"] if r["instant"] == tx.instant_time)["outcome"] == "stale"
    finally:
        tx.abort(reason="test over")


def test_a_reader_of_one_dag_sees_only_its_rows(tmp_path):
    got = make_contended_table(str(tmp_path / "events"))
    table = Table.open(str(tmp_path / "events"))
    view = build_timeline_view(table, may_read=lambda dag: dag == "ingest")
    assert view["filtered"] is True
    lanes = {r["lane"] for r in view["instants"]}
    assert lanes <= {"ingest \u203a upsert", "table service: rollback"} and "ingest \u203a upsert" in lanes
    assert {r["instant"] for r in view["instants"] if r["lane"].startswith("ingest")} == {got["loser"], got["retry"]}
    [c] = view["conflicts"]
    assert c["other_instant"] == got["winner"] and c["other_hidden"] is True and c["other_lane"] is None
    assert "backfill" not in json.dumps(view) and "seed" not in json.dumps(view)
    assert [r["key"] for r in view["retries"]] == ["ingest/upsert/manual__1"]
    assert build_timeline_view(table, may_read=lambda dag: True)["filtered"] is False


def test_limit_keeps_newest(tmp_path):
    got = make_contended_table(str(tmp_path / "events"))
    view = build_timeline_view(Table.open(str(tmp_path / "events")), limit=2)
    assert view["truncated"] is True and len(view["instants"]) == 2
    assert view["instants"][-1]["instant"] >= got["retry"]


def test_live_writer_named_by_a_begin_record(table):
    """A record written when an attempt begins (outcome "running") names a live writer's DAG
    and task; once its instant is gone without an end record it shows as rolled back."""
    cfg = _cfg(dag_id="backfill", task_id="rewrite", run_id="bf", try_number="2")
    tx = WriteTransaction(table, cfg, writer_id="bf")
    tx.begin()
    try:
        rec = tx._attempt_record()
        rec.outcome = "running"
        attempt_log.write_record(table, rec)
        tx.create_marker("p1", "fg1-0_0-0-0_%s.parquet" % tx.instant_time, "CREATE")
        [w] = build_timeline_view(table)["live_writers"]
        assert w["lane"] == "backfill \u203a rewrite" and w["writer"]["try_number"] == "2"
    finally:
        tx.abort(reason="test over", rollback=True)
    attempt_log.write_record(table, rec)  # as if the writer died: only the begin record is left
    row = next(r for r in build_timeline_view(table)["instants"] if r["instant"] == tx.instant_time)
    assert row["outcome"] == "rolled_back" and row["on_timeline"] is False
