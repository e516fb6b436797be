"""Compaction of merge-on-read tables in core: trigger and plan under the lock, the Arrow
executor, writers meeting a pending compaction, rollback of a failed one. After every step
hudi-rs and our reader must show exactly the model's rows (snapshot and read-optimised)."""

from __future__ import annotations

import os

import pytest

from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.commit.rollback import rollback_instant
from airflow_hudi_occ.core.config import CompactionConfig, WriteConfig
from airflow_hudi_occ.core.errors import ConfigError, InstantStateError
from airflow_hudi_occ.core.format.instant import Action, State
from airflow_hudi_occ.core.format.log_file import LogFileName
from airflow_hudi_occ.core.format.metadata import CompactionPlan
from airflow_hudi_occ.core.services.compaction import (execute_compaction, schedule_compaction,
                                                       show_compaction, trigger_reached)
from airflow_hudi_occ.core.table.mor_reader import merge_file_slices, read_optimized, read_snapshot
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key
from tests.core.commit.test_mor_writer import COLS, Model, _batch, hudi_read_optimized

FORCE = {**FAST_WRITE_OPTIONS}


@pytest.fixture
def mor(tmp_path):
    return Table.create(str(tmp_path / "mor"), "mor", record_key_fields=["id"], partition_fields=["p"],
                        precombine_field="ts", table_type="MERGE_ON_READ")


def check(table: Table, model: Model, *, read_optimised: dict | None = None):
    assert rows_by_key(hudi_read(table.base_uri), columns=COLS) == model.rows
    assert rows_by_key(read_snapshot(table), columns=COLS) == model.rows
    ro = rows_by_key(read_optimized(table), columns=COLS)
    assert rows_by_key(hudi_read_optimized(table.base_uri), columns=COLS) == ro
    if read_optimised is not None:
        assert ro == read_optimised


def _seeded(mor, n=6):
    w = MergeOnReadWriter(mor, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    m = Model()
    rows = [(i, "a" if i % 2 else "b", 1, f"v{i}") for i in range(n)]
    w.write(_batch(rows), "insert")
    m.upsert(rows)
    return w, m


def _upsert(w, m, rows):
    r = w.write(_batch(rows), "upsert")
    m.upsert(rows)
    return r


def test_compaction_merges_logs_into_new_base_files_as_a_commit(mor):
    w, m = _seeded(mor)
    _upsert(w, m, [(1, "a", 2, "u1"), (2, "b", 2, "u2")])
    _upsert(w, m, [(1, "a", 3, "u1b"), (3, "a", 0, "stale")])
    w.write(_batch([(4, "b", 0, "")]), "delete")
    m.delete([4])
    check(mor, m)
    t = schedule_compaction(mor, FORCE, force=True)
    tl = mor.timeline()
    assert tl.get(t).action is Action.COMPACTION and tl.get(t).state is State.REQUESTED
    plan = tl.compaction_plan(tl.get(t))
    assert {op.partition_path for op in plan.operations} == {"a", "b"}
    assert all(op.delta_file_names and op.data_file_name.endswith(".parquet") for op in plan.operations)
    # pending: readers see the old slices with their logs, nothing of the plan
    check(mor, m)

    res = execute_compaction(mor, FORCE)
    assert res.instant == t
    done = mor.timeline().get(t)
    assert done.action is Action.COMMIT and done.is_completed
    assert os.path.exists(os.path.join(mor.base_uri, ".hoodie", "timeline", f"{t}_{done.completion_time}.commit"))
    meta = mor.timeline().commit_metadata(done)
    assert meta.operation_type == "COMPACT" and meta.compacted
    # read-optimised now equals the snapshot: the logs are in the base files
    check(mor, m, read_optimised=m.rows)
    assert all(fs.base.instant_time == t and not fs.log_files for fs in merge_file_slices(mor))
    # records keep the commit time of the write that last changed them
    times = rows_by_key(hudi_read(mor.base_uri), columns=["id", "_hoodie_commit_time"])
    assert times[0]["_hoodie_commit_time"] < times[1]["_hoodie_commit_time"]
    assert not os.path.exists(os.path.join(mor.base_uri, ".hoodie", ".temp", t))

    # after compaction, new deltacommits append to the new slice
    _upsert(w, m, [(1, "a", 9, "after"), (5, "a", 9, "after5")])
    check(mor, m)
    assert {fs.base.instant_time for fs in merge_file_slices(mor) if fs.log_files} == {t}


def test_writer_during_pending_compaction_lands_in_the_new_slice(mor):
    w, m = _seeded(mor)
    _upsert(w, m, [(1, "a", 2, "u1")])
    t = schedule_compaction(mor, FORCE, force=True)
    # a writer appending while the compaction is pending: not refused, no conflict
    r = _upsert(w, m, [(1, "a", 5, "during"), (3, "a", 5, "during3")])
    stat = next(s for ss in r.metadata.partition_to_write_stats.values() for s in ss)
    assert stat.prev_commit == t and stat.base_file == ""  # Java's delta stat in a pending slice
    check(mor, m)
    execute_compaction(mor, FORCE)
    check(mor, m)
    [fs] = [fs for fs in merge_file_slices(mor) if fs.base.partition == "a"]
    assert fs.base.instant_time == t
    assert [lf.instant_time for lf in fs.log_files] == [r.instant.requested_time]


def test_inflight_deltacommit_at_scheduling_is_left_out_of_the_plan(mor):
    w, m = _seeded(mor)
    _upsert(w, m, [(1, "a", 2, "u1")])
    box = {}

    def schedule_meanwhile(tx):
        box["t"] = schedule_compaction(mor, FORCE, force=True)

    r = w.write(_batch([(1, "a", 7, "late"), (3, "a", 7, "late3")]), "upsert", before_commit=schedule_meanwhile)
    m.upsert([(1, "a", 7, "late"), (3, "a", 7, "late3")])
    t = box["t"]
    assert r.instant.requested_time < t < r.instant.completion_time
    plan = mor.timeline().compaction_plan(mor.timeline().get(t))
    assert all(LogFileName.parse(n).instant_time != r.instant.requested_time
               for op in plan.operations for n in op.delta_file_names)
    check(mor, m)
    execute_compaction(mor, FORCE)
    check(mor, m)


def test_trigger_counts_deltacommits_since_the_last_compaction(mor):
    w, m = _seeded(mor)
    cfg = CompactionConfig.from_options({**FAST_WRITE_OPTIONS, "hoodie.compact.inline.max.delta.commits": "3"})
    assert trigger_reached(mor.timeline(), cfg)[0] is False  # 1 deltacommit
    assert schedule_compaction(mor, cfg) is None
    for k in range(2):
        _upsert(w, m, [(1, "a", 2 + k, f"u{k}")])
    assert trigger_reached(mor.timeline(), cfg)[0] is True
    t = schedule_compaction(mor, cfg)
    assert t is not None
    execute_compaction(mor, cfg, t)
    assert trigger_reached(mor.timeline(), cfg)[0] is False  # counted from the compaction
    time_cfg = CompactionConfig.from_options({**FAST_WRITE_OPTIONS,
                                              "hoodie.compact.inline.trigger.strategy": "TIME_ELAPSED",
                                              "hoodie.compact.inline.max.delta.seconds": "60"})
    assert trigger_reached(mor.timeline(), time_cfg)[0] is False
    import time as _t
    assert trigger_reached(mor.timeline(), time_cfg, now=_t.time() + 120)[0] is True
    check(mor, m)


def test_second_schedule_skips_file_groups_with_a_pending_plan(mor):
    w, m = _seeded(mor)
    _upsert(w, m, [(1, "a", 2, "u1")])
    t1 = schedule_compaction(mor, FORCE, force=True)
    _upsert(w, m, [(1, "a", 3, "u1b"), (2, "b", 3, "u2")])
    t2 = schedule_compaction(mor, FORCE, force=True)
    tl = mor.timeline()
    g1 = tl.compaction_plan(tl.get(t1)).file_groups()
    g2 = tl.compaction_plan(tl.get(t2)).file_groups()
    assert g1 and g2 and not (g1 & g2)
    assert [p["instant"] for p in show_compaction(mor)] == [t1, t2]
    execute_compaction(mor, FORCE, t2)
    execute_compaction(mor, FORCE, t1)
    check(mor, m)
    # key 1's second update was written after t1's plan: it lives in t1's new slice, as a log
    ro = rows_by_key(read_optimized(mor), columns=COLS)
    assert ro[2] == m.rows[2] and ro[1]["v"] == "u1" and m.rows[1]["v"] == "u1b"


def test_failed_compaction_rolls_back_to_requested_and_runs_again(mor):
    w, m = _seeded(mor)
    _upsert(w, m, [(1, "a", 2, "u1"), (2, "b", 2, "u2")])
    t = schedule_compaction(mor, FORCE, force=True)

    def boom(tx):
        raise RuntimeError("executor died before commit")

    with pytest.raises(RuntimeError):
        execute_compaction(mor, FORCE, before_commit=boom)
    inst = mor.timeline().get(t)
    assert inst.action is Action.COMPACTION and inst.state is State.REQUESTED  # plan kept
    rb = [i for i in mor.timeline() if i.action is Action.ROLLBACK]
    assert rb and rb[0].is_completed
    assert not [n for d in ("a", "b") for n in os.listdir(os.path.join(mor.base_uri, d)) if t in n]
    check(mor, m)
    execute_compaction(mor, FORCE, t)
    check(mor, m, read_optimised=m.rows)


def test_dead_inflight_compaction_is_rolled_back_by_the_next_executor(mor):
    """A crashed executor (files written, heartbeat gone) leaves an inflight compaction whose
    base files hudi-rs must ignore; the next executor rolls it back and re-runs the plan."""
    w, m = _seeded(mor)
    _upsert(w, m, [(1, "a", 2, "u1"), (2, "b", 2, "u2")])
    t = schedule_compaction(mor, FORCE, force=True)

    class Crash(BaseException):
        pass

    def crash(tx):
        tx.heartbeat.stop(delete=True)  # the process is gone: no beat
        raise Crash()

    from airflow_hudi_occ.core.services import compaction as mod
    real_abort = mod.CompactionTransaction.abort
    mod.CompactionTransaction.abort = lambda self, **kw: None  # a crash runs no cleanup
    try:
        with pytest.raises(Crash):
            execute_compaction(mor, FORCE, before_commit=crash)
    finally:
        mod.CompactionTransaction.abort = real_abort
    assert mor.timeline().get(t).state is State.INFLIGHT
    assert [n for n in os.listdir(os.path.join(mor.base_uri, "a")) if n.endswith(f"_{t}.parquet")]
    check(mor, m)  # the pending compaction's base files are invisible
    res = execute_compaction(mor, FORCE)
    assert res.instant == t
    check(mor, m, read_optimised=m.rows)
    assert any(i.action is Action.ROLLBACK for i in mor.timeline())


def test_failed_deltacommit_after_compaction_is_rolled_back_from_its_markers(mor):
    w, m = _seeded(mor)
    _upsert(w, m, [(1, "a", 2, "u1")])
    schedule_compaction(mor, FORCE, force=True)
    execute_compaction(mor, FORCE)

    box = {}

    def boom(tx):
        box["t"] = tx.instant_time
        raise RuntimeError("crash before commit")

    with pytest.raises(RuntimeError):
        w.write(_batch([(1, "a", 9, "lost")]), "upsert", before_commit=boom)
    check(mor, m)
    logs = [LogFileName.parse(n) for n in os.listdir(os.path.join(mor.base_uri, "a"))]
    assert not [lf for lf in logs if lf and lf.instant_time == box["t"]]


def test_rollback_of_a_failed_deltacommit_without_markers_finds_its_log_files(mor):
    w, m = _seeded(mor)
    box = {}

    def lose_markers(tx):
        box["t"] = tx.instant_time
        import shutil
        shutil.rmtree(os.path.join(mor.base_uri, ".hoodie", ".temp", tx.instant_time))
        raise KeyboardInterrupt  # not caught by abort's rollback path below

    from airflow_hudi_occ.core.commit import transaction as txmod
    real_abort = txmod.WriteTransaction.abort
    txmod.WriteTransaction.abort = lambda self, **kw: None
    try:
        with pytest.raises(KeyboardInterrupt):
            w.write(_batch([(1, "a", 9, "lost")]), "upsert", before_commit=lose_markers)
    finally:
        txmod.WriteTransaction.abort = real_abort
    assert [n for n in os.listdir(os.path.join(mor.base_uri, "a")) if LogFileName.parse(n)]
    res = rollback_instant(mor, box["t"], WriteConfig.from_options(FAST_WRITE_OPTIONS))
    assert any(".log." in f for f in res.deleted_files)
    assert not [n for n in os.listdir(os.path.join(mor.base_uri, "a")) if LogFileName.parse(n)]
    check(mor, m)


def test_refusals(mor, tmp_path):
    cow = Table.create(str(tmp_path / "cow"), "cow", record_key_fields=["id"], partition_fields=["p"],
                       precombine_field="ts")
    with pytest.raises(ConfigError):
        schedule_compaction(cow, FORCE, force=True)
    with pytest.raises(ConfigError):
        CompactionConfig.from_options({"hoodie.compaction.strategy": "DayBasedCompactionStrategy"})
    with pytest.raises(InstantStateError):
        execute_compaction(mor, FORCE)
    w, m = _seeded(mor)
    assert schedule_compaction(mor, FORCE, force=True) is None  # no log files yet


def test_plan_round_trips_in_javas_shape(mor):
    w, m = _seeded(mor)
    _upsert(w, m, [(1, "a", 2, "u1")])
    t = schedule_compaction(mor, FORCE, force=True)
    path = os.path.join(mor.base_uri, ".hoodie", "timeline", f"{t}.compaction.requested")
    import fastavro
    with open(path, "rb") as f:
        reader = fastavro.reader(f)
        assert reader.writer_schema["name"] == "org.apache.hudi.avro.model.HoodieCompactionPlan"
        [rec] = list(reader)
    assert rec["version"] == 2
    [op] = rec["operations"]
    assert "/" not in op["dataFilePath"] and op["deltaFilePaths"][0].startswith(".")
    assert set(op["metrics"]) >= {"TOTAL_LOG_FILES", "TOTAL_LOG_FILES_SIZE", "TOTAL_IO_MB"}
    with open(path, "rb") as f:
        plan = CompactionPlan.decode(f.read())
    assert plan.file_groups() == {("a", op["fileId"])}


# --- compaction racing ingestion, separate processes ---------------------------------------

PREFER = {"hoodie.write.lock.conflict.resolution.strategy": "prefer-writer"}
STRATEGIES = {"simple": {}, "prefer-writer": PREFER}


def _procs(targets):
    for p in targets:
        p.start()
    return targets


def _collect(results, procs):
    out = {r["name"]: r for r in (results.get(timeout=180) for _ in procs)}
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert all(r["outcome"] != "error" for r in out.values()), out
    return out


def _dict_rows(rows):
    return [dict(zip(COLS, r)) for r in rows]


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_writer_started_after_the_plan_and_compaction_commit_together(mor, strategy):
    """A compaction requested before a writer started does not conflict with it, whichever
    commits first: both commit (processes meet at a barrier just before their commits)."""
    import multiprocessing as mp

    from airflow_hudi_occ.testing.service_workers import compact_after_barrier
    from airflow_hudi_occ.testing.workers import mor_upsert_between_barriers

    opts = {**FAST_WRITE_OPTIONS, **STRATEGIES[strategy]}
    w, m = _seeded(mor)
    _upsert(w, m, [(1, "a", 2, "u1"), (2, "b", 2, "u2")])
    t = schedule_compaction(mor, opts, force=True)
    ctx = mp.get_context("spawn")
    go, results = ctx.Barrier(2), ctx.Queue()
    rows = [(1, "a", 5, "ingested1"), (3, "a", 5, "ingested3"), (2, "b", 5, "ingested2")]
    procs = _procs([ctx.Process(target=compact_after_barrier, args=(mor.base_uri, opts, t, go, results)),
                    ctx.Process(target=mor_upsert_between_barriers,
                                args=(mor.base_uri, opts, _dict_rows(rows), [go], results, "ingestion"))])
    out = _collect(results, procs)
    assert out["compaction"]["outcome"] == "committed"
    assert out["ingestion"]["outcome"] == "committed"
    m.upsert(rows)
    check(mor, m)  # hudi-rs: the serial replay, nothing lost, no key twice
    ing = out["ingestion"]["instant"]
    assert all(fs.base.instant_time == t and [lf.instant_time for lf in fs.log_files] == [ing]
               for fs in merge_file_slices(mor))


@pytest.mark.parametrize("first", ["writer", "compaction"])
@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_writer_inflight_when_planned(mor, strategy, first):
    """A deltacommit inflight while the compaction is scheduled: its log file stays out of the
    plan (Hudi 1.x does not refuse its file group) and, once completed, belongs to the new
    slice. Who commits first is forced by barriers. Both commit, except under prefer-writer
    when the compaction completes first: Hudi's rule then aborts the deltacommit (a completed
    compaction requested after it, on its file group) and it is rolled back."""
    import multiprocessing as mp

    from airflow_hudi_occ.testing.service_workers import compact_after_barrier
    from airflow_hudi_occ.testing.workers import mor_upsert_between_barriers

    opts = {**FAST_WRITE_OPTIONS, **STRATEGIES[strategy]}
    w, m = _seeded(mor)
    _upsert(w, m, [(1, "a", 2, "u1")])
    ctx = mp.get_context("spawn")
    ready, go, after, results = ctx.Barrier(2), ctx.Barrier(2), ctx.Barrier(2), ctx.Queue()
    rows = [(1, "a", 6, "inflight1"), (5, "a", 6, "inflight5")]
    w_barriers = [ready, go] + ([after] if first == "compaction" else [])
    c_barriers = [go] + ([after] if first == "writer" else [])
    writer = _procs([ctx.Process(target=mor_upsert_between_barriers,
                                 args=(mor.base_uri, opts, _dict_rows(rows), w_barriers, results,
                                       "ingestion"))])
    ready.wait(timeout=120)  # the writer's log file is written; its instant is inflight
    t = schedule_compaction(mor, opts, force=True)
    plan = mor.timeline().compaction_plan(mor.timeline().get(t))
    pending_writer = [i for i in mor.timeline().pending() if i.action is Action.DELTA_COMMIT]
    assert len(pending_writer) == 1 and pending_writer[0].requested_time < t
    assert all(LogFileName.parse(n).instant_time != pending_writer[0].requested_time
               for op in plan.operations for n in op.delta_file_names)
    compactor = _procs([ctx.Process(target=compact_after_barrier,
                                    args=(mor.base_uri, opts, t, c_barriers, results))])
    out = {}
    r = results.get(timeout=180)
    out[r["name"]] = r
    assert r["name"] == ("ingestion" if first == "writer" else "compaction"), r
    after.wait(timeout=120)  # let the second one commit
    r = results.get(timeout=180)
    out[r["name"]] = r
    for p in writer + compactor:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert all(r["outcome"] != "error" for r in out.values()), out
    assert out["compaction"]["outcome"] == "committed"
    writer_loses = strategy == "prefer-writer" and first == "compaction"
    assert out["ingestion"]["outcome"] == ("conflict" if writer_loses else "committed")
    if writer_loses:
        assert out["ingestion"]["error"]["other_instant"] == t
        assert mor.timeline().get(out["ingestion"]["instant"]) is None
    else:
        m.upsert(rows)
    check(mor, m)
    [fs] = [fs for fs in merge_file_slices(mor) if fs.base.partition == "a"]
    assert fs.base.instant_time == t
    assert [lf.instant_time for lf in fs.log_files] == ([] if writer_loses else [out["ingestion"]["instant"]])


def test_clean_after_compaction_deletes_old_slices_whole(mor):
    """The cleaner removes a compacted slice's log files with its base file: a log file left
    alone would be older than every base file of its group, which hudi-rs (HEAD) refuses."""
    from airflow_hudi_occ.core.services.clean import run_clean
    w, m = _seeded(mor)
    first = _upsert(w, m, [(1, "a", 2, "u1")])
    t = schedule_compaction(mor, FORCE, force=True)
    execute_compaction(mor, FORCE, t)
    later = _upsert(w, m, [(1, "a", 3, "u1b")])
    res = run_clean(mor, {**FAST_WRITE_OPTIONS, "hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
                          "hoodie.cleaner.fileversions.retained": "1"})
    names = [f.rsplit("/", 1)[1] for f in res.deleted_files]
    assert any(LogFileName.parse(n) and LogFileName.parse(n).instant_time == first.instant.requested_time
               for n in names)
    left = [LogFileName.parse(n) for n in os.listdir(os.path.join(mor.base_uri, "a"))]
    assert [lf.instant_time for lf in left if lf] == [later.instant.requested_time]
    check(mor, m)


def test_early_conflict_detection_lets_a_compaction_and_an_inflight_writer_both_commit(mor):
    """With early conflict detection on, a deltacommit's APPEND marker on a file group is no
    reason to stop the compaction of that group (nor the compaction's MERGE marker a reason to
    stop the writer): the writer's log belongs to the slice the compaction starts."""
    ecd = {**FAST_WRITE_OPTIONS, "hoodie.write.concurrency.early.conflict.detection.enable": "true"}
    w, m = _seeded(mor)
    w = MergeOnReadWriter(mor, WriteConfig.from_options(ecd))
    _upsert(w, m, [(1, "a", 2, "u1")])
    box = {}

    def compact_meanwhile(tx):
        box["t"] = schedule_compaction(mor, ecd, force=True)
        box["res"] = execute_compaction(mor, ecd, box["t"])

    rows = [(1, "a", 7, "late"), (3, "a", 7, "late3")]
    r = w.write(_batch(rows), "upsert", before_commit=compact_meanwhile)
    m.upsert(rows)
    assert box["res"].instant == box["t"] < r.instant.completion_time
    check(mor, m)
    w.write(_batch([(5, "a", 8, "after")]), "upsert")
    m.upsert([(5, "a", 8, "after")])
    check(mor, m)


def test_a_hostile_plan_is_refused_before_anything_is_touched(mor, tmp_path):
    """A compaction plan edited to name a partition outside the table: the executor refuses
    it as it reads the plan (UnsafePathError naming the plan file), and nothing inside or
    outside the table changes."""
    from airflow_hudi_occ.core.errors import UnsafePathError
    from airflow_hudi_occ.core.format.metadata import CompactionOperation
    from airflow_hudi_occ.testing.tables import tree_snapshot
    w, m = _seeded(mor)
    _upsert(w, m, [(1, "a", 2, "u1")])
    t = schedule_compaction(mor, FORCE, force=True)
    (plan_file,) = [p for p in (tmp_path / "mor" / ".hoodie" / "timeline").iterdir()
                    if p.name == f"{t}.compaction.requested"]
    ops = CompactionPlan.decode(plan_file.read_bytes()).operations
    hostile = [CompactionOperation("../..", o.file_id, o.base_instant_time, o.data_file_name,
                                   o.delta_file_names) for o in ops]
    plan_file.write_bytes(CompactionPlan(hostile).encode())
    before = tree_snapshot(tmp_path)
    with pytest.raises(UnsafePathError) as e:
        execute_compaction(Table.open(mor.base_uri), FORCE, t)
    assert plan_file.name in str(e.value) and "'../..'" in str(e.value)
    assert tree_snapshot(tmp_path) == before
