"""``hudi-occ`` on real tables: Java-written fixtures and tables written by the library.

The CLI is driven in-process through ``main()`` (fast, and its JSON is asserted field by field)
and through the installed console script (the entry point a user actually runs).
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_hudi_occ.cli import main
from airflow_hudi_occ.cli.render import render_table
from airflow_hudi_occ.core.config import HeartbeatConfig, WriteConfig
from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.core.concurrency.heartbeat import is_expired
from airflow_hudi_occ.core.format.metadata import WriteStat
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.commit.transaction import WriteTransaction
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.testing.tables import java_fixture

OPTS = {"hoodie.write.lock.provider": "filesystem",
        "hoodie.time.generator.max_expected_clock_skew_ms": "2"}
FAST_HB = {**OPTS, "hoodie.client.heartbeat.interval_in_ms": "200"}
FAST_HB_ARGS = ["--option", "hoodie.client.heartbeat.interval_in_ms=200"]

V8_FG_10 = "10/7b0ea4f9-3768-4e87-b12c-8d33efd22b55-0"
V8_FG_30 = "30/6653c109-b3c0-470e-8ad4-f45947474a34-0"


# --- helpers ---------------------------------------------------------------------------------


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def run_json(capsys, *argv):
    rc, out, err = run(capsys, *argv, "--json")
    assert "Traceback" not in err
    return rc, json.loads(out)


def batch(ids, part, value="v", ts=1):
    return pa.table({"id": list(ids), "p": [part] * len(ids), "ts": [ts] * len(ids),
                     "value": [value] * len(ids)})


def file_id_in(table, partition):
    slices = FileSystemView(table).latest_file_slices(partition)
    assert len(slices) == 1
    return slices[0].file_id


@pytest.fixture
def writers():
    """Pending writers left running by a test; their heartbeats are stopped afterwards."""
    started = []

    def start(table, options=OPTS, markers=()):
        tx = WriteTransaction(table, WriteConfig.from_options(options))
        t = tx.begin()
        for partition, file_id, io in markers:
            tx.create_marker(partition, f"{file_id}_0-0-0_{t}.parquet", io)
        started.append(tx)
        return tx

    yield start
    for tx in started:
        if tx.heartbeat is not None:
            tx.heartbeat.stop(delete=False)


def wait_expired(table, instant, interval_ms=200):
    """Wait (bounded) until the heartbeat is past expiry; a wait, not a timing assertion."""
    cfg = HeartbeatConfig(interval_ms, 2)
    deadline = time.monotonic() + 30
    while not is_expired(table, instant, cfg):
        assert time.monotonic() < deadline, "heartbeat never expired"
        time.sleep(0.05)


# --- Java-written fixtures -----------------------------------------------------------------------


def test_timeline_of_java_v8_table(tmp_path, capsys):
    path = java_fixture("v8_simplekeygen_nonhivestyle", tmp_path)
    rc, doc = run_json(capsys, "timeline", path)
    assert rc == 0 and doc["version"] == 8
    got = [(i["requested_time"], i["action"], i["state"], i["completion_time"], i["duration_ms"],
            i["operation_type"]) for i in doc["instants"]]
    assert got == [("20250713011315930", "commit", "completed", "20250713011316231", 301, "UPSERT"),
                   ("20250713011316909", "commit", "completed", "20250713011317225", 316, "UPSERT")]
    assert doc["instants"][1]["file_groups"] == [V8_FG_10, V8_FG_30]
    assert doc["instants"][1]["writer_id"] is None  # Java Hudi does not record ours

    rc, out, _ = run(capsys, "timeline", path)
    lines = out.splitlines()
    assert rc == 0 and lines[0].split()[:5] == ["REQUESTED", "ACTION", "STATE", "COMPLETED", "DURATION"]
    assert lines[2].split()[:5] == ["20250713011316909", "commit", "completed", "20250713011317225", "0.316s"]
    # aligned: every column starts at the same offset on every line
    assert lines[1].index("completed") == lines[2].index("completed") == lines[0].index("STATE")


def test_timeline_of_java_v6_table_has_no_completion_times(tmp_path, capsys):
    path = java_fixture("v6_simplekeygen_nonhivestyle", tmp_path)
    rc, doc = run_json(capsys, "timeline", path)
    assert rc == 0 and doc["version"] == 6
    assert [(i["requested_time"], i["state"], i["completion_time"], i["duration_ms"], i["operation_type"])
            for i in doc["instants"]] == [
        ("20240418172802262", "completed", None, None, "UPSERT"),
        ("20240418172804498", "completed", None, None, "UPSERT")]


def test_file_groups_of_java_v9_table_now_and_as_of(tmp_path, capsys):
    from hudi import HudiTableBuilder
    path = java_fixture("v9_txns_simple_overwrite", tmp_path)
    rc, doc = run_json(capsys, "file-groups", path)
    theirs = {(s.partition_path, s.file_id, s.creation_instant_time)
              for s in HudiTableBuilder.from_base_uri(str(path)).build().get_file_slices()}
    assert rc == 0 and doc["count"] == len(theirs) > 0
    assert {(g["partition"], g["file_id"], g["instant_time"]) for g in doc["file_groups"]} == theirs
    # the overwrite replaced everything: every surviving group was written by the replacecommit
    assert {g["instant_time"] for g in doc["file_groups"]} == {"20260403184001282"}
    assert {g["completion_time"] for g in doc["file_groups"]} == {"20260403184002260"}

    rc, old = run_json(capsys, "file-groups", path, "--as-of", "20260403183959838")
    view = FileSystemView(Table.open(str(path)), as_of="20260403183959838")
    assert rc == 0 and old["as_of"] == "20260403183959838"
    assert [(g["partition"], g["file_id"], g["instant_time"]) for g in old["file_groups"]] == [
        (s.partition, s.file_id, s.instant_time) for s in view.latest_file_slices()]
    assert {g["instant_time"] for g in old["file_groups"]} == {"20260403183955124", "20260403183959838"}

    rc, eu = run_json(capsys, "file-groups", path, "--as-of", "20260403183959838", "--partition", "eu")
    assert rc == 0 and {g["partition"] for g in eu["file_groups"]} == {"eu"} and eu["count"] == 2

    rc, out, err = run(capsys, "file-groups", path, "--partition", "mars")
    assert rc == 2 and out == "" and "partition 'mars' does not exist" in err and "'eu'" in err


def test_file_groups_of_a_mor_table_list_the_log_files_read_as_of(tmp_path, capsys):
    from hudi import HudiReadOptions, HudiTableBuilder

    from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
    from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS
    t = Table.create(str(tmp_path / "mor"), "mor", record_key_fields=["id"], partition_fields=["p"],
                     precombine_field="ts", table_type="MERGE_ON_READ")
    w = MergeOnReadWriter(t, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    rows = lambda ts: pa.table({"id": [1, 2], "p": ["a", "b"], "ts": [ts, ts], "v": ["x", "y"]})  # noqa: E731
    w.write(rows(1), "insert")
    r2 = w.write(rows(2), "upsert").instant.requested_time
    w.write(rows(3), "upsert")
    ht = HudiTableBuilder.from_base_uri(t.base_uri).build()
    rc, doc = run_json(capsys, "file-groups", t.base_uri)
    theirs = {(s.partition_path, s.file_id): sorted(s.log_file_names) for s in ht.get_file_slices()}
    assert rc == 0 and {(g["partition"], g["file_id"]): sorted(g["log_files"])
                        for g in doc["file_groups"]} == theirs
    assert {len(g["log_files"]) for g in doc["file_groups"]} == {2}
    # as of r2: the slice's logs of instants requested by then (hudi-rs lists the slice's every
    # log file and skips the later blocks when it reads them)
    rc, old = run_json(capsys, "file-groups", t.base_uri, "--as-of", r2)
    theirs = {(s.partition_path, s.file_id) for s in ht.get_file_slices(HudiReadOptions().with_as_of_timestamp(r2))}
    assert rc == 0 and {(g["partition"], g["file_id"]) for g in old["file_groups"]} == theirs
    assert all([n.split("_")[1].split(".")[0] for n in g["log_files"]] == [r2] for g in old["file_groups"])
    rc, out, _ = run(capsys, "file-groups", t.base_uri, "--as-of", r2)
    assert rc == 0 and "LOGS" in out


def test_show_java_v9_table(tmp_path, capsys):
    path = java_fixture("v9_txns_simple_overwrite", tmp_path)
    rc, doc = run_json(capsys, "show", path)
    assert rc == 0
    assert doc["table"]["version"] == 9 and doc["table"]["properties"]["hoodie.table.version"] == "9"
    assert doc["instants"]["total"] == 3
    assert doc["instants"]["by_state"] == {"requested": 0, "inflight": 0, "completed": 3}
    assert doc["instants"]["by_action"] == {"commit": 2, "replacecommit": 1}
    assert doc["instants"]["latest_completed"]["operation_type"] == "INSERT_OVERWRITE_TABLE"
    assert doc["writers"]["pending"] == 0
    rc, out, _ = run(capsys, "show", path)
    assert rc == 0 and "version 9" in out and "3: 0 requested, 0 inflight, 3 completed" in out



def test_show_says_when_the_metadata_table_is_another_tables(tmp_path, capsys, fast_options):
    """Issue 40 item 7: B's metadata table replaced by A's (core/table/metadata_trust.py)."""
    from tests.core.table.test_metadata_trust import two_tables
    a, b, a_instant, _b_instant, _rows = two_tables(tmp_path, fast_options)
    rc, doc = run_json(capsys, "show", str(a))
    assert rc == 0 and doc["table"]["metadata_table_foreign_instants"] == []
    rc, doc = run_json(capsys, "show", str(b))
    assert rc == 0 and doc["table"]["metadata_table_foreign_instants"] == [a_instant]
    rc, out, _ = run(capsys, "show", str(b))
    assert rc == 0 and "NOT this table's" in out and a_instant in out and "hoodie.metadata.enable=false" in out

# --- tables written by the library ------------------------------------------------------------------


def test_timeline_shows_writer_attempt_checkpoint_and_rollbacks(table, capsys):
    w = ArrowTableWriter(table, WriteConfig.from_options(OPTS), writer_id="ingest-1")
    r1 = w.write(batch([1, 2], "a"), "upsert", checkpoint="offset-17", batch_key="b-1", attempt=2)
    tx = WriteTransaction(table, WriteConfig.from_options(OPTS))
    failed = tx.begin()
    tx.create_marker("a", f"{file_id_in(table, 'a')}_0-0-0_{failed}.parquet", "MERGE")
    tx.abort(reason="test")

    rc, doc = run_json(capsys, "timeline", table.base_uri)
    assert rc == 0
    by_time = {i["requested_time"]: i for i in doc["instants"]}
    c = by_time[r1.instant.requested_time]
    assert (c["writer_id"], c["attempt"], c["checkpoint"], c["batch_key"], c["operation_type"]) == (
        "ingest-1", 2, "offset-17", "b-1", "UPSERT")
    assert c["completion_time"] == r1.instant.completion_time and c["duration_ms"] >= 0
    assert failed not in by_time
    rollbacks = [i for i in doc["instants"] if i["action"] == "rollback"]
    assert len(rollbacks) == 1 and rollbacks[0]["rolled_back"] == [failed]
    assert rollbacks[0]["state"] == "completed"

    rc, out, _ = run(capsys, "timeline", table.base_uri)
    assert rc == 0 and f"rolled back {failed}" in out and "offset-17" in out and "ingest-1" in out

    # "why did my write fail?" about an instant that is gone: its attempt record answers,
    # naming the rollback (exit 3: it aborted)
    rc, out, err = run(capsys, "conflicts", table.base_uri, "--instant", failed)
    assert rc == 3 and f"rolled back by {rollbacks[0]['requested_time']}" in out
    assert f"verdict: {failed} ABORTED (aborted)" in out and err == ""
    # without a record (a writer that keeps none, such as Java Hudi), the rollback still does
    from airflow_hudi_occ.core.commit import attempt_log
    attempt_log.delete_record(table, failed)
    rc, out, err = run(capsys, "conflicts", table.base_uri, "--instant", failed)
    assert rc == 2 and out == ""
    assert f"error: instant {failed} is not on the timeline: rollback {rollbacks[0]['requested_time']}" in err
    assert "remedy:" in err and "Traceback" not in err


def test_conflicts_names_the_instant_and_file_group_that_abort_a_pending_write(table, capsys, writers):
    w = ArrowTableWriter(table, WriteConfig.from_options(OPTS))
    r1 = w.write(batch([1], "a"), "upsert")
    r2 = w.write(batch([2], "b"), "upsert")
    fa, fb = file_id_in(table, "a"), file_id_in(table, "b")
    doomed = writers(table, markers=[("a", fa, "MERGE")])
    fine = writers(table, markers=[("c", "11111111-2222-3333-4444-555555555555-0", "CREATE")])
    r3 = w.write(batch([1], "a", value="new", ts=2), "upsert")  # rewrites a/fa after both began
    assert file_id_in(table, "a") == fa

    rc, doc = run_json(capsys, "conflicts", table.base_uri, "--instant", doomed.instant_time)
    assert rc == 3 and doc["would_abort"] is True
    assert doc["strategy"] == "simple" and doc["file_groups_source"] == "markers"
    assert doc["file_groups"] == [f"a/{fa}"]
    assert doc["snapshot"] == {"last_completed": r2.instant.requested_time, "pending_at_start": [],
                               "exact": True}
    assert [c["instant"] for c in doc["conflicts"]] == [r3.instant.requested_time]
    assert doc["conflicts"][0]["conflicting_file_groups"] == [f"a/{fa}"]
    assert [r["kind"] for r in doc["reasons"]] == ["conflict"]
    assert doc["reasons"][0]["other_instant"] == r3.instant.requested_time
    assert doc["heartbeat"]["alive"] is True

    rc, doc = run_json(capsys, "conflicts", table.base_uri, "--instant", fine.instant_time)
    assert rc == 0 and doc["would_abort"] is False and doc["conflicts"] == [] and doc["reasons"] == []
    # r3 completed after `fine` began, so it is checked, and found harmless
    assert r3.instant.requested_time in [c["instant"] for c in doc["candidates"]]
    assert r1.instant.requested_time not in [c["instant"] for c in doc["candidates"]]

    # the same instant, asked about file groups it has not written yet
    rc, doc = run_json(capsys, "conflicts", table.base_uri, "--instant", fine.instant_time,
                       "--file-group", f"a/{fa}", "--file-group", f"b/{fb}")
    assert rc == 3 and doc["file_groups_source"] == "given"
    assert doc["file_groups"] == sorted([f"a/{fa}", f"b/{fb}"])
    assert doc["conflicts"][0]["conflicting_file_groups"] == [f"a/{fa}"]

    rc, out, _ = run(capsys, "conflicts", table.base_uri, "--instant", doomed.instant_time)
    assert rc == 3 and f"verdict: {doomed.instant_time} would ABORT" in out
    assert r3.instant.requested_time in out and fa in out
    rc, out, _ = run(capsys, "conflicts", table.base_uri, "--instant", fine.instant_time)
    assert rc == 0 and f"verdict: {fine.instant_time} would commit" in out


def test_conflicts_bare_file_id_on_a_partitioned_table_is_an_error(table, capsys, writers):
    w = ArrowTableWriter(table, WriteConfig.from_options(OPTS))
    w.write(batch([1], "a"), "upsert")
    fa = file_id_in(table, "a")
    pending = writers(table)
    w.write(batch([1], "a", value="new", ts=2), "upsert")
    rc, out, err = run(capsys, "conflicts", table.base_uri, "--instant", pending.instant_time,
                       "--file-group", fa)
    assert rc == 2 and f"--file-group {fa} names no partition" in err and f"<partition path>/{fa}" in err
    # with its partition, the same question finds the conflict
    rc, doc = run_json(capsys, "conflicts", table.base_uri, "--instant", pending.instant_time,
                       "--file-group", f"a/{fa}")
    assert rc == 3 and doc["would_abort"] is True


def test_conflicts_strategy_decides(table, capsys, writers):
    """Same bucket, different fileIds: the bucket strategy aborts, the simple one does not."""
    pending = writers(table, markers=[("a", "00000007-aaaa-bbbb-cccc-000000000001-0", "CREATE")])
    other = WriteTransaction(table, WriteConfig.from_options(OPTS))
    other.begin()
    other.create_marker("a", f"00000007-dddd-eeee-ffff-000000000002-0_0-0-0_{other.instant_time}.parquet",
                        "CREATE")
    done = other.commit([WriteStat(file_id="00000007-dddd-eeee-ffff-000000000002-0",
                                   path="a/x.parquet", partition_path="a")])
    t = pending.instant_time

    rc, doc = run_json(capsys, "conflicts", table.base_uri, "--instant", t)
    assert rc == 0 and doc["strategy"] == "simple" and doc["would_abort"] is False
    rc, doc = run_json(capsys, "conflicts", table.base_uri, "--instant", t, "--strategy", "bucket")
    assert rc == 3 and doc["strategy"] == "bucket"
    assert [c["instant"] for c in doc["conflicts"]] == [done.instant.requested_time]
    # the strategy can also come from the writers' own option
    rc, doc = run_json(capsys, "conflicts", table.base_uri, "--instant", t, "--option",
                       "hoodie.write.lock.conflict.resolution.strategy=bucket")
    assert rc == 3 and doc["strategy"] == "bucket"

    rc, out, err = run(capsys, "conflicts", table.base_uri, "--instant", t, "--strategy", "nope")
    assert rc == 2 and out == ""
    assert "error: unknown conflict resolution strategy 'nope'" in err
    assert "remedy: use one of simple" in err

    rc, out, err = run(capsys, "conflicts", table.base_uri, "--instant", done.instant.requested_time)
    assert rc == 2 and "is completed" in err


def test_writers_alive_then_expired(table, capsys, writers):
    fid = "11111111-2222-3333-4444-555555555555-0"
    tx = writers(table, FAST_HB, markers=[("a", fid, "CREATE"), ("b", fid, "CREATE")])
    t = tx.instant_time
    tx.heartbeat.beat()
    rc, doc = run_json(capsys, "writers", table.base_uri, *FAST_HB_ARGS)
    assert rc == 0
    assert doc["heartbeat"] == {"interval_ms": 200, "tolerable_misses": 2, "expiry_ms": 400}
    [wr] = doc["writers"]
    assert (wr["instant"], wr["state"], wr["status"], wr["alive"], wr["markers"]) == (
        t, "inflight", "alive", True, 2)
    assert 0 <= wr["heartbeat_age_s"]

    tx.heartbeat.stop(delete=False)  # the writer dies: its last beat stays behind
    wait_expired(table, t)
    rc, doc = run_json(capsys, "writers", table.base_uri, *FAST_HB_ARGS)
    [wr] = doc["writers"]
    assert rc == 0 and (wr["status"], wr["alive"]) == ("expired", False)
    assert wr["heartbeat_age_s"] > 0.4
    # with the default 60 s interval the same writer is still presumed alive
    rc, doc = run_json(capsys, "writers", table.base_uri)
    assert doc["writers"][0]["status"] == "alive"

    rc, out, _ = run(capsys, "writers", table.base_uri, *FAST_HB_ARGS)
    assert rc == 0 and t in out and "expired" in out

    # a dead writer cannot commit: conflicts says so even without any overlap
    rc, doc = run_json(capsys, "conflicts", table.base_uri, "--instant", t, *FAST_HB_ARGS)
    assert rc == 3 and [r["kind"] for r in doc["reasons"]] == ["heartbeat_expired"]
    assert doc["conflicts"] == []

    rc, doc = run_json(capsys, "show", table.base_uri, *FAST_HB_ARGS)
    assert (doc["writers"]["pending"], doc["writers"]["alive"], doc["writers"]["expired"]) == (1, 0, 1)

    tx.heartbeat.stop(delete=True)
    rc, doc = run_json(capsys, "writers", table.base_uri)
    assert doc["writers"][0]["status"] == "missing" and doc["writers"][0]["alive"] is False


def test_markers(table, capsys, writers):
    fid1, fid2 = "aaaaaaaa-0000-0000-0000-000000000001-0", "aaaaaaaa-0000-0000-0000-000000000002-0"
    a = writers(table, markers=[("a", fid1, "CREATE"), ("b", fid2, "MERGE")])
    b = writers(table, markers=[("a", fid2, "CREATE")])
    rc, doc = run_json(capsys, "markers", table.base_uri)
    assert rc == 0 and [d["instant"] for d in doc["instants"]] == [a.instant_time, b.instant_time]
    first = doc["instants"][0]
    assert (first["state"], first["marker_type"], first["count"]) == ("inflight", "DIRECT", 2)
    assert first["file_groups"] == [f"a/{fid1}", f"b/{fid2}"]
    assert {(m["partition"], m["file_id"], m["io_type"]) for m in first["markers"]} == {
        ("a", fid1, "CREATE"), ("b", fid2, "MERGE")}
    assert first["markers"][0]["path"].endswith(".marker.CREATE")

    rc, doc = run_json(capsys, "markers", table.base_uri, "--instant", b.instant_time)
    assert rc == 0 and [d["file_groups"] for d in doc["instants"]] == [[f"a/{fid2}"]]

    rc, out, _ = run(capsys, "markers", table.base_uri)
    assert rc == 0 and "3 markers in 2 instants" in out and fid2 in out

    rc, out, err = run(capsys, "markers", table.base_uri, "--instant", "20000101000000000")
    assert rc == 2 and "20000101000000000 is not on the timeline" in err


@pytest.mark.parametrize("strategy", ["simple", "transactional", "bloom-direct", "async", "bloom-async"])
def test_early_check_stops_the_later_writer_only(table, capsys, writers, strategy):
    fid = "bbbbbbbb-0000-0000-0000-000000000001-0"
    early = writers(table, FAST_HB, markers=[("a", fid, "CREATE")])
    late = writers(table, FAST_HB)
    early.heartbeat.beat()
    args = ["--partition", "a", "--file-id", fid, "--strategy", strategy]

    rc, doc = run_json(capsys, "early-check", table.base_uri, "--instant", late.instant_time, *args)
    assert rc == 3 and doc["stopped"] is True and doc["strategy"] == strategy
    assert (doc["other_instant"], doc["kind"]) == (early.instant_time, "markers")
    assert doc["conflicting_file_groups"] == [f"a/{fid}"]
    assert early.instant_time in doc["candidates"]

    # the earlier writer is never stopped by a later one
    rc, doc = run_json(capsys, "early-check", table.base_uri, "--instant", early.instant_time, *args)
    assert rc == 0 and doc["stopped"] is False and doc["candidates"] == []
    # another file group of the same partition passes
    rc, doc = run_json(capsys, "early-check", table.base_uri, "--instant", late.instant_time,
                       "--partition", "a", "--file-id", "cccccccc-0000-0000-0000-000000000009-0",
                       "--strategy", strategy)
    assert rc == 0 and doc["stopped"] is False

    # a dead earlier writer is no longer a candidate
    early.heartbeat.stop(delete=False)
    wait_expired(table, early.instant_time)
    rc, doc = run_json(capsys, "early-check", table.base_uri, "--instant", late.instant_time, *args,
                       *FAST_HB_ARGS)
    assert rc == 0 and doc["stopped"] is False and doc["candidates"] == []


def test_early_check_takes_the_marker_type_the_instant_used_from_disk(table, capsys, writers):
    """A writer with batched (timeline-server-based) markers uses the async checker by default;
    asked without the writer's options, the CLI must judge it the same way."""
    fid = "bbbbbbbb-0000-0000-0000-000000000001-0"
    batched = {**OPTS, "hoodie.write.markers.type": "TIMELINE_SERVER_BASED"}
    early = writers(table, batched, markers=[("a", fid, "CREATE")])
    late = writers(table, batched)
    late.create_marker("a", f"cccccccc-0000-0000-0000-000000000009-0_0-0-0_{late.instant_time}.parquet", "CREATE")
    early.heartbeat.beat()
    args = ["--instant", late.instant_time, "--partition", "a", "--file-id", fid]
    rc, doc = run_json(capsys, "early-check", table.base_uri, *args)
    assert doc["marker_type"] == "TIMELINE_SERVER_BASED"
    assert doc["marker_type_source"] == "the instant's MARKERS.type"
    assert doc["strategy"] == "async" and rc == 3 and doc["other_instant"] == early.instant_time
    # options that name the type win over the folder
    rc, doc = run_json(capsys, "early-check", table.base_uri, *args, "--option",
                       "hoodie.write.markers.type=DIRECT")
    assert doc["marker_type"] == "DIRECT" and doc["marker_type_source"] == "options"


def test_early_check_commit_conflict(table, capsys, writers):
    w = ArrowTableWriter(table, WriteConfig.from_options(OPTS))
    w.write(batch([1], "a"), "upsert")
    fa = file_id_in(table, "a")
    pending = writers(table)
    r2 = w.write(batch([1], "a", value="new", ts=2), "upsert")
    args = ["--instant", pending.instant_time, "--partition", "a", "--file-id", fa]

    rc, doc = run_json(capsys, "early-check", table.base_uri, *args)
    assert rc == 0 and doc["stopped"] is False and doc["check_commit_conflict"] is False
    assert doc["early_detection_enabled"] is False
    rc, doc = run_json(capsys, "early-check", table.base_uri, *args, "--check-commit-conflict")
    assert rc == 3 and doc["stopped"] is True and doc["check_commit_conflict"] is True
    assert (doc["other_instant"], doc["kind"]) == (r2.instant.requested_time, "completed_commit")
    rc, out, _ = run(capsys, "early-check", table.base_uri, *args, "--check-commit-conflict")
    assert rc == 3 and f"STOPPED by completed commit of {r2.instant.requested_time}" in out

    rc, out, err = run(capsys, "early-check", table.base_uri, *args, "--strategy", "psychic")
    assert rc == 2 and "unknown early conflict detection strategy 'psychic'" in err and "remedy:" in err


# --- errors --------------------------------------------------------------------------------------


def test_user_errors_exit_2_with_message_and_remedy(tmp_path, capsys, table):
    cases = [
        (["timeline", tmp_path / "nothing"], f"error: no Hudi table at {str(tmp_path / 'nothing')!r}"),
        # a table path with a character no one sees: shown by repr(), refused before any read
        (["show", table.base_uri + " "], f"error: the table path {table.base_uri + ' '!r} has whitespace"),
        (["timeline", table.base_uri + "\n"], "has the control character(s) '\\n'"),
        (["timeline", table.base_uri, "--option", "oops"], "error: --option expects KEY=VALUE, got 'oops'"),
        (["writers", table.base_uri, "--option", "hoodie.client.heartbeat.interval_in_ms=soon"],
         "error: invalid value 'soon' for hoodie.client.heartbeat.interval_in_ms"),
        (["show", table.base_uri, "--storage-option", "=x"], "error: --storage-option expects KEY=VALUE"),
        (["conflicts", table.base_uri, "--instant", "yesterday"], "error: instant 'yesterday' is not an instant time"),
        (["conflicts", table.base_uri], "error: the following arguments are required: --instant"),
        (["conflicts", table.base_uri, "--instant", "20000101000000000"], "is not on the timeline"),
        (["file-groups", table.base_uri, "--as-of", "12"], "error: --as-of '12' is not an instant time"),
        (["conflicts", table.base_uri, "--instant", "20000101000000000", "--file-group", "/"],
         "error: --file-group expects PARTITION/FILEID"),
        (["frobnicate", table.base_uri], "error: argument COMMAND: invalid choice: 'frobnicate'"),
        (["timeline", "nosuchproto://bucket/t"], "error: cannot open storage for 'nosuchproto://bucket/t'"),
    ]
    for argv, expected in cases:
        rc, out, err = run(capsys, *argv)
        assert rc == 2, (argv, err)
        assert out == "" and expected in err, (argv, err)
        assert "\nremedy: " in err and "Traceback" not in err, (argv, err)

    rc, out, err = run(capsys, "--json", "timeline", tmp_path / "nothing")
    doc = json.loads(err)
    assert rc == 2 and out == "" and doc["error"] == "TableNotFoundError"
    assert doc["remedy"] and doc["base_path"] == str(tmp_path / "nothing")
    rc, out, err = run(capsys, "conflicts", table.base_uri, "--json")
    assert rc == 2 and json.loads(err)["error"] == "UsageError"


def test_corrupt_metadata_is_a_user_error(tmp_path, capsys):
    path = java_fixture("v8_simplekeygen_nonhivestyle", tmp_path)
    commit = path / ".hoodie" / "timeline" / "20250713011316909_20250713011317225.commit"
    commit.write_bytes(b"Obj\x01 truncated")
    rc, out, err = run(capsys, "timeline", path)
    assert rc == 2 and out == ""
    assert "error: cannot parse instant metadata" in err and commit.name in err
    assert "remedy: the file is truncated" in err and "Traceback" not in err

    (path / ".hoodie" / "hoodie.properties").write_text("garbage\n")
    rc, doc_out, err = run(capsys, "show", path, "--json")
    assert rc == 2 and json.loads(err)["error"] == "CorruptMetadataError"


def test_help_and_no_command(capsys):
    rc, out, _ = run(capsys, "--help")
    assert rc == 0 and "early-check" in out and "conflicts" in out
    rc, out, err = run(capsys)
    assert rc == 2 and "usage: hudi-occ" in err


def test_render_table_aligns_and_marks_missing_values():
    text = render_table(["A", "LONG_HEADER"], [["x", None], ["longer", True]])
    assert text.splitlines() == ["A       LONG_HEADER", "x       -", "longer  yes"]
    assert render_table(["A"], [], empty="nothing") == "nothing"


# --- the installed console script ------------------------------------------------------------------


def test_console_script(table, tmp_path, writers):
    script = Path(sys.executable).parent / "hudi-occ"
    assert script.exists(), f"console script missing: {script} (pip install -e .)"
    w = ArrowTableWriter(table, WriteConfig.from_options(OPTS))
    w.write(batch([1, 2], "a"), "upsert")
    fa = file_id_in(table, "a")
    pending = writers(table, markers=[("a", fa, "MERGE")])
    winner = w.write(batch([1], "a", value="new", ts=2), "upsert")

    p = subprocess.run([str(script), "show", table.base_uri, "--json"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["instants"]["by_state"] == {"requested": 0, "inflight": 1, "completed": 2}
    assert doc["file_groups"]["total"] == 1 and doc["writers"]["alive"] == 1

    p = subprocess.run([str(script), "--json", "conflicts", table.base_uri, "--instant",
                        pending.instant_time], capture_output=True, text=True, timeout=120)
    assert p.returncode == 3, p.stderr
    doc = json.loads(p.stdout)
    assert doc["would_abort"] is True
    assert doc["reasons"][0]["other_instant"] == winner.instant.requested_time

    p = subprocess.run([str(script), "timeline", str(tmp_path / "missing")], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith("error: no Hudi table") and "Traceback" not in p.stderr


def test_a_misspelt_option_is_refused_and_the_table_is_unchanged(tmp_path, capsys):
    from airflow_hudi_occ.testing.tables import tree_snapshot
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"])
    w = ArrowTableWriter(t, WriteConfig.from_options(OPTS))
    for ts in (1, 2, 3):
        w.write(batch([1, 2], "eu", ts=ts))
    before = tree_snapshot(t.base_uri)
    for argv, words in [
        (["clean", t.base_uri, "--option", "hoodie.clean.commit.retained=1"],
         "unknown option 'hoodie.clean.commit.retained': did you mean 'hoodie.clean.commits.retained'?"),
        (["rollback", t.base_uri, "--option", "hoodie.write.lock.provider=zookeepr"],
         "unknown lock provider 'zookeepr'"),
    ]:
        rc, out, err = run(capsys, *argv)
        assert rc == 2 and out == "" and words in err, (argv, err)
        assert "\nremedy: " in err and "Traceback" not in err
        assert tree_snapshot(t.base_uri) == before
    # The key spelt right does what the misspelt one would silently not have done.
    rc, out, err = run(capsys, "clean", t.base_uri, "--option", "hoodie.clean.commits.retained=1")
    assert rc == 0 and tree_snapshot(t.base_uri) != before, err


# --- compact (merge-on-read) -----------------------------------------------------------------


def test_compact_schedule_show_execute_and_show_and_timeline(tmp_path, capsys):
    from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
    from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key
    mor = Table.create(str(tmp_path / "mor"), "mor", record_key_fields=["id"], partition_fields=["p"],
                       precombine_field="ts", table_type="MERGE_ON_READ")
    w = MergeOnReadWriter(mor, WriteConfig.from_options(OPTS))
    w.write(batch(range(4), "a"), "insert")
    w.write(batch([1, 2], "a", "u", ts=2), "upsert")
    opts = ["--option", "hoodie.write.lock.provider=filesystem"]
    rc, doc = run_json(capsys, "compact", mor.base_uri, "--schedule-only", *opts)
    assert rc == 0 and doc["scheduled"] is None  # 2 deltacommits < 5 (Hudi's default trigger)
    rc, doc = run_json(capsys, "compact", mor.base_uri, "--schedule-only", "--force", *opts)
    t = doc["scheduled"]
    assert rc == 0 and t and doc["executed"] is None
    rc, doc = run_json(capsys, "compact", mor.base_uri, "--show")
    assert [p["instant"] for p in doc["pending"]] == [t] and doc["pending"][0]["state"] == "requested"
    rc, doc = run_json(capsys, "show", mor.base_uri)
    assert doc["compaction"]["pending"][0]["instant"] == t
    assert doc["compaction"]["deltacommits_since_last"] == 2
    rc, doc = run_json(capsys, "timeline", mor.base_uri)
    row = next(r for r in doc["instants"] if r["requested_time"] == t)
    assert (row["action"], row["state"], row["operation_type"]) == ("compaction", "requested", "COMPACT")
    rc, out, _ = run(capsys, "compact", mor.base_uri, "--execute", t, *opts)
    assert rc == 0 and f"compaction {t} committed" in out
    rc, doc = run_json(capsys, "timeline", mor.base_uri)
    row = next(r for r in doc["instants"] if r["requested_time"] == t)
    assert (row["action"], row["state"], row["operation_type"]) == ("commit", "completed", "COMPACT")
    rc, doc = run_json(capsys, "show", mor.base_uri)
    assert doc["compaction"] == {"pending": [], "deltacommits_since_last": 0}
    assert {k: v["value"] for k, v in rows_by_key(hudi_read(mor.base_uri)).items()} == \
        {0: "v", 1: "u", 2: "u", 3: "v"}
    rc, out, err = run(capsys, "compact", mor.base_uri, "--execute", t, *opts)
    assert rc == 2 and "not a pending compaction" in err


def test_compact_refuses_a_copy_on_write_table(table, capsys):
    rc, out, err = run(capsys, "compact", table.base_uri, "--force")
    assert rc == 2 and "merge-on-read" in err


def test_compact_without_flags_runs_a_pending_plan_when_the_trigger_is_not_reached(tmp_path, capsys):
    from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
    mor = Table.create(str(tmp_path / "mor"), "mor", record_key_fields=["id"], partition_fields=["p"],
                       precombine_field="ts", table_type="MERGE_ON_READ")
    w = MergeOnReadWriter(mor, WriteConfig.from_options(OPTS))
    w.write(batch(range(3), "a"), "insert")
    w.write(batch([1], "a", "u", ts=2), "upsert")
    opts = ["--option", "hoodie.write.lock.provider=filesystem"]
    rc, doc = run_json(capsys, "compact", mor.base_uri, "--schedule-only", "--force", *opts)
    t = doc["scheduled"]
    rc, doc = run_json(capsys, "compact", mor.base_uri, *opts)
    assert rc == 0 and doc["scheduled"] is None and doc["executed"]["instant"] == t
