"""Non-blocking concurrency control on merge-on-read tables: concurrent writers to one bucket
all commit, and the snapshot equals a serial replay of their batches by completion time.

Writers are real processes (spawn). Each writes its log files, waits until every writer has,
then commits; in the forced-order tests the latest-requested writer commits first, so
completion order is the reverse of requested order, the one case where a reader's order of
log files shows.

Two models are kept: the serial replay by *completion* time (what our reader and compaction
give, and what the tests assert for them) and the serial replay by *requested* time (what
hudi-rs 0.5.0 gives: it orders a slice's log files by the instant in their names, as Java's
``HoodieLogFile.LogFileComparator`` and RFC-66 do). They differ only on keys where two writers
wrote equal ordering values (or a delete and a write); docs/merge-on-read.md, section NBCC.
After a compaction the base file holds our merge and hudi-rs reads exactly the model.
"""

from __future__ import annotations

import multiprocessing as mp
import os

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import WriteConflictError
from airflow_hudi_occ.core.format.bucket_index import bucket_id, nbcc_file_id
from airflow_hudi_occ.core.format.layout import parse_base_file_name
from airflow_hudi_occ.core.format.log_file import LogFileName
from airflow_hudi_occ.core.services.compaction import run_compaction
from airflow_hudi_occ.core.table.mor_reader import merge_file_slices, read_snapshot
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key

N = 4
COLS = ["id", "p", "ts", "v"]
BUCKETS = 2


def _options(buckets=BUCKETS):
    return {**FAST_WRITE_OPTIONS, "hoodie.write.lock.wait_time_ms": "5000",
            "hoodie.write.concurrency.mode": "NON_BLOCKING_CONCURRENCY_CONTROL",
            "hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": str(buckets)}


@pytest.fixture
def table(tmp_path):
    return Table.create(str(tmp_path / "nbcc"), "nbcc", record_key_fields=["id"], partition_fields=["p"],
                        precombine_field="ts", table_type="MERGE_ON_READ")


def _part(k: int) -> str:
    return "a" if k % 2 == 0 else "b"


def _rows(w: int) -> list[dict]:
    """Writer ``w``'s batch: keys 0..7 shared by every writer, with ordering values that tie
    between writers on some keys and not on others, plus one key of its own."""
    shared = [{"id": k, "p": _part(k), "ts": (k * 7 + w) % 3, "v": f"w{w}-k{k}"} for k in range(8)]
    return shared + [{"id": 100 + w, "p": _part(w), "ts": 0, "v": f"w{w}-own"}]


def _replay(batches) -> dict:
    """Serial replay of upserts: a larger ts wins, equal ts go to the later batch."""
    out: dict = {}
    for rows in batches:
        for r in rows:
            old = out.get(r["id"])
            if old is None or r["ts"] >= old["ts"]:
                out[r["id"]] = {c: r[c] for c in COLS}
    return out


def _run(table, row_sets, *, forced_order: bool, tmp_path):
    from airflow_hudi_occ.testing.workers import mor_upsert_between_barriers, nbcc_upsert_in_turn
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(row_sets))
    results = ctx.Queue()
    if forced_order:
        turns = tmp_path / "turns"
        turns.mkdir()
        procs = [ctx.Process(target=nbcc_upsert_in_turn,
                             args=(table.base_uri, _options(), rows, str(turns), barrier, results, f"w{i}"))
                 for i, rows in enumerate(row_sets)]
    else:
        procs = [ctx.Process(target=mor_upsert_between_barriers,
                             args=(table.base_uri, _options(), rows, [barrier], results, f"w{i}"))
                 for i, rows in enumerate(row_sets)]
    for p in procs:
        p.start()
    out = [results.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert not [r for r in out if r["outcome"] == "error"], out
    return out


def _file_ids(table) -> dict[str, set[str]]:
    """partition -> every fileId on storage (base and log files, committed or not)."""
    out: dict[str, set[str]] = {}
    for part in ("a", "b"):
        folder = os.path.join(table.base_uri, part)
        for name in os.listdir(folder) if os.path.isdir(folder) else []:
            lf = LogFileName.parse(name)
            bf = parse_base_file_name(name, part)
            fid = lf.file_id if lf else (bf.file_id if bf else None)
            if fid:
                out.setdefault(part, set()).add(fid)
    return out


def _check_models(table, out):
    by_completion = [r["rows"] for r in sorted(out, key=lambda r: r["completion"])]
    by_requested = [r["rows"] for r in sorted(out, key=lambda r: r["instant"])]
    model, requested_model = _replay(by_completion), _replay(by_requested)
    assert rows_by_key(read_snapshot(table), columns=COLS) == model
    # hudi-rs 0.5.0 replays a slice's logs in requested order (as Java does)
    assert rows_by_key(hudi_read(table.base_uri), columns=COLS) == requested_model
    differ = {k for k in model if model[k] != requested_model.get(k)}
    for k in differ:  # only ties between writers can tell the two orders apart
        assert model[k]["ts"] == requested_model[k]["ts"]
    return model, differ


def test_writers_creating_one_bucket_all_commit_in_reverse_order(table, tmp_path):
    """Four processes upsert the same keys into buckets no one has written yet; the last to
    begin commits first. All commit (no conflict resolution ran), each bucket has exactly one
    file group (the fixed NBCC fileId) holding only log files, and the snapshot equals the
    replay by completion time. A compaction then makes hudi-rs agree row for row."""
    out = _run(table, [_rows(w) for w in range(N)], forced_order=True, tmp_path=tmp_path)
    assert [r["outcome"] for r in out] == ["committed"] * N
    assert all(r["checked"] == [] for r in out)
    order = sorted(out, key=lambda r: r["completion"])
    assert [r["instant"] for r in order] == sorted((r["instant"] for r in out), reverse=True)

    buckets = {(_part(k), bucket_id([str(k)], BUCKETS)) for w in range(N) for k in
               [r["id"] for r in _rows(w)]}
    expected_ids: dict[str, set[str]] = {}
    for part, b in buckets:
        expected_ids.setdefault(part, set()).add(nbcc_file_id(b))
    assert _file_ids(table) == expected_ids
    slices = merge_file_slices(table)
    # log-only groups; a bucket every writer wrote has one log file of each deltacommit
    assert all(fs.base is None for fs in slices)
    assert max(len({lf.instant_time for lf in fs.log_files}) for fs in slices) == N

    model, differ = _check_models(table, out)
    assert differ, "the rows must include ties that completion order decides"

    run_compaction(table, _options(), force=True)
    assert rows_by_key(read_snapshot(table), columns=COLS) == model
    assert rows_by_key(hudi_read(table.base_uri), columns=COLS) == model
    assert all(fs.base is not None and not fs.log_files for fs in merge_file_slices(table))


@pytest.mark.slow
def test_writers_racing_on_a_compacted_bucket_all_commit(table, tmp_path):
    """The same bucket, now with a base file (bulk_insert, then logs compacted): four writers
    race to commit in whatever order the lock gives them. All commit; base + logs read as the
    replay by completion time."""
    w = MergeOnReadWriter(table, WriteConfig.from_options(_options()))
    seed = [{"id": k, "p": _part(k), "ts": 1, "v": "seed"} for k in range(8)]
    w.write(pa.Table.from_pylist(seed), "bulk_insert")
    assert {fs.base is not None for fs in merge_file_slices(table)} == {True}
    out = _run(table, [_rows(i) for i in range(N)], forced_order=False, tmp_path=tmp_path)
    assert [r["outcome"] for r in out] == ["committed"] * N
    by_completion = [seed] + [r["rows"] for r in sorted(out, key=lambda r: r["completion"])]
    model = _replay(by_completion)
    assert rows_by_key(read_snapshot(table), columns=COLS) == model
    by_requested = [seed] + [r["rows"] for r in sorted(out, key=lambda r: r["instant"])]
    assert rows_by_key(hudi_read(table.base_uri), columns=COLS) == _replay(by_requested)
    for part, ids in _file_ids(table).items():  # still one file group per bucket
        assert len(ids) == len({i[:8] for i in ids})


def test_bulk_insert_still_resolves_conflicts(table):
    """Hudi's one NBCC operation that resolves conflicts: a bulk_insert creating a new bucket's
    base file (fixed fileId) aborts when an insert into that bucket completed meanwhile
    (Hudi's TestJavaNonBlockingConcurrencyControl case 3); the insert stands."""
    cfg = WriteConfig.from_options(_options(buckets=1))
    row = lambda v: pa.Table.from_pylist([{"id": 1, "p": "a", "ts": 1, "v": v}])  # noqa: E731

    def meanwhile(tx):
        MergeOnReadWriter(table, cfg).write(row("insert"), "insert")

    with pytest.raises(WriteConflictError):
        MergeOnReadWriter(table, cfg).write(row("bulk"), "bulk_insert", before_commit=meanwhile)
    assert rows_by_key(read_snapshot(table), columns=["id", "v"]) == {1: {"id": 1, "v": "insert"}}
    assert rows_by_key(hudi_read(table.base_uri), columns=["id", "v"]) == {1: {"id": 1, "v": "insert"}}
    assert not [f for f in os.listdir(os.path.join(table.base_uri, "a")) if f.endswith(".parquet")]

    # alone, bulk_insert into a new bucket writes a base file under the fixed fileId
    res = MergeOnReadWriter(table, cfg).write(
        pa.Table.from_pylist([{"id": 2, "p": "b", "ts": 1, "v": "bulk"}]), "bulk_insert")
    assert [s.path for s in res.metadata.write_stats()] == [
        f"b/{nbcc_file_id(0)}_0-0-1_{res.instant.requested_time}.parquet"]


def test_delete_racing_an_insert_of_a_new_bucket(table):
    """A delete is written to the key's bucket even when the bucket does not exist yet: an
    insert of the key that completes before the delete must end up deleted, as the serial
    replay by completion time has it (Hudi drops a delete it cannot tag; deliberate)."""
    cfg = WriteConfig.from_options(_options(buckets=1))

    def meanwhile(tx):
        MergeOnReadWriter(table, cfg).write(
            pa.Table.from_pylist([{"id": 1, "p": "a", "ts": 5, "v": "x"},
                                  {"id": 2, "p": "a", "ts": 5, "v": "y"}]), "insert")

    MergeOnReadWriter(table, cfg).write(pa.Table.from_pylist([{"id": 1, "p": "a", "ts": 0, "v": ""}]),
                                        "delete", before_commit=meanwhile)
    assert rows_by_key(read_snapshot(table), columns=["id", "v"]) == {2: {"id": 2, "v": "y"}}
    # hudi-rs 0.5.0 applies the delete (requested first) before the insert
    assert set(rows_by_key(hudi_read(table.base_uri), columns=["id", "v"])) == {1, 2}
    run_compaction(table, _options(buckets=1), force=True)
    assert rows_by_key(hudi_read(table.base_uri), columns=["id", "v"]) == {2: {"id": 2, "v": "y"}}


def test_failed_writer_rolls_back_only_its_own_log_file(table):
    """Two writers append to one bucket; the one that fails before committing is rolled back
    from its APPEND marker: its log file goes, the other's (same file group) stays committed."""
    cfg = WriteConfig.from_options(_options(buckets=1))
    row = lambda v: pa.Table.from_pylist([{"id": 1, "p": "a", "ts": 1, "v": v}])  # noqa: E731
    other = {}

    def fail_after_other(tx):
        other["res"] = MergeOnReadWriter(table, cfg).write(row("kept"), "upsert")
        other["failed"] = tx.instant_time
        raise RuntimeError("writer dies before its commit")

    with pytest.raises(RuntimeError):
        MergeOnReadWriter(table, cfg).write(row("lost"), "upsert", before_commit=fail_after_other)
    logs = [LogFileName.parse(f) for f in os.listdir(os.path.join(table.base_uri, "a"))]
    assert {lf.instant_time for lf in logs if lf} == {other["res"].instant.requested_time}
    assert table.timeline().get(other["failed"]) is None
    assert rows_by_key(read_snapshot(table), columns=["id", "v"]) == {1: {"id": 1, "v": "kept"}}
    assert rows_by_key(hudi_read(table.base_uri), columns=["id", "v"]) == {1: {"id": 1, "v": "kept"}}


def test_clean_removes_a_compacted_log_only_slice(table):
    """After a compaction gives a log-only group its first base file, the log-only slice is an
    older version: clean deletes its log files by the retention policy, and only them."""
    from airflow_hudi_occ.core.services.clean import run_clean
    cfg = WriteConfig.from_options(_options(buckets=1))
    w = MergeOnReadWriter(table, cfg)
    w.write(pa.Table.from_pylist([{"id": 1, "p": "a", "ts": 1, "v": "a"}]), "upsert")
    w.write(pa.Table.from_pylist([{"id": 2, "p": "a", "ts": 1, "v": "b"}]), "upsert")
    run_compaction(table, _options(buckets=1), force=True)
    late = w.write(pa.Table.from_pylist([{"id": 1, "p": "a", "ts": 2, "v": "c"}]), "upsert")
    model = {1: {"id": 1, "v": "c"}, 2: {"id": 2, "v": "b"}}

    def logs():
        return {lf.instant_time for lf in map(LogFileName.parse, os.listdir(os.path.join(table.base_uri, "a")))
                if lf}

    assert len(logs()) == 3
    run_clean(table, {**_options(buckets=1)})  # KEEP_LATEST_COMMITS, 10 retained: all kept
    assert len(logs()) == 3
    run_clean(table, {**_options(buckets=1), "hoodie.clean.policy": "KEEP_LATEST_FILE_VERSIONS",
                      "hoodie.clean.fileversions.retained": "1"})
    assert logs() == {late.instant.requested_time}
    assert rows_by_key(read_snapshot(table), columns=["id", "v"]) == model
    assert rows_by_key(hudi_read(table.base_uri), columns=["id", "v"]) == model


def test_deltacommit_overlapping_a_compaction_commits(table):
    """Under NBCC a deltacommit that began before a compaction and commits after it completed
    needs no resolution, even with the prefer-writer strategy (which aborts it under OCC): its
    log completes after the compaction instant, so it belongs to the slice the compaction
    starts, and both readers show it on top of the compacted base."""
    opts = {**_options(buckets=1), "hoodie.write.lock.conflict.resolution.strategy": "prefer-writer"}
    cfg = WriteConfig.from_options(opts)
    w = MergeOnReadWriter(table, cfg)
    w.write(pa.Table.from_pylist([{"id": k, "p": "a", "ts": 1, "v": "first"} for k in range(3)]), "upsert")
    state = {}

    def compact_meanwhile(tx):
        state["compaction"] = run_compaction(table, opts, force=True)["executed"]["instant"]

    res = MergeOnReadWriter(table, cfg).write(
        pa.Table.from_pylist([{"id": 1, "p": "a", "ts": 2, "v": "overlapping"}]), "upsert",
        before_commit=compact_meanwhile)
    assert res.instant.requested_time < state["compaction"] < res.instant.completion_time
    [fs] = merge_file_slices(table)
    assert fs.base.instant_time == state["compaction"]
    assert [lf.instant_time for lf in fs.log_files] == [res.instant.requested_time]
    model = {0: "first", 1: "overlapping", 2: "first"}
    for read in (read_snapshot(table), hudi_read(table.base_uri)):
        assert {k: v["v"] for k, v in rows_by_key(read, columns=["id", "v"]).items()} == model


def test_time_travel_over_log_only_groups_before_and_after_their_compaction(table):
    """Log-only bucket file groups (NBCC) seen as of each instant: before compaction the logs
    alone, after it the compacted base plus later logs; as of an instant before the first
    base file, the group is still the log-only slice it was then. hudi-rs checks the latest."""
    opts = WriteConfig.from_options(_options())
    w = MergeOnReadWriter(table, opts)
    model: dict[int, dict] = {}
    states = []
    for i in range(3):
        rows = [{"id": k, "p": _part(k), "ts": i, "v": f"c{i}-k{k}"} for k in range(i, i + 4)]
        res = w.write(pa.Table.from_pylist(rows), "upsert")
        model.update({r["id"]: r for r in rows})
        states.append((res.instant.requested_time, {k: dict(r) for k, r in model.items()}))
    assert all(s.base is None for s in merge_file_slices(table))  # log-only so far
    run_compaction(table, WriteConfig.from_options({**_options(), "hoodie.compact.inline.max.delta.commits": "1"}))
    assert all(s.base is not None for s in merge_file_slices(table))  # every group compacted
    rows = [{"id": 0, "p": "a", "ts": 9, "v": "after"}]
    res = w.write(pa.Table.from_pylist(rows), "upsert")
    model[0] = rows[0]
    states.append((res.instant.requested_time, {k: dict(r) for k, r in model.items()}))

    def as_dict(t):
        return {r["id"]: {c: r[c] for c in COLS} for r in t.select(COLS).to_pylist()}

    for instant, want in states:
        assert as_dict(read_snapshot(table, as_of=instant)) == want, instant
    assert as_dict(read_snapshot(table)) == model
    assert {k: {c: r[c] for c in COLS} for k, r in rows_by_key(hudi_read(table.base_uri), "id").items()} == model
