"""The Spark engine on S3 (the loopback moto server), end to end.

spark-submit processes (local master) write an S3 table whose storage options reach them only
through the job-secrets file; executors write base files and markers through the core's
``Storage`` (conditional PUTs), and read base files and the source through fsspec (no s3a jars
here). Checked against the server's request log, ``/proc/*/cmdline`` and hudi-rs.
"""

import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.errors import StorageError
from airflow_hudi_occ.core.format.storage import Storage
from airflow_hudi_occ.core.job_protocol import EXIT_ERROR, EXIT_RETRYABLE, last_payload
from airflow_hudi_occ.core.job_secrets import SECRETS_ENV, SECRETS_FILE_ENV, JobSecrets, write_secrets_file
from airflow_hudi_occ.core.table.file_system_view import list_base_files, list_partitions
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.spark import job
from airflow_hudi_occ.spark.reader import read_incremental, read_snapshot
from airflow_hudi_occ.spark.writer import SparkHudiWriter
from airflow_hudi_occ.testing.s3 import S3Server, hudi_read_s3
from airflow_hudi_occ.testing.spark_job import PATH as TEST_JOB
from airflow_hudi_occ.testing.tables import rows_by_key

from tests.provider.test_spark_cluster import ArgvWatch

#: moto checks no signature: a distinctive secret that `ps` must never show
SECRET = "s3-secret-Kw7yQ2v9"
OPTS = {"hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.name": "orders",
        "hoodie.write.lock.provider": "filesystem",  # its lock file: a conditional PUT too
        "hoodie.write.lock.client.wait_time_ms_between_retry": "50",
        "hoodie.time.generator.max_expected_clock_skew_ms": "2",
        # S3 modification times have one-second resolution: beat coarser than that
        "hoodie.client.heartbeat.interval_in_ms": "1500"}
SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.string())])


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    log = tmp_path_factory.mktemp("s3") / "requests.jsonl"
    with S3Server(request_log=str(log)) as server:
        server.create_bucket("lake")
        server.log_path = log
        yield server


def options_of(s3) -> dict:
    return dict(s3.storage_options, secret=SECRET)


def put_source(s3, key: str, rows: list[dict]) -> str:
    fs = Storage("s3://lake", options_of(s3)).fs
    with fs.open(f"lake/{key}", "wb") as f:
        pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), f)
    return f"s3://lake/{key}"


def launch(tmp_path, name, table, src, *, barrier=None, n=2, storage_options=None):
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable,
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    env.pop("HUDI_OCC_TEST_COMMIT_BARRIER", None)
    env.pop(SECRETS_ENV, None)
    if barrier is not None:
        env["HUDI_OCC_TEST_COMMIT_BARRIER"] = f"{barrier}:{n}"
    # the storage options (the secret among them) go in a 0600 file, as the hook hands them over
    env[SECRETS_FILE_ENV] = write_secrets_file(JobSecrets({}, storage_options), str(tmp_path))
    cmd = [os.path.join(os.path.dirname(sys.executable), "spark-submit"), "--master", "local[1]",
           "--conf", "spark.ui.enabled=false", TEST_JOB, "--table", table, "--operation", "upsert",
           "--source", src, "--source-format", "parquet"]
    for k, v in OPTS.items():
        cmd += ["--option", f"{k}={v}"]
    out = open(tmp_path / f"{name}.out", "w+")
    err = open(tmp_path / f"{name}.err", "w+")
    p = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, text=True)
    p.files = (out, err)
    p.secrets_file = env[SECRETS_FILE_ENV]
    return p


def finish(procs):
    out = []
    for p in procs:
        p.wait(timeout=600)
        for f in p.files:
            f.seek(0)
        stdout, stderr = p.files[0].read(), p.files[1].read()
        res = last_payload(stdout)
        assert res is not None, stderr[-3000:]
        assert SECRET not in stdout + stderr
        assert not os.path.exists(p.secrets_file)  # read once, deleted
        out.append((p.returncode, res))
    return out


def requests(s3) -> list[dict]:
    return [json.loads(line) for line in open(s3.log_path)]


def files_of(table: Table, instant: str) -> list[str]:
    return [bf.relative_path for part in list_partitions(table) for bf in list_base_files(table, part)
            if bf.instant_time == instant]


def test_spark_jobs_on_s3_write_conflict_and_read_back_with_conditional_puts_only(spark, s3, tmp_path):
    """A seed write from a source on S3; then two concurrent writers on overlapping keys held
    at their commit until both wrote their files: one commits, the other conflicts and its
    files are rolled back on S3. hudi-rs and the Spark readers read exactly the model; every
    data, marker and timeline file was created by a PUT with If-None-Match: *; no process's
    command line ever held the secret."""
    so = options_of(s3)
    table_uri = "s3://lake/orders"
    seed_rows = [{"id": i, "p": f"d{i % 2}", "ts": 1, "v": "seed"} for i in range(20)]
    watch = ArgvWatch(SECRET)
    watch.start()
    try:
        [(code, seed)] = finish([launch(tmp_path, "seed", table_uri,
                                        put_source(s3, "landing/seed/part-0.parquet", seed_rows),
                                        storage_options=so)])
        assert code == 0 and seed["outcome"] == "committed", seed
        a = [{"id": i, "p": f"d{i % 2}", "ts": 2, "v": "A"} for i in range(0, 20, 2)]
        b = [{"id": i, "p": f"d{i % 2}", "ts": 2, "v": "B"} for i in range(0, 20, 4)]  # overlaps a
        barrier = tmp_path / "barrier"
        procs = [launch(tmp_path, name, table_uri, put_source(s3, f"landing/{name}.parquet", rows),
                        barrier=str(barrier), storage_options=so)
                 for name, rows in (("a", a), ("b", b))]
        results = finish(procs)
    finally:
        watch.stop()
    assert sorted(c for c, _ in results) == [0, EXIT_RETRYABLE], results
    (wc, winner), (lc, loser) = sorted(results, key=lambda r: r[0])
    assert loser["outcome"] == "conflict" and loser["other_instant"] == winner["instant"]
    assert loser["file_groups"] and loser["error"]["error"] == "WriteConflictError"
    table = Table.open(table_uri, so)
    assert files_of(table, loser["instant"]) == []  # rolled back on S3
    assert loser["instant"] not in {i.requested_time for i in table.timeline().completed()}
    # the model: the seed, then the winner's rows
    won = a if results[0][0] == 0 else b
    model = {r["id"]: r["v"] for r in seed_rows}
    model.update({r["id"]: r["v"] for r in won})
    got = rows_by_key(hudi_read_s3(table_uri, so), columns=["id", "v"])
    assert {k: v["v"] for k, v in got.items()} == model
    snap = {r.id: r.v for r in read_snapshot(spark, table_uri, storage_options=so).collect()}
    assert snap == model
    assert {r.id: r.v for r in read_snapshot(spark, table_uri, as_of=seed["instant"],
                                             storage_options=so).collect()} == \
        {r["id"]: "seed" for r in seed_rows}
    inc = read_incremental(spark, table_uri, start=seed["completion_time"], storage_options=so)
    assert {r.id: r.v for r in inc.collect()} == {r["id"]: r["v"] for r in won}
    # every file the writers created, by a conditional PUT (If-None-Match: *)
    created = [r for r in requests(s3) if r["m"] == "PUT" and r["path"].startswith("/lake/orders/")
               and r.get("status", "").startswith("200")]
    kinds = {"data": lambda p: p.endswith(".parquet") and "/.hoodie/" not in p,
             "timeline": lambda p: "/.hoodie/timeline/" in p,
             "marker": lambda p: "/.hoodie/.temp/" in p}
    for kind, is_kind in kinds.items():
        puts = [r for r in created if is_kind(r["path"])]
        assert puts, f"no {kind} file was PUT"
        unconditional = [r["path"] for r in puts if r.get("HTTP_IF_NONE_MATCH") != "*"]
        assert unconditional == [], (kind, unconditional)
    data_puts = {r["path"] for r in created if kinds["data"](r["path"])}
    on_table = {f"/lake/orders/{rel}" for part in list_partitions(table)
                for bf in list_base_files(table, part) for rel in [bf.relative_path]}
    assert on_table <= data_puts and len(data_puts) > len(on_table)  # the loser's: PUT, then removed
    # `ps` never showed the secret
    assert watch.seen_submit > 0 and watch.scans > 10 and watch.hits == []


def test_missing_credentials_fail_before_anything_naming_the_store_and_the_fix(tmp_path, monkeypatch,
                                                                                 capsys):
    with S3Server(check_credentials=True) as strict:
        strict.create_bucket("lake")
        wrong = dict(strict.storage_options, key="nobody")
        monkeypatch.setenv(SECRETS_ENV, JobSecrets({}, wrong).to_json())
        src = tmp_path / "in.parquet"
        pq.write_table(pa.Table.from_pylist([{"id": 1, "p": "d", "ts": 1, "v": "x"}], schema=SCHEMA), src)
        argv = ["--table", "s3://lake/orders", "--source", str(src)]
        for k, v in OPTS.items():
            argv += ["--option", f"{k}={v}"]
        code = job.main(argv)  # refused before any Spark session exists
        result = last_payload(capsys.readouterr().out)
        assert code == EXIT_ERROR
        err = result["error"]
        assert err["error"] == "StorageError" and strict.endpoint in err["message"], err
        assert "InvalidAccessKeyId" in err["message"] or "Access Key" in err["message"]
        assert "storage_options" in err["remedy"] and "key / secret" in err["remedy"]
        assert Storage("s3://lake", strict.storage_options).walk_files("lake") == []


def test_a_store_without_conditional_writes_is_refused_and_the_declared_fallback_works(
        spark, tmp_path, zk_server):
    """A store that answers If-None-Match with 501: the first write is refused before any
    instant, naming the store and both fixes, and leaves nothing; declared with
    ``assume_locked_creates`` (the storage option, carried to the executors) under the
    ZooKeeper lock, the write commits and hudi-rs reads it."""
    df = spark.createDataFrame([(i, f"d{i % 2}", 1, "x") for i in range(10)], "id long, p string, ts long, v string")
    with S3Server(conditional_writes=False) as plain:
        plain.create_bucket("lake")
        with pytest.raises(StorageError) as e:
            SparkHudiWriter(spark, "s3://lake/t", OPTS, storage_options=plain.storage_options).write(df)
        assert plain.endpoint in str(e.value) and "501" in str(e.value)
        assert "zookeeper" in e.value.remedy and "assume_locked_creates" in e.value.remedy
        assert Storage("s3://lake", plain.storage_options).walk_files("lake") == []
        declared = dict(plain.storage_options, assume_locked_creates=True)
        zk = {**OPTS, "hoodie.write.lock.provider": "zookeeper",
              "hoodie.write.lock.zookeeper.url": zk_server.hosts,
              "hoodie.write.lock.zookeeper.base_path": "/hudi/s3-no-conditional"}
        res = SparkHudiWriter(spark, "s3://lake/t", zk, storage_options=declared).write(df)
        assert res.outcome == "committed" and res.summary()["rows_written"] == 10
        got = rows_by_key(hudi_read_s3("s3://lake/t", plain.storage_options), columns=["id", "v"])
        assert {k: v["v"] for k, v in got.items()} == {i: "x" for i in range(10)}
        # the file lock needs an atomic create: refused on such a store, declared or not
        with pytest.raises(Exception, match="atomic|conditional"):
            SparkHudiWriter(spark, "s3://lake/t", OPTS, storage_options=declared).write(df)
