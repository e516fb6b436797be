"""provider/java_job: the options a Java writer gets, the file that carries them, and the
reading of a Java job's output and of its commit. The real Java Hudi runs in
tests/provider/operators/test_java_write.py; here the unit seams, with output lines as Java
Hudi 1.2.0 printed them."""

import os
import stat

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.format.metadata import EXTRA_BATCH_KEY, EXTRA_WRITER_ID
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider import java_job

ZK = "hoodie.write.lock.zookeeper."

# what Java Hudi 1.2.0's PySpark driver printed for a lost conflict (spark-submit's output)
CONFLICT_LINES = [
    "py4j.protocol.Py4JJavaError: An error occurred while calling o70.save.",
    ": org.apache.hudi.exception.HoodieWriteConflictException: java.util.ConcurrentModificationException: "
    "Cannot resolve conflicts for overlapping writes between first operation = ConcurrentOperation("
    "actionState=INFLIGHT, actionType=commit, instantTime=20261127124247024), second operation = "
    "ConcurrentOperation(actionState=COMPLETED, actionType=commit, instantTime=20261127124341494)",
    "\tat org.apache.hudi.client.utils.TransactionUtils.resolveWriteConflictIfAny(TransactionUtils.java:95)",
    "Caused by: java.util.ConcurrentModificationException: Cannot resolve conflicts for overlapping writes",
]


@pytest.mark.parametrize("url,port,want", [
    ("zk1", "2181", "zk1:2181"),
    ("zk1,zk2:2182", "2190", "zk1:2190,zk2:2182"),
    ("zk1,zk2/chroot/x", "2181", "zk1:2181,zk2:2181/chroot/x"),
    ("zk1:1", None, "zk1:1"),
])
def test_zookeeper_url_gets_the_port_java_would_otherwise_ignore(url, port, want):
    assert java_job.zookeeper_url_with_port(url, port) == want


def test_java_options_force_occ_and_stamp_the_attempt():
    opts = java_job.java_options(
        {"hoodie.write.lock.provider": "zookeeper", ZK + "url": "zk1", ZK + "port": "2185",
         "hoodie.write.concurrency.mode": "single_writer", "hoodie.cleaner.policy.failed.writes": "EAGER",
         "hoodie.occ.writer.labels": "{}", "hoodie.write.markers.type": "TIMELINE_SERVER_BASED",
         "hoodie.metadata.enable": "false"},
        writer_id="airflow:d.t.-1:r:try1:attempt2", batch_key="java/2024-01-02", attempt=2, checkpoint="cp-7")
    assert opts["hoodie.write.lock.provider"] == "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider"
    assert opts[ZK + "url"] == "zk1:2185"
    assert opts["hoodie.write.concurrency.mode"] == "optimistic_concurrency_control"
    assert opts["hoodie.clean.failed.writes.policy"] == "LAZY"
    assert "hoodie.cleaner.policy.failed.writes" not in opts  # the alias would fight the key
    assert "hoodie.occ.writer.labels" not in opts
    assert opts["hoodie.write.markers.type"] == "TIMELINE_SERVER_BASED"  # the user's choice stays
    assert opts["hoodie.write.concurrency.early.conflict.detection.enable"] == "true"
    assert opts["hoodie.datasource.write.commitmeta.key.prefix"] == "airflow_hudi_occ."
    assert opts[EXTRA_WRITER_ID] == "airflow:d.t.-1:r:try1:attempt2"
    assert opts[EXTRA_BATCH_KEY] == "java/2024-01-02"
    assert opts["airflow_hudi_occ.checkpoint"] == "cp-7" and opts["airflow_hudi_occ.attempt"] == "2"


def test_defaults_file_is_private_one_line_a_key_and_removed():
    folder = java_job.DefaultsFolder({"b": "2", "a": "x y=z"})
    path = os.path.join(folder.path, java_job.DEFAULTS_FILE)
    try:
        assert open(path).read() == "a=x y=z\nb=2\n"
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(folder.path).st_mode) == 0o700
    finally:
        folder.remove()
    assert not os.path.exists(folder.path)
    with pytest.raises(ValueError, match="line break"):
        java_job.render_defaults({"k": "one\ntwo"})


def test_a_conflict_is_read_with_both_instants_this_writer_first():
    f = java_job.read_failure(CONFLICT_LINES)
    assert f.conflict and f.java_class == java_job.WRITE_CONFLICT
    assert (f.instant, f.other_instant) == ("20261127124247024", "20261127124341494")
    assert f.message.startswith("java.util.ConcurrentModificationException: Cannot resolve")


def test_an_early_conflict_is_a_conflict():
    f = java_job.read_failure([": org.apache.hudi.exception.HoodieEarlyConflictDetectionException: "
                               "java.util.ConcurrentModificationException: Early conflict detected but cannot "
                               "resolve conflicts for overlapping writes"])
    assert f.conflict and f.java_class == java_job.EARLY_CONFLICT and f.instant is None


def test_another_failure_quotes_the_jobs_own_exception():
    f = java_job.read_failure([
        "py4j.protocol.Py4JJavaError: An error occurred while calling o71.save.",
        ": org.apache.hudi.exception.HoodieException: Config conflict(key\tcurrent value\texisting value):",
        "\tat org.apache.hudi.HoodieWriterUtils$.validateTableConfig(HoodieWriterUtils.scala:229)"])
    assert not f.conflict
    assert (f.java_class, f.message) == ("org.apache.hudi.exception.HoodieException",
                                         "Config conflict(key\tcurrent value\texisting value):")
    py = java_job.read_failure(["Traceback (most recent call last):", '  File "job.py", line 3',
                                "FileNotFoundError: [Errno 2] No such file: '/in.json'"])
    assert py.java_class == "FileNotFoundError" and "No such file" in py.message


def test_the_commit_is_found_by_the_writer_id_it_carries(tmp_path):
    path = str(tmp_path / "t")
    t = Table.create(path, "t", record_key_fields=["id"], partition_fields=[], version=9)
    rows = pa.table({"id": pa.array([1], pa.int64()), "v": ["x"]})
    inst = ArrowTableWriter(t, WriteConfig.from_options({"hoodie.metadata.enable": "false"}),
                            writer_id="w-1").write(rows, "insert").instant
    found, meta = java_job.find_writer_commit(path, None, "w-1")
    assert found.requested_time == inst.requested_time and meta.extra_metadata[EXTRA_WRITER_ID] == "w-1"
    assert java_job.find_writer_commit(path, None, "w-2") == (None, None)
    assert java_job.find_writer_commit(str(tmp_path / "none"), None, "w-1") == (None, None)


def test_the_running_instant_is_read_from_hudis_heartbeat_line():
    # the line as Hudi 1.2.0's HoodieHeartbeatClient logs it, in the quiet layout
    line = ("26/11/27 13:20:41 INFO HoodieHeartbeatClient: Received request to start heartbeat for "
            "instant time 20261127132041123")
    assert java_job.began_instant(line) == "20261127132041123"
    assert java_job.began_instant("26/11/27 13:20:41 WARN SparkContext: anything") is None


def test_the_drivers_log4j2_file_keeps_the_quiet_root_and_lets_the_heartbeat_line_through():
    folder = java_job.DefaultsFolder({"k": "v"})
    try:
        text = open(folder.log4j2).read()
        assert "rootLogger.level = warn" in text
        assert f"logger.hudi_begin.name = {java_job.HEARTBEAT_LOGGER}\nlogger.hudi_begin.level = info" in text
    finally:
        folder.remove()


def test_a_failure_names_the_causes_java_wrapped():
    # Hudi 1.2.0's output for a clustering plan strategy class that does not exist
    f = java_job.read_failure([
        "py4j.protocol.Py4JJavaError: An error occurred while calling o64.scheduleClustering.",
        ": org.apache.hudi.exception.HoodieException: Unable to load class",
        "\tat org.apache.hudi.common.util.ReflectionUtils.getClass(ReflectionUtils.java:58)",
        "Caused by: java.lang.ClassNotFoundException: no.such.Strategy",
        "\tat java.base/java.net.URLClassLoader.findClass(URLClassLoader.java:445)"])
    assert f.java_class == "org.apache.hudi.exception.HoodieException"
    assert f.message == "Unable to load class; caused by java.lang.ClassNotFoundException: no.such.Strategy"


def test_occ_options_are_the_writers_without_the_attempt_stamp():
    opts = java_job.occ_options({"hoodie.write.lock.provider": "filesystem", "hoodie.occ.writer.labels": "{}",
                                 "hoodie.clean.commits.retained": "1"})
    assert opts["hoodie.write.lock.provider"] == \
        "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider"
    assert opts["hoodie.clean.failed.writes.policy"] == "LAZY"
    assert opts["hoodie.clean.commits.retained"] == "1" and "hoodie.occ.writer.labels" not in opts
    assert java_job.COMMITMETA_PREFIX_KEY not in opts and EXTRA_WRITER_ID not in opts


def test_a_java_job_leaves_conflict_retries_to_the_operator():
    """Hudi's retry key is the operator's budget (one fresh attempt per job): the job itself
    gets 0, or it would retry inside each attempt too."""
    opts = java_job.occ_options({"hoodie.write.num.retries.on.conflict.failures": "3"})
    assert opts["hoodie.write.num.retries.on.conflict.failures"] == "0"


def test_the_java_setup_takes_the_operator_over_the_connection(tmp_path, monkeypatch):
    extras = {"java": {"spark_submit": "/conn/spark-submit", "bundle": "/conn/hudi.jar", "python": "/conn/py"}}
    setup = java_job.JavaSetup.resolve(extras, spark_submit="/op/spark-submit", python=None, spark_home=None,
                                       bundle=None)
    assert (setup.spark_submit, setup.bundle, setup.python) == ("/op/spark-submit", "/conn/hudi.jar", "/conn/py")
    assert setup.bundle_conf({}) == ("/conn/hudi.jar", None)
    with pytest.raises(ValueError, match="JSON object"):
        java_job.JavaSetup.resolve({"java": "/opt/spark"})
    # no bundle anywhere: none where Spark's own defaults name jars, else Hudi's Maven bundle
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    bare = java_job.JavaSetup.resolve({})
    assert bare.bundle_conf({}) == (None, java_job.DEFAULT_BUNDLE)
    assert bare.bundle_conf({"spark.jars.packages": "x:y:1"}) == (None, None)
    (tmp_path / "spark-defaults.conf").write_text("spark.jars /opt/hudi.jar\n")
    assert bare.bundle_conf({}) == (None, None)
    folder = java_job.DefaultsFolder({"k": "v"})
    try:
        env = setup.env({"X": 1}, folder)
        assert env == {"PYSPARK_PYTHON": "/conn/py", "PYSPARK_DRIVER_PYTHON": "/conn/py", "X": "1",
                       java_job.CONF_DIR_ENV: folder.path}
        conf = java_job.driver_conf({"spark.driver.extraJavaOptions": "-Xss4m"}, folder)
        assert conf["spark.driver.extraJavaOptions"] == f"-Xss4m -Dlog4j2.configurationFile=file:{folder.log4j2}"
        own = {"spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=file:/mine"}
        assert java_job.driver_conf(own, folder) == own  # the user's log4j stays theirs
    finally:
        folder.remove()


def test_a_services_outcome_is_read_from_the_timeline(tmp_path):
    """What a service did, from two timeline loads (the services here are ours: the reading is
    the same for Java's instants, which the operator tests make)."""
    from airflow_hudi_occ.core.commit.archival import run_archival
    from airflow_hudi_occ.core.services.clean import run_clean

    opts = {"hoodie.metadata.enable": "false", "hoodie.clean.commits.retained": "1",
            "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3", "hoodie.archive.automatic": "false"}
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=[], version=9)
    w = ArrowTableWriter(t, WriteConfig.from_options(opts))
    for k in range(5):
        w.write(pa.table({"id": pa.array([1], pa.int64()), "v": [f"x{k}"]}), "upsert")
    before = t.timeline()
    assert java_job.service_outcome(before, t.timeline(), "clean") == {"rolled_back": []}
    run_clean(t, WriteConfig.from_options(opts))
    out = java_job.service_outcome(before, t.timeline(), "clean")
    cleans = [i for i in t.timeline().completed() if i.action.value == "clean"]
    assert out["instant"] == cleans[-1].requested_time and out["completion_time"] == cleans[-1].completion_time
    before = t.timeline()
    run_archival(t, WriteConfig.from_options(opts))
    after = t.timeline()
    out = java_job.service_outcome(before, after, "archive")
    assert out["archived"] and not set(out["archived"]) & {i.requested_time for i in after.instants}
    assert set(out["archived"]) <= {i.requested_time for i in before.completed()}


def test_an_s3_connection_reaches_java_as_hadoop_s3a_settings_credentials_off_the_command_line():
    so = {"key": "AK", "secret": "SK", "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000",
                                                         "region_name": "us-east-1"}}
    conf, env = java_job.hadoop_store_settings("s3://tables/t", so)
    assert conf == {"spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
                    "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
                    "spark.hadoop.fs.s3a.path.style.access": "true",
                    "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
                    "spark.hadoop.fs.s3a.endpoint.region": "us-east-1"}
    assert env == {"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK"}
    assert "SK" not in " ".join(f"{k}={v}" for k, v in conf.items())
    assert java_job.hadoop_store_settings("/local/t", so) == ({}, {})
    assert java_job.hadoop_store_settings("s3a://b/t", {}) == ({}, {})  # instance roles: nothing to add
    folder = java_job.DefaultsFolder({"k": "v"})
    try:
        setup = java_job.JavaSetup(bundle="/j/hudi.jar", jars="/j/hadoop-aws.jar,/j/sdk.jar")
        got = setup.job_settings({"spark.hadoop.fs.s3a.path.style.access": "false"}, {"AWS_SECRET_ACCESS_KEY": "mine"},
                                 folder, table_path="s3a://tables/t", storage_options=so)
        assert got["jars"] == "/j/hudi.jar,/j/hadoop-aws.jar,/j/sdk.jar" and got["packages"] is None
        assert got["conf"]["spark.hadoop.fs.s3a.path.style.access"] == "false"  # the user's conf wins
        assert got["conf"]["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
        assert got["env_vars"]["AWS_SECRET_ACCESS_KEY"] == "mine" and got["env_vars"]["AWS_ACCESS_KEY_ID"] == "AK"
        maven = java_job.JavaSetup(jars=["/j/hadoop-aws.jar"]).bundle_conf({})
        assert maven == ("/j/hadoop-aws.jar", java_job.DEFAULT_BUNDLE)
    finally:
        folder.remove()
