"""The write transaction end to end on real tables, checked with the independent hudi-rs reader."""

import os
import time

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.concurrency import abort_signal
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import (RetryableError, HeartbeatExpiredError, InstantStateError,
                                          PendingClusteringConflictError, UnknownLockProviderError,
                                          UnknownStrategyError, WriteAbortedError, WriteConflictError)
from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.core.concurrency.heartbeat import heartbeat_path
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.format.metadata import (EXTRA_ATTEMPT, EXTRA_CHECKPOINT, EXTRA_WRITER_ID,
                                            ClusteringGroup, RequestedReplaceMetadata)
from airflow_hudi_occ.core.commit.rollback import rollback_failed_writes
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.commit.transaction import WriteTransaction, find_committed_batch, last_checkpoint
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.testing.tables import hudi_read, java_fixture, rows_by_key


def batch(ids, value, ts=1, part=lambda i: f"p{i % 2}"):
    return pa.table({"id": list(ids), "p": [part(i) for i in ids], "value": [value] * len(ids),
                     "ts": [ts] * len(ids)})


def data_files(table):
    return sorted(p for p in _walk(table.storage.root) if p.endswith(".parquet"))


def _walk(root):
    for d, _, files in os.walk(root):
        if "/.hoodie" in d:
            continue
        for f in files:
            yield os.path.relpath(os.path.join(d, f), root)


def test_upsert_delete_and_hudi_reader_agree(table, fast_options):
    cfg = WriteConfig.from_options(fast_options)
    w = ArrowTableWriter(table, cfg)
    r1 = w.write(batch(range(10), "a"), "upsert")
    r2 = w.write(batch([1, 2, 3, 20], "b", ts=2), "upsert")
    w.write(batch([2], "x", ts=0), "upsert")  # older precombine value: the stored record stays
    w.write(batch([3], "", ts=9), "delete")
    got = rows_by_key(hudi_read(table.base_uri))
    expected = {i: "a" for i in range(10)} | {1: "b", 2: "b", 20: "b"}
    del expected[3]
    assert {k: v["value"] for k, v in got.items()} == expected
    t = hudi_read(table.base_uri)
    commit_time = dict(zip(t.column("id").to_pylist(), t.column("_hoodie_commit_time").to_pylist()))
    assert commit_time[0] == r1.instant.requested_time  # untouched rows keep their commit time
    assert commit_time[1] == r2.instant.requested_time
    assert rows_by_key(read_table(table)) == got


def test_time_travel_and_incremental_by_completion_time(table, fast_options):
    w = ArrowTableWriter(table, WriteConfig.from_options(fast_options))
    r1 = w.write(batch(range(4), "a"), "upsert")
    r2 = w.write(batch([0, 9], "b"), "upsert")
    old = rows_by_key(hudi_read(table.base_uri, as_of=r1.instant.requested_time))
    assert {k: v["value"] for k, v in old.items()} == {0: "a", 1: "a", 2: "a", 3: "a"}
    inc = hudi_read(table.base_uri, start=r1.instant.completion_time, end=r2.instant.completion_time)
    assert sorted(inc.column("id").to_pylist()) == [0, 9]


def test_insert_overwrite_replaces_partition(table, fast_options):
    w = ArrowTableWriter(table, WriteConfig.from_options(fast_options))
    w.write(batch(range(6), "a"), "upsert")
    r = w.write(batch([100, 102], "o", part=lambda i: "p0"), "insert_overwrite")
    assert r.instant.action is Action.REPLACE_COMMIT
    got = {k: v["value"] for k, v in rows_by_key(hudi_read(table.base_uri)).items()}
    assert got == {1: "a", 3: "a", 5: "a", 100: "o", 102: "o"}


def test_extra_metadata_checkpoint_and_batch_key(table, fast_options):
    w = ArrowTableWriter(table, WriteConfig.from_options(fast_options), writer_id="me")
    r = w.write(batch([1], "a"), checkpoint="offset=41", batch_key="dag/run/task", attempt=3)
    meta = table.timeline().commit_metadata(r.instant)
    assert meta.extra_metadata[EXTRA_WRITER_ID] == "me"
    assert meta.extra_metadata[EXTRA_ATTEMPT] == "3"
    assert meta.extra_metadata[EXTRA_CHECKPOINT] == "offset=41"
    assert last_checkpoint(table) == "offset=41"
    assert find_committed_batch(table, "dag/run/task").requested_time == r.instant.requested_time
    assert find_committed_batch(table, "dag/run/other") is None


def test_append_to_java_v8_fixture_is_read_by_hudi(tmp_path, fast_options):
    path = java_fixture("v8_simplekeygen_nonhivestyle", tmp_path)
    t = Table.open(str(path))
    before = hudi_read(str(path))
    schema = before.drop_columns([c for c in before.column_names if c.startswith("_hoodie_")]).schema
    new_row = {name: None for name in schema.names}
    new_row.update({"id": 99, "name": "Zed", "byteField": 20, "longField": 1})
    row = pa.Table.from_pylist([new_row], schema=schema)
    ArrowTableWriter(t, WriteConfig.from_options(fast_options)).write(row, "upsert")
    after = rows_by_key(hudi_read(str(path)), columns=["id", "name"])
    assert {k: v["name"] for k, v in after.items()} == \
        {r["id"]: r["name"] for r in before.select(["id", "name"]).to_pylist()} | {99: "Zed"}


def _begin_with_file(table, cfg, ids, value):
    """A transaction that has written its files but not committed (two writers interleaved)."""
    w = ArrowTableWriter(table, cfg)
    holder = {}

    class Stop(Exception):
        pass

    def before_commit(tx):
        holder["tx"] = tx
        raise Stop()

    # Run the write up to the commit, keeping the transaction pending.
    orig_abort = WriteTransaction.abort
    WriteTransaction.abort = lambda self, **kw: None
    try:
        with pytest.raises(Stop):
            w.write(batch(ids, value), before_commit=before_commit)
    finally:
        WriteTransaction.abort = orig_abort
    return holder["tx"]


def test_overlapping_writers_exactly_one_wins_and_loser_is_rolled_back(table, fast_options):
    cfg = WriteConfig.from_options(fast_options)
    ArrowTableWriter(table, cfg).write(batch(range(4), "base"))
    tx1 = _begin_with_file(table, cfg, [0], "one")
    tx2 = _begin_with_file(table, cfg, [2], "two")  # same file group p0
    stats2 = [s for s in _stats_of(table, tx2)]
    stats1 = [s for s in _stats_of(table, tx1)]
    tx2.commit(stats2)
    with pytest.raises(WriteConflictError) as e:
        tx1.commit(stats1)
    err = e.value
    assert err.instant == tx1.instant_time and err.other_instant == tx2.instant_time
    assert err.file_groups == [f"{s.partition_path}/{s.file_id}" for s in stats1]
    loser_files = [s.path for s in stats1]
    tx1.abort()
    tl = table.timeline()
    assert tl.get(tx1.instant_time) is None
    rb = [i for i in tl if i.action is Action.ROLLBACK]
    assert len(rb) == 1 and rb[0].is_completed
    assert not any(os.path.exists(table.storage.path(p)) for p in loser_files)
    assert not os.path.exists(table.storage.path(".hoodie", ".temp", tx1.instant_time))
    got = {k: v["value"] for k, v in rows_by_key(hudi_read(table.base_uri)).items()}
    assert got == {0: "base", 1: "base", 2: "two", 3: "base"}


def _stats_of(table, tx):
    """Write stats of a pending transaction, rebuilt from the base files its markers name."""
    from airflow_hudi_occ.core.format.layout import parse_base_file_name
    from airflow_hudi_occ.core.format.metadata import WriteStat
    out = []
    for rel in tx.markers.data_files():
        part, name = rel.rsplit("/", 1)
        bf = parse_base_file_name(name, part)
        out.append(WriteStat(file_id=bf.file_id, path=rel, partition_path=part,
                             file_size_in_bytes=os.path.getsize(table.storage.path(rel))))
    return out


def test_disjoint_writers_both_commit(table, fast_options):
    cfg = WriteConfig.from_options(fast_options)
    ArrowTableWriter(table, cfg).write(batch(range(4), "base"))
    tx1 = _begin_with_file(table, cfg, [0], "one")  # p0
    tx2 = _begin_with_file(table, cfg, [1], "two")  # p1
    s1, s2 = _stats_of(table, tx1), _stats_of(table, tx2)
    tx2.commit(s2)
    tx1.commit(s1)
    got = {k: v["value"] for k, v in rows_by_key(hudi_read(table.base_uri)).items()}
    assert got == {0: "one", 1: "two", 2: "base", 3: "base"}


def test_abort_signal_stops_before_the_next_marker(table, fast_options):
    cfg = WriteConfig.from_options(fast_options)
    tx = WriteTransaction(table, cfg)
    tx.begin()
    tx.create_marker("p0", "f1-0_0-0-1_" + tx.instant_time + ".parquet", "CREATE")
    abort_signal.raise_abort(table, tx.instant_time, "early conflict seen by a sensor", source="test")
    with pytest.raises(WriteAbortedError) as e:
        tx.create_marker("p0", "f2-0_0-0-1_" + tx.instant_time + ".parquet", "CREATE")
    assert e.value.instant == tx.instant_time and "sensor" in e.value.reason
    tx.abort()
    assert table.timeline().get(tx.instant_time) is None


def test_own_expired_heartbeat_refuses_commit(table, fast_options):
    cfg = WriteConfig.from_options(fast_options | {"hoodie.client.heartbeat.interval_in_ms": "100000"})
    tx = WriteTransaction(table, cfg)
    tx.begin()
    old = time.time() - 1000
    os.utime(heartbeat_path(table, tx.instant_time), (old, old))
    with pytest.raises(HeartbeatExpiredError):
        tx.commit([])
    assert table.timeline().get(tx.instant_time).is_pending
    tx.heartbeat.stop(delete=False)


def test_lazy_rollback_picks_only_dead_writers(table, fast_options):
    cfg = WriteConfig.from_options(fast_options | {"hoodie.client.heartbeat.interval_in_ms": "300"})
    ArrowTableWriter(table, cfg).write(batch(range(4), "base"))
    dead = _begin_with_file(table, cfg, [0], "dead")
    alive = _begin_with_file(table, cfg, [1], "alive")
    dead.heartbeat.stop(delete=False)  # the process "died": no more beats
    old = time.time() - 10
    os.utime(heartbeat_path(table, dead.instant_time), (old, old))
    dead_files = dead.markers.data_files()
    results = rollback_failed_writes(table, cfg)
    assert [r.rolled_back for r in results] == [dead.instant_time]
    assert table.timeline().get(dead.instant_time) is None
    assert not any(os.path.exists(table.storage.path(f)) for f in dead_files)
    # the slow-but-alive writer is still pending and can commit
    assert table.timeline().get(alive.instant_time).is_pending
    alive.commit(_stats_of(table, alive))
    got = {k: v["value"] for k, v in rows_by_key(hudi_read(table.base_uri)).items()}
    assert got == {0: "base", 1: "alive", 2: "base", 3: "base"}


def test_rolled_back_instant_cannot_commit(table, fast_options):
    cfg = WriteConfig.from_options(fast_options)
    tx = _begin_with_file(table, cfg, [0], "x")
    stats = _stats_of(table, tx)
    from airflow_hudi_occ.core.commit.rollback import rollback_instant
    rollback_instant(table, tx.instant_time, cfg)
    with pytest.raises((InstantStateError, HeartbeatExpiredError)) as e:
        tx.commit(stats)
    assert isinstance(e.value, RetryableError)
    assert hudi_read(table.base_uri).num_rows == 0
    tx.heartbeat.stop()


def test_write_into_pending_clustering_is_refused_before_any_data(table, fast_options):
    cfg = WriteConfig.from_options(fast_options)
    ArrowTableWriter(table, cfg).write(batch(range(4), "base"))
    fg = FileSystemView(table).latest_file_slices("p0")[0]
    plan = RequestedReplaceMetadata("CLUSTER", [ClusteringGroup([("p0", fg.file_id, fg.base_file.relative_path)])])
    cl = WriteTransaction(table, cfg, action=Action.REPLACE_COMMIT, operation_type="CLUSTER",
                          is_table_service=True)
    cl.begin(plan=plan)
    files_before = data_files(table)
    with pytest.raises(PendingClusteringConflictError) as e:
        ArrowTableWriter(table, cfg).write(batch([0], "new"))
    assert cl.instant_time in str(e.value)
    assert data_files(table) == files_before
    cl.heartbeat.stop()


def test_unknown_strategy_and_lock_provider_change_nothing(table, fast_options):
    before = sorted(os.listdir(table.timeline_dir))
    with pytest.raises(UnknownStrategyError):
        ArrowTableWriter(table, WriteConfig.from_options(
            fast_options | {"hoodie.write.lock.conflict.resolution.strategy": "nope"})).write(batch([1], "a"))
    with pytest.raises(UnknownLockProviderError):
        ArrowTableWriter(table, WriteConfig.from_options(
            fast_options | {"hoodie.write.lock.provider": "etcd"})).write(batch([1], "a"))
    assert sorted(os.listdir(table.timeline_dir)) == before
    assert data_files(table) == []


def test_corrupt_commit_on_the_timeline_fails_the_write_and_changes_nothing_visible(table, fast_options):
    from airflow_hudi_occ.core.errors import CorruptMetadataError
    cfg = WriteConfig.from_options(fast_options)
    w = ArrowTableWriter(table, cfg)
    w.write(batch(range(4), "a"))
    r1 = w.write(batch([10], "b"))  # the latest commit: every writer reads its schema
    before_rows = rows_by_key(read_table(table))
    path = table.timeline().file_path(r1.instant)
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])  # a truncated completed commit
    from airflow_hudi_occ.core.table import timeline as tlmod
    tlmod._META_CACHE.clear()
    files_before = data_files(table)
    with pytest.raises(CorruptMetadataError) as e:
        w.write(batch([0], "c"))
    assert path in str(e.value) and e.value.remedy
    assert data_files(table) == files_before  # no stray base file of the failed write
    assert [i for i in table.timeline() if i.is_pending] == []
    open(path, "wb").write(data)
    tlmod._META_CACHE.clear()
    assert rows_by_key(read_table(table)) == before_rows
