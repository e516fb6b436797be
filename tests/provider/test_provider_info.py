"""Provider packaging: provider.yaml is the single source of get_provider_info, valid against
Airflow's own schema; Airflow's CLI and ProvidersManager see the provider, its connection
forms and its asset URIs, with no warnings; provider modules take Airflow's classes from
version_compat."""

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from airflow_hudi_occ.provider import get_provider_info as gpi
from airflow_hudi_occ.provider.hooks.hudi_occ import HudiOccHook, HudiZooKeeperHook

PROVIDER = Path(gpi.__file__).parent


def test_get_provider_info_is_the_yaml_plus_the_version():
    with open(PROVIDER / "provider.yaml") as f:
        data = yaml.safe_load(f)
    from airflow_hudi_occ.provider import __version__
    assert gpi.get_provider_info() == {**data, "versions": [__version__]}


def test_get_provider_info_is_importable_without_airflow():
    # the providers manager calls it while Airflow starts: it must not import airflow
    code = ("import sys, json\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'airflow' or name.startswith('airflow.'):\n"
            "            raise ImportError('airflow imported: ' + name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "from airflow_hudi_occ.provider.get_provider_info import get_provider_info\n"
            "print(json.dumps(sorted(get_provider_info())))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(PROVIDER.parents[1])})
    assert "asset-uris" in json.loads(out.stdout)


def test_provider_info_is_valid_against_airflows_schema():
    import jsonschema
    import airflow
    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(gpi.get_provider_info(), schema)


def test_every_dotted_path_in_the_yaml_imports():
    info = gpi.get_provider_info()
    paths = [c["hook-class-name"] for c in info["connection-types"]] + info["extra-links"]
    paths += [p["plugin-class"] for p in info["plugins"]]
    for a in info["asset-uris"]:
        paths += [a["handler"], a["factory"], a["to_openlineage_converter"]]
    for p in paths:
        mod, attr = p.rsplit(".", 1)
        assert callable(getattr(importlib.import_module(mod), attr)), p


def test_the_hooks_forms_are_derived_from_the_yaml():
    for hook in (HudiOccHook, HudiZooKeeperHook):
        conn = gpi.connection_type(hook.conn_type)
        b = hook.get_ui_field_behaviour()
        assert b["hidden_fields"] == conn["ui-field-behaviour"]["hidden-fields"]
        assert b["relabeling"] == conn["ui-field-behaviour"]["relabeling"]
        # bound in the class's own body: Airflow looks in __dict__, not in the bases
        assert "get_ui_field_behaviour" in hook.__dict__ and "get_connection_form_widgets" in hook.__dict__
    assert set(gpi.connection_type("hudi_occ")["conn-fields"]) == {
        "lock_provider", "zookeeper_conn_id", "storage_options", "options"}


def test_providers_manager_declares_the_connection_forms_without_warnings(recwarn):
    from airflow.providers_manager import ProvidersManager
    pm = ProvidersManager()
    widgets = pm.connection_form_widgets
    for name in ("extra__hudi_occ__lock_provider", "extra__hudi_occ__zookeeper_conn_id",
                 "extra__hudi_occ__storage_options", "extra__hudi_occ__options",
                 "extra__hudi_zookeeper__lock_key", "extra__hudi_zookeeper__session_timeout_ms"):
        assert widgets[name].package_name == "airflow-hudi-occ", name
    assert widgets["extra__hudi_occ__lock_provider"].field["schema"]["title"] == "Lock provider"
    assert pm.field_behaviours["hudi_occ"]["hidden_fields"] == ["schema", "login", "password", "port"]
    assert pm.field_behaviours["hudi_zookeeper"]["relabeling"]["host"].startswith("ZooKeeper quorum")
    assert pm.asset_uri_handlers["hudi"].__module__ == "airflow_hudi_occ.provider.assets"
    ours = [w for w in recwarn if "hudi" in str(w.message).lower()]
    assert not ours, [str(w.message) for w in ours]


def _cli(airflow_env, *args):
    out = airflow_env.airflow(*args, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout, out.stderr


def test_airflow_cli_lists_the_provider_with_no_warnings(airflow_env):
    for args in (("providers", "list", "-o", "json"), ("providers", "get", "airflow-hudi-occ", "--full", "-o", "json"),
                 ("providers", "hooks", "-o", "json"), ("providers", "links", "-o", "json")):
        stdout, stderr = _cli(airflow_env, *args)
        noise = [ln for ln in (stdout + stderr).splitlines()
                 if re.search(r"warn|error|exception", ln, re.I) and re.search(r"hudi", ln, re.I)]
        assert not noise, (args, noise)
        if args[1] == "list":
            assert {"package_name": "airflow-hudi-occ"}.items() <= next(
                p for p in json.loads(stdout) if p["package_name"] == "airflow-hudi-occ").items()
        if args[1] == "get":
            info = json.loads(stdout)[0]
            assert info["asset-uris"][0]["schemes"] == ["hudi"] and "conn-fields" in info["connection-types"][0]
        if args[1] == "hooks":
            types = {h["connection_type"] for h in json.loads(stdout)}
            assert {"hudi_occ", "hudi_zookeeper"} <= types
        if args[1] == "links":
            assert "airflow_hudi_occ.provider.links.HudiTimelineLink" in stdout


def test_provider_modules_take_airflow_classes_from_version_compat():
    # one place to change when Airflow moves a class (Airflow's providers do the same)
    for f in PROVIDER.rglob("*.py"):
        if f.name == "version_compat.py":
            continue
        text = f.read_text()
        for cls in ("BaseOperator", "BaseHook", "BaseSensorOperator", "BaseOperatorLink", "Asset"):
            assert not re.search(rf"^from airflow\.sdk import [^\n]*\b{cls}\b", text, re.M), (f, cls)
