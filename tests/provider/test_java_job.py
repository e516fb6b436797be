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
