"""The job refuses bad input before its Spark session starts, and writes nothing.

Proof that no session was started: the job runs with ``JAVA_HOME`` pointing nowhere and no
``java`` on PATH, so a Spark start would fail with a Java error instead of the answer checked
here. Proof that nothing was written: the table (or folder) is byte-for-byte as before.
"""

import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.job_protocol import EXIT_ERROR, EXIT_USAGE, last_payload
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import tree_snapshot

KEYS = {"hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "day"}


def run_job(args):
    env = {"PATH": os.path.dirname(sys.executable), "JAVA_HOME": "/nonexistent-java",
           "HOME": os.environ.get("HOME", "/tmp")}
    p = subprocess.run([sys.executable, "-m", "airflow_hudi_occ.spark.job", *args], env=env,
                       capture_output=True, text=True, timeout=120)
    return p.returncode, last_payload(p.stdout), p.stdout + p.stderr


@pytest.fixture
def table(tmp_path):
    t = Table.create(str(tmp_path / "orders"), "orders", record_key_fields=["id"], partition_fields=["day"])
    ArrowTableWriter(t, WriteConfig()).write(pa.table({"id": [1, 2], "day": ["d1", "d2"], "v": ["a", "b"]}))
    return str(tmp_path / "orders")


@pytest.fixture
def batch(tmp_path):
    (tmp_path / "landing").mkdir()
    pq.write_table(pa.table({"id": [3], "day": ["d1"], "v": ["c"]}), tmp_path / "landing" / "b.parquet")
    return str(tmp_path / "landing")


def options(**extra):
    return [a for k, v in {**KEYS, **extra}.items() for a in ("--option", f"{k}={v}")]


@pytest.mark.parametrize("case", ["operation", "missing_source", "misspelt_key", "lock_provider", "mor",
                                  "remote_token", "conf"])
def test_bad_input_is_refused_before_spark_and_the_table_is_unchanged(case, table, batch, tmp_path):
    args = ["--table", table, "--source", batch, *options()]
    want_code, want_error, words = EXIT_ERROR, "ConfigError", []
    if case == "operation":
        args += ["--operation", "upsertt"]
        want_code, want_error = EXIT_USAGE, "UsageError"
        words = ["argument --operation: invalid choice: 'upsertt'", "'upsert'"]
    elif case == "missing_source":
        args[3] = str(tmp_path / "landing" / "2024-01-02")
        want_error, words = "SourceNotFoundError", ["does not exist", "2024-01-02"]
    elif case == "misspelt_key":
        args += options(**{"hoodie.write.lock.providr": "zookeeper"})
        words = ["unknown option 'hoodie.write.lock.providr'", "did you mean 'hoodie.write.lock.provider'"]
    elif case == "lock_provider":
        args += options(**{"hoodie.write.lock.provider": "zookeepr"})
        want_error, words = "UnknownLockProviderError", ["'zookeepr'", "did you mean 'zookeeper'"]
    elif case == "remote_token":  # a Spark Connect token on the command line: readable by all
        args += ["--remote", "sc://spark.example:15002/;token=s3cr3t"]
        want_code, want_error = EXIT_USAGE, "UsageError"
        words = ["--remote carries a token", "$SPARK_REMOTE"]
    elif case == "conf":
        args += ["--remote", "sc://127.0.0.1:1", "--conf", "spark.sql.shuffle.partitions"]
        want_code, want_error = EXIT_USAGE, "UsageError"
        words = ["--conf expects KEY=VALUE"]
    elif case == "mor":
        args += options(**{"hoodie.datasource.write.table.type": "MERGE_ON_READ",
                           "hoodie.index.type": "BUCKET"})
        words = ["merge-on-read"]
    before = tree_snapshot(table)
    code, result, out = run_job(args)
    assert code == want_code, out
    assert result["outcome"] == "error" and result["error"]["error"] == want_error, out
    for w in words:
        assert w in result["error"]["message"], result
    assert result["error"]["remedy"]
    assert "JAVA_HOME" not in out and "Java gateway" not in out
    assert tree_snapshot(table) == before


def test_a_folder_of_plain_parquet_files_is_not_adopted(batch, tmp_path):
    folder = tmp_path / "plain"
    (folder / "day=d1").mkdir(parents=True)
    pq.write_table(pa.table({"id": [9]}), folder / "day=d1" / "part-0.parquet")
    before = tree_snapshot(folder)
    code, result, out = run_job(["--table", str(folder), "--source", batch, *options()])
    assert code == EXIT_ERROR and result["error"]["error"] == "TableLocationNotEmptyError", out
    assert "not a Hudi table and not empty" in result["error"]["message"]
    assert result["error"]["entries"] == ["day=d1"]
    assert tree_snapshot(folder) == before


@pytest.mark.parametrize("case", ["metadata_table", "downgrade", "foreign_metadata_table"])
def test_a_table_this_write_cannot_write_is_refused_before_spark(case, tmp_path):
    """A Java table with an enabled metadata table holding a record index (default
    hoodie.metadata.enable), a version 9 table asked to be written as 8, or one whose metadata
    table is another table's (issue 40 item 7): refused in a second, the table byte-for-byte as
    before."""
    from airflow_hudi_occ.testing.tables import java_fixture
    path = java_fixture("v9_txns_simple_overwrite", tmp_path / "java")
    (tmp_path / "landing").mkdir()
    pq.write_table(pa.table({"txn_id": ["N"], "region": ["us"], "txn_ts": [1]}), tmp_path / "landing" / "b.parquet")
    args = ["--table", str(path), "--source", str(tmp_path / "landing"),
            "--option", "hoodie.datasource.write.recordkey.field=txn_id",
            "--option", "hoodie.datasource.write.partitionpath.field=region"]
    want, words = "UnmaintainedMetadataPartitionsError", ["metadata table", "record_index"]
    if case == "downgrade":
        args += ["--option", "hoodie.metadata.enable=false", "--option", "hoodie.write.table.version=8",
                 "--option", "hoodie.occ.metadata.delete.unmaintained=true"]
        want, words = "UnsupportedTableVersionError", ["downgrade"]
    if case == "foreign_metadata_table":
        import shutil
        Table.open(str(path)).update_properties({"hoodie.table.metadata.partitions": "files"})
        java_fixture("v9_files_metadata_actions", tmp_path / "other")
        shutil.rmtree(path / ".hoodie" / "metadata")
        shutil.copytree(tmp_path / "other" / "copy_on_write" / ".hoodie" / "metadata", path / ".hoodie" / "metadata")
        want, words = "ForeignMetadataTableError", ["belongs to another table", str(path / ".hoodie" / "metadata")]
    before = tree_snapshot(path)
    code, result, out = run_job(args)
    assert code == EXIT_ERROR and result["error"]["error"] == want, out
    for w in words:
        assert w in result["error"]["message"], result
    assert result["error"]["remedy"]
    assert tree_snapshot(path) == before
