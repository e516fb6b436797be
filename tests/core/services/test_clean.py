"""Clean: what each policy keeps (checked through hudi-rs time travel), the clean instants on
the timeline, and LAZY rollback of a SIGKILLed writer while a live slow writer survives."""

import json
import multiprocessing as mp
import os
import signal
import time

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.concurrency import abort_signal

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.services.clean import run_clean
from airflow_hudi_occ.cli import main as cli_main
from airflow_hudi_occ.core.services.clustering import execute_clustering, schedule_clustering
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import CleanedInstantError
from airflow_hudi_occ.core.table.file_system_view import list_base_files
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.format.metadata import CleanerPlan, CleanMetadata
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.testing.service_workers import write_then_hang, write_when_told
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key


def _history(table, opts, n=5):
    """n upserts of keys 0..2 in partition a; key 100 in partition b written once."""
    w = ArrowTableWriter(table, WriteConfig.from_options(opts))
    insts = []
    w.write(pa.Table.from_pylist([{"id": 100, "p": "b", "ts": 0, "v": "once"}]), "upsert")
    for i in range(n):
        r = w.write(pa.Table.from_pylist([{"id": k, "p": "a", "ts": i, "v": f"v{i}"} for k in range(3)]),
                    "upsert")
        insts.append(r.instant.requested_time)
    return insts


def test_keep_latest_commits_time_travel(table, fast_options):
    opts = {**fast_options, "hoodie.cleaner.commits.retained": "2"}
    insts = _history(table, opts)
    before = {t: rows_by_key(hudi_read(table.base_uri, as_of=t)) for t in insts}
    res = run_clean(table, opts)
    # earliest retained = 2nd newest commit; the version just before it is kept as well
    assert res.earliest_commit_to_retain == insts[-2]
    assert len(res.deleted_files) == 2
    for t in insts[-3:]:
        assert rows_by_key(hudi_read(table.base_uri, as_of=t)) == before[t]
    assert rows_by_key(hudi_read(table.base_uri))[100]["v"] == "once"  # its only version stays
    for t in insts[:2]:
        with pytest.raises(CleanedInstantError) as ei:
            read_table(table, as_of=t)
        assert ei.value.clean_instant == res.clean_instant and "commits.retained" in str(ei.value)
        # hudi-rs (0.5.0) does not fail: it silently returns the table without that file group
        assert rows_by_key(hudi_read(table.base_uri, as_of=t)) != before[t]
    assert rows_by_key(read_table(table, as_of=insts[-3]).drop_columns(
        [c for c in read_table(table).column_names if c.startswith("_hoodie")])) == before[insts[-3]]
    # the clean instant, as Java Hudi 1.x writes it
    tl = table.timeline()
    inst = tl.get(res.clean_instant)
    assert inst.action is Action.CLEAN and inst.is_completed
    names = tl.files_of(res.clean_instant)
    assert {n.split(".", 1)[1] for n in names} == {"clean.requested", "clean.inflight", "clean"}
    meta = CleanMetadata.decode(table.storage.read(tl.file_path(inst)))
    assert meta.earliest_commit_to_retain == insts[-2] and meta.deleted_files() == set(res.deleted_files)
    req = [n for n in names if n.endswith("clean.requested")][0]
    plan = CleanerPlan.decode(table.storage.read(table.storage.path(".hoodie", "timeline", req)), table.base_uri)
    assert sorted(f for v in plan.files_by_partition.values() for f in v) == sorted(res.deleted_files)
    assert run_clean(table, opts).clean_instant is None  # nothing more to clean: no instant


def test_keep_latest_file_versions(table, fast_options):
    opts = {**fast_options, "hoodie.clean.policy": "KEEP_LATEST_FILE_VERSIONS",
            "hoodie.cleaner.fileversions.retained": "2"}
    insts = _history(table, opts)
    res = run_clean(table, opts)
    assert len(res.deleted_files) == 3
    left = sorted(b.instant_time for b in list_base_files(table, "a"))
    assert left == insts[-2:]
    assert rows_by_key(hudi_read(table.base_uri, as_of=insts[-2]))[0]["v"] == "v3"


def test_replaced_file_groups_are_cleaned_and_pending_clustering_inputs_kept(table, fast_options):
    opts = {**fast_options, "hoodie.cleaner.commits.retained": "1"}
    w = ArrowTableWriter(table, WriteConfig.from_options(opts))
    for b in range(3):
        w.write(pa.Table.from_pylist([{"id": b, "p": "a", "ts": b, "v": "x"}]), "insert")
    snapshot = rows_by_key(hudi_read(table.base_uri))
    t = schedule_clustering(table, opts)
    res = run_clean(table, opts)  # the plan's inputs are needed: nothing may go
    assert res.deleted_files == [] and len(list_base_files(table, "a")) == 3
    execute_clustering(table, opts, t)
    res = run_clean(table, opts)
    assert len(res.deleted_files) == 3  # the replaced file groups, entirely
    assert [b.instant_time for b in list_base_files(table, "a")] == [t]
    assert rows_by_key(hudi_read(table.base_uri)) == snapshot


def test_pending_write_keeps_its_input_and_its_files(table, fast_options, tmp_path):
    """KEEP_LATEST_FILE_VERSIONS=1 keeps only the newest version, except the version a running
    writer started from, and it never touches the running writer's own files."""
    from airflow_hudi_occ.core.errors import WriteConflictError
    opts = {**fast_options, "hoodie.clean.policy": "KEEP_LATEST_FILE_VERSIONS",
            "hoodie.cleaner.fileversions.retained": "1"}
    _history(table, opts, n=2)  # versions v0, v1 of the file group in partition a
    old = sorted(b.instant_time for b in list_base_files(table, "a"))
    w = ArrowTableWriter(table, WriteConfig.from_options(opts))
    seen = {}

    def during(tx):  # W has read v1 and written its file; another writer commits v2 now
        other = ArrowTableWriter(table, WriteConfig.from_options(opts)).write(
            pa.Table.from_pylist([{"id": 1, "p": "a", "ts": 8, "v": "other"}]), "upsert")
        seen["v2"] = other.instant.requested_time
        seen["res"] = run_clean(table, opts)
        seen["files"] = sorted(b.instant_time for b in list_base_files(table, "a"))
        seen["t"] = tx.instant_time

    with pytest.raises(WriteConflictError):  # W then loses to v2 (simple strategy)
        w.write(pa.Table.from_pylist([{"id": 0, "p": "a", "ts": 9, "v": "new"}]), "upsert",
                before_commit=during)
    assert [f.rsplit("_", 1)[1][:17] for f in seen["res"].deleted_files] == [old[0]]
    assert seen["files"] == sorted([old[1], seen["v2"], seen["t"]])  # W's input and W's own file stay
    assert rows_by_key(hudi_read(table.base_uri))[1]["v"] == "other"


def test_clean_prunes_bookkeeping_of_gone_instants(table, fast_options):
    opts = {**fast_options, "hoodie.cleaner.commits.retained": "1"}
    insts = _history(table, opts, n=3)
    attempt_log.write_record(table, attempt_log.AttemptRecord(instant="20000101000000000", action="commit",
                                                              operation="UPSERT", writer_id="gone"))
    abort_signal.raise_abort(table, insts[0], "stale signal")
    res = run_clean(table, opts)
    assert res.pruned_attempt_records == ["20000101000000000"]
    assert res.pruned_abort_signals == [insts[0]]
    assert {r.instant for r in attempt_log.read_records(table)} >= set(insts)  # committed ones stay
    # what went is counted, so the page can say a clean pruned history (and only then)
    summary = attempt_log.read_pruned_summary(table)
    assert (summary["count"], summary["by_outcome"], summary["newest_instant"]) == \
        (1, {"committed": 1}, "20000101000000000")


def test_sigkilled_writer_rolled_back_by_clean_live_slow_writer_survives(table, fast_options, tmp_path):
    opts = {**fast_options, "hoodie.client.heartbeat.interval_in_ms": "400",
            "hoodie.client.heartbeat.tolerable.misses": "2"}
    _history(table, opts, n=1)
    ctx = mp.get_context("spawn")
    ready_a, ready_b, go_b = (str(tmp_path / n) for n in ("ready_a", "ready_b", "go_b"))
    results = ctx.Queue()
    doomed = ctx.Process(target=write_then_hang, args=(
        table.base_uri, opts, [{"id": k, "p": "c", "ts": 5, "v": "doomed"} for k in (7, 8)], ready_a))
    slow = ctx.Process(target=write_when_told, args=(
        table.base_uri, opts, [{"id": 9, "p": "d", "ts": 5, "v": "slow"}], ready_b, go_b, results))
    doomed.start()
    slow.start()
    deadline = time.time() + 120
    while not (os.path.exists(ready_a) and os.path.exists(ready_b)) and time.time() < deadline:
        time.sleep(0.05)
    dead_t, live_t = open(ready_a).read(), open(ready_b).read()
    assert [b for b in list_base_files(table, "c") if b.instant_time == dead_t]  # it wrote files
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.join()
    # A real wait, not now=: the live writer keeps beating meanwhile, so the clean must tell a
    # dead heartbeat from a live one as of the same clock (a future now= would age both).
    time.sleep(1.5)  # > interval x misses: the killed writer's heartbeat has expired
    res = run_clean(table, opts)
    assert [r["rolled_back"] for r in res.rolled_back] == [dead_t]
    tl = table.timeline()
    assert tl.get(dead_t) is None and tl.get(live_t) is not None
    assert not [b for b in list_base_files(table, "c")]
    assert not os.path.exists(os.path.join(table.base_uri, ".hoodie", ".temp", dead_t))
    assert not os.path.exists(os.path.join(table.base_uri, ".hoodie", ".heartbeat", dead_t))
    open(go_b, "w").close()
    assert results.get(timeout=60)["outcome"] == "committed"
    slow.join(timeout=30)
    rows = rows_by_key(hudi_read(table.base_uri))
    assert rows[9]["v"] == "slow" and 7 not in rows and 8 not in rows


def test_cli_clean_rollback_cluster(table, fast_options, capsys):
    opts = {**fast_options, "hoodie.cleaner.commits.retained": "1"}
    _history(table, opts, n=3)
    o = [a for k, v in opts.items() for a in ("-o", f"{k}={v}")]
    assert cli_main(["clean", table.base_uri, "--dry-run", "--json", *o]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["dry_run"] and len(dry["planned_files"]) == 1 and len(list_base_files(table, "a")) == 3
    assert cli_main(["clean", table.base_uri, "--json", *o]) == 0
    assert sorted(json.loads(capsys.readouterr().out)["deleted_files"]) == sorted(dry["planned_files"])
    assert cli_main(["rollback", table.base_uri, "--json", *o]) == 0
    assert json.loads(capsys.readouterr().out) == {"rolled_back": []}
    assert cli_main(["rollback", table.base_uri, "--instant", "20200101000000000", *o]) == 2
    assert "20200101000000000" in capsys.readouterr().err
    ArrowTableWriter(table, WriteConfig.from_options(opts)).write(
        pa.Table.from_pylist([{"id": 50, "p": "a", "ts": 1, "v": "y"}]), "insert")
    assert cli_main(["cluster", "schedule", table.base_uri, "--json", *o]) == 0
    t = json.loads(capsys.readouterr().out)["scheduled"]
    assert cli_main(["cluster", "show", table.base_uri, "--json", *o]) == 0
    assert [p["instant"] for p in json.loads(capsys.readouterr().out)["pending"]] == [t]
    assert cli_main(["cluster", "run", table.base_uri, "--json", *o]) == 0
    assert json.loads(capsys.readouterr().out)["instant"] == t


def test_clean_right_after_a_retried_conflict_keeps_it_for_the_page_and_the_cli(tmp_path, capsys,
                                                                               fast_options):
    """The issue's case: a conflict, its retry, then a clean retaining one commit. The loser
    is off the timeline and older than the retained commit, yet younger than the trends window:
    its record stays, so the page's read models and `hudi-occ attempts` count the same."""
    from airflow_hudi_occ.core.inspection.timeline_view import build_timeline_view
    from airflow_hudi_occ.core.inspection.trends import build_trends
    from airflow_hudi_occ.core.table.table import Table
    from tests.core.inspection.test_timeline_view import make_contended_table

    got = make_contended_table(str(tmp_path / "events"))
    table = Table.open(str(tmp_path / "events"))
    res = run_clean(table, {**fast_options, "hoodie.clean.commits.retained": "1"})
    assert res.earliest_commit_to_retain > got["loser"] and table.timeline().get(got["loser"]) is None
    assert res.pruned_attempt_records == [] and attempt_log.read_pruned_summary(table) is None

    view = build_timeline_view(table)
    assert [c["instant"] for c in view["conflicts"]] == [got["loser"]]
    assert [a["instant"] for a in view["retries"][0]["attempts"]] == [got["loser"], got["retry"]]
    trends = build_trends(table, window="1d")
    assert (trends["totals"]["conflicts"], trends["totals"]["retries"]) == (1, 1)
    assert trends["pruned"] is None
    assert cli_main(["attempts", table.base_uri, "--outcome", "conflict", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["attempts"]
    assert (row["instant"], row["other_instant"], row["retried_by"]) == (got["loser"], got["winner"], got["retry"])

    # a month and a half later the same clean prunes it, and says so
    later = run_clean(table, {**fast_options, "hoodie.clean.commits.retained": "1"},
                      now=time.time() + attempt_log.RETAINED_MS / 1000 + 3600)
    assert got["loser"] in later.pruned_attempt_records
    assert attempt_log.read_pruned_summary(table)["by_outcome"]["conflict"] == 1
