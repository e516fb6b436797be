"""Trends over days, from attempt logs written by real commits and real conflicts.

The table's history is written by the real Arrow writer with an injected clock, so its
instants fall on chosen past days: losers are really rolled back, and the attempt log holds
what the writers themselves recorded (seconds and files discarded, the winner, the file
groups). Nothing here builds records by hand except the damaged-log case.
"""

from __future__ import annotations

import calendar
import json
import time
import types
from unittest import mock

import pytest

from airflow_hudi_occ.core.commit import attempt_log, transaction
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.errors import ConfigError, WriteConflictError
from airflow_hudi_occ.core.format.instant_time import InstantTimeGenerator, parse_ms
from airflow_hudi_occ.core.inspection.trends import build_trends, parse_window
from airflow_hudi_occ.core.table.table import Table
from tests.core.inspection.test_timeline_view import _cfg, _rows

#: "now" for every test: 2026-11-20 12:00 UTC
NOW = calendar.timegm((2026, 11, 20, 12, 0, 0))
DAY = 86_400


class Clock:
    def __init__(self, t: float):
        self.t = t

    def __call__(self) -> float:
        return self.t


def make_history(path: str, now: float = NOW) -> dict:
    """See :func:`_write_history`. The writers' wall clock (attempt start and end, seconds
    discarded) follows the injected clock too, so every time in a record agrees with its
    instant, as it would had the history really happened over those days."""
    clock = Clock(now - 12 * DAY)
    wall = types.SimpleNamespace(time=clock, sleep=time.sleep, monotonic=time.monotonic)
    with mock.patch.object(transaction, "time", wall), mock.patch.object(attempt_log, "time", wall):
        return _write_history(path, now, clock)


def _write_history(path: str, now: float, clock: "Clock") -> dict:
    """Ten days of one table: a seed, then ``ingest`` losing to ``backfill`` on p0 ten days ago,
    three days ago and yesterday (retrying each time), ``report`` losing to ``ingest`` on p1 an
    hour ago, and an unlabelled writer committing. Every retry commits 3 s after it is
    requested (the clock moves while it writes), and each loser wrote for 2 s before it lost.
    Used by the UI tests too, with the real now."""
    gen = InstantTimeGenerator(0, clock=clock, sleep=lambda s: None)
    table = Table.create(path, "events", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")

    def writer(dag, task, run, wid):
        labels = dict(dag_id=dag, task_id=task, run_id=run, try_number="1") if dag else {}
        return ArrowTableWriter(table, _cfg(**labels), writer_id=wid, time_generator=gen)

    out: dict = {"conflicts": [], "retries": []}
    out["seed"] = writer("seed", "load", "r0", "seed").write(
        _rows(range(20), "seed")).instant.requested_time
    writer("seed", "load", "r0b", "seed").write(_rows(range(20, 30), "seed", p="p1"))

    def contended(at, loser_dag, winner_dag, p, run):
        clock.t = at
        loser = writer(loser_dag, "upsert", run, loser_dag)
        winner = writer(winner_dag, "rewrite", run + "-w", winner_dag)
        got = {}
        base = {"p0": 0, "p1": 20}[p]  # keys the seed wrote: both writers update its file group

        def winner_commits_first(tx):
            got["loser"] = tx.instant_time
            clock.t += 2
            got["winner"] = winner.write(_rows(range(base, base + 5), winner_dag, p=p)).instant.requested_time

        with pytest.raises(WriteConflictError):
            loser.write(_rows(range(base, base + 3), loser_dag, p=p), batch_key=run, attempt=1,
                        before_commit=winner_commits_first)

        def slow(tx):
            clock.t += 3

        clock.t += 60
        got["retry"] = loser.write(_rows(range(base, base + 3), loser_dag + "-2", p=p), batch_key=run, attempt=2,
                                   before_commit=slow).instant.requested_time
        out["conflicts"].append(got)
        return got

    out["old"] = contended(now - 10 * DAY, "ingest", "backfill", "p0", "old")
    out["d3"] = contended(now - 3 * DAY, "ingest", "backfill", "p0", "d3")
    out["d1"] = contended(now - 1 * DAY + 3600, "ingest", "backfill", "p0", "d1")
    out["h1"] = contended(now - 3600, "report", "ingest", "p1", "h1")
    clock.t = now - 1800
    out["anon"] = writer(None, None, None, "anon").write(_rows(range(40, 42), "anon", p="p2")).instant.requested_time
    return out


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("trends") / "events")
    got = make_history(path)
    return Table.open(path), got


def _day(bucket_list, ts):
    day = parse_ms(ts) // 86_400_000 * 86_400_000
    [b] = [b for b in bucket_list if b["start_ms"] == day]
    return b


def test_week_counts_conflicts_retries_and_cost_per_day(history):
    table, got = history
    assert table.timeline().get(got["d3"]["loser"]) is None  # really rolled back
    tr = build_trends(table, window="7d", now=NOW, name="events")
    json.dumps(tr)
    assert tr["window"]["bucket"] == "day" and len(tr["buckets"]) == 8  # partial first and last day
    assert [b["label"] for b in tr["buckets"]][-1] == "2026-11-20"
    d3, d1 = _day(tr["buckets"], got["d3"]["loser"]), _day(tr["buckets"], got["d1"]["loser"])
    assert (d3["conflicts"], d3["retries"], d3["committed"]) == (1, 1, 2)
    assert d3["files_discarded"] >= 1 and d3["seconds_discarded"] >= 0
    assert sum(b["conflicts"] for b in tr["buckets"]) == tr["totals"]["conflicts"] == 3  # old one is out
    assert tr["totals"]["retries"] == 3 and tr["totals"]["attempts"] == 10
    records = {r.instant: r for r in attempt_log.read_records(table)}
    losers = [got[k]["loser"] for k in ("d3", "d1", "h1")]
    assert tr["totals"]["seconds_discarded"] == pytest.approx(
        sum(records[t].seconds_discarded for t in losers), abs=1e-3)
    assert tr["totals"]["seconds_discarded"] == pytest.approx(6.0, abs=0.05)  # 2 s per loser
    assert tr["totals"]["files_discarded"] == sum(records[t].files_discarded for t in losers) >= 3
    assert tr["covered_from_ms"] <= parse_ms(got["old"]["loser"])  # the lookback day reads it
    assert tr["filtered"] is False


def test_dags_file_groups_and_who_beats_whom(history):
    table, got = history
    tr = build_trends(table, window="7d", now=NOW)
    dags = {d["dag_id"]: d for d in tr["dags"]}
    assert set(dags) == {"ingest", "backfill", "report", None}
    assert (dags["ingest"]["conflicts"], dags["ingest"]["retries"]) == (2, 2)
    assert dags["report"]["conflicts"] == 1 and dags["backfill"]["conflicts"] == 0
    assert tr["dags"][0]["dag_id"] in ("ingest", "report")  # most time discarded first
    assert dags["ingest"]["tasks"] == ["rewrite", "upsert"]  # it won on p1 as "rewrite"

    # hot file groups: the p0 group the two ingest attempts lost on, fought over by both DAGs
    hot = tr["file_groups"]
    assert hot[0]["partition"] == "p0" and hot[0]["conflicts"] == 2
    assert hot[0]["dags"] == ["backfill", "ingest"]
    records = {r.instant: r for r in attempt_log.read_records(table)}
    assert hot[0]["file_group"] in records[got["d3"]["loser"]].file_groups
    assert any(g["partition"] == "p1" and g["dags"] == ["ingest", "report"] for g in hot)

    fights = {(f["loser_dag"], f["winner_dag"]): f["conflicts"] for f in tr["fights"]}
    assert fights == {("ingest", "backfill"): 2, ("report", "ingest"): 1}


def test_request_to_commit_per_dag(history):
    table, got = history
    tr = build_trends(table, window="7d", now=NOW)
    ingest = {d["dag_id"]: d for d in tr["dags"]}["ingest"]
    # two committed retries (each 3 s from request to commit) and one winner (over 0 s)
    lat = ingest["commit_latency"]
    assert lat["count"] == 3 and 3000 <= lat["p95_ms"] < 3100 and lat["median_ms"] >= 3000
    # a batch waits from its first request (the lost attempt) to its commit: over a minute
    batch = {d["dag_id"]: d for d in tr["dags"]}["report"]["batch_latency"]
    assert batch["count"] == 1 and batch["median_ms"] >= 63_000
    assert batch["median_ms"] == parse_ms(
        next(r for r in attempt_log.read_records(table) if r.instant == got["h1"]["retry"]).completion_time
    ) - parse_ms(got["h1"]["loser"])


def test_windows_and_buckets(history):
    table, got = history
    day = build_trends(table, window="1d", now=NOW)
    assert day["window"]["bucket"] == "hour" and len(day["buckets"]) == 25
    assert day["totals"]["conflicts"] == 2  # d1 (23 h ago) and h1
    month = build_trends(table, window="30d", now=NOW)
    assert month["totals"]["conflicts"] == 4 and len(month["buckets"]) == 31
    assert parse_window("36h").ms == 36 * 3_600_000
    for bad in ("7", "0d", "-1d", "1w", "400d", "7d;drop", "", " 7D "):
        if bad in ("", " 7D "):
            assert parse_window(bad).text in ("7d",)
            continue
        with pytest.raises(ConfigError) as e:
            parse_window(bad)
        assert "1d" in e.value.remedy


def test_a_reader_of_one_dag_sees_only_its_attempts(history):
    table, got = history
    full = build_trends(table, window="7d", now=NOW)
    tr = build_trends(table, window="7d", now=NOW, may_read=lambda dag: dag == "ingest")
    assert tr["filtered"] is True
    assert [d["dag_id"] for d in tr["dags"]] == ["ingest"]
    assert tr["totals"]["conflicts"] == 2 and tr["totals"]["attempts"] == 5
    text = json.dumps(tr)
    assert "backfill" not in text and "report" not in text  # not even as a winner's name
    assert [(f["loser_dag"], f["winner_dag"], f["winner_hidden"]) for f in tr["fights"]] == \
        [("ingest", None, True)]
    assert all(g["dags"] == ["ingest"] for g in tr["file_groups"])
    # asking for one DAG narrows the numbers the same way
    only = build_trends(table, window="7d", now=NOW, dag_id="report")
    assert [d["dag_id"] for d in only["dags"]] == ["report"] and only["totals"]["conflicts"] == 1
    assert full["totals"]["attempts"] > tr["totals"]["attempts"]


def test_a_damaged_or_pruned_log_degrades_the_numbers_not_the_answer(tmp_path, history):
    table, got = history
    recs = list(attempt_log.read_records(table))
    # the winner's record is gone (pruned) and a record is unreadable: still an answer
    kept = [r for r in recs if r.instant != got["d3"]["winner"]]
    tr = build_trends(table, window="7d", now=NOW, records=kept)
    fights = {(f["loser_dag"], f["winner_dag"]): f for f in tr["fights"]}
    assert fights[("ingest", None)]["winner_hidden"] is False and fights[("ingest", None)]["conflicts"] == 1
    empty = Table.create(str(tmp_path / "empty"), "empty", record_key_fields=["id"],
                         partition_fields=["p"], precombine_field="ts")
    tr = build_trends(empty, window="7d", now=NOW)
    assert tr["totals"]["attempts"] == 0 and tr["covered_from_ms"] is None and len(tr["buckets"]) == 8


def test_what_clean_pruned_is_reported_only_after_it_did(tmp_path, history):
    """The page says "clean pruned older records" from ``pruned``: None on a table no clean
    pruned (a young log is not a pruned one), the count and the newest pruned time after."""
    from tests.core.inspection.test_timeline_view import make_concurrent_runs_table
    table, _got = history
    assert build_trends(table, window="30d", now=NOW)["pruned"] is None
    got = make_concurrent_runs_table(str(tmp_path / "runs"))  # its writers use the real clock
    runs = Table.open(str(tmp_path / "runs"))
    assert got["clean"].pruned_attempt_records == [got["old_loser"]]
    tr = build_trends(runs, window="90d")
    assert tr["pruned"]["count"] == 1 and tr["pruned"]["by_outcome"] == {"conflict": 1}
    assert tr["pruned"]["newest_ms"] == parse_ms(got["old_loser"]) < tr["window"]["end_ms"] - 30 * DAY * 1000
    assert tr["pruned"]["last_clean"] == got["clean"].clean_instant
    # the new conflict and its retry are counted; the old retry still counts as a retry
    assert tr["totals"]["conflicts"] == 1 and tr["totals"]["retries"] == 2


def test_admission_waits_are_counted_beside_conflicts(tmp_path):
    """The write operator records an attempt's admission wait in its labels
    (``admission_wait_s``); the trends count waits and their seconds per DAG and in total."""
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    ArrowTableWriter(table, _cfg(dag_id="ingest", task_id="w", run_id="r1")).write(_rows([1], "a"), "upsert")
    ArrowTableWriter(table, _cfg(dag_id="ingest", task_id="w", run_id="r2", admission_wait_s="12.500")).write(
        _rows([2], "b"), "upsert")
    doc = build_trends(table, window="1d")
    assert (doc["totals"]["waits"], doc["totals"]["wait_seconds"]) == (1, 12.5)
    [dag] = doc["dags"]
    assert (dag["dag_id"], dag["waits"], dag["wait_seconds"], dag["conflicts"]) == ("ingest", 1, 12.5, 0)
    assert sum(b["waits"] for b in doc["buckets"]) == 1
