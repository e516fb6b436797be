"""The Spark engine through a real Spark Connect server (the jar in PySpark's wheel): the
driver-side steps in a client process, the data work in the server's executors, the package
shipped as a session artifact.

The client runs in a process of its own: PySpark's functions build Connect or classic columns
by a process-wide switch, so a process holds one kind of session (this test process holds the
classic ``spark`` fixture's). That is also how a Connect write runs in production: the job's
entry point with ``--remote`` (``python -m airflow_hudi_occ.spark.job --remote sc://...``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.table.file_system_view import list_base_files
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider.launchers.connect import ConnectLauncher
from airflow_hudi_occ.testing.spark_connect import SparkConnectServer
from airflow_hudi_occ.testing.spark_line_smoke import OPTS, model as smoke_model
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key


@pytest.fixture(scope="module")
def spark_connect_server():
    """One real Spark Connect server (the jar in PySpark's wheel, local[2]) for this file's
    tests, stopped after them. Its executors run this interpreter without this process's
    PYTHONPATH, so the engine reaches them only as the client's session artifact
    (spark/session.py)."""
    with SparkConnectServer() as server:
        yield server

#: one Connect client doing a table's life: every result printed as one JSON line
CLIENT = r"""
import json, os, sys, threading, time
url, work, opts, full = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4] == "full"
from airflow_hudi_occ.spark.compat import default_parallelism, is_connect, task_per_item
from airflow_hudi_occ.spark.session import connect_session
spark = connect_session(url, "hudi-occ-connect-test")
from airflow_hudi_occ.core.concurrency import abort_signal
from airflow_hudi_occ.core.errors import RetryableError
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.spark.jobgroup import JobAborted, run_watched
from airflow_hudi_occ.spark.writer import SparkHudiWriter

def say(**kw):
    print("RESULT " + json.dumps(kw), flush=True)

say(step="session", connect=is_connect(spark), parallelism=default_parallelism(spark),
    per_item=task_per_item(spark, [1, 2, 3], lambda x: x * 10)())

cow, mor = os.path.join(work, "cow"), os.path.join(work, "mor")

def batch(lo, hi, ts, v):
    return spark.range(lo, hi).selectExpr("id", "cast(id % 4 as string) as p",
                                          f"cast({ts} as long) as ts", f"'{v}' as v")

w = SparkHudiWriter(spark, cow, opts)
say(step="bulk_insert", **w.write(batch(0, 1000, 1, "a"), "bulk_insert").to_json())
say(step="upsert", **w.write(batch(500, 1500, 2, "b"), "upsert", batch_key="b-1").to_json())
say(step="upsert again", **w.write(batch(500, 1500, 2, "b"), "upsert", batch_key="b-1").to_json())
if full:
    say(step="delete", **w.write(batch(0, 100, 3, "x"), "delete").to_json())

# the sensor's role: a thread raises the abort signal as soon as an instant has a marker
def watch(path, seen):
    root = os.path.join(path, ".hoodie", ".temp")
    while "instant" not in seen:
        for inst in (os.listdir(root) if os.path.isdir(root) else []):
            if any(".marker." in f for _, _, fs in os.walk(os.path.join(root, inst)) for f in fs):
                abort_signal.raise_abort(Table.open(path), inst, "sensor: doomed", source="test")
                seen.update(instant=inst, at=time.time())
                return
        time.sleep(0.02)

seen = {}
threading.Thread(target=watch, args=(cow, seen), daemon=True).start()
try:
    w.write(batch(0, 300_000, 4, "big"), "upsert", attempt=1)
    say(step="stopped", error=None)
except RetryableError as e:
    say(step="stopped", error=type(e).__name__, instant=e.instant, signal_instant=seen.get("instant"),
        seconds_to_stop=round(time.time() - seen["at"], 3), **{k: v for k, v in e.to_dict().items()
        if k in ("job_cancelled", "tasks_done_at_cancel", "tasks_total", "seconds_discarded")})
say(step="retry", **w.write(batch(0, 3000, 4, "big"), "upsert", attempt=2).to_json())

if not full:
    spark.stop()
    sys.exit(0)

# cancel by tag, alone: a job of two tasks that would sleep 60 s each, stopped by the signal
table = Table.open(cow)
marks = os.path.join(work, "finished")
os.makedirs(marks)

def sleepy(batches):
    for b in batches:
        open(os.path.join(marks, f"pid-{os.getpid()}"), "w").close()
        time.sleep(60)
        open(os.path.join(marks, str(b.column(0)[0].as_py())), "w").close()
        yield b

job = spark.range(0, 2, 1, 2).mapInArrow(sleepy, "id long")
threading.Timer(3.0, abort_signal.raise_abort, (table, "00000000000000001", "test: stop")).start()
t0 = time.time()
try:
    run_watched(spark, table, "00000000000000001", job.collect)
    say(step="tagged", error=None)
except JobAborted as e:
    pids = [int(n[4:]) for n in os.listdir(marks) if n.startswith("pid-")]
    def alive(pid):
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False
    say(step="tagged", error="JobAborted", seconds=round(time.time() - t0, 3), started=len(pids),
        alive_after=[p for p in pids if alive(p)], **e.info)
abort_signal.clear_abort(table, "00000000000000001")

m = SparkHudiWriter(spark, mor, {**opts, "hoodie.datasource.write.table.type": "MERGE_ON_READ"})
say(step="mor seed", **m.write(batch(0, 400, 1, "a"), "upsert").to_json())
say(step="mor upsert", **m.write(batch(200, 600, 2, "b"), "upsert").to_json())
spark.stop()
"""


def run_client(url: str, work, full: bool, opts=OPTS, timeout=600) -> tuple[dict, str]:
    env = dict(os.environ)
    env.pop("SPARK_REMOTE", None)
    proc = subprocess.run([sys.executable, "-c", CLIENT, url, str(work), json.dumps(opts),
                           "full" if full else "short"],
                          capture_output=True, text=True, env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    steps = {}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            d = json.loads(line[len("RESULT "):])
            steps[d.pop("step")] = d
    return steps, proc.stdout


def model(*writes) -> dict:
    return smoke_model(writes)


def check_client(steps: dict, out: str, tmp_path, full: bool) -> None:
    # the engine reached the server's executors as the session's artifact, not an install
    assert steps["session"] == {"connect": True, "parallelism": 2, "per_item": [10, 20, 30]}
    shipped = [line for line in out.splitlines() if line.startswith("executors import airflow_hudi_occ")]
    assert shipped and ".zip/airflow_hudi_occ" in shipped[0], out[-2000:]

    assert steps["bulk_insert"]["outcome"] == "committed"
    assert steps["upsert"]["outcome"] == "committed"
    assert steps["upsert again"]["outcome"] == "already_committed"
    assert steps["upsert again"]["instant"] == steps["upsert"]["instant"]

    stopped = steps["stopped"]
    assert stopped["error"] == "WriteAbortedError", stopped
    assert stopped["instant"] == stopped["signal_instant"]
    retry = steps["retry"]
    assert retry["outcome"] == "committed" and retry["attempt"] == 2
    assert retry["instant"] > stopped["instant"]

    cow = Table.open(str(tmp_path / "cow"))
    completed = {i.requested_time for i in cow.timeline().completed()}
    assert stopped["instant"] not in completed
    assert all(bf.instant_time != stopped["instant"]
               for p in ("0", "1", "2", "3") for bf in list_base_files(cow, p))
    assert not os.path.exists(tmp_path / "cow" / ".hoodie" / ".aux" / ".abort" / stopped["instant"])
    records = {r.instant: r for r in attempt_log.read_records(cow)}
    assert records[stopped["instant"]].outcome == attempt_log.ABORTED
    assert records[retry["instant"]].outcome == attempt_log.COMMITTED
    assert records[retry["instant"]].attempt == 2

    writes = [("upsert", 0, 1000, 1, "a"), ("upsert", 500, 1500, 2, "b")] + \
        ([("delete", 0, 100, 3, "x")] if full else []) + [("upsert", 0, 3000, 4, "big")]
    assert rows_by_key(hudi_read(str(tmp_path / "cow")), columns=["id", "p", "ts", "v"]) == model(*writes)
    print(f"connect early stop: {stopped['seconds_to_stop']} s from the signal to the error "
          f"(job_cancelled={stopped.get('job_cancelled')})")


@pytest.mark.slow
def test_a_connect_client_writes_stops_early_and_retries_as_spark_submit_does(spark_connect_server, tmp_path):
    """A client's life on a Connect server: bulk_insert, a keyed upsert and its re-run
    (already committed, nothing written), an upsert stopped by the abort signal (the
    sensor's role) inside its write job and retried on a fresh instant, its attempt records;
    hudi-rs reads the table as the model."""
    steps, out = run_client(spark_connect_server.url, tmp_path, full=False)
    check_client(steps, out, tmp_path, full=False)


@pytest.mark.slow
def test_a_connect_client_deletes_cancels_by_tag_and_writes_merge_on_read(spark_connect_server, tmp_path):
    """The same life with a delete, then a job cancelled by tag alone (two tasks that would
    sleep 60 s: once run_watched returns no Python worker of theirs is left), and a
    merge-on-read table's upserts, read by hudi-rs."""
    steps, out = run_client(spark_connect_server.url, tmp_path, full=True)
    check_client(steps, out, tmp_path, full=True)
    assert steps["delete"]["stats"]["deletes"] == 100
    tagged = steps["tagged"]
    assert tagged["error"] == "JobAborted" and tagged["job_cancelled"] is True, tagged
    assert tagged["started"] == 2 and tagged["alive_after"] == [], tagged
    assert [n for n in os.listdir(tmp_path / "finished") if not n.startswith("pid-")] == []
    mor_model = model(("upsert", 0, 400, 1, "a"), ("upsert", 200, 600, 2, "b"))
    assert steps["mor upsert"]["outcome"] == "committed"
    assert rows_by_key(hudi_read(str(tmp_path / "mor")), columns=["id", "p", "ts", "v"]) == mor_model


# -- a race between a Connect writer and a spark-submit writer on one table -----------------

#: the loser's driver checks every planned file group against live writers' markers every
#: 200 ms (Hudi's async checker): the first of the winner's markers on any of them dooms it,
#: whichever group its own tasks are writing
ECD = {"hoodie.write.concurrency.early.conflict.detection.enable": "true",
       "hoodie.write.concurrency.early.conflict.detection.strategy": "AsyncTimelineServerBasedDetectionStrategy",
       "hoodie.write.concurrency.async.conflict.detector.period_ms": "200"}
PARTS, ROWS = 32, 40_000  # the loser's write job must outlast the winner's planning


def seed_table(path: str, rows: int = ROWS) -> None:
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.config import WriteConfig
    table = Table.create(path, "tbl", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    n = PARTS * rows
    ArrowTableWriter(table, WriteConfig.from_options(OPTS)).write(pa.table({
        "id": pa.array(range(n), pa.int64()), "p": pa.array([str(i % PARTS) for i in range(n)]),
        "ts": pa.array([1] * n, pa.int64()), "v": pa.array(["seed"] * n)}), "bulk_insert")


def source(path: str, ids, ts: int, v: str) -> str:
    import pyarrow.parquet as pq
    ids = list(ids)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "p": pa.array([str(i % PARTS) for i in ids]),
                             "ts": pa.array([ts] * len(ids), pa.int64()), "v": pa.array([v] * len(ids))}), path)
    return path


def launch(route: str, table: str, src: str, out: str, *, url: str, env_extra=(), conf=(), attempt=1):
    """The engine's job in the test harness: by spark-submit (local[2]) or as a Connect client."""
    from airflow_hudi_occ.testing.spark_job import PATH as JOB
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, **dict(env_extra))
    env.pop("SPARK_REMOTE", None)
    args = ["--table", table, "--operation", "upsert", "--source", src, "--source-format", "parquet",
            "--attempt", str(attempt)]
    for k, v in {**OPTS, **ECD}.items():
        args += ["--option", f"{k}={v}"]
    if route == "connect":
        cmd = [sys.executable, "-m", "airflow_hudi_occ.testing.spark_job", "--remote", url] + \
            [a for c in conf for a in ("--conf", c)] + args
    else:
        cmd = [os.path.join(os.path.dirname(sys.executable), "spark-submit"), "--master", "local[2]",
               "--conf", "spark.ui.enabled=false"] + [a for c in conf for a in ("--conf", c)] + [JOB] + args
    f = open(out, "w+")
    p = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, text=True)
    p.log = f
    return p


def result_of(p, timeout=600) -> tuple[int, dict, str]:
    from airflow_hudi_occ.core.job_protocol import last_payload
    p.wait(timeout=timeout)
    p.log.seek(0)
    text = p.log.read()
    res = last_payload(text)
    assert res is not None, text[-4000:]
    return p.returncode, res, text


def first_marker_at(root: str, stop) -> float | None:
    """When a marker file first appears under ``root`` (polled every 10 ms until ``stop()``)."""
    import time
    while not stop():
        if os.path.isdir(root) and any(".marker." in f for _, _, fs in os.walk(root) for f in fs):
            return time.time()
        time.sleep(0.01)
    return None


def race(tmp_path, url: str, loser: str, winner: str) -> dict:
    """``winner`` begins and plans first and holds before it goes inflight (no file group of
    it declared, no marker); ``loser`` begins after it, passes its checks and starts its write
    job; then the winner is let go: it goes inflight and writes its markers while the loser's
    job runs, whatever the machine's load.
    The loser's executors meet the winner's markers and its driver cancels the job (a job
    group on spark-submit, a tag on Connect); the loser exits 75, the winner commits, and the
    loser's retry (attempt 2, a fresh instant) commits. Returns the seconds measured."""
    import threading
    import time
    from airflow_hudi_occ.core.format.instant_time import parse_ms

    path = str(tmp_path / f"{loser}-loses")
    seed_table(path)
    go = str(tmp_path / f"go-{loser}")
    temp = os.path.join(path, ".hoodie", ".temp")
    w = launch(winner, path, source(str(tmp_path / f"w-{loser}.parquet"), range(0, 4 * PARTS, PARTS), 2, "W"),
               str(tmp_path / f"w-{loser}.log"), url=url, env_extra={"HUDI_OCC_TEST_HOLD_AFTER_PLAN": go})
    deadline = time.time() + 300
    while not os.path.exists(go + ".planned"):
        assert w.poll() is None and time.time() < deadline, result_of(w)[2][-3000:]
        time.sleep(0.05)
    w_instant = open(go + ".planned").read().strip()
    l = launch(loser, path, source(str(tmp_path / f"l-{loser}.parquet"), range(PARTS * ROWS), 3, "L"),
               str(tmp_path / f"l-{loser}.log"), url=url, conf=["spark.sql.shuffle.partitions=48"])
    # the loser's first marker: its write job runs; let the winner go
    while True:
        assert l.poll() is None and time.time() < deadline, result_of(l)[2][-3000:]
        mine = [i for i in (os.listdir(temp) if os.path.isdir(temp) else []) if i != w_instant]
        if mine and any(".marker." in f for _, _, fs in os.walk(os.path.join(temp, mine[0])) for f in fs):
            break
        time.sleep(0.02)
    seen = {}
    l_instant = mine[0]

    def watch():
        seen["marker"] = first_marker_at(os.path.join(temp, w_instant), lambda: w.poll() is not None)
        signal = os.path.join(path, ".hoodie", ".aux", ".abort", l_instant)
        while not os.path.exists(signal) and l.poll() is None:  # the loser's driver cancels on it
            time.sleep(0.005)
        seen["signal"] = time.time() if os.path.exists(signal) else None
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    open(go, "w").close()
    code_l, res_l, log_l = result_of(l)
    code_w, res_w, log_w = result_of(w)
    watcher.join(timeout=10)
    assert (code_w, code_l) == (0, 75), (res_w, res_l, log_l[-3000:])
    assert res_w["instant"] == w_instant and res_l["other_instant"] == w_instant, (res_w, res_l)
    assert res_l["error"]["error"] == "EarlyConflictError", res_l
    assert res_l["job_cancelled"] is True, res_l  # stopped inside its write job, by the driver
    table = Table.open(path)
    rec = attempt_log.read_record(table, res_l["instant"])
    assert rec.outcome == attempt_log.CONFLICT and rec.other_instant == w_instant
    assert all(bf.instant_time != res_l["instant"] for p in range(PARTS) for bf in list_base_files(table, str(p)))

    code_r, res_r, log_r = result_of(launch(loser, path, str(tmp_path / f"l-{loser}.parquet"),
                                            str(tmp_path / f"r-{loser}.log"), url=url, attempt=2))
    assert code_r == 0 and res_r["outcome"] == "committed" and res_r["attempt"] == 2, log_r[-3000:]
    got = hudi_read(path).select(["id", "ts", "v"])
    assert got.num_rows == PARTS * ROWS and set(got.column("v").to_pylist()) == {"L"}
    assert attempt_log.read_record(table, res_r["instant"]).outcome == attempt_log.COMMITTED
    stop_ms = parse_ms(rec.rolled_back_by) if rec.rolled_back_by else rec.ended_at_ms
    assert res_l["instant"] == l_instant
    return {"loser": loser, "winner": winner,
            # the loser's driver raises the signal and cancels its job in the same step
            "marker_to_cancel_s": round(seen["signal"] - seen["marker"], 3)
            if seen.get("signal") and seen.get("marker") else None,
            # ... and rolls back once the job's tasks are gone
            "marker_to_rollback_s": round(stop_ms / 1000 - seen["marker"], 3) if seen.get("marker") else None,
            "seconds_discarded": res_l.get("seconds_discarded"),
            "tasks_done_at_cancel": res_l["error"].get("tasks_done_at_cancel"),
            "tasks_total": res_l["error"].get("tasks_total")}


# Both directions with --slow: the race's table (1.28 M rows, so that the loser is still inside
# its write job when the rival's markers appear) takes about 150 s a direction on 2 cores, over the
# default run's budget; the default run keeps the Connect launcher's unit tests
# (tests/provider/launchers/test_connect.py) and the Spark-line smokes.
@pytest.mark.slow
@pytest.mark.parametrize("loser, winner", [("connect", "submit"), ("submit", "connect")])
def test_a_connect_writer_and_a_spark_submit_writer_race_and_the_later_one_stops_early(
        spark_connect_server, tmp_path, loser, winner):
    """The Connect writer loses to a spark-submit writer, or a spark-submit writer loses to a
    Connect writer; the loser is stopped inside its write job
    (cancelled by tag on Connect, by job group on spark-submit) and retried. The seconds from
    the winner's first marker to the loser's cancel and to its rollback are printed."""
    got = race(tmp_path, spark_connect_server.url, loser, winner)
    print(f"{got['loser']} loser vs {got['winner']} winner: {got}")
    assert got["marker_to_cancel_s"] is not None and got["marker_to_rollback_s"] is not None, got


@pytest.mark.slow
def test_a_connect_job_stopped_by_sigterm_interrupts_its_server_job_and_rolls_back(spark_connect_server, tmp_path):
    """An orchestrator's kill of the client (SIGTERM) must not leave the write running on the
    server without its driver: the job is interrupted by tag, the instant rolled back, and
    no base file of it appears afterwards (the server's tasks are gone)."""
    import signal
    import time

    path = str(tmp_path / "tbl")
    seed_table(path)
    temp = os.path.join(path, ".hoodie", ".temp")
    p = launch("connect", path, source(str(tmp_path / "l.parquet"), range(PARTS * ROWS), 3, "L"),
               str(tmp_path / "l.log"), url=spark_connect_server.url, conf=["spark.sql.shuffle.partitions=48"])
    deadline = time.time() + 300
    while not (os.path.isdir(temp) and any(".marker." in f for _, _, fs in os.walk(temp) for f in fs)):
        assert p.poll() is None and time.time() < deadline, result_of(p)[2][-3000:]
        time.sleep(0.02)
    instant = os.listdir(temp)[0]
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=120)
    p.log.seek(0)
    log = p.log.read()
    assert p.returncode != 0, log[-3000:]
    time.sleep(8)  # longer than Spark's kill of a cancelled task's Python worker
    table = Table.open(path)
    assert instant not in {i.requested_time for i in table.timeline().completed()}
    assert all(bf.instant_time != instant for part in range(PARTS) for bf in list_base_files(table, str(part))), log[-3000:]
    rec = attempt_log.read_record(table, instant)
    assert rec is not None and rec.outcome != attempt_log.RUNNING, (rec, log[-3000:])


# -- the write operator on Connect: the same race, the retry by the attempt loop ----------------


class RecordingConnectLauncher(ConnectLauncher):
    """The Connect launcher, keeping each attempt's result line whole (the loop's XCom record
    keeps part of it; whether the job was cancelled inside its write stage is in the line)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.results: list = []  # shared with the operator's copy of the launcher

    def run_attempt(self, run, n, on_began):
        got = super().run_attempt(run, n, on_began)
        self.results.append(got)
        return got


@pytest.mark.slow  # about 50 s on 2 shared cores, beside a Connect server
def test_the_write_operator_on_connect_loses_a_race_to_spark_submit_stops_early_and_retries(
        spark_connect_server, tmp_path):
    """The write operator with the Spark Connect launcher (each attempt a client of the real
    server) against a spark-submit writer on one table. The spark-submit writer begins and
    plans first and holds before it goes inflight; the operator's attempt 1 begins after it;
    then the spark-submit writer is let go: it declares its file groups and writes its
    markers while attempt 1 tags or writes, and holds before its commit until attempt 1 has
    ended (a live writer, as a long write would be). Attempt 1 is stopped early by them (before its
    write job by its driver's check, or inside it, its server job interrupted by tag: whichever
    the machine's load makes it; the slow race test pins the second and measures it), rolls
    back and exits 75; the attempt loop retries on a fresh instant, which commits after the
    winner."""
    import threading
    import time

    from airflow.sdk.execution_time.context import OutletEventAccessors

    from airflow_hudi_occ.core.commit.retry import RetryPolicy
    from airflow_hudi_occ.core.format.instant_time import parse_ms
    from airflow_hudi_occ.provider.admission import AdmissionSettings
    from airflow_hudi_occ.provider.operators.write import HudiWriteOperator
    from airflow_hudi_occ.provider.task_keys import XCOM_ATTEMPTS, XCOM_RUNNING
    from tests.provider.test_write_operator_recovery import StubTI

    rows = 10_000  # the loser's tagging and write job outlast the winner's declaration after its release
    path = str(tmp_path / "tbl")
    seed_table(path, rows)
    go, barrier = str(tmp_path / "go"), tmp_path / "barrier"
    # The winner also holds before its commit until attempt 1 has ended: a live writer's markers
    # are what stops a later one early, and a winner let run to its commit (4 rows: about a
    # second after its release) was gone from the live writers before attempt 1 (a Connect
    # client, its tagging on the server) looked, so attempt 1 lost at its commit instead. Were
    # attempt 1 not stopped early, it would now commit first and the winner lose at its commit.
    w = launch("submit", path, source(str(tmp_path / "w.parquet"), range(0, 4 * PARTS, PARTS), 2, "W"),
               str(tmp_path / "w.log"), url=spark_connect_server.url,
               env_extra={"HUDI_OCC_TEST_HOLD_AFTER_PLAN": go, "HUDI_OCC_TEST_COMMIT_BARRIER": f"{barrier}:2"})
    deadline = time.time() + 300
    while not os.path.exists(go + ".planned"):
        assert w.poll() is None and time.time() < deadline, result_of(w)[2][-3000:]
        time.sleep(0.05)
    w_instant = open(go + ".planned").read().strip()

    launcher = RecordingConnectLauncher(remote=spark_connect_server.url, spark_connect_conn_id=None,
                                        spark_conf={"spark.sql.shuffle.partitions": "48"})
    op = HudiWriteOperator(task_id="upsert", source=source(str(tmp_path / "l.parquet"), range(PARTS * rows), 3, "L"),
                           table_path=path, hudi_conn_id=None, options={**OPTS, **ECD}, write_windows=None,
                           admission=AdmissionSettings(on_overlap="go"),  # the race is the point
                           launcher=launcher,
                           conflict_retries=RetryPolicy(max_conflict_retries=5, base_delay_s=2.0, max_delay_s=4.0))
    ti, box = StubTI(), {}

    def run():
        try:
            # what Airflow's context gives the task for its asset events (the operator fills the
            # table's event; without it each commit logged a warning with a traceback)
            box["out"] = op.execute({"ti": ti, "outlet_events": OutletEventAccessors()})
        except BaseException as e:  # noqa: BLE001 - asserted below
            box["error"] = e
    loser = threading.Thread(target=run, daemon=True)
    loser.start()
    while XCOM_RUNNING not in ti.xcom:  # attempt 1 began (its instant requested): let the winner go
        assert loser.is_alive() and time.time() < deadline, box
        time.sleep(0.02)
    l_instant = ti.xcom[XCOM_RUNNING]["instant"]
    released = time.time()
    open(go, "w").close()
    while not launcher.results:  # attempt 1 ended: let the winner commit
        assert loser.is_alive() and time.time() < deadline + 300, box
        time.sleep(0.05)
    barrier.mkdir(exist_ok=True)
    (barrier / "attempt-1-ended").touch()
    loser.join(timeout=600)
    code_w, res_w, log_w = result_of(w)
    assert "out" in box, box
    assert code_w == 0 and res_w["instant"] == w_instant, log_w[-3000:]

    attempts = ti.xcom[XCOM_ATTEMPTS]
    first, last = attempts[0], attempts[-1]
    assert (first["instant"], first["outcome"], first["exit_code"]) == (l_instant, "conflict", 75), attempts
    assert first["other_instant"] == w_instant and first["error"]["error"] == "EarlyConflictError", first
    line = launcher.results[0].result
    stopped_in_job, before_job = line.get("job_cancelled") is True, line["error"].get("stopped_before_job") is True
    assert stopped_in_job or before_job, line  # stopped early, not at its commit
    assert box["out"]["outcome"] == "committed" and last["outcome"] == "committed" and last["attempt"] >= 2
    assert last["instant"] > w_instant

    table = Table.open(path)
    rec = attempt_log.read_record(table, l_instant)
    assert rec.outcome == attempt_log.CONFLICT and rec.other_instant == w_instant
    assert all(bf.instant_time != l_instant for p in range(PARTS) for bf in list_base_files(table, str(p)))
    got = hudi_read(path).select(["id", "v"])
    assert got.num_rows == PARTS * rows and set(got.column("v").to_pylist()) == {"L"}
    stop_ms = parse_ms(rec.rolled_back_by) if rec.rolled_back_by else rec.ended_at_ms
    print(f"connect loser (write operator) vs spark-submit winner: stopped "
          f"{'inside its write job' if stopped_in_job else 'before its write job'}, rolled back "
          f"{round(stop_ms / 1000 - released, 3)} s after the winner's release; "
          f"tasks_done_at_cancel={line['error'].get('tasks_done_at_cancel')}/{line['error'].get('tasks_total')}, "
          f"attempts={len(attempts)}")
