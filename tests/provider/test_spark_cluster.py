"""The write job on a real Spark standalone cluster (master + worker on 127.0.0.1, from the
installed pyspark), submitted through the hook the operators use.

The worker runs with a clean environment and a ``python3`` that has the dependencies but
cannot import ``airflow_hudi_occ`` (``testing/spark_cluster.python_without_package``): a
write that commits proves the hook shipped the engine (``--py-files``). A thread reads every
process's command line while the job runs: the ZooKeeper credential never appears there.
"""

import os
import stat
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.job_protocol import EXIT_ERROR, EXIT_OK, last_payload
from airflow_hudi_occ.core.job_secrets import SECRETS_FILE_ENV
from airflow_hudi_occ.provider.hooks.hudi_occ import HudiSparkJobHook
from airflow_hudi_occ.provider.spark_jobs import SPARK_APP
from airflow_hudi_occ.testing.spark_cluster import SparkStandaloneCluster, python_without_package
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key

SECRET = "hudi-occ-digest-Zq8xW1"
OPTS = {"hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.name": "orders"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("spark-standalone")
    python = python_without_package(root / "worker-python")
    with SparkStandaloneCluster(root / "cluster", cores=2, worker_python=python) as c:
        c.python = python
        yield c
    assert c.survivors() == [], "Spark processes outlived the cluster"


@pytest.fixture
def spark_conn(cluster, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER",
                       '{"conn_type": "spark", "host": "%s"}' % cluster.master_url)
    monkeypatch.setenv("HUDI_OCC_CACHE_DIR", str(cluster.workdir / "cache"))
    # the executors' interpreter is the cluster's (python3 on the worker's PATH), as on a real
    # cluster: a PYSPARK_PYTHON here would be respected and sent to the executors
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    return "spark_cluster"


def source(path, rows):
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema(
        [("id", pa.int64()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.string())])), path)
    return str(path)


class ArgvWatch(threading.Thread):
    """Reads /proc/*/cmdline (what `ps` shows every user) until stopped; records any process
    whose command line holds ``needle``, and the secrets file of the spark-submit process."""

    def __init__(self, needle: str):
        super().__init__(daemon=True)
        self.needle = needle.encode()
        self.hits: list[str] = []
        self.scans = 0
        self.seen_submit = 0
        self.secret_files: set[str] = set()
        self._done = threading.Event()

    def run(self):
        while not self._done.is_set():
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = f.read()
                except OSError:
                    continue
                if self.needle in cmd:
                    self.hits.append(cmd.replace(b"\0", b" ").decode(errors="replace"))
                if b"org.apache.spark.deploy.SparkSubmit" in cmd:
                    self.seen_submit += 1
                    try:
                        with open(f"/proc/{pid}/environ", "rb") as f:
                            for item in f.read().split(b"\0"):
                                if item.startswith(SECRETS_FILE_ENV.encode() + b"="):
                                    self.secret_files.add(item.split(b"=", 1)[1].decode())
                    except OSError:
                        pass
            self.scans += 1
            time.sleep(0.05)

    def stop(self):
        self._done.set()
        self.join(5)


def job_args(table, src, zk_server):
    args = ["--table", table, "--operation", "upsert", "--source", src, "--batch-key", "b1"]
    opts = {**OPTS, "hoodie.write.lock.provider": "zookeeper",
            "hoodie.write.lock.zookeeper.url": zk_server.hosts,
            "hoodie.write.lock.zookeeper.base_path": "/hudi/cluster-test",
            "hoodie.write.lock.zookeeper.auth": f"writer:{SECRET}"}
    for k, v in opts.items():
        args += ["--option", f"{k}={v}"]
    return args


def run_hook(spark_conn, args, **kw):
    lines: list[str] = []
    hook = HudiSparkJobHook(conn_id=spark_conn, application_args=args, on_line=lines.append,
                            name="hudi-occ cluster test", **kw)
    code = hook.run(SPARK_APP)
    return code, lines, hook


def test_a_write_on_a_standalone_cluster_ships_the_engine_and_keeps_credentials_off_argv(
        cluster, spark_conn, zk_server, tmp_path):
    table = str(tmp_path / "orders")
    rows = [{"id": i, "p": f"d{i % 2}", "ts": 1, "v": f"v{i}"} for i in range(40)]
    src = source(tmp_path / "in.parquet", rows)
    watch = ArgvWatch(SECRET)
    watch.start()
    try:
        code, lines, hook = run_hook(spark_conn, job_args(table, src, zk_server),
                                     conf={"spark.cores.max": "1"})
    finally:
        watch.stop()
    out = "\n".join(lines)
    result = last_payload(lines)
    assert code == EXIT_OK, out[-4000:] + cluster.executor_logs()[-4000:]
    assert result["outcome"] == "committed"
    # the executors imported the shipped zip, with the worker's interpreter, not the driver's
    shipped = [ln for ln in lines if ln.startswith("executors import airflow_hudi_occ")]
    assert shipped and ".zip/airflow_hudi_occ/__init__.py" in shipped[0], out[-3000:]
    assert f"at {cluster.python})" in shipped[0], shipped
    assert rows_by_key(hudi_read(table), columns=["id", "v"]) == {r["id"]: {"id": r["id"], "v": r["v"]} for r in rows}
    # ps never showed the credential; the job got it through a 0600 file, gone by now
    assert watch.seen_submit > 0 and watch.scans > 10
    assert watch.hits == []
    assert watch.secret_files and not any(os.path.exists(f) for f in watch.secret_files)
    assert SECRET not in out
    # the application was capped and left nothing running on the cluster
    apps = cluster.state()["completedapps"]
    assert [a["cores"] for a in apps if a["name"].startswith("hudi-occ upsert")] == [1], apps


@pytest.mark.slow
def test_executors_without_the_dependencies_fail_before_the_write_naming_the_fix(
        cluster, spark_conn, tmp_path):
    bare = python_without_package(tmp_path / "bare-python", with_dependencies=False)
    table = str(tmp_path / "orders")
    src = source(tmp_path / "in.parquet", [{"id": 1, "p": "d", "ts": 1, "v": "x"}])
    args = ["--table", table, "--operation", "upsert", "--source", src]
    for k, v in {**OPTS, "hoodie.write.lock.provider": "filesystem"}.items():
        args += ["--option", f"{k}={v}"]
    import sys
    code, lines, _ = run_hook(spark_conn, args, conf={
        "spark.cores.max": "1", "spark.pyspark.python": bare,
        "spark.pyspark.driver.python": sys.executable})
    result = last_payload(lines)
    assert code == EXIT_ERROR, "\n".join(lines)[-3000:]
    err = result["error"]
    assert err["error"] == "EngineNotShippedError"
    assert "pyarrow" in err["message"] and "spark.archives" in err["remedy"], err
    assert not os.path.exists(os.path.join(table, ".hoodie")) or not [
        f for f in os.listdir(os.path.join(table, ".hoodie")) if f[0].isdigit()]


def test_the_zip_is_built_once_per_content_and_readable(tmp_path):
    from airflow_hudi_occ.spark.submit.package import package_zip
    a = package_zip(tmp_path)
    assert package_zip(tmp_path) == a and a.name.startswith("airflow_hudi_occ-")
    assert stat.S_IMODE(a.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == [a.name]  # no temporary file left



@pytest.mark.slow  # ~2 min on 2 cores; the default run keeps the single cluster write above
def test_two_operators_on_the_cluster_write_s3_one_wins_the_loser_retries_to_success(
        cluster, spark_conn, tmp_path, monkeypatch):
    """Two HudiWriteOperators at once, on the standalone cluster (one core each), upserting
    overlapping keys of an S3 table (the loopback moto server) named by a table connection
    whose storage options hold the secret: both write their files and meet at the commit
    barrier; one commits, the other loses the conflict, is rolled back and retried on a fresh
    instant, and commits. The executors (the worker's clean interpreter) wrote through the
    shipped engine with the storage options of the task closure; hudi-rs reads exactly the
    model; no command line showed the secret."""
    import json
    import threading

    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.core.commit.retry import RetryPolicy
    from airflow_hudi_occ.provider.admission import AdmissionSettings
    from airflow_hudi_occ.provider.launchers.spark_submit import SparkSubmitLauncher
    from airflow_hudi_occ.provider.operators.write import HudiWriteOperator
    from airflow_hudi_occ.testing.s3 import S3Server, hudi_read_s3
    from airflow_hudi_occ.testing.spark_job import PATH as TEST_JOB
    from tests.provider.test_write_operator_recovery import StubTI

    s3_secret = "s3-cluster-secret-Pq4rT8"
    opts = {**OPTS, "hoodie.write.lock.provider": "filesystem",
            "hoodie.write.lock.client.wait_time_ms_between_retry": "50",
            "hoodie.time.generator.max_expected_clock_skew_ms": "2",
            "hoodie.client.heartbeat.interval_in_ms": "1500"}
    with S3Server() as s3:
        s3.create_bucket("lake")
        so = dict(s3.storage_options, secret=s3_secret)  # moto checks no signature
        monkeypatch.setenv("AIRFLOW_CONN_HUDI_S3", json.dumps(
            {"conn_type": "hudi_occ", "host": "lake/orders", "schema": "s3",
             "extra": {"storage_options": so}}))
        table = Table.create("s3://lake/orders", "orders", record_key_fields=["id"],
                             partition_fields=["p"], precombine_field="ts", storage_options=so)
        seed = [{"id": i, "p": f"d{i % 2}", "ts": 1, "v": "seed"} for i in range(20)]
        ArrowTableWriter(table, WriteConfig.from_options(opts)).write(
            pa.Table.from_pylist(seed), "upsert")
        batches = {"a": [{"id": i, "p": f"d{i % 2}", "ts": 2, "v": "A"} for i in range(0, 20, 2)],
                   "b": [{"id": i, "p": f"d{i % 2}", "ts": 3, "v": "B"} for i in range(0, 20, 4)]}
        outs, errors = {}, {}

        def run(name):
            op = HudiWriteOperator(
                task_id=f"upsert_{name}", source=source(tmp_path / f"{name}.parquet", batches[name]),
                hudi_conn_id="hudi_s3", options=opts, write_windows=None,
                conflict_retries=RetryPolicy(max_conflict_retries=2, base_delay_s=0.2, max_delay_s=1.0),
                admission=AdmissionSettings(on_overlap="go"),  # both must run at once: the race is the point
                batch_key=f"batch-{name}", launcher=SparkSubmitLauncher(
                    spark_conn_id=spark_conn, application=TEST_JOB,
                    # one core and a small executor each: the 2-core, 1 GiB worker runs both at once
                    spark_conf={"spark.cores.max": "1", "spark.executor.memory": "512m"},
                    spark_env={"HUDI_OCC_TEST_COMMIT_BARRIER": f"{tmp_path / 'barrier'}:2"}))
            try:
                outs[name] = op.execute({"ti": StubTI()})
            except BaseException as e:  # noqa: BLE001 - reported below
                errors[name] = e

        watch = ArgvWatch(s3_secret)
        watch.start()
        t0 = time.time()
        try:
            threads = [threading.Thread(target=run, args=(n,)) for n in batches]
            for t in threads:
                t.start()
            for t in threads:
                t.join(900)
        finally:
            watch.stop()
        assert errors == {}, (errors, cluster.executor_logs()[-4000:])
        attempts = {n: [a["outcome"] for a in o["attempts"]] for n, o in outs.items()}
        assert sorted(attempts.values()) == [["committed"], ["conflict", "committed"]], attempts
        loser = next(n for n, a in attempts.items() if a[0] == "conflict")
        winner = next(n for n in batches if n != loser)
        assert outs[loser]["attempts"][0]["other_instant"] == outs[winner]["instant"]
        model = {r["id"]: r["v"] for r in seed}
        for name in ("a", "b"):  # b's ordering field (ts 3) beats a's (2), whoever commits last
            model.update({r["id"]: r["v"] for r in batches[name]})
        got = rows_by_key(hudi_read_s3("s3://lake/orders", so), columns=["id", "v"])
        assert {k: v["v"] for k, v in got.items()} == model
        assert watch.seen_submit > 0 and watch.hits == []
        # three applications (two first attempts, one retry) ran on the cluster, the first
        # two side by side
        apps = sorted((a for a in cluster.state()["completedapps"]
                       if a["name"] == "hudi-occ upsert orders" and a["starttime"] >= t0 * 1000),
                      key=lambda a: a["starttime"])
        assert len(apps) == 3, apps
        assert apps[1]["starttime"] < apps[0]["starttime"] + apps[0]["duration"], apps
