"""Concurrent spark-submit PROCESSES (local master) against one table, checked with hudi-rs."""

import os
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.table.file_system_view import list_base_files, list_partitions
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.job_protocol import (BEGIN_PREFIX, EXIT_RETRYABLE, PROGRESS_PREFIX,
                                                RESULT_PREFIX, last_payload, progress_stages)
from airflow_hudi_occ.spark.submit.conf import default_conf, log_conf
from airflow_hudi_occ.testing.spark_job import PATH as TEST_JOB
from airflow_hudi_occ.spark.writer import SparkHudiWriter
from airflow_hudi_occ.testing.tables import SPARK_TEST_OPTIONS, hudi_read, rows_by_key

JOB = TEST_JOB  # the engine's job inside the test harness (commit barrier)
OPTS = SPARK_TEST_OPTIONS
SCHEMA = "id long, p string, ts long, v string"


def seed(spark, path, parts):
    SparkHudiWriter(spark, path, OPTS).write(
        spark.createDataFrame([(i, p, 1, "seed") for p in parts for i in range(20)
                               if (i % len(parts)) == parts.index(p)], SCHEMA), "upsert")


def source(tmp_path, name, rows):
    f = str(tmp_path / f"{name}.parquet")
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema(
        [("id", pa.int64()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.string())])), f)
    return f


ECD = {"hoodie.write.concurrency.early.conflict.detection.enable": "true"}


def launch(path, src, barrier, n, extra=(), conf=(), operation="upsert"):
    # Output goes to files: a pipe nobody drains yet would block a chatty JVM before the
    # barrier, and its peer would wait there in vain.
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable,
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    env.pop("HUDI_OCC_TEST_COMMIT_BARRIER", None)
    if barrier is not None:
        env["HUDI_OCC_TEST_COMMIT_BARRIER"] = f"{barrier}:{n}"
    cmd = [os.path.join(os.path.dirname(sys.executable), "spark-submit"), "--master", "local[1]",
           "--conf", "spark.ui.enabled=false"]
    for c in conf:
        cmd += ["--conf", c]
    cmd += [JOB, "--table", path, "--operation", operation, "--source", src, "--source-format", "parquet"]
    for k, v in {**OPTS, **dict(extra)}.items():
        cmd += ["--option", f"{k}={v}"]
    out = open(src + ".out", "w+")
    err = open(src + ".err", "w+")
    p = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, text=True)
    p.files = (out, err)
    return p


def output_of(p) -> tuple[str, str]:
    """(stdout, stderr) of a finished :func:`launch`."""
    for f in p.files:
        f.seek(0)
    return p.files[0].read(), p.files[1].read()


def finish(procs):
    out = []
    for p in procs:
        p.wait(timeout=400)
        for f in p.files:
            f.seek(0)
        stdout, stderr = p.files[0].read(), p.files[1].read()
        res = last_payload(stdout)
        assert res is not None, stderr[-3000:]
        out.append((p.returncode, res))
    return out


def files_of(path, instant):
    t = Table.open(path)
    return [bf.relative_path for part in list_partitions(t) for bf in list_base_files(t, part)
            if bf.instant_time == instant]


def run_writers(spark, tmp_path, batches):
    path = str(tmp_path / "tbl")
    seed(spark, path, ["a", "b", "c", "d"][:max(2, len(batches))])
    srcs = [source(tmp_path, f"w{i}", rows) for i, rows in enumerate(batches)]
    procs = [launch(path, s, str(tmp_path / "barrier"), len(batches)) for s in srcs]
    return path, finish(procs)


@pytest.mark.slow  # ~1 min; the default run keeps two spark-submit writers racing on the same
# file groups on S3 (tests/spark/test_s3.py) and through Airflow (tests/provider/test_dags_e2e.py)
def test_two_writers_on_disjoint_file_groups_both_commit(spark, tmp_path):
    a = [{"id": i, "p": "a", "ts": 2, "v": "A"} for i in range(0, 20, 2)]
    b = [{"id": i, "p": "b", "ts": 2, "v": "B"} for i in range(1, 20, 2)]
    path, results = run_writers(spark, tmp_path, [a, b])
    assert [code for code, _ in results] == [0, 0], results
    got = rows_by_key(hudi_read(path))
    assert {got[i]["v"] for i in range(20)} == {"A", "B"}
    assert all(got[i]["v"] == ("A" if i % 2 == 0 else "B") for i in range(20))


@pytest.mark.slow  # ~1.5 min; the default run keeps the same race on S3 (tests/spark/test_s3.py)
def test_two_writers_on_the_same_file_groups_exactly_one_commits(spark, tmp_path):
    a = [{"id": i, "p": "a", "ts": 2, "v": "A"} for i in range(0, 20, 2)]
    b = [{"id": i, "p": "a", "ts": 2, "v": "B"} for i in range(0, 20, 2)]
    path, results = run_writers(spark, tmp_path, [a, b])
    codes = sorted(code for code, _ in results)
    assert codes == [0, EXIT_RETRYABLE], results
    winner = next(r for c, r in results if c == 0)
    loser = next(r for c, r in results if c == EXIT_RETRYABLE)
    assert loser["outcome"] == "conflict" and loser["other_instant"] == winner["instant"]
    assert loser["file_groups"] and loser["seconds_discarded"] > 0
    assert files_of(path, loser["instant"]) == []  # rolled back: nothing of the loser remains
    got = rows_by_key(hudi_read(path))
    assert {got[i]["v"] for i in range(0, 20, 2)} == {"A" if winner is results[0][1] else "B"}


@pytest.mark.slow
def test_four_writers_overlapping_in_pairs(spark, tmp_path):
    batches = [[{"id": i, "p": p, "ts": 2, "v": f"{p}{n}"} for i in range(20) if i % 4 == "abcd".index(p)]
               for p in "ab" for n in (0, 1)]
    path, results = run_writers(spark, tmp_path, batches)
    codes = [c for c, _ in results]
    assert sorted(codes[:2]) == [0, EXIT_RETRYABLE] and sorted(codes[2:]) == [0, EXIT_RETRYABLE], results
    for c, r in results:
        if c == EXIT_RETRYABLE:
            assert files_of(path, r["instant"]) == []
    # the hudi reader sees exactly the winners' rows (one writer per partition) and the seed
    got = rows_by_key(hudi_read(path))
    want = {r["id"]: r["v"] for (c, _), rows in zip(results, batches) if c == 0 for r in rows}
    assert {i: got[i]["v"] for i in want} == want
    assert all(got[i]["v"] == "seed" for i in range(20) if i not in want) and len(got) == 20


def wait_for(cond, what, timeout=300, procs=()):
    deadline = time.time() + timeout
    while not cond():
        for p in procs:
            assert p.poll() is None, f"{what}: a writer exited early ({p.returncode})"
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.slow  # ~2 min; the default run keeps a spark-submit writer stopped right after begin by
# a rival's declared file groups (below) and the driver's check before tagging in process
# (tests/spark/test_writer.py::test_early_check_before_tagging_stops_only_writes_into_held_file_groups)
def test_early_detection_stops_the_later_writer_before_its_write_job(spark, tmp_path):
    """RFC-56 with two spark-submit processes: A has written every file group and waits to
    commit; B (later, early detection on) upserts the same keys. Before its tagging jobs, B's
    driver finds that keys of its batch live in file groups A holds markers on and stops: no
    write task ran, no file was written; B exits 75; A then commits. (A conflict that appears while
    the job runs is found by the executors and the job is cancelled: test_executor.py.)"""
    path = str(tmp_path / "tbl")
    parts = list("abcdefgh")
    seed(spark, path, parts)
    t = Table.open(path)
    planned = sum(1 for p in list_partitions(t) for _ in list_base_files(t, p))
    assert planned == len(parts)
    rows = [{"id": i, "p": parts[i % len(parts)], "ts": 2, "v": "A"} for i in range(20)]
    barrier = tmp_path / "barrier"
    a = launch(path, source(tmp_path, "a", rows), str(barrier), 2)
    wait_for(lambda: barrier.exists() and len(os.listdir(barrier)) == 1, "A at its commit", procs=[a])
    # Many (mostly empty) shuffle partitions: B's write stage has tasks left when it is doomed,
    # so only the driver's cancel can end it early.
    b = launch(path, source(tmp_path, "b", [dict(r, ts=3, v="B") for r in rows]), None, 1,
               extra=ECD, conf=["spark.sql.shuffle.partitions=48"])
    [(code_b, res_b)] = finish([b])
    open(barrier / "release", "w").close()
    # B's task log says where it stopped and whom it lost to (core/job_protocol progress lines)
    out_b = output_of(b)[0]
    assert progress_stages(out_b)[-2:] == ["early-check", "conflict"], out_b
    assert "before tagging: stopped" in out_b and "writing" not in progress_stages(out_b), out_b
    [(code_a, res_a)] = finish([a])
    assert (code_a, code_b) == (0, EXIT_RETRYABLE), (res_a, res_b)
    assert res_b["outcome"] == "conflict" and res_b["other_instant"] == res_a["instant"]
    assert res_b["error"]["error"] == "EarlyConflictError"
    assert res_b["error"]["stopped_before_job"] is True and res_b["job_cancelled"] is False, res_b
    assert res_b["error"]["stopped_before_tagging"] is True, res_b
    # Stopped before writing any file.
    assert res_b["file_groups_planned"] == 0  # stopped before tagging planned anything
    assert res_b["files_written"] == 0, res_b
    assert files_of(path, res_b["instant"]) == []
    assert not os.path.exists(os.path.join(path, ".hoodie", ".aux", ".abort", res_b["instant"]))
    got = rows_by_key(hudi_read(path))
    assert {got[i]["v"] for i in range(20)} == {"A"}


@pytest.mark.slow  # ~40 s; the default run refuses hostile partition values in process
# (tests/spark/test_writer.py::test_hostile_partition_values_are_refused_before_the_instant)
def test_a_hostile_partition_value_through_the_job_is_refused_with_the_table_unchanged(spark, tmp_path):
    """spark-submit with a source whose partition column holds '../../escaped': exit 1 (not
    retryable), the result line names the error, the column and the value, and nothing
    changed inside or outside the table (no requested instant, no marker, no file)."""
    from airflow_hudi_occ.core.job_protocol import EXIT_ERROR
    from airflow_hudi_occ.testing.tables import tree_snapshot
    path = str(tmp_path / "a" / "b" / "tbl")
    seed(spark, path, ["a", "b"])
    src = source(tmp_path, "hostile", [{"id": 1, "p": "a", "ts": 2, "v": "x"},
                                       {"id": 2, "p": "../../escaped", "ts": 2, "v": "y"}])
    before = tree_snapshot(tmp_path / "a")
    t0 = time.time()
    [(code, res)] = finish([launch(path, src, None, 1)])
    assert code == EXIT_ERROR, res
    err = res["error"]
    assert err["error"] == "InvalidPartitionPathError" and err["column"] == "p"
    assert "'../../escaped'" in err["message"]
    assert tree_snapshot(tmp_path / "a") == before
    assert time.time() - t0 < 300  # refused in the driver before any write job, not after minutes


@pytest.mark.slow  # the in-process route is proven in the default run (tests/spark/test_pair_write.py)
def test_a_hostile_partition_value_in_a_bulk_insert_job_is_refused_at_publish_with_the_data_unchanged(spark, tmp_path):
    """The same source through a spark-submit bulk_insert, which its write tasks check
    (spark/pair_write.py): exit 1, the result line names the error, the column and the value;
    nothing changed outside ``.hoodie`` (the attempt's instant is rolled back inside it), and
    the table reads as before."""
    from airflow_hudi_occ.core.job_protocol import EXIT_ERROR
    from airflow_hudi_occ.testing.tables import hudi_read, tree_snapshot
    path = str(tmp_path / "a" / "b" / "tbl")
    seed(spark, path, ["a", "b"])
    src = source(tmp_path, "hostile", [{"id": 1, "p": "a", "ts": 2, "v": "x"},
                                       {"id": 2, "p": "../../escaped", "ts": 2, "v": "y"}])
    rows_before = sorted(hudi_read(path).to_pylist(), key=lambda r: r["_hoodie_record_key"])

    def data(snapshot):
        return {k: v for k, v in snapshot.items() if "/.hoodie" not in k and not k.startswith(".hoodie")}
    before = data(tree_snapshot(tmp_path / "a"))
    [(code, res)] = finish([launch(path, src, None, 1, operation="bulk_insert")])
    assert code == EXIT_ERROR, res
    err = res["error"]
    assert err["error"] == "InvalidPartitionPathError" and err["column"] == "p"
    assert "'../../escaped'" in err["message"]
    assert data(tree_snapshot(tmp_path / "a")) == before
    assert sorted(hudi_read(path).to_pylist(), key=lambda r: r["_hoodie_record_key"]) == rows_before


def test_a_write_job_logs_its_progress_and_no_spark_info_lines(tmp_path):
    """One spark-submit write with the Spark settings the operator's hook passes
    (``default_conf`` + ``log_conf``): the job's own progress lines come in the order of the
    write, Spark prints no INFO line (before this change a write printed 488 lines, 480 of
    them INFO; now about 15), and the BEGIN and RESULT lines an operator parses are intact."""
    path = str(tmp_path / "tbl")
    rows = [{"id": i, "p": "abcd"[i % 4], "ts": 1, "v": "x"} for i in range(200)]
    conf = {k: v for k, v in default_conf("local[1]").items() if k != "spark.driver.memory"}
    conf.update(log_conf(conf, driver_local=True))
    assert "log4j2.configurationFile" in conf["spark.driver.extraJavaOptions"]
    p = launch(path, source(tmp_path, "w", rows), None, 1, conf=[f"{k}={v}" for k, v in conf.items()])
    [(code, res)] = finish([p])
    stdout, stderr = output_of(p)
    lines = stdout.splitlines() + stderr.splitlines()
    assert code == 0 and res["outcome"] == "committed", res
    stages = progress_stages(stdout)
    want = ["starting", "planning", "begin", "tagging", "writing", "committing", "committed"]
    assert [s for i, s in enumerate(stages) if i == 0 or stages[i - 1] != s] == want, stdout
    assert "upsert of 200 input rows in 4 partition(s)" in stdout
    assert "4 file group(s) to write in 4 partition(s): 0 existing, 4 new" in stdout
    assert "done: 4 file(s), 200 rows written" in stdout
    # Spark's INFO chatter stays out, from spark-submit's first line on
    info = [ln for ln in lines if " INFO " in ln]
    assert info == [], info[:10]
    assert len(lines) < 40, "\n".join(lines)
    # the protocol lines: one BEGIN before the progress of the write, the RESULT line last
    begin = last_payload(stdout, BEGIN_PREFIX)
    assert begin is not None and begin["instant"] == res["instant"]
    out = stdout.splitlines()
    assert out[-1].startswith(RESULT_PREFIX)
    assert out.index(next(ln for ln in out if ln.startswith(BEGIN_PREFIX))) < \
        out.index(next(ln for ln in out if ln.startswith(PROGRESS_PREFIX + "tagging")))
    assert rows_by_key(hudi_read(path))[7]["v"] == "x"


RIVAL = r'''
import os, sys, time
from airflow_hudi_occ.core.commit.transaction import WriteTransaction
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.file_system_view import list_base_files
from airflow_hudi_occ.core.table.table import Table
path, part, release, opts = sys.argv[1], sys.argv[2], sys.argv[3], dict(a.split("=", 1) for a in sys.argv[4:])
t = Table.open(path)
tx = WriteTransaction(t, WriteConfig.from_options(opts), footprint=[part])
tx.begin()
tx.start_inflight(planned_file_groups=[(part, bf.file_id) for bf in list_base_files(t, part)])
print(tx.instant_time, flush=True)
deadline = time.time() + 300
while not os.path.exists(release) and time.time() < deadline:
    time.sleep(0.1)
tx.abort(reason="test rival done")
'''


def test_a_rivals_declared_file_groups_stop_the_later_writer_right_after_begin(spark, tmp_path):
    """Two processes, file lock. A (a core transaction in its own process) has begun on
    partition a and declared its file groups (inflight, tagging done) but written no marker
    yet, as a Spark writer between its tagging and its write job. B, a spark-submit upsert of
    keys in those file groups, stops right after begin, before its tagging, on A's declared
    footprint (the check before tagging found no marker): exit 75, nothing written."""
    path = str(tmp_path / "tbl")
    seed(spark, path, ["a", "b"])
    release = tmp_path / "release"
    a = subprocess.Popen([sys.executable, "-c", RIVAL, path, "a", str(release)]
                         + [f"{k}={v}" for k, v in OPTS.items()], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    try:
        rival = a.stdout.readline().strip()
        assert rival, "the rival did not begin"
        assert not os.path.exists(os.path.join(path, ".hoodie", ".temp", rival, "a")), "no marker yet"
        rows = [{"id": i, "p": "a", "ts": 3, "v": "B"} for i in range(0, 20, 2)]
        b = launch(path, source(tmp_path, "b", rows), None, 1, extra=ECD)
        [(code_b, res_b)] = finish([b])
    finally:
        release.touch()
        a.wait(timeout=60)
    out_b = output_of(b)[0]
    assert code_b == EXIT_RETRYABLE, res_b
    assert res_b["other_instant"] == rival and res_b["error"]["error"] == "EarlyConflictError", res_b
    assert "declared file group" in res_b["error"]["message"], res_b
    assert res_b["error"]["stopped_before_tagging"] is True and res_b["files_written"] == 0, res_b
    assert "right after begin: live writer " + rival in out_b, out_b
    assert progress_stages(out_b)[-2:] == ["early-check", "conflict"], out_b
    assert files_of(path, res_b["instant"]) == []
    assert {r["v"] for r in hudi_read(path).to_pylist()} == {"seed"}


class _SharedSession:
    """The run's one session for an in-process job: the job stops its session when it ends,
    which must not stop the one every other test shares."""

    def __init__(self, spark):
        self._spark = spark

    def __getattr__(self, name):
        return getattr(self._spark, name)

    def stop(self):
        pass


def test_a_job_checks_its_options_once_and_looks_its_batch_key_up_once_outside_the_lock(
        spark, tmp_path, monkeypatch):
    """Issue 29 item 5: one check of the options per job (before: the preflight, the batch
    lookup and the writer each parsed them), and one look for the batch key outside the commit
    lock (none when the operator, which submits ``--batch-checked``, looked just before) plus
    the one under it that decides."""
    from airflow_hudi_occ.core.commit import pipeline, transaction
    from airflow_hudi_occ.spark import job
    from airflow_hudi_occ.spark.submit import options as submit_options

    calls = {"check": 0, "outside": 0, "under_lock": 0}

    def counting(name, fn):
        def wrapped(*a, **kw):
            calls[name] += 1
            return fn(*a, **kw)
        return wrapped

    monkeypatch.setattr(submit_options, "check_write_options",
                        counting("check", submit_options.check_write_options))
    monkeypatch.setattr(pipeline, "find_committed_batch", counting("outside", pipeline.find_committed_batch))
    monkeypatch.setattr(transaction, "find_committed_batch",
                        counting("under_lock", transaction.find_committed_batch))
    monkeypatch.setattr(job, "_session", lambda args: _SharedSession(spark))
    path = str(tmp_path / "t")

    def run(key, rows, *flags):
        calls.update(check=0, outside=0, under_lock=0)
        argv = ["--table", path, "--operation", "upsert", "--source", source(tmp_path, key, rows),
                "--source-format", "parquet", "--batch-key", key, *flags,
                *[a for k, v in OPTS.items() for a in ("--option", f"{k}={v}")]]
        assert job.main(argv, on_begin=lambda tx: None, on_progress=lambda stage, text: None) == 0
        return dict(calls)

    first = [{"id": 1, "p": "a", "ts": 1, "v": "one"}]
    assert run("k1", first) == {"check": 1, "outside": 0, "under_lock": 1}  # no table yet: no look
    assert run("k2", [{"id": 1, "p": "a", "ts": 5, "v": "new"}], "--batch-checked") == \
        {"check": 1, "outside": 0, "under_lock": 1}
    assert rows_by_key(hudi_read(path), "id")[1]["v"] == "new"
    # k1 again: found committed before Spark starts, by the one look outside the lock
    assert run("k1", first) == {"check": 1, "outside": 1, "under_lock": 0}
    assert rows_by_key(hudi_read(path), "id")[1]["v"] == "new"


def test_the_preflight_judges_a_table_with_stats_as_the_commit_will(tmp_path):
    """Issue 32: every Spark write keeps Java's column and partition stats (the transaction
    writes them for every action), so the job's check before Spark starts lets an upsert and an
    insert_overwrite through; a record index, which nothing of ours keeps, is refused there,
    naming it, nothing written."""
    import types
    from airflow_hudi_occ.core.errors import UnmaintainedMetadataPartitionsError
    from airflow_hudi_occ.core.table.metadata_table import PARTITIONS_KEY
    from airflow_hudi_occ.spark.job import preflight
    from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, java_fixture, tree_snapshot
    from tests.core.table.test_metadata_table import V9

    path = str(java_fixture(V9, tmp_path))
    Table.open(path).update_properties({PARTITIONS_KEY: "column_stats,files,partition_stats"})
    source = str(tmp_path / "rows.parquet")
    pq.write_table(pa.table({"id": ["x"]}), source)
    options = dict(FAST_WRITE_OPTIONS)  # our defaults: the metadata table kept
    args = types.SimpleNamespace(table=path, operation="upsert", source=source, source_format="parquet")
    preflight(args, options)
    args.operation = "insert_overwrite"
    preflight(args, options)
    Table.open(path).update_properties({PARTITIONS_KEY: "column_stats,files,partition_stats,record_index"})
    snap = tree_snapshot(path)
    with pytest.raises(UnmaintainedMetadataPartitionsError) as refused:
        preflight(args, options)
    assert refused.value.unmaintained == ("record_index",) and refused.value.remedy
    assert tree_snapshot(path) == snap
