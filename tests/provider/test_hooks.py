"""Hooks: options built from connections (as Airflow resolves them from AIRFLOW_CONN_*)."""

import json
import os

import pytest

from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.provider.hooks.hudi_occ import HudiOccHook, HudiZooKeeperHook


def conn_env(monkeypatch, conn_id, **fields):
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


def test_zookeeper_connection_becomes_hudi_lock_keys(monkeypatch):
    conn_env(monkeypatch, "zk", conn_type="hudi_zookeeper", host="zk1:2181,zk2", port=2182,
             schema="locks/hudi", login="writer", password="s3cret-pw", extra={"lock_key": "orders"})
    conn_env(monkeypatch, "tbl", conn_type="hudi_occ", host="/lake/orders",
             extra={"lock_provider": "zookeeper", "zookeeper_conn_id": "zk",
                    "storage_options": {"anon": True},
                    "options": {"hoodie.write.lock.wait_time_ms": "5000"}})
    hook = HudiOccHook("tbl")
    assert hook.table_path == "/lake/orders" and hook.storage_options == {"anon": True}
    cfg = hook.write_config()
    assert cfg.lock.provider == "zookeeper" and cfg.lock.zk_url == "zk1:2181,zk2"
    assert cfg.lock.zk_port == 2182 and cfg.lock.zk_base_path == "/locks/hudi"
    assert cfg.lock.zk_auth == "writer:s3cret-pw" and cfg.lock.zk_lock_key == "orders"
    assert cfg.lock.wait_time_ms == 5000


def test_operator_options_override_the_connection(monkeypatch):
    conn_env(monkeypatch, "tbl", conn_type="hudi_occ", host="/lake/orders",
             extra={"lock_provider": "filesystem", "hoodie.write.lock.wait_time_ms": "5000"})
    opts = HudiOccHook("tbl", options={"hoodie.write.lock.wait_time_ms": 7}).write_options({"x.y": {"a": 1}})
    assert opts["hoodie.write.lock.wait_time_ms"] == "7" and opts["hoodie.write.lock.provider"] == "filesystem"
    assert json.loads(opts["x.y"]) == {"a": 1}


def test_missing_connection_uses_the_given_path_and_embedded_defaults():
    hook = HudiOccHook("no_such_conn_for_this_test", table_path="/tmp/t")
    assert hook.table_path == "/tmp/t" and hook.write_config().lock.provider == "filesystem"
    with pytest.raises(ConfigError, match="not found"):
        _ = HudiOccHook("no_such_conn_for_this_test").table_path


def test_bad_values_fail_naming_the_key(monkeypatch):
    with pytest.raises(ConfigError, match="hoodie.write.lock.wait_time_ms"):
        HudiOccHook(None, table_path="/t", options={"hoodie.write.lock.wait_time_ms": "soon"}).write_config()
    conn_env(monkeypatch, "zkbad", conn_type="hudi_zookeeper", host="zk1", login="u")
    with pytest.raises(ConfigError, match="no password"):
        HudiZooKeeperHook("zkbad").lock_options()


def test_zookeeper_hook_connects_to_a_real_server(monkeypatch, zk_server):
    conn_env(monkeypatch, "zkreal", conn_type="hudi_zookeeper", host=zk_server.hosts, schema="/hudi/locks")
    client = HudiZooKeeperHook("zkreal").get_conn()
    try:
        assert client.connected
    finally:
        client.stop()


def test_provider_info_names_classes_that_exist():
    import importlib

    from airflow_hudi_occ.provider.get_provider_info import get_provider_info
    info = get_provider_info()
    for ct in info["connection-types"]:
        mod, cls = ct["hook-class-name"].rsplit(".", 1)
        assert getattr(importlib.import_module(mod), cls).conn_type == ct["connection-type"]
    for section in ("hooks", "operators", "sensors", "triggers"):
        for m in info[section][0]["python-modules"]:
            importlib.import_module(m)
    assert {c["connection-type"] for c in info["connection-types"]} == {"hudi_occ", "hudi_zookeeper"}
    assert info["extra-links"] == ["airflow_hudi_occ.provider.links.HudiTimelineLink"]


def test_the_job_hook_takes_credentials_off_the_command_line_and_masks_them(monkeypatch, tmp_path):
    """No Spark: the command the hook would run, and the masker's view of a log line."""
    from airflow.sdk.log import redact

    from airflow_hudi_occ.core.job_secrets import SECRETS_FILE_ENV, read_job_secrets
    from airflow_hudi_occ.provider.hooks.hudi_occ import HudiSparkJobHook
    monkeypatch.setenv("HUDI_OCC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_STANDALONE", '{"conn_type": "spark", "host": "spark://10.0.0.1:7077"}')
    hook = HudiSparkJobHook(conn_id="spark_standalone", application_args=[
        "--table", "s3://b/t", "--option", "hoodie.write.lock.zookeeper.auth=writer:pw-Zx81",
        "--option", "hoodie.write.lock.zookeeper.url=zk:2181"],
        storage_options={"key": "AKIA-TEST", "secret": "sk-Zx81", "endpoint_url": "http://s3"})
    hook._secrets_file = "/tmp/placeholder"
    cmd = hook._build_spark_submit_command("job.py")
    line = " ".join(cmd)
    assert "pw-Zx81" not in line and "sk-Zx81" not in line and "AKIA-TEST" not in line
    assert "hoodie.write.lock.zookeeper.url=zk:2181" in line
    assert "--py-files" in cmd and cmd[cmd.index("--py-files") + 1].startswith(str(tmp_path))
    assert "spark.ui.enabled=false" in line and "spark.driver.memory" not in line  # cluster-sized
    # Spark's INFO lines out of the task log: WARN, and (client mode: the driver is here) the
    # quiet log4j2 file from spark-submit's first line on
    assert "spark.log.level=WARN" in line and "-Dlog4j2.configurationFile=file:" in line
    assert "PYSPARK_PYTHON" not in hook._env  # the cluster's interpreter for executors
    assert hook._env[SECRETS_FILE_ENV] == "/tmp/placeholder"
    for secret in ("pw-Zx81", "writer:pw-Zx81", "sk-Zx81", "AKIA-TEST"):
        assert secret not in str(redact(f"job said {secret}"))
    hook._secrets_file = None
    # run() writes the file the job reads (0600) and deletes it; here the "job" is `true`
    monkeypatch.setattr(HudiSparkJobHook, "_get_spark_binary_path", lambda self: ["true"])
    # no master at 10.0.0.1: the probe (spark/master.py) is not what this test is about
    monkeypatch.setattr("airflow_hudi_occ.provider.hooks.hudi_occ.check_master_reachable", lambda m: None)
    seen = {}
    real_submit = HudiSparkJobHook.submit

    def submit(self, application, **kw):
        path = seen["path"] = self._secrets_file
        seen["mode"] = oct(os.stat(path).st_mode & 0o777)
        seen["secrets"] = read_job_secrets({SECRETS_FILE_ENV: path}, remove=False)
        return real_submit(self, application, **kw)
    monkeypatch.setattr(HudiSparkJobHook, "submit", submit)
    assert hook.run("job.py") == 0
    assert seen["mode"] == "0o600"
    assert seen["secrets"].options == {"hoodie.write.lock.zookeeper.auth": "writer:pw-Zx81"}
    assert seen["secrets"].storage_options["secret"] == "sk-Zx81"
    assert not os.path.exists(seen["path"])  # deleted when the job ended


def test_a_missing_spark_connection_runs_local_without_claiming_yarn(monkeypatch, capfd):
    """The provider logs "Could not load connection string spark_default, defaulting to yarn"
    for a missing connection; our hook runs such a job on local[*] and must say that instead."""
    from airflow_hudi_occ.provider.hooks.hudi_occ import HudiSparkJobHook
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT", raising=False)
    hook = HudiSparkJobHook(conn_id="spark_default", ship_package=False)
    out, err = capfd.readouterr()
    assert hook.master == "local[*]" and not hook._is_yarn
    assert "no Airflow connection 'spark_default': the Spark job runs on local[*]" in out + err
    assert "defaulting to yarn" not in out + err
    assert "get_connection" not in vars(hook), "the stand-in connection is gone after resolving"
    conn_env(monkeypatch, "spark_default", conn_type="spark", host="spark://master.example", port=7077)
    assert HudiSparkJobHook(conn_id="spark_default", ship_package=False).master == "spark://master.example:7077"


def test_the_job_hook_leaves_sparks_info_lines_in_when_asked(monkeypatch, tmp_path):
    """spark_conf={"spark.log.level": "INFO"}: no quiet log4j2 file, the level as given."""
    from airflow_hudi_occ.provider.hooks.hudi_occ import HudiSparkJobHook
    monkeypatch.setenv("HUDI_OCC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL1", '{"conn_type": "spark", "host": "local[1]"}')
    hook = HudiSparkJobHook(conn_id="spark_local1", conf={"spark.log.level": "INFO"},
                            application_args=["--table", "/tmp/t"])
    line = " ".join(hook._build_spark_submit_command("job.py"))
    assert "spark.log.level=INFO" in line and "log4j2.configurationFile" not in line
