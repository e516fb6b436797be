"""Real concurrency: OS processes committing to one table through each lock provider.

Every writer begins and writes its files, then all commit at once (a barrier), so they are all
truly concurrent. The independent hudi-rs reader then checks the table: exactly the winners'
rows, each key once; and the timeline: no instant time (requested or completion) repeats.
"""

import multiprocessing as mp
import os
import uuid

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key
from airflow_hudi_occ.testing.workers import commit_after_barrier

N = 4


def _options(kind, tmp_path, zk_hosts=None):
    opts = {"hoodie.write.lock.provider": kind, "hoodie.write.lock.wait_time_ms": "5000",
            "hoodie.write.lock.client.wait_time_ms_between_retry": "50",
            "hoodie.time.generator.max_expected_clock_skew_ms": "5",
            "hoodie.client.heartbeat.interval_in_ms": "2000"}
    if kind == "zookeeper":
        opts.update({"hoodie.write.lock.zookeeper.url": zk_hosts,
                     "hoodie.write.lock.zookeeper.base_path": f"/conc-{uuid.uuid4().hex[:8]}",
                     "hoodie.write.lock.zookeeper.session_timeout_ms": "6000"})
    return opts


@pytest.fixture(params=["filesystem", "zookeeper"])
def lock_options(request, tmp_path):
    if request.param == "zookeeper":
        zk = request.getfixturevalue("zk_server")
        return _options("zookeeper", tmp_path, zk.hosts)
    return _options("filesystem", tmp_path)


def _run(table, options, row_sets):
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(row_sets))
    results = ctx.Queue()
    procs = [ctx.Process(target=commit_after_barrier,
                         args=(table.base_uri, options, rows, barrier, results, f"w{i}"))
             for i, rows in enumerate(row_sets)]
    for p in procs:
        p.start()
    out = [results.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    errors = [r for r in out if r["outcome"] == "error"]
    assert not errors, errors[0].get("trace")
    return out


def _seed(table, options):
    ArrowTableWriter(table, WriteConfig.from_options(options)).write(
        pa.table({"id": list(range(100)), "p": ["p0"] * 100, "value": ["seed"] * 100, "ts": [0] * 100}))


def _assert_unique_times(table):
    times = []
    for inst in table.timeline():
        times.append(inst.requested_time)
        if inst.completion_time:
            times.append(inst.completion_time)
    assert len(times) == len(set(times)), "an instant time repeated"


def test_overlapping_file_group_exactly_one_winner(table, lock_options):
    _seed(table, lock_options)
    row_sets = [[{"id": i, "p": "p0", "value": f"w{i}", "ts": 1}] for i in range(N)]
    out = _run(table, lock_options, row_sets)
    winners = [r for r in out if r["outcome"] == "committed"]
    losers = [r for r in out if r["outcome"] == "conflict"]
    assert len(winners) == 1 and len(losers) == N - 1
    w = winners[0]
    for lo in losers:
        assert lo["error"]["other_instant"] == w["instant"]
        assert lo["error"]["instant"] == lo["instant"]
        assert table.timeline().get(lo["instant"]) is None  # rolled back
    got = {k: v["value"] for k, v in rows_by_key(hudi_read(table.base_uri)).items()}
    expected = {i: "seed" for i in range(100)}
    expected[w["rows"][0]["id"]] = w["rows"][0]["value"]
    assert got == expected
    _assert_unique_times(table)
    leftovers = [f for d, _, fs in os.walk(table.base_uri) if "/.hoodie" not in d for f in fs
                 if any(lo["instant"] in f for lo in losers)]
    assert leftovers == []


def test_disjoint_file_groups_all_commit(table, lock_options):
    _seed(table, lock_options)
    row_sets = [[{"id": 1000 + i, "p": f"q{i}", "value": f"w{i}", "ts": 1}] for i in range(N)]
    out = _run(table, lock_options, row_sets)
    assert [r["outcome"] for r in out] == ["committed"] * N
    got = {k: v["value"] for k, v in rows_by_key(hudi_read(table.base_uri)).items()}
    assert got == {i: "seed" for i in range(100)} | {1000 + i: f"w{i}" for i in range(N)}
    _assert_unique_times(table)
    completions = sorted(r["completion"] for r in out)
    assert len(set(completions)) == N


def test_inprocess_lock_threads(table):
    """The in-process provider only serialises threads of one process: prove it with threads."""
    import threading
    opts = _options("inprocess", None)
    _seed(table, opts)
    barrier = threading.Barrier(N)
    results = []

    def run(i):
        from airflow_hudi_occ.core.errors import WriteConflictError
        w = ArrowTableWriter(Table.open(table.base_uri), WriteConfig.from_options(opts))
        try:
            w.write(pa.table({"id": [i], "p": ["p0"], "value": [f"t{i}"], "ts": [1]}),
                    before_commit=lambda tx: barrier.wait(timeout=60))
            results.append("committed")
        except WriteConflictError:
            results.append("conflict")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(N)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["committed"] + ["conflict"] * (N - 1)
    assert hudi_read(table.base_uri).num_rows == 100
    _assert_unique_times(table)


# --- merge-on-read: deltacommits appending log files ---------------------------------------


def _mor_table(tmp_path):
    from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
    t = Table.create(str(tmp_path / "mor"), "mor", record_key_fields=["id"], partition_fields=["p"],
                     precombine_field="ts", table_type="MERGE_ON_READ")
    MergeOnReadWriter(t, WriteConfig.from_options(_options("filesystem", tmp_path))).write(
        pa.table({"id": list(range(20)), "p": ["p0"] * 10 + ["p1"] * 10, "value": ["seed"] * 20,
                  "ts": [0] * 20}), "insert")
    return t


def _run_mor(table, options, row_sets):
    from airflow_hudi_occ.testing.workers import mor_upsert_between_barriers
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(row_sets))
    results = ctx.Queue()
    procs = [ctx.Process(target=mor_upsert_between_barriers,
                         args=(table.base_uri, options, rows, [barrier], results, f"w{i}"))
             for i, rows in enumerate(row_sets)]
    for p in procs:
        p.start()
    out = [results.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert not [r for r in out if r["outcome"] == "error"], out
    return out


def test_mor_deltacommits_on_one_file_group_exactly_one_winner(tmp_path):
    """Two deltacommits appending log files to the same file group conflict under the simple
    strategy (their write stats name the same fileId): one commits, the other is rolled back,
    its log file deleted through its APPEND marker."""
    table = _mor_table(tmp_path)
    opts = _options("filesystem", tmp_path)
    row_sets = [[{"id": i, "p": "p0", "value": f"w{i}", "ts": 1}] for i in range(3)]
    out = _run_mor(table, opts, row_sets)
    winners = [r for r in out if r["outcome"] == "committed"]
    losers = [r for r in out if r["outcome"] == "conflict"]
    assert len(winners) == 1 and len(losers) == 2
    expected = {i: "seed" for i in range(20)}
    expected[winners[0]["rows"][0]["id"]] = winners[0]["rows"][0]["value"]
    got = {k: v["value"] for k, v in rows_by_key(hudi_read(table.base_uri)).items()}
    assert got == expected
    for lo in losers:
        assert lo["error"]["other_instant"] == winners[0]["instant"]
        assert table.timeline().get(lo["instant"]) is None
        assert not [f for f in os.listdir(os.path.join(table.base_uri, "p0")) if lo["instant"] in f]
    _assert_unique_times(table)


def test_mor_deltacommits_on_disjoint_file_groups_all_commit(tmp_path):
    table = _mor_table(tmp_path)
    opts = _options("filesystem", tmp_path)
    out = _run_mor(table, opts, [[{"id": 1, "p": "p0", "value": "a", "ts": 1}],
                                 [{"id": 11, "p": "p1", "value": "b", "ts": 1}]])
    assert [r["outcome"] for r in out] == ["committed", "committed"]
    got = {k: v["value"] for k, v in rows_by_key(hudi_read(table.base_uri)).items()}
    assert got == {i: "seed" for i in range(20)} | {1: "a", 11: "b"}
    _assert_unique_times(table)
