"""Faults on a Spark standalone cluster, through the write operator: an unreachable master,
and a task killed while its job runs on the cluster (issue 12, "what must be shown").

The kill test uses the cluster fixture of ``test_spark_cluster.py`` (a master and a 2-core
worker on 127.0.0.1, started from the installed pyspark with a clean environment).
"""

import os
import threading
import time

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.rollback import rollback_failed_writes
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider.launchers.spark_submit import SparkSubmitLauncher
from airflow_hudi_occ.provider.operators.write import HudiWriteOperator
from airflow_hudi_occ.spark.submit.errors import SparkMasterUnreachableError
from airflow_hudi_occ.spark.submit.master import master_addresses
from airflow_hudi_occ.testing.spark_cluster import free_port
from airflow_hudi_occ.testing.spark_job import PATH as TEST_JOB
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key

from .test_spark_cluster import OPTS, cluster, source, spark_conn  # noqa: F401 - fixtures
from .test_write_operator_recovery import StubTI

FS_OPTS = {**OPTS, "hoodie.write.lock.provider": "filesystem",
           "hoodie.write.lock.client.wait_time_ms_between_retry": "50",
           "hoodie.time.generator.max_expected_clock_skew_ms": "2",
           "hoodie.client.heartbeat.interval_in_ms": "1000"}


def test_master_urls_are_parsed_for_the_probe():
    assert master_addresses("spark://a:7078,b") == [("a", 7078), ("b", 7077)]
    assert master_addresses("local[*]") == [] and master_addresses("yarn") == []


def test_an_unreachable_master_fails_at_once_naming_it_and_the_fix(tmp_path, monkeypatch):
    port = free_port()  # bound then released: nothing listens there
    master = f"spark://127.0.0.1:{port}"
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_GONE", '{"conn_type": "spark", "host": "spark://127.0.0.1", '
                                                  '"port": %d}' % port)
    table = str(tmp_path / "orders")
    op = HudiWriteOperator(task_id="upsert", source=source(tmp_path / "in.parquet", [
        {"id": 1, "p": "d", "ts": 1, "v": "x"}]), table_path=table, options=FS_OPTS,
        launcher=SparkSubmitLauncher(spark_conn_id="spark_gone"), write_windows=None, batch_key="b1")
    t0 = time.time()
    with pytest.raises(SparkMasterUnreachableError) as err:
        op.execute({"ti": StubTI()})
    assert time.time() - t0 < 15
    assert err.value.master == master and master in str(err.value)
    assert "Spark connection" in err.value.remedy and "7077" in err.value.remedy
    assert not os.path.exists(table)  # nothing submitted, nothing written


def _app_processes(needles: list[str]) -> list[str]:
    """Command lines (as `ps` shows them) that name one of ``needles``."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ")[-1].startswith("Z"):
                    continue  # a zombie runs nothing
        except OSError:
            continue
        if any(n in cmd for n in needles):
            out.append(f"{pid}: {cmd[:300]}")
    return out


@pytest.mark.slow  # one cluster application, about a minute
def test_a_task_killed_mid_job_leaves_no_spark_process_and_a_table_rollback_cleans(
        cluster, spark_conn, tmp_path):  # noqa: F811 - fixtures
    table_path = str(tmp_path / "orders")
    table = Table.create(table_path, "orders", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    seed = [{"id": i, "p": f"d{i % 2}", "ts": 1, "v": "seed"} for i in range(20)]
    ArrowTableWriter(table, WriteConfig.from_options(FS_OPTS)).write(pa.Table.from_pylist(seed), "upsert")
    hold = tmp_path / "hold"
    op = HudiWriteOperator(
        task_id="upsert", source=source(tmp_path / "in.parquet",
                                        [{"id": i, "p": f"d{i % 2}", "ts": 2, "v": "new"} for i in range(40)]),
        table_path=table_path, options=FS_OPTS, write_windows=None, batch_key="killed", conflict_retries=0,
        launcher=SparkSubmitLauncher(
            spark_conn_id=spark_conn, application=TEST_JOB,
            spark_conf={"spark.cores.max": "1", "spark.executor.memory": "512m"},
            # the job writes its files, then waits before its commit for writers that never come
            spark_env={"HUDI_OCC_TEST_COMMIT_BARRIER": f"{hold}:99"}))
    errors = []
    th = threading.Thread(target=lambda: _catch(errors, lambda: op.execute({"ti": StubTI()})), daemon=True)
    th.start()
    deadline = time.time() + 300
    while not (hold.exists() and os.listdir(hold)) and time.time() < deadline and th.is_alive():
        time.sleep(0.5)
    assert hold.exists() and os.listdir(hold), ("the job never reached its commit", errors,
                                                cluster.executor_logs()[-3000:])
    instant = os.listdir(hold)[0]
    apps = [a["id"] for a in cluster.state()["activeapps"]]
    assert apps, cluster.state()
    needles = apps + [TEST_JOB, table_path]
    assert _app_processes(needles), "no process of the job found while it runs"
    op.on_kill()
    th.join(120)
    assert not th.is_alive() and errors, "execute did not end after on_kill"
    # the master sees the driver gone and has the worker kill its executors
    deadline = time.time() + 60
    while _app_processes(needles) and time.time() < deadline:
        time.sleep(1)
    assert _app_processes(needles) == []
    assert not cluster.state()["activeapps"]
    # a pending instant with files; once its heartbeat expired, rollback removes it
    t = Table.open(table_path)
    assert [i.requested_time for i in t.timeline().pending()] == [instant]
    config = WriteConfig.from_options(FS_OPTS)
    deadline = time.time() + 60
    done = []
    while not done and time.time() < deadline:
        done = rollback_failed_writes(t, config)
        time.sleep(1)
    assert [r.rolled_back for r in done] == [instant], done
    assert not Table.open(table_path).timeline().pending()
    got = rows_by_key(hudi_read(table_path), columns=["id", "v"])
    assert got == {r["id"]: {"id": r["id"], "v": "seed"} for r in seed}


def _catch(errors, fn):
    try:
        fn()
    except BaseException as e:  # noqa: BLE001 - asserted by the test
        errors.append(e)


@pytest.mark.slow  # two cluster applications, about a minute and a half
def test_early_detection_stops_the_losers_job_on_the_cluster_with_no_file_written(
        cluster, spark_conn, tmp_path):  # noqa: F811 - fixtures
    """A has written every file group and waits at its commit (one core); B (early conflict
    detection on, the other core) upserts the same keys: its driver finds A's markers on
    the file groups its batch needs and stops with a retryable EarlyConflictError: no file
    of B's instant exists; A then commits and hudi-rs reads A's rows."""
    from airflow_hudi_occ.core.job_protocol import EXIT_OK, EXIT_RETRYABLE, last_payload
    from airflow_hudi_occ.provider.hooks.hudi_occ import HudiSparkJobHook
    from tests.spark.test_job import files_of

    table_path = str(tmp_path / "orders")
    table = Table.create(table_path, "orders", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    seed = [{"id": i, "p": f"d{i % 4}", "ts": 1, "v": "seed"} for i in range(20)]
    ArrowTableWriter(table, WriteConfig.from_options(FS_OPTS)).write(pa.Table.from_pylist(seed), "upsert")
    barrier = tmp_path / "barrier"

    def job(name, extra_opts, env, conf):
        rows = [dict(r, ts=2 if name == "a" else 3, v=name.upper()) for r in seed]
        args = ["--table", table_path, "--operation", "upsert",
                "--source", source(tmp_path / f"{name}.parquet", rows), "--batch-key", name]
        for k, v in {**FS_OPTS, **extra_opts}.items():
            args += ["--option", f"{k}={v}"]
        lines: list[str] = []
        hook = HudiSparkJobHook(conn_id=spark_conn, application_args=args, on_line=lines.append,
                                env_vars=env, conf={"spark.cores.max": "1",
                                                    "spark.executor.memory": "512m", **conf},
                                name=f"hudi-occ ecd {name}")
        return hook.run(TEST_JOB), lines

    out = {}
    a = threading.Thread(target=lambda: out.__setitem__("a", job(
        "a", {}, {"HUDI_OCC_TEST_COMMIT_BARRIER": f"{barrier}:2"}, {})), daemon=True)
    a.start()
    deadline = time.time() + 300
    while not (barrier.exists() and os.listdir(barrier)) and time.time() < deadline and a.is_alive():
        time.sleep(0.5)
    assert barrier.exists() and os.listdir(barrier), ("A never reached its commit", out)
    code_b, lines_b = job("b", {"hoodie.write.concurrency.early.conflict.detection.enable": "true"},
                          {}, {"spark.sql.shuffle.partitions": "48"})
    (barrier / "release").touch()
    a.join(300)
    code_a, lines_a = out["a"]
    res_a, res_b = last_payload(lines_a), last_payload(lines_b)
    assert (code_a, code_b) == (EXIT_OK, EXIT_RETRYABLE), (res_a, res_b, "\n".join(lines_b)[-3000:])
    assert res_b["error"]["error"] == "EarlyConflictError" and res_b["other_instant"] == res_a["instant"]
    assert res_b["files_written"] == 0 and files_of(table_path, res_b["instant"]) == []
    got = rows_by_key(hudi_read(table_path), columns=["id", "v"])
    assert {v["v"] for v in got.values()} == {"A"} and len(got) == len(seed)
