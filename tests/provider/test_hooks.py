"""Hooks: options built from connections (as Airflow resolves them from AIRFLOW_CONN_*)."""

import json

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
