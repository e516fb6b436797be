"""Clustering in core: planning under the lock, the Arrow executor, writers meeting a pending
plan, and clustering racing ingestion in separate processes (hudi-rs checks every row once)."""

import os
import multiprocessing as mp

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.services.clustering import (execute_clustering, plan_clustering,
                                              schedule_clustering, show_clustering)
from airflow_hudi_occ.core.config import ClusteringConfig, WriteConfig
from airflow_hudi_occ.core.errors import PendingClusteringConflictError, WriteConflictError
from airflow_hudi_occ.core.table.file_system_view import FileSystemView, list_base_files
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.testing.service_workers import cluster_after_barrier
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key
from airflow_hudi_occ.testing.workers import commit_after_barrier

PREFER = {"hoodie.write.lock.conflict.resolution.strategy": "prefer-writer"}


def _seed(table, opts, batches=3, per=4, parts=("a",)):
    w = ArrowTableWriter(table, WriteConfig.from_options(opts))
    for b in range(batches):
        w.write(pa.Table.from_pylist([{"id": b * 100 + i + 1000 * parts.index(p), "p": p, "ts": b,
                                       "v": f"{(per - i) % per}-{b}"}
                                      for p in parts for i in range(per)]), "insert")


def test_arrow_clustering_rewrites_small_groups_keeping_rows_and_commit_times(table, fast_options):
    _seed(table, fast_options, parts=("a", "b"))
    before = hudi_read(table.base_uri)
    t = schedule_clustering(table, {**fast_options, "hoodie.clustering.plan.strategy.sort.columns": "v"})
    assert [p["instant"] for p in show_clustering(table)] == [t]
    res = execute_clustering(table, fast_options)
    after = hudi_read(table.base_uri)
    assert rows_by_key(after) == rows_by_key(before)
    key_time = lambda tb: dict(zip(tb.column("id").to_pylist(), tb.column("_hoodie_commit_time").to_pylist()))  # noqa: E731
    assert key_time(after) == key_time(before)
    assert {s.instant_time for s in FileSystemView(table).latest_file_slices()} == {t}
    assert sum(len(v) for v in res.replaced.values()) == 6
    assert schedule_clustering(table, fast_options) is None  # one file per partition: nothing to do


def test_plan_respects_size_limits_and_skips_pending_work(table, fast_options):
    w = ArrowTableWriter(table, WriteConfig.from_options(fast_options))
    for b, n in enumerate((2, 4, 8, 60)):  # four files of growing size
        w.write(pa.Table.from_pylist([{"id": b * 100 + i, "p": "a", "ts": b, "v": "x" * 20 * i}
                                      for i in range(n)]), "insert")
    tl = table.timeline()
    sizes = sorted(table.storage.size(table.storage.path(s.base_file.relative_path))
                   for s in FileSystemView(table).latest_file_slices())
    cfg = ClusteringConfig.from_options({**fast_options,
                                         "hoodie.clustering.plan.strategy.small.file.limit": sizes[-1],
                                         "hoodie.clustering.plan.strategy.target.file.max.bytes": sizes[0]})
    groups = plan_clustering(table, tl, cfg)
    assert len(groups[0].slices) == 3  # the largest file is not small
    assert groups[0].num_output_file_groups >= 2
    t = schedule_clustering(table, cfg)
    # a second plan does not take file groups of the pending one
    assert plan_clustering(table, table.timeline(), ClusteringConfig.from_options(fast_options)) == []
    assert t is not None


def test_write_into_pending_clustering_is_refused_before_any_data(table, fast_options):
    _seed(table, fast_options)
    t = schedule_clustering(table, fast_options)
    w = ArrowTableWriter(table, WriteConfig.from_options(fast_options))
    with pytest.raises(PendingClusteringConflictError) as ei:
        w.write(pa.Table.from_pylist([{"id": 1, "p": "a", "ts": 9, "v": "new"}]), "upsert")
    assert ei.value.other_instant == t and t in str(ei.value)
    refused = ei.value.instant
    assert not [b for b in list_base_files(table, "a") if b.instant_time == refused]
    # inserts of new keys go to new file groups: not refused
    w.write(pa.Table.from_pylist([{"id": 999, "p": "a", "ts": 9, "v": "new"}]), "upsert")


def _race(table, options, rows):
    """Clustering (scheduled now) and an ingestion, separate processes, committing at once."""
    t = schedule_clustering(table, options)
    assert t is not None
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    results = ctx.Queue()
    procs = [ctx.Process(target=cluster_after_barrier, args=(table.base_uri, options, t, barrier, results)),
             ctx.Process(target=commit_after_barrier,
                         args=(table.base_uri, options, rows, barrier, results, "ingestion"))]
    for p in procs:
        p.start()
    out = {r["name"]: r for r in (results.get(timeout=180) for _ in procs)}
    for p in procs:
        p.join(timeout=60)
    assert all(r["outcome"] != "error" for r in out.values()), out
    return t, out


@pytest.mark.parametrize("round_", range(2))
def test_prefer_writer_ingestion_always_commits_and_clustering_aborts(table, fast_options, round_):
    opts = {**fast_options, **PREFER}
    _seed(table, opts)
    before = rows_by_key(hudi_read(table.base_uri))
    rows = [{"id": k, "p": "a", "ts": 50, "v": "ingested"} for k in (0, 101, 202)]
    t, out = _race(table, opts, rows)
    assert out["ingestion"]["outcome"] == "committed"
    assert out["clustering"]["outcome"] == "conflict"
    assert out["clustering"]["error"]["other_instant"] == out["ingestion"]["instant"]
    got = rows_by_key(hudi_read(table.base_uri))  # raises on a duplicate key
    expected = {**before, **{r["id"]: r for r in rows}}
    assert got == expected
    tl = table.timeline()
    assert tl.get(t) is None  # the loser is rolled back, plan included ...
    assert not [b for b in list_base_files(table, "a") if b.instant_time == t]
    assert schedule_clustering(table, opts) is not None  # ... and can be planned again


def test_simple_clustering_wins_and_ingestion_loses(table, fast_options):
    """Simple (with updates allowed so the ingestion reaches its commit): a pending clustering
    plan is a candidate for every ingestion (concurrency-semantics 2), and a completed one for
    a later commit: exactly one of the two commits, the clustering."""
    opts = {**fast_options, "hoodie.clustering.updates.strategy":
            "org.apache.hudi.client.clustering.update.strategy.SparkAllowUpdateStrategy"}
    _seed(table, opts)
    before = rows_by_key(hudi_read(table.base_uri))
    rows = [{"id": k, "p": "a", "ts": 50, "v": "ingested"} for k in (0, 101)]
    t, out = _race(table, opts, rows)
    assert out["clustering"]["outcome"] == "committed"
    assert out["ingestion"]["outcome"] == "conflict"
    assert out["ingestion"]["error"]["other_instant"] == t
    assert rows_by_key(hudi_read(table.base_uri)) == before


def test_simple_later_commit_loses(table, fast_options):
    opts = {**fast_options, "hoodie.clustering.updates.strategy": "allow"}
    _seed(table, opts)
    w = ArrowTableWriter(table, WriteConfig.from_options(opts))
    t = schedule_clustering(table, opts)
    held = {}

    def cluster_first(tx):  # the ingestion has written its files; clustering commits now
        held["res"] = execute_clustering(Table.open(table.base_uri), opts, t)

    with pytest.raises(WriteConflictError) as ei:
        w.write(pa.Table.from_pylist([{"id": 0, "p": "a", "ts": 9, "v": "late"}]), "upsert",
                before_commit=cluster_first)
    assert ei.value.other_instant == t and held["res"].instant == t
    assert rows_by_key(hudi_read(table.base_uri))[0]["v"] != "late"


def test_clustering_a_bucket_index_table_is_refused_before_planning(tmp_path):
    from airflow_hudi_occ.core.errors import ConfigError
    from airflow_hudi_occ.core.table.table import Table
    t = Table.create(str(tmp_path / "b"), "b", record_key_fields=["id"], partition_fields=["p"])
    opts = {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2",
            "hoodie.write.lock.provider": "inprocess"}
    with pytest.raises(ConfigError, match="bucket index") as ei:
        schedule_clustering(t, opts)
    assert ei.value.remedy and not t.timeline().pending()


def test_an_executed_clustering_names_its_dag_and_task_on_the_timeline_while_it_runs(table, fast_options):
    """Adopting the plan writes a running record with the executor's labels (as a write's
    begin does), so the timeline page draws the clustering on its DAG's task lane while its
    job runs, not as an unlabelled table service."""
    import json

    from airflow_hudi_occ.core.commit.attempt_log import LABELS_OPTION
    from airflow_hudi_occ.core.inspection.timeline_view import build_timeline_view
    from airflow_hudi_occ.core.services.clustering import ClusteringTransaction, schedule_clustering
    _seed(table, fast_options, batches=2)
    t = schedule_clustering(table, fast_options)
    assert t is not None
    labels = {"dag_id": "maint", "task_id": "cluster", "run_id": "r1", "try_number": "1"}
    tx = ClusteringTransaction(table, WriteConfig.from_options({**fast_options, LABELS_OPTION: json.dumps(labels)}))
    tx.adopt(t)
    try:
        [row] = [r for r in build_timeline_view(table)["instants"] if r["instant"] == t]
        assert (row["writer"]["dag_id"], row["writer"]["task_id"]) == ("maint", "cluster")
        assert row["lane"] == "maint \u203a cluster" and row["outcome"] == "running"
    finally:
        tx.abort()


def test_merge_on_read_clustering_rewrites_the_merged_slices(tmp_path, fast_options):
    """A merge-on-read file group with log files (an update and a delete) is clustered from its
    merged rows, as Hudi reads a slice: the update and the delete survive the rewrite (reading
    the base file alone brought the old row back and the deleted one too)."""
    from airflow_hudi_occ.core.format.log_file import LogFileName
    from airflow_hudi_occ.core.table.mor_reader import read_snapshot
    path, opts = mor_table_with_an_update_and_a_delete(tmp_path, fast_options)
    assert sum(1 for n in os.listdir(os.path.join(path, "a")) if LogFileName.parse(n)) == 2
    planned = schedule_clustering(Table.open(path), opts)
    execute_clustering(Table.open(path), opts, planned)
    rows = read_snapshot(Table.open(path)).select(["id", "v"]).to_pylist()
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, "updated"), (3, "z")]


def test_a_merge_on_read_plan_names_each_slices_log_files_as_java_does(tmp_path, fast_options):
    """The plan of a slice with log files names them (full paths, latest first, as Java's
    planner: its executor reads exactly the slice a plan names) under Java 1.x's
    ``clustering`` action; the interop proof is
    tests/interop/test_java_runs_our_mor_clustering_plan.py (Java's plan of the same slice
    is the same record, and Java runs ours)."""
    from airflow_hudi_occ.core.format.instant import Action
    from airflow_hudi_occ.core.format.log_file import LogFileName
    path, opts = mor_table_with_an_update_and_a_delete(tmp_path, fast_options)
    table = Table.open(path)
    planned = schedule_clustering(table, opts)
    inst = table.timeline().get(planned)
    assert inst.action is Action.CLUSTERING
    [group] = table.timeline().requested_replace_metadata(inst).input_groups
    [(part, fid, base)] = group.slices
    logs = sorted((n for n in os.listdir(os.path.join(path, "a")) if LogFileName.parse(n)),
                  key=lambda n: LogFileName.parse(n).instant_time, reverse=True)
    assert len(logs) == 2
    assert group.delta_file_paths == {(part, fid): [f"{table.base_uri}/a/{n}" for n in logs]}
    assert base.startswith(f"{table.base_uri}/a/{fid}_")


def test_the_executor_reads_the_planned_slice_not_a_log_completed_after_it(tmp_path, fast_options):
    """A deltacommit into a planned file group after the plan (a writer the updates strategy
    let in) is not read by the rewrite: the planned slice is base + the plan's logs, as Java
    reads it; the later writer is the conflict rule's business."""
    from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
    from airflow_hudi_occ.core.services.clustering import planned_slices
    from airflow_hudi_occ.core.table.mor_reader import read_file_slice
    from tests.interop.rows import batch
    path, opts = mor_table_with_an_update_and_a_delete(tmp_path, fast_options)
    table = Table.open(path)
    planned = schedule_clustering(table, opts)
    MergeOnReadWriter(Table.open(path), WriteConfig.from_options({**opts, **PREFER})).write(
        batch([(3, "a", 9, "after-the-plan")]), "upsert")
    table = Table.open(path)
    tl = table.timeline()
    plan = tl.requested_replace_metadata(tl.get(planned))
    [(part, fid, _)] = plan.input_groups[0].slices
    [fs] = planned_slices(table, plan, planned).values()
    assert [lf.name for lf in fs.log_files] == sorted(plan.input_groups[0].log_file_names(part, fid),
                                                      key=lambda n: n.split("_")[1])
    assert not any("after-the-plan" in str(v) for v in
                   read_file_slice(table, fs).column("v").to_pylist())


def test_a_plan_that_names_no_log_files_still_reads_those_before_it(tmp_path, fast_options):
    """A plan of ours from before plans named their log files: its executor reads the logs that
    completed before the plan (the planner saw them), so the update and delete survive."""
    from airflow_hudi_occ.core.format.metadata import RequestedReplaceMetadata
    from airflow_hudi_occ.core.table.mor_reader import read_snapshot
    path, opts = mor_table_with_an_update_and_a_delete(tmp_path, fast_options)
    planned = schedule_clustering(Table.open(path), opts)
    [name] = [n for n in os.listdir(os.path.join(path, ".hoodie", "timeline")) if n.startswith(planned)]
    file = os.path.join(path, ".hoodie", "timeline", name)
    with open(file, "rb") as f:
        plan = RequestedReplaceMetadata.decode(f.read())
    for g in plan.input_groups:
        g.delta_file_paths = {}
    with open(file, "wb") as f:
        f.write(plan.encode())
    execute_clustering(Table.open(path), opts, planned)
    rows = read_snapshot(Table.open(path)).select(["id", "v"]).to_pylist()
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, "updated"), (3, "z")]


def test_a_plan_naming_a_log_file_the_table_lost_is_refused(tmp_path, fast_options):
    from airflow_hudi_occ.core.errors import InstantStateError
    from airflow_hudi_occ.core.format.metadata import RequestedReplaceMetadata
    from airflow_hudi_occ.core.services.clustering import planned_slices
    path, opts = mor_table_with_an_update_and_a_delete(tmp_path, fast_options)
    table = Table.open(path)
    planned = schedule_clustering(table, opts)
    plan = table.timeline().requested_replace_metadata(table.timeline().get(planned))
    g = plan.input_groups[0]
    key = next(iter(g.delta_file_paths))
    g.delta_file_paths[key] = g.delta_file_paths[key] + [f"{table.base_uri}/a/.{key[1]}_1.log.1_0-0-0"]
    plan = RequestedReplaceMetadata.decode(plan.encode())
    with pytest.raises(InstantStateError) as e:
        planned_slices(table, plan, planned)
    assert e.value.remedy and planned in e.value.remedy


def mor_table_with_an_update_and_a_delete(tmp_path, options: dict) -> tuple[str, dict]:
    """A merge-on-read table whose one file group in partition ``a`` has a base file of ids 1-3
    and two log files (1 updated to "updated", 2 deleted), and clustering options that plan it
    (small-file limit above it, sorted by id): (path, options). The rows every reader must
    return after any clustering: (1, "updated"), (3, "z")."""
    from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
    from tests.interop.rows import batch
    path = str(tmp_path / "t")
    Table.create(path, "t", record_key_fields=["id"], partition_fields=["p"], precombine_field="ts",
                 table_type="MERGE_ON_READ")
    opts = {**options, "hoodie.clustering.plan.strategy.small.file.limit": str(100 * 1024 * 1024),
            "hoodie.clustering.plan.strategy.sort.columns": "id"}

    def write(rows, op):
        MergeOnReadWriter(Table.open(path), WriteConfig.from_options(opts)).write(batch(rows), op)
    write([(1, "a", 1, "x"), (2, "a", 1, "y"), (3, "a", 1, "z")], "insert")
    write([(1, "a", 2, "updated")], "upsert")
    write([(2, "a", 3, "")], "delete")
    return path, opts
