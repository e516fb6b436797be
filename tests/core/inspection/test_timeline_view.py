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
from airflow_hudi_occ.core.concurrency import admission
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import WriteConflictError
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.inspection.attempt_history import list_attempts
from airflow_hudi_occ.core.inspection.timeline_view import build_timeline_view
from airflow_hudi_occ.core.inspection.trends import build_trends
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
    # the retry was admitted after waiting for the backfill (the write operator's labels)
    out["waited_for"] = f"{out['winner']} (backfill.rewrite) on partitions p0"
    waited = ArrowTableWriter(table, _cfg(**ingest_labels, **admission.wait_labels(12.5, [out["waited_for"]])),
                              writer_id="ingest")
    res = waited.write(_rows(range(5), "ingest-2"), batch_key="ingest-batch", attempt=2)
    out["retry"] = res.instant.requested_time
    return out


def make_concurrent_runs_table(path: str, *, now: float | None = None) -> dict:
    """Two runs of one task at once, and history a clean pruned: used by the UI tests too.

    Forty days before ``now`` (the writers' instant clock set back), ``ingest.upsert`` run
    ``old`` lost a conflict and retried. Now, run ``late__2`` of the same task begins, run
    ``manual__1`` writes the same file group and commits in the middle of it (its bar lies
    inside the loser's), and ``late__2`` retries. A clean retaining one commit then prunes the
    old loser's record (older than the attempt log's retention), never the new one's.
    """
    import time as _time

    from airflow_hudi_occ.core.format.instant_time import InstantTimeGenerator
    from airflow_hudi_occ.core.services.clean import run_clean

    now = _time.time() if now is None else now
    table = Table.create(path, "runs", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    old_clock = InstantTimeGenerator(0, clock=lambda: now - 40 * 86_400, sleep=lambda s: None)

    def upsert(run, gen=None):
        labels = dict(dag_id="ingest", task_id="upsert", run_id=run, try_number="1")
        return ArrowTableWriter(table, _cfg(**labels), writer_id=f"upsert-{run}", time_generator=gen)

    out = {}
    ArrowTableWriter(table, _cfg(dag_id="seed", task_id="load", run_id="r0", try_number="1"),
                     time_generator=old_clock).write(_rows(range(20), "seed"))
    old, old_winner = upsert("old", old_clock), upsert("old-w", old_clock)

    def old_winner_first(tx):
        out["old_loser"] = tx.instant_time
        old_winner.write(_rows(range(5), "old-w"))

    with pytest.raises(WriteConflictError):
        old.write(_rows(range(5), "old"), batch_key="old", attempt=1, before_commit=old_winner_first)
    out["old_retry"] = old.write(_rows(range(5), "old-2"), batch_key="old",
                                 attempt=2).instant.requested_time

    late, manual = upsert("late__2"), upsert("manual__1")

    def manual_commits_inside(tx):
        out["loser"] = tx.instant_time
        out["winner"] = manual.write(_rows(range(10), "manual")).instant.requested_time

    with pytest.raises(WriteConflictError):
        late.write(_rows(range(5), "late"), batch_key="late", attempt=1, before_commit=manual_commits_inside)
    out["retry"] = late.write(_rows(range(5), "late-2"), batch_key="late", attempt=2).instant.requested_time
    out["clean"] = run_clean(table, {**FAST_WRITE_OPTIONS, "hoodie.clean.commits.retained": "1"}, now=now)
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


def _mor_rows(rows):
    return pa.table({"id": [r[0] for r in rows], "p": [r[1] for r in rows],
                     "ts": [r[2] for r in rows], "v": [r[3] for r in rows]})


def make_compacting_table(path: str) -> dict:
    """A merge-on-read table under prefer-writer with three compactions: ``done`` completed
    while ingestion appended to its file group (``appended``); ``won`` completed in the
    middle of an ingestion attempt on its file group, which lost (``loser``) and was retried
    (``retry``); ``pending`` is only requested, and a writer appended to its file group
    meanwhile (``appended_pending``). Used by the UI tests too."""
    from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
    from airflow_hudi_occ.core.services.compaction import execute_compaction, schedule_compaction

    opts = {**FAST_WRITE_OPTIONS, "hoodie.write.lock.conflict.resolution.strategy": "prefer-writer"}

    def svc(run):
        return {**opts, attempt_log.LABELS_OPTION: json.dumps(
            {"dag_id": "services", "task_id": "compact", "run_id": run, "try_number": "1"})}

    table = Table.create(path, "orders", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts", table_type="MERGE_ON_READ")

    def writer(task, run="r1"):
        labels = {"dag_id": "ingest", "task_id": task, "run_id": run, "try_number": "1"}
        return MergeOnReadWriter(table, WriteConfig.from_options(
            {**opts, attempt_log.LABELS_OPTION: json.dumps(labels)}), writer_id=task)

    out = {}
    w = writer("load")
    w.write(_mor_rows([(i, f"p{i % 2}", 1, "seed") for i in range(10)]), "insert")
    writer("load", "r1b").write(_mor_rows([(0, "p0", 2, "u"), (1, "p1", 2, "u")]))
    out["done"] = schedule_compaction(table, svc("s1"), force=True)
    out["appended"] = writer("upsert").write(_mor_rows([(2, "p0", 3, "during")])).instant.requested_time
    execute_compaction(table, svc("s1"), out["done"])
    writer("upsert", "r2").write(_mor_rows([(3, "p1", 3, "after")]))

    def compaction_completes_meanwhile(tx):
        out["loser"] = tx.instant_time
        out["won"] = schedule_compaction(table, svc("s2"), force=True)
        execute_compaction(table, svc("s2"), out["won"])

    late = writer("upsert", "r3")
    with pytest.raises(WriteConflictError):
        late.write(_mor_rows([(5, "p1", 4, "lost")]), batch_key="late", attempt=1,
                   before_commit=compaction_completes_meanwhile)
    out["retry"] = late.write(_mor_rows([(5, "p1", 4, "retried")]), batch_key="late",
                              attempt=2).instant.requested_time
    out["pending"] = schedule_compaction(table, svc("s3"), force=True)
    out["appended_pending"] = writer("upsert", "r4").write(
        _mor_rows([(7, "p1", 5, "meanwhile")])).instant.requested_time
    return out


def test_compactions_with_the_writers_they_met(tmp_path):
    got = make_compacting_table(str(tmp_path / "orders"))
    table = Table.open(str(tmp_path / "orders"))
    view = build_timeline_view(table, name="orders")
    json.dumps(view)
    rows = {r["instant"]: r for r in view["instants"]}
    comps = {c["instant"]: c for c in view["compactions"]}
    assert list(comps) == [got["done"], got["won"], got["pending"]]

    done = comps[got["done"]]
    assert done["state"] == "completed" and done["outcome"] == "committed"
    assert rows[got["done"]]["action"] == "commit" and rows[got["done"]]["operation"] == "COMPACT"
    assert done["lane"] == "services \u203a compact" and done["log_files"] == 2
    assert len(done["file_groups"]) == 2 and {fg.split("/")[0] for fg in done["file_groups"]} == {"p0", "p1"}
    # the upsert that ran while it was pending: its log lands in the new slice, no conflict
    assert [a["instant"] for a in done["appended"]] == [got["appended"]]
    assert done["conflicted"] == []

    won = comps[got["won"]]
    assert won["state"] == "completed"
    assert won["conflicted"] == [{"instant": got["loser"], "lane": "ingest \u203a upsert",
                                  "retried_by": got["retry"]}]
    [c] = view["conflicts"]
    assert (c["instant"], c["other_instant"], c["other_lane"]) == (got["loser"], got["won"],
                                                                   "services \u203a compact")

    pending = comps[got["pending"]]
    assert pending["state"] == "requested" and pending["completion_time"] is None
    # scheduled, not started: a table service waiting for its executor, not a stale writer
    assert pending["outcome"] == "service" and rows[got["pending"]]["outcome"] == "service"
    assert got["pending"] not in {w["instant"] for w in view["live_writers"]}
    assert pending["lane"] == "table service: compaction"
    # drawn as a mark at its request, not a bar to now: nothing runs until an executor starts it
    p = rows[got["pending"]]
    assert p["end_ms"] == p["start_ms"] and p["end_kind"] == "scheduled"
    # each compaction is its own task run; the one retry is the attempt that lost
    assert [r["key"] for r in view["retries"]] == ["ingest/upsert/r3"]
    assert pending["file_groups"] and all(fg.startswith("p1/") for fg in pending["file_groups"])
    assert [a["instant"] for a in pending["appended"]] == [got["appended_pending"]]
    assert rows[got["pending"]]["compaction"]["appended"] == [got["appended_pending"]]
    # an ordinary deltacommit is no compaction
    assert "compaction" not in rows[got["appended"]]


def test_concurrent_runs_of_one_task_get_their_own_rows(tmp_path):
    got = make_concurrent_runs_table(str(tmp_path / "runs"))
    view = build_timeline_view(Table.open(str(tmp_path / "runs")))
    rows = {r["instant"]: r for r in view["instants"]}
    loser, winner, retry = rows[got["loser"]], rows[got["winner"]], rows[got["retry"]]
    assert loser["lane"] == winner["lane"] == retry["lane"] == "ingest \u203a upsert"
    # the winner ran inside the loser's bar: on one row it would be hidden under it
    assert loser["start_ms"] < winner["start_ms"] and winner["end_ms"] <= loser["end_ms"]
    assert (loser["lane_row"], winner["lane_row"]) == (0, 1)
    assert retry["lane_row"] == 0  # after its loser, on the loser's row
    lanes = {lane["lane"]: lane for lane in view["lanes"]}
    assert lanes["ingest \u203a upsert"]["rows"] == 2 and lanes["seed \u203a load"]["rows"] == 1
    # rows of one sub-row never overlap
    for lane in view["lanes"]:
        for k in range(lane["rows"]):
            bars = sorted((r["start_ms"], r["end_ms"]) for r in view["instants"]
                          if r["lane"] == lane["lane"] and r["lane_row"] == k)
            assert all(a[1] <= b[0] for a, b in zip(bars, bars[1:])), (lane["lane"], k, bars)


def test_a_gone_attempt_names_its_rollback_after_the_timeline_forgot_it(tmp_path):
    """Archival moves the rollback off the active timeline; the loser's record still names it."""
    got = make_contended_table(str(tmp_path / "events"))
    table = Table.open(str(tmp_path / "events"))
    [rb] = [i for i in table.timeline() if i.action.value == "rollback"]
    assert attempt_log.read_record(table, got["loser"]).rolled_back_by == rb.requested_time
    # as archival would leave it: the rollback's files gone from .hoodie
    for name in table.timeline().files_of(rb.requested_time):
        table.storage.delete(table.storage.path(table.config.timeline_folder, name))
    assert all(i.action.value != "rollback" for i in table.timeline())
    rows = {r["instant"]: r for r in build_timeline_view(table)["instants"]}
    assert rows[got["loser"]]["rolled_back_by"] == rb.requested_time


def test_a_commit_archival_took_off_the_timeline_is_still_drawn_committed(tmp_path):
    """Archival moves committed instants to the history; their attempt records still say they
    committed, and the page must not draw them as rolled back (it drew most of a 90-day
    backfill so)."""
    got = make_contended_table(str(tmp_path / "events"))
    table = Table.open(str(tmp_path / "events"))
    winner = got["winner"]
    assert attempt_log.read_record(table, winner).outcome == attempt_log.COMMITTED
    for name in table.timeline().files_of(winner):  # as archival leaves it
        table.storage.delete(table.storage.path(table.config.timeline_folder, name))
    rows = {r["instant"]: r for r in build_timeline_view(table)["instants"]}
    row = rows[winner]
    assert (row["outcome"], row["state"], row["on_timeline"]) == ("committed", "archived", False)
    assert rows[got["loser"]]["outcome"] != "committed"


def test_an_attempt_that_waited_says_for_whom_hidden_from_a_reader_of_other_dags(tmp_path):
    got = make_contended_table(str(tmp_path / "t"))
    view = build_timeline_view(Table.open(str(tmp_path / "t")))
    rows = {r["instant"]: r for r in view["instants"]}
    assert rows[got["retry"]]["wait"] == {"seconds": 12.5, "waited_for": [got["waited_for"]]}
    assert rows[got["loser"]]["wait"] is None  # its first attempt did not wait
    [retry] = view["retries"]
    assert [a["wait"] for a in retry["attempts"]] == [None, rows[got["retry"]]["wait"]]
    # a reader granted the DAG "ingest" only sees that it waited, and on what, not for whose task
    scoped = build_timeline_view(Table.open(str(tmp_path / "t")), may_read=lambda dag: dag == "ingest")
    [row] = [r for r in scoped["instants"] if r["instant"] == got["retry"]]
    assert row["wait"]["waited_for"] == [f"{got['winner']} (a DAG you may not read) on partitions p0"]


def make_mapped_run_table(path: str) -> dict:
    """One run of a mapped backfill task: three mapped tasks, each into its own day; the
    second loses to an ingestion write into its day and commits on its retry (attempt 2)."""
    table = Table.create(path, "mapped", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")

    def mapped(i):
        return ArrowTableWriter(table, _cfg(dag_id="backfill", task_id="rewrite_day", run_id="bf__1",
                                            try_number="1", map_index=str(i)), writer_id=f"day-{i}")

    out = {"days": []}
    ArrowTableWriter(table, _cfg(dag_id="seed", task_id="load", run_id="r0", try_number="1")).write(
        _rows(range(100, 110), "seed", p="d1"))  # one file group in d1 for both to update
    ingest = ArrowTableWriter(table, _cfg(dag_id="ingest", task_id="upsert", run_id="m1", try_number="1"))

    def ingest_first(tx):
        out["loser"] = tx.instant_time
        out["winner"] = ingest.write(_rows(range(100, 102), "ingest", p="d1")).instant.requested_time

    for i in range(3):
        if i == 1:
            with pytest.raises(WriteConflictError):
                mapped(i).write(_rows(range(100, 105), "bf", p="d1"), batch_key="bf/d1", attempt=1,
                                before_commit=ingest_first)
            out["retry"] = mapped(i).write(_rows(range(100, 105), "bf", p="d1"), batch_key="bf/d1",
                                           attempt=2).instant.requested_time
        else:
            out["days"].append(mapped(i).write(_rows(range(i * 10, i * 10 + 5), "bf", p=f"d{i}"),
                                               batch_key=f"bf/d{i}").instant.requested_time)
    return out


def test_the_mapped_tasks_of_one_run_are_not_retries_of_each_other(tmp_path):
    got = make_mapped_run_table(str(tmp_path / "mapped"))
    table = Table.open(str(tmp_path / "mapped"))
    view = build_timeline_view(table)
    [r] = view["retries"]  # only the mapped task that lost and retried
    assert r["key"] == "backfill/rewrite_day/bf__1[1]"
    assert [a["instant"] for a in r["attempts"]] == [got["loser"], got["retry"]]
    rows = {x["instant"]: x for x in view["instants"]}
    assert all(rows[d]["retry_of"] is None and rows[d]["retried_by"] is None for d in got["days"])
    assert rows[got["retry"]]["retry_of"] == got["loser"]
    attempts = {a["instant"]: a for a in list_attempts(table, table.timeline())["attempts"]}
    assert [attempts[d]["retry_of"] for d in got["days"]] == [None, None]
    assert attempts[got["retry"]]["retry_of"] == got["loser"]
    assert build_trends(table, window="1d")["totals"]["retries"] == 1
