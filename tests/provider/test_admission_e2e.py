"""Admission end to end with four writers: 2 ingestion writers, a backfill and a clustering
(the table-service operator), each its own ``airflow dags test`` process started at the same
moment on one table (real spark-submit, the ZooKeeper lock of the default connection).

Footprints (partitions): ingest_ab {a, b}, ingest_c {c}, backfill_bc {b, c}, cluster_a {a}.
Overlapping pairs (a common file group): ingest_ab-backfill_bc (b), ingest_ab-cluster_a (a);
the others are disjoint, ingest_c-backfill_bc too (partition c, but each its own file group
of it: admission compares the file groups the batches reach). The two ingestion writers commit only once both have begun (the
test job's begin barrier), so that disjoint writers provably run at once whatever the order
the processes reach their admission in.

Everything is judged from the table (its timeline's requested and completion times, its
commits' file groups, the attempt log) and the tasks' admission records (XCom), never from
timing."""

import json
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import TableNotFoundError
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider.spark_jobs import APPLICATION_ENV
from airflow_hudi_occ.testing.spark_job import BARRIER_ENV, BARRIER_TIMEOUT_ENV
from airflow_hudi_occ.testing.spark_job import PATH as TEST_JOB
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key

from .conftest import finish

pytestmark = [pytest.mark.zookeeper, pytest.mark.timeout(2400)]

SEED_OPTS = {"hoodie.datasource.write.recordkey.field": "id",
             "hoodie.datasource.write.partitionpath.field": "p",
             "hoodie.datasource.write.precombine.field": "ts",
             "hoodie.write.lock.provider": "filesystem",
             "hoodie.parquet.small.file.limit": "0"}  # each seed write: new file groups

#: the batches: who writes which keys (the key's first letter is its partition)
BATCHES = {"ingest_ab": ["a0", "a1", "b0", "b1"], "ingest_c": ["c0", "c1"],
           "backfill_bc": ["b2", "b3", "c10", "c11"]}
WRITERS = {f"hudi_occ_test_four_{n}": n for n in (*BATCHES, "cluster_a")}


def _rows(keys, v, ts):
    return [{"id": k, "p": k[0], "ts": ts, "v": v} for k in keys]


def _seed(path):
    """a: 2 file groups (clustering has work), b: 1 (ingest_ab and the backfill share it),
    c: 2 (ingest_c and the backfill each touch one of them: a wait between them is false)."""
    table = Table.create(path, "four", record_key_fields=["id"], partition_fields=["p"], precombine_field="ts")
    cfg = WriteConfig.from_options(SEED_OPTS)
    first = [f"a{i}" for i in range(4)] + [f"b{i}" for i in range(6)] + [f"c{i}" for i in range(4)]
    second = [f"a1{i}" for i in range(4)] + [f"c1{i}" for i in range(4)]
    for keys in (first, second):
        ArrowTableWriter(table, cfg).write(pa.Table.from_pylist(_rows(keys, "seed", 1)), "insert")
    return {k: "seed" for k in first + second}


def _xcom(airflow_env, dag_id, key):
    code = ("import json, sys\n"
            "from sqlalchemy import select\n"
            "from airflow.models.xcom import XComModel\n"
            "from airflow.utils.session import create_session\n"
            "with create_session() as s:\n"
            "    rows = s.execute(select(XComModel.value).where(XComModel.dag_id == sys.argv[1],"
            " XComModel.key == sys.argv[2])).all()\n"
            "    print(json.dumps([r[0] for r in rows]))\n")
    out = subprocess.run([sys.executable, "-c", code, dag_id, key], env=airflow_env.env,
                         capture_output=True, text=True, timeout=120, check=True)
    vals = json.loads(out.stdout.strip().splitlines()[-1])
    return [json.loads(v) if isinstance(v, str) else v for v in vals]


def _waits(airflow_env, dag_id):
    """(blocker description) of every admission wait of this DAG's task, from its records:
    the write operator's attempt records (``waited_for``), the clustering's return value."""
    out = []
    if dag_id.endswith("cluster_a"):
        for ret in _xcom(airflow_env, dag_id, "return_value"):
            out += (ret.get("admission_wait") or {}).get("waited_for") or []
        return out
    for attempts in _xcom(airflow_env, dag_id, "hudi_occ_attempts"):
        for a in attempts:
            out += a.get("waited_for") or []
    return out


def _overlap_in_time(x, y):
    """Closed intervals of requested and completion times (17-digit instant times sort)."""
    return not (x[1] < y[0] or y[1] < x[0])


@pytest.mark.slow  # four dags-test processes and four Spark jobs (~5-10 min on 2 cores); the
# default run keeps the 2-writer waits (tests/provider/test_deferrable_operator.py, through the
# real trigger) and the clustering's admission on a worker (tests/provider/operators/test_table_service_admission.py)
def test_four_writers_overlapping_wait_disjoint_run_together_all_commit(airflow_env, tmp_path):
    path = str(tmp_path / "four")
    want = _seed(path)
    sources = tmp_path / "sources"
    sources.mkdir()
    for name, keys in BATCHES.items():
        pq.write_table(pa.Table.from_pylist(_rows(keys, name, 2)), str(sources / f"{name}.parquet"))
        want.update({k: name for k in keys})
    common = {"HUDI_OCC_FOUR_TABLE": path, "HUDI_OCC_FOUR_SOURCES": str(sources), APPLICATION_ENV: TEST_JOB}
    # the ingestion writer on a may wait for the whole clustering job while the one on c,
    # begun, holds at its commit for it: give the barrier as long as admission's timeout
    barrier = {BARRIER_ENV: f"{tmp_path / 'barrier'}:2:begin", BARRIER_TIMEOUT_ENV: "1500"}
    # The DAGs' outlet assets name this table: serialize them once, before four processes
    # would each insert them (UNIQUE constraint failed in SQLite).
    airflow_env.airflow("dags", "reserialize", env=common, timeout=300)
    procs = {dag: airflow_env.dags_test(dag, name, env={**common, **(barrier if name.startswith("ingest") else {})})
             for dag, name in WRITERS.items()}
    logs = {dag: finish(p, timeout=2000) for dag, p in procs.items()}
    for dag, p in procs.items():  # no starvation: every writer committed
        assert p.returncode == 0 and "state=success" in logs[dag], (dag, logs[dag][-4000:])

    t = Table.open(path)
    tl = t.timeline()
    records = [r for r in attempt_log.read_records(t) if r.labels.get("dag_id") in WRITERS]  # not the seed
    assert [r for r in records if r.outcome != "committed"] == [], [r.to_json() for r in records]
    instants = {}
    for r in records:
        instants[r.labels["dag_id"]] = r.instant
    [clustering] = [i for i in tl.completed() if tl.is_clustering(i)]
    instants["hudi_occ_test_four_cluster_a"] = clustering.requested_time
    assert set(instants) == set(WRITERS), instants
    by_time = {i.requested_time: i for i in tl.completed()}
    interval, parts, groups = {}, {}, {}
    for dag, t_req in instants.items():
        inst = by_time[t_req]
        meta = tl.commit_metadata(inst)
        interval[dag] = (inst.requested_time, inst.completion_time)
        groups[dag] = meta.mutated_file_groups()
        parts[dag] = {p for p, _ in groups[dag]}
    assert parts["hudi_occ_test_four_cluster_a"] == {"a"} and parts["hudi_occ_test_four_backfill_bc"] == {"b", "c"}

    dags = sorted(WRITERS)
    pairs = [(x, y) for i, x in enumerate(dags) for y in dags[i + 1:]]
    overlapping = [(x, y) for x, y in pairs if groups[x] & groups[y]]
    disjoint = [(x, y) for x, y in pairs if not groups[x] & groups[y]]
    assert len(overlapping) == 2, overlapping
    assert ("hudi_occ_test_four_backfill_bc", "hudi_occ_test_four_ingest_c") in disjoint  # partition c only
    # No overlapping writer began while another overlapping writer was live ...
    for x, y in overlapping:
        assert not _overlap_in_time(interval[x], interval[y]), (x, interval[x], y, interval[y])
    # ... and disjoint ones ran at once (at least the two ingestion writers, by the barrier).
    together = [(x, y) for x, y in disjoint if _overlap_in_time(interval[x], interval[y])]
    assert ("hudi_occ_test_four_ingest_ab", "hudi_occ_test_four_ingest_c") in together, interval

    # The waits, and which were false: the writer waited for turned out to commit file groups
    # disjoint from the waiter's (a shared partition only).
    # One wait per (waiter, writer waited for): a writer is waited for first as a request,
    # then as the instant it began, both named in the records.
    owner_dag = {f"{dag}.{'cluster' if dag.endswith('cluster_a') else 'write'}": dag for dag in WRITERS}
    waits = set()
    for dag in dags:
        for blocker in _waits(airflow_env, dag):
            ident, _, rest = blocker.partition(" (")
            owner = rest.partition(")")[0]
            assert owner != "unknown writer", blocker  # the clustering too: named by its executor
            other = owner_dag.get(owner) or next((d for d, i in instants.items() if i == ident), None)
            assert other is not None and other != dag, (dag, blocker)
            waits.add((dag, other))
    waits = sorted(waits)
    false_waits = [(dag, other) for dag, other in waits if not groups[dag] & groups[other]]
    for dag, other in waits:  # a writer waits only on one whose partitions it shares
        assert parts[dag] & parts[other], (dag, other)
    print(f"\nfour writers: intervals {json.dumps(interval)}\n{len(waits)} admission wait(s) {waits}; "
          f"{len(false_waits)} false {false_waits}; ran together {together}")
    # Admission compares the file groups each batch can reach (keys looked up in the committed
    # file groups before spark-submit), so ingest_c and the backfill, which share partition c
    # but not a file group of it, never wait for each other.
    assert false_waits == [], false_waits

    got = rows_by_key(hudi_read(path))  # hudi-rs; raises on a duplicate key
    assert {k: r["v"] for k, r in got.items()} == want


@pytest.mark.slow  # two dags-test processes and two Spark jobs one after the other (~3-5 min);
# the default run keeps the same two first writes through the operator, Spark's submission
# replaced (tests/provider/test_deferrable_operator.py)
def test_two_first_writes_of_a_new_table_one_waits_for_the_other(airflow_env, tmp_path):
    """No table at the path: two writers that both insert the new key b1 are started at once
    (each would make a file group of its own for it, and b1 would end up twice: their new-key
    slots meet). The first to come makes the table (as its job would) and files its request
    there; the other finds it and waits. The writer that went holds before its commit until
    the test has seen the other one waiting in the table (or, were admission broken, a second
    instant begun): so the wait is proven from the table, not from timing. (Two first writes
    of different new keys share no file group and go together.)"""
    from airflow_hudi_occ.core.concurrency import admission

    path = str(tmp_path / "fresh" / "orders")
    sources = tmp_path / "sources"
    sources.mkdir()
    want = {}
    names = ("ingest_ab", "backfill_bc")
    batches = {"ingest_ab": BATCHES["ingest_ab"], "backfill_bc": [*BATCHES["backfill_bc"], "b1"]}
    for name in names:
        keys = batches[name]
        ts = [3 if (name, k) == ("backfill_bc", "b1") else 2 for k in keys]  # b1: the backfill's, in either order
        pq.write_table(pa.table({"id": keys, "p": [k[0] for k in keys], "ts": ts, "v": [name] * len(keys)}),
                       str(sources / f"{name}.parquet"))
        want.update({k: name for k in keys})
    hold = tmp_path / "hold"
    env = {"HUDI_OCC_FOUR_TABLE": path, "HUDI_OCC_FOUR_SOURCES": str(sources), APPLICATION_ENV: TEST_JOB,
           BARRIER_ENV: f"{hold}:2"}  # a writer commits once 2 files are there: its own and the test's
    airflow_env.airflow("dags", "reserialize", env=env, timeout=300)
    procs = {f"hudi_occ_test_four_{n}": airflow_env.dags_test(f"hudi_occ_test_four_{n}", f"first-{n}", env=env)
             for n in names}
    deadline = time.time() + 1200
    seen = None
    while time.time() < deadline and seen is None:
        for dag, p in procs.items():
            assert p.poll() is None, (dag, finish(p)[-4000:])  # none ends while one is held
        try:
            t = Table.open(path)
        except TableNotFoundError:
            time.sleep(0.5)
            continue
        pending = t.timeline().pending()
        waiting = [r for r in admission.requests(t) if r.state == admission.WAITING]
        if pending and waiting or len(pending) >= 2:
            seen = ([i.requested_time for i in pending], [(r.owner, r.state) for r in waiting])
        time.sleep(0.5)
    assert seen is not None, "no writer began, or none waited"
    hold.mkdir(exist_ok=True)
    (hold / "released-by-the-test").touch()
    logs = {dag: finish(p, timeout=1200) for dag, p in procs.items()}
    for dag, p in procs.items():
        assert p.returncode == 0 and "state=success" in logs[dag], (dag, logs[dag][-4000:])

    t = Table.open(path)
    tl = t.timeline()
    records = [r for r in attempt_log.read_records(t) if r.labels.get("dag_id") in procs]
    assert [r.outcome for r in records] == ["committed", "committed"], [r.to_json() for r in records]
    assert len(seen[0]) == 1, f"two first writes began at once: {seen}"
    first = seen[0]
    by_time = {i.requested_time: i for i in tl.completed()}
    went, waited = sorted(records, key=lambda r: r.instant)
    assert went.instant == first[0]
    assert by_time[went.instant].completion_time < waited.instant  # began after the other ended
    waits = {dag: [b.split(" (")[0] for b in _waits(airflow_env, dag)] for dag in procs}
    # the later one waited, last for the instant of the one that went ...
    assert waits[waited.labels["dag_id"]] and waits[waited.labels["dag_id"]][-1] == went.instant, waits
    # ... which waited for no instant: at most it backed off once from an admission made at the
    # same moment as the other's (admission's step 3: both go back to waiting, then one goes)
    assert not set(waits[went.labels["dag_id"]]) & {went.instant, waited.instant}, waits
    got = rows_by_key(hudi_read(path))
    assert {k: r["v"] for k, r in got.items()} == want
