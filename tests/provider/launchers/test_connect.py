"""The Spark Connect launcher without a server: what each attempt's client process is given
(its command line, its environment, the secrets file) and how the launcher reads it back. A
stand-in interpreter (``python=``) records what it received and prints the engine's BEGIN and
RESULT lines, as ``python -m airflow_hudi_occ.spark.job`` does. The real client against a real
Spark Connect server, through the write operator: tests/spark/test_writer_connect.py."""

from __future__ import annotations

import json
import os
import socket
import stat
import sys

import pytest

from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.job_protocol import BEGIN_PREFIX, RESULT_PREFIX, format_options
from airflow_hudi_occ.core.job_secrets import SECRETS_FILE_ENV
from airflow_hudi_occ.provider.attempt_loop import WriteRun
from airflow_hudi_occ.provider.launchers.connect import JOB_MODULE, ConnectLauncher

URL = "sc://connect.example:15002/;token=s3cr3t-token"
AUTH = "hoodie.write.lock.zookeeper.auth"

#: a stand-in for the client's interpreter: what it got, then the engine's protocol lines
FAKE = """#!{python}
import json, os, sys
secrets = os.environ.get("{env}")
record = {{"argv": sys.argv[1:], "remote": os.environ.get("SPARK_REMOTE"),
           "secrets": json.load(open(secrets)) if secrets else None, "secrets_path": secrets}}
open(os.environ["FAKE_RECORD"], "w").write(json.dumps(record))
print("spark says hello")
print("{begin} " + json.dumps({{"instant": "20261129000000001", "attempt": 1}}), flush=True)
print("{result} " + json.dumps({{"outcome": "conflict", "instant": "20261129000000001"}}), flush=True)
sys.exit(75)
"""


def write_run(tmp_path) -> WriteRun:
    return WriteRun(table_path=str(tmp_path / "t"), options={"hoodie.datasource.write.recordkey.field": "id",
                                                             AUTH: "user:pw-123"},
                    storage_options={"key": "store-key"}, batch_key="dag/run/task",
                    labels={"dag_id": "d", "task_id": "t", "map_index": -1, "run_id": "r", "try_number": 1},
                    ti=None, source="/landing/x.parquet")


def test_an_attempt_gets_the_url_and_credentials_off_its_command_line_and_is_read_back(tmp_path, monkeypatch):
    fake = tmp_path / "python"
    fake.write_text(FAKE.format(python=sys.executable, env=SECRETS_FILE_ENV, begin=BEGIN_PREFIX,
                                result=RESULT_PREFIX))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("FAKE_RECORD", str(tmp_path / "record.json"))
    launcher = ConnectLauncher(remote=URL, spark_conf={"spark.sql.shuffle.partitions": "8"},
                               python=str(fake), spark_connect_conn_id=None)
    began = []
    got = launcher.run_attempt(write_run(tmp_path), 1, began.append)

    seen = json.loads((tmp_path / "record.json").read_text())
    argv = seen["argv"]
    assert argv[:4] == ["-m", JOB_MODULE, "--conf", "spark.sql.shuffle.partitions=8"]
    assert "--batch-key" in argv and argv[argv.index("--batch-key") + 1] == "dag/run/task"
    assert format_options({"hoodie.datasource.write.recordkey.field": "id"})[1] in argv
    assert not any("s3cr3t" in a or "pw-123" in a or "store-key" in a for a in argv), argv
    assert seen["remote"] == URL
    assert seen["secrets"] == {"options": {AUTH: "user:pw-123"}, "storage_options": {"key": "store-key"}}
    assert not os.path.exists(seen["secrets_path"])  # removed when the job ended
    assert got.code == 75 and got.result["outcome"] == "conflict"
    assert began and began[0]["instant"] == "20261129000000001"


def test_no_url_is_refused_naming_both_ways_to_give_one(tmp_path, monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_NO_SUCH_CONNECT", raising=False)
    with pytest.raises(ConfigError, match="no_such_connect") as e:
        ConnectLauncher(spark_connect_conn_id="no_such_connect").url()
    assert "remote=" in e.value.remedy
    with pytest.raises(ConfigError, match="sc://"):
        ConnectLauncher(remote="http://host:15002").url()


def test_the_url_comes_from_a_spark_connect_connection(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_MY_CONNECT", json.dumps(
        {"conn_type": "spark_connect", "host": "connect.example", "port": 15002, "password": "tok"}))
    assert ConnectLauncher(spark_connect_conn_id="my_connect").url() == "sc://connect.example:15002/;token=tok"


def test_a_server_that_does_not_answer_is_refused_before_a_first_write(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConfigError, match=f"127.0.0.1:{port}"):
        ConnectLauncher(remote=f"sc://127.0.0.1:{port}", spark_connect_conn_id=None).check_reachable(write_run(tmp_path))


#: a stand-in client that, on SIGTERM, takes 1.5 s to "roll back" and then says so
STOPPER = """#!{python}
import os, signal, sys, time
def stop(signum, frame):
    time.sleep(1.5)
    open(os.environ["FAKE_ROLLED_BACK"], "w").close()
    sys.exit(1)
signal.signal(signal.SIGTERM, stop)
open(os.environ["FAKE_READY"], "w").close()
time.sleep(60)
"""


@pytest.mark.parametrize("grace, rolled_back", [(0.3, False), (6.0, True)])
def test_a_deferred_client_is_given_its_launchers_grace_to_roll_back_before_sigkill(
        tmp_path, monkeypatch, grace, rolled_back):
    """The deferred attempt's record (what the trigger gets, as JSON) carries the launcher's
    grace, and its kill leaves the client that long after SIGTERM: enough, and its rollback
    ends; too little, and SIGKILL cuts it short. By default the grace is the bound of the
    job's own stop (job_protocol.stop_grace_s), not a fixed few seconds."""
    import time

    from airflow_hudi_occ.core.job_protocol import stop_grace_s
    from airflow_hudi_occ.provider.deferred_job import DetachedJob

    assert ConnectLauncher(remote=URL, spark_connect_conn_id=None).stop_grace_s() == stop_grace_s() > 30
    fake = tmp_path / "python"
    fake.write_text(STOPPER.format(python=sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    ready, done = tmp_path / "ready", tmp_path / "rolled-back"
    monkeypatch.setenv("FAKE_READY", str(ready))
    monkeypatch.setenv("FAKE_ROLLED_BACK", str(done))
    monkeypatch.setenv("HUDI_OCC_JOBS_DIR", str(tmp_path / "jobs"))
    launcher = ConnectLauncher(remote=URL, python=str(fake), spark_connect_conn_id=None, kill_grace_s=grace)
    started, _ = launcher.start(write_run(tmp_path), 1)
    job = DetachedJob.from_json(json.loads(json.dumps(started.to_json())))
    assert job.kill_grace_s == grace
    deadline = time.time() + 30
    while not ready.exists():
        assert time.time() < deadline
        time.sleep(0.05)
    assert job.kill()
    assert done.exists() is rolled_back
