"""The plugin's configured tables, its extra link and its wiring, without a server.

The HTTP behaviour (auth, traversal, the page) is tested against a real api-server in
test_ui_server.py.
"""

from __future__ import annotations

import os
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import pytest


from airflow_hudi_occ.core.errors import ConfigError  # noqa: E402
from airflow_hudi_occ.provider import links, tables_config  # noqa: E402


class _Conf:
    def __init__(self, **values):
        self.values = values

    def get(self, section, key, fallback=None):
        assert section == "hudi_occ"
        return self.values.get(key, fallback)


def test_tables_from_config_and_env_env_wins():
    cfg = tables_config.load(_Conf(tables="events=/lake/events, orders = s3://b/orders\nx=/a"),
                             {"HUDI_OCC_TABLES": "events=/other/events,y=/b"})
    assert cfg.tables == {"events": "/other/events", "orders": "s3://b/orders", "x": "/a", "y": "/b"}
    assert cfg.errors == []


@pytest.mark.parametrize("entry", ["noequals", "=/path", "a/b=/p", "..=/p", "name=", " .x=/p"])
def test_bad_entries_are_reported_not_loaded(entry):
    cfg = tables_config.load(_Conf(tables=f"ok=/p,{entry}"), {})
    assert cfg.tables == {"ok": "/p"}
    assert len(cfg.errors) == 1 and "[hudi_occ] tables" in cfg.errors[0]


def test_json_options_are_validated():
    cfg = tables_config.load(_Conf(write_options='{"hoodie.client.heartbeat.interval_in_ms": "500"}',
                                   storage_options="[1]"), {})
    assert cfg.write_options == {"hoodie.client.heartbeat.interval_in_ms": "500"}
    assert cfg.storage_options == {} and "storage_options" in cfg.errors[0]


def test_resolve_is_a_lookup_with_a_remedy():
    cfg = tables_config.TablesConfig(tables={"events": "/lake/events"})
    assert tables_config.resolve(cfg, "events") == "/lake/events"
    for name in ("../events", "/lake/events", "events/", "Events"):
        with pytest.raises(ConfigError) as ei:
            tables_config.resolve(cfg, name)
        assert "events" in ei.value.remedy and "HUDI_OCC_TABLES" in ei.value.remedy


def test_name_for_path_normalises(tmp_path):
    cfg = tables_config.TablesConfig(tables={"events": str(tmp_path / "events"), "s3t": "s3://b/t"})
    assert tables_config.name_for_path(cfg, f"file://{tmp_path}/x/../events/") == "events"
    assert tables_config.name_for_path(cfg, "s3://b/t/") == "s3t"
    assert tables_config.name_for_path(cfg, str(tmp_path / "other")) is None


def _ti(**kw):
    return SimpleNamespace(dag_id="ingest", task_id="upsert", run_id="manual__2026-01-01T00:00:00+00:00",
                           map_index=-1, try_number=1, **kw)


def _query(url):
    parts = urlsplit(url)
    assert parts.path.endswith("/hudi-occ/")
    return {k: v[0] for k, v in parse_qs(parts.query).items()}


def test_link_from_table_path_and_committed_instant(monkeypatch, tmp_path):
    monkeypatch.setenv("HUDI_OCC_TABLES", f"events={tmp_path}/events")
    monkeypatch.setattr(links, "_xcom", lambda ti_key, key: {"instant": "20260101000000123"}
                        if key == "return_value" else None)
    url = links.HudiTimelineLink().get_link(SimpleNamespace(table_path=f"{tmp_path}/events"), ti_key=_ti())
    assert _query(url) == {"table": "events", "dag_id": "ingest", "task_id": "upsert",
                           "run_id": "manual__2026-01-01T00:00:00+00:00", "instant": "20260101000000123"}
    assert "%2B" in url  # the run id's '+' is encoded, not read back as a space


def test_link_prefers_an_explicit_table_name_and_survives_no_xcom(monkeypatch):
    monkeypatch.setattr(links, "_xcom", lambda ti_key, key: None)
    op = SimpleNamespace(table_name="orders", table_path="/somewhere/else")
    q = _query(links.HudiTimelineLink().get_link(op, ti_key=_ti()))
    assert q["table"] == "orders" and "instant" not in q


def test_link_with_unconfigured_path_uses_its_last_segment(monkeypatch):
    monkeypatch.delenv("HUDI_OCC_TABLES", raising=False)
    monkeypatch.setattr(links, "_xcom", lambda ti_key, key: "20260101000000999")
    q = _query(links.HudiTimelineLink().get_link(SimpleNamespace(table_path="s3://b/lake/trips/"),
                                                 ti_key=_ti()))
    assert q["table"] == "trips" and q["instant"] == "20260101000000999"


def test_every_route_requires_an_airflow_user():
    """Auth is an app-level dependency, so a route added later cannot forget it."""
    from fastapi.routing import APIRoute

    from airflow_hudi_occ.provider.plugins.timeline import HudiOccTimelinePlugin, require_reader
    [entry] = HudiOccTimelinePlugin.fastapi_apps
    assert entry["url_prefix"] == "/hudi-occ"
    routes = [r for r in entry["app"].routes if isinstance(r, APIRoute)]
    assert {r.path for r in routes} >= {"/", "/static/{name}", "/api/tables", "/api/tables/{name}/timeline"}
    for r in routes:
        assert any(d.call is require_reader for d in r.dependant.dependencies), r.path
    views = {v["destination"]: v["href"] for v in HudiOccTimelinePlugin.external_views}
    assert views == {"nav": "/hudi-occ/", "dag": "/hudi-occ/?dag_id={DAG_ID}",
                     "task": "/hudi-occ/?dag_id={DAG_ID}&task_id={TASK_ID}",
                     "task_instance": "/hudi-occ/?dag_id={DAG_ID}&task_id={TASK_ID}&run_id={RUN_ID}"}
    assert len({v["url_route"] for v in HudiOccTimelinePlugin.external_views}) == 4
    assert [type(link).__name__ for link in HudiOccTimelinePlugin.operator_extra_links] == ["HudiTimelineLink"]
    assert links.HudiTimelineLink().name == "Hudi timeline"


def test_static_files_exist():
    from airflow_hudi_occ.provider.plugins.timeline import STATIC, WWW
    for name in ["index.html", *STATIC]:
        assert os.path.getsize(WWW / name) > 100
