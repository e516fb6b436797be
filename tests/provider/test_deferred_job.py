"""The deferrable write's trigger against real detached spark-submit jobs (local[1]), run
directly with asyncio: a commit, a conflict between two overlapping writers, a failed job, and
a cancelled task whose trigger kills the driver's whole process group."""

import asyncio
import os
import sys
import time

import psutil
import pytest

from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider.deferred_job import DetachedJob, start_detached
from airflow_hudi_occ.provider.hooks.hudi_occ import HudiSparkJobHook
from airflow_hudi_occ.provider.triggers.hudi_occ import HudiWriteJobTrigger
from airflow_hudi_occ.testing.spark_job import PATH as SPARK_APP

pytestmark = pytest.mark.timeout(600)

KEYS = ["--option", "hoodie.datasource.write.recordkey.field=id",
        "--option", "hoodie.datasource.write.partitionpath.field=p",
        "--option", "hoodie.datasource.write.precombine.field=ts"]


def _source(tmp_path, name="src", ts=1):
    import pyarrow as pa
    import pyarrow.parquet as pq
    f = str(tmp_path / f"{name}.parquet")
    pq.write_table(pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"], "ts": [ts] * 3}), f)
    return f


def _start(tmp_path, table, source, writer_id, env=None, extra_args=()):
    os.environ.setdefault("AIRFLOW_CONN_SPARK_LOCAL", '{"conn_type": "spark", "host": "local[1]"}')
    hook = HudiSparkJobHook(
        conn_id="spark_local", conf={"spark.ui.enabled": "false"}, spark_binary=None,
        application_args=["--table", table, "--source", source, *KEYS, *extra_args,
                          "--writer-id", writer_id],
        env_vars={"PYSPARK_PYTHON": sys.executable, "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
                  **(env or {})})
    return start_detached(hook, SPARK_APP, writer_id=writer_id, directory=str(tmp_path))


def _trigger(table, job):
    return HudiWriteJobTrigger(table, job.to_json(), poll_interval=0.5)


async def _first_event(trigger):
    async for event in trigger.run():
        return event.payload


def test_trigger_serializes_round_trip():
    job = DetachedJob(pid=1, create_time=2.0, host="h", log_path="/l", exit_path="/e",
                      writer_id="w", started_at=3.0)
    t = HudiWriteJobTrigger("/t", job.to_json(), options={"a": "b"}, poll_interval=1.0)
    path, kw = t.serialize()
    assert path == "airflow_hudi_occ.provider.triggers.hudi_occ.HudiWriteJobTrigger"
    assert HudiWriteJobTrigger(**kw).serialize() == (path, kw)
    assert DetachedJob.from_json(kw["job"]) == job


def test_committed(tmp_path):
    table = str(tmp_path / "t")
    # the outcome from the timeline; the job's exit status agrees
    job = _start(tmp_path, table, _source(tmp_path), "w-commit")
    event = asyncio.run(_first_event(_trigger(table, job)))
    assert event["status"] == "committed", event
    inst = Table.open(table).timeline().get(event["instant"])
    assert inst is not None and inst.is_completed and event["completion_time"] == inst.completion_time
    assert event["exit_code"] in (0, None)


@pytest.mark.slow  # two Spark jobs at once: about 2 minutes on 2 shared cores
def test_conflict(tmp_path):
    table = str(tmp_path / "t")
    # a first commit, so that both upserts update the same file groups (on an empty table
    # each insert would make new file groups of its own, and both would commit)
    first = asyncio.run(_first_event(_trigger(table, _start(tmp_path, table, _source(tmp_path), "w-0"))))
    assert first["status"] == "committed", first
    # two overlapping writers, each held before its commit until both have begun
    barrier = tmp_path / "barrier"
    env = {"HUDI_OCC_TEST_COMMIT_BARRIER": f"{barrier}:2:begin"}
    jobs = [_start(tmp_path, table, _source(tmp_path, f"s{i}", ts=10 + i), f"w-race-{i}", env=env)
            for i in (1, 2)]

    async def both():
        return await asyncio.gather(*(_first_event(_trigger(table, j)) for j in jobs))
    events = asyncio.run(both())
    assert sorted(e["status"] for e in events) == ["committed", "conflict"], events
    lost = next(e for e in events if e["status"] == "conflict")
    won = next(e for e in events if e["status"] == "committed")
    assert lost["other_instant"] == won["instant"] and lost["file_groups"], lost
    tl = Table.open(table).timeline()
    assert tl.get(lost["instant"]) is None or not tl.get(lost["instant"]).is_completed


def test_failed(tmp_path):
    table = str(tmp_path / "t")
    # a source that does not exist: the job's own error, read from its result
    job = _start(tmp_path, table, str(tmp_path / "missing.parquet"), "w-fail")
    event = asyncio.run(_first_event(_trigger(table, job)))
    assert event["status"] == "failed" and event["exit_code"] == 1, event
    assert "missing.parquet" in event["message"], event


def test_cancelled_trigger_kills_the_driver_and_leaves_the_instant_pending(tmp_path):
    table = str(tmp_path / "t")
    barrier = tmp_path / "hold"  # 99 writers never arrive: the job waits before its commit
    job = _start(tmp_path, table, _source(tmp_path), "w-kill",
                 env={"HUDI_OCC_TEST_COMMIT_BARRIER": f"{barrier}:99"})
    trigger = _trigger(table, job)

    async def follow_then_cancel():
        task = asyncio.ensure_future(_first_event(trigger))
        deadline = time.time() + 300
        while not (barrier.exists() and os.listdir(barrier)) and time.time() < deadline:
            await asyncio.sleep(0.5)
        assert not task.done(), task.result()  # still running: no event yet
        tree = [psutil.Process(job.pid)] + psutil.Process(job.pid).children(recursive=True)
        task.cancel()
        await trigger.on_kill()  # what the triggerer does on a user's cancel
        return tree
    tree = asyncio.run(follow_then_cancel())
    _, alive = psutil.wait_procs(tree, timeout=15)
    assert not alive, [(p.pid, p.cmdline()) for p in alive]
    pending = [i.requested_time for i in Table.open(table).timeline().pending_writes()]
    assert pending, "the killed instant stays pending for the next writer's rollback"


@pytest.mark.slow  # four Spark jobs: about 2-3 minutes on 2 shared cores
def test_operator_conflict_then_retry_through_the_trigger(tmp_path):
    """The operator's own deferrable path, its triggers run here: attempt 1 loses to an
    earlier overlapping writer, ``execute_complete`` defers attempt 2 on a fresh instant, which
    commits; the return value lists both attempts."""
    from airflow.sdk.exceptions import TaskDeferred

    from airflow_hudi_occ.core.commit.retry import RetryPolicy
    from airflow_hudi_occ.provider.launchers.spark_submit import SparkSubmitLauncher
    from airflow_hudi_occ.provider.operators.write import HudiWriteOperator
    from tests.provider.test_deferrable_operator import _context

    table = str(tmp_path / "t")
    first = asyncio.run(_first_event(_trigger(table, _start(tmp_path, table, _source(tmp_path), "w-0"))))
    assert first["status"] == "committed", first
    barrier = {"HUDI_OCC_TEST_COMMIT_BARRIER": f"{tmp_path / 'barrier'}:2:begin"}
    other = _start(tmp_path, table, _source(tmp_path, "o", ts=5), "w-other", env=barrier)
    deadline = time.time() + 120
    while not (other.began() or {}).get("instant") and time.time() < deadline:
        time.sleep(0.5)  # the other writer's instant is the earlier one
    op = HudiWriteOperator(task_id="t", source=_source(tmp_path, "mine", ts=7), table_path=table,
                           hudi_conn_id=None, deferrable=True,
                           options={"hoodie.datasource.write.recordkey.field": "id",
                                    "hoodie.datasource.write.partitionpath.field": "p",
                                    "hoodie.datasource.write.precombine.field": "ts"},
                           launcher=SparkSubmitLauncher(spark_conn_id="spark_local", spark_env=barrier,
                                                        application=SPARK_APP, poll_interval=0.5),
                           conflict_retries=RetryPolicy(base_delay_s=0.1, max_delay_s=0.1), write_windows=None)
    ctx = _context()
    with pytest.raises(TaskDeferred) as d1:
        op.execute(ctx)
    assert ctx["ti"].xcom["hudi_occ_running_instant"]["instant"] > other.began()["instant"]

    async def race():
        return await asyncio.gather(_first_event(d1.value.trigger), _first_event(_trigger(table, other)))
    mine, theirs = asyncio.run(race())
    assert (mine["status"], theirs["status"]) == ("conflict", "committed"), (mine, theirs)
    with pytest.raises(TaskDeferred) as d2:
        op.execute_complete(ctx, mine, **d1.value.kwargs)
    assert d2.value.kwargs["attempt"] == 2
    event = asyncio.run(_first_event(d2.value.trigger))
    out = op.execute_complete(ctx, event, **d2.value.kwargs)
    assert out["outcome"] == "committed", out
    assert [a["outcome"] for a in out["attempts"]] == ["conflict", "committed"], out
    assert Table.open(table).timeline().get(out["instant"]).is_completed


def test_admission_trigger_serializes_round_trip():
    from airflow_hudi_occ.provider.triggers.hudi_occ import HudiAdmissionTrigger
    t = HudiAdmissionTrigger("/t", "00001-ab", options={"hoodie.client.heartbeat.interval_in_ms": "1000"},
                             poll_interval=0.5, timeout_s=30, starvation_s=60, started_at=12.0)
    path, kw = t.serialize()
    assert path.endswith("HudiAdmissionTrigger")
    assert HudiAdmissionTrigger(**kw).serialize() == (path, kw)
