"""OpenLineage: the write and service operators' facets, checked on their own and in the
events the OpenLineage provider sends from a real ``airflow dags test`` run (file transport),
validated with jsonschema.

No installed package ships OpenLineage's own ``OpenLineage.json`` (openlineage-python is
generated from it but carries only the classes), and the tests use no network: the events are
validated against ``EVENT_SCHEMA`` below, the parts of the OpenLineage 2-0-2 RunEvent model
and of the schema / outputStatistics facets these operators produce (required fields, types,
formats), and the ``hudi_occ`` run facet against the schema the package ships."""

import json
import os

import jsonschema
import pyarrow as pa
import pytest

from airflow_hudi_occ.core import ArrowTableWriter, Table, WriteConfig
from airflow_hudi_occ.provider import assets
from airflow_hudi_occ.provider import openlineage as ol

from .conftest import asset_event_extras, finish

OPTS = {"hoodie.write.lock.provider": "filesystem", "hoodie.time.generator.max_expected_clock_skew_ms": "2"}
RUN_FACET_SCHEMA = json.load(open(os.path.join(os.path.dirname(ol.__file__), "schemas", "HudiOccRunFacet.json")))

_FACET = {"type": "object", "required": ["_producer", "_schemaURL"],
          "properties": {"_producer": {"type": "string", "format": "uri"},
                         "_schemaURL": {"type": "string", "format": "uri"}}}
_FACETS = {"type": "object", "additionalProperties": {"$ref": "#/$defs/Facet"}}
EVENT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$defs": {
        "Facet": _FACET,
        "Dataset": {"type": "object", "required": ["namespace", "name"],
                    "properties": {"namespace": {"type": "string", "minLength": 1},
                                   "name": {"type": "string", "minLength": 1},
                                   "facets": {
                                       **_FACETS,
                                       "properties": {"schema": {"allOf": [{"$ref": "#/$defs/Facet"}, {
                                           "type": "object", "required": ["fields"],
                                           "properties": {"fields": {"type": "array", "items": {
                                               "type": "object", "required": ["name"],
                                               "properties": {"name": {"type": "string"},
                                                              "type": {"type": "string"}}}}}}]}}},
                                   "inputFacets": _FACETS,
                                   "outputFacets": {
                                       **_FACETS,
                                       "properties": {"outputStatistics": {"allOf": [{"$ref": "#/$defs/Facet"}, {
                                           "type": "object", "required": ["rowCount"],
                                           "properties": {"rowCount": {"type": "integer", "minimum": 0},
                                                          "size": {"type": "integer", "minimum": 0},
                                                          "fileCount": {"type": "integer", "minimum": 0}}}]}}}}},
    },
    "type": "object",
    "required": ["eventTime", "producer", "schemaURL", "run", "job"],
    "properties": {
        "eventType": {"enum": ["START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"]},
        "eventTime": {"type": "string", "format": "date-time"},
        "producer": {"type": "string", "format": "uri"},
        "schemaURL": {"type": "string", "format": "uri"},
        "run": {"type": "object", "required": ["runId"],
                "properties": {"runId": {"type": "string", "format": "uuid"}, "facets": _FACETS}},
        "job": {"type": "object", "required": ["namespace", "name"],
                "properties": {"namespace": {"type": "string"}, "name": {"type": "string"},
                               "facets": _FACETS}},
        "inputs": {"type": "array", "items": {"$ref": "#/$defs/Dataset"}},
        "outputs": {"type": "array", "items": {"$ref": "#/$defs/Dataset"}},
    },
}
FORMATS = jsonschema.Draft202012Validator.FORMAT_CHECKER


def validate_event(doc: dict) -> None:
    jsonschema.Draft202012Validator(EVENT_SCHEMA, format_checker=FORMATS).validate(doc)
    for name, facet in (doc["run"].get("facets") or {}).items():
        if name == "hudi_occ":
            jsonschema.Draft202012Validator(
                {**RUN_FACET_SCHEMA["$defs"]["HudiOccRunFacet"], "$defs": RUN_FACET_SCHEMA["$defs"]},
                format_checker=FORMATS).validate(facet)


def serialise(lineage) -> dict:
    """The lineage as the OpenLineage client writes it in a COMPLETE event."""
    from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
    from openlineage.client.serde import Serde
    from openlineage.client.uuid import generate_new_uuid
    ev = RunEvent(eventType=RunState.COMPLETE, eventTime="2026-11-25T10:00:00.000Z",
                  run=Run(runId=str(generate_new_uuid()), facets=lineage.run_facets),
                  job=Job(namespace="default", name="d.t"), inputs=lineage.inputs,
                  outputs=lineage.outputs, producer="https://example.invalid/producer")
    return json.loads(Serde.to_json(ev))


@pytest.mark.parametrize("path, ns, name", [
    ("/staging/run 1/batch.parquet", "file", "/staging/run 1/batch.parquet"),
    ("file:///staging//b.parquet", "file", "/staging/b.parquet"),
    ("s3a://bucket/raw/b.parquet", "s3://bucket", "raw/b.parquet"),
    ("gs://bucket/t", "gs://bucket", "t"),
    ("hdfs://nn:8020/w/t", "hdfs://nn:8020", "w/t"),
])
def test_dataset_naming_follows_openlineage_conventions(path, ns, name):
    assert ol.dataset_namespace_and_name(path) == (ns, name)


def test_write_lineage_from_a_real_commit_is_valid(tmp_path):
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"])
    r = ArrowTableWriter(t, WriteConfig.from_options(OPTS)).write(
        pa.table({"id": [1, 2, 3], "p": ["a", "a", "b"], "ts": [1, 1, 1], "name": ["x", None, "z"]}), "upsert")
    summary = assets.commit_summary(t.base_uri, None, instant=r.instant.requested_time, operation="upsert",
                                    outcome="committed", conflict_retries=2, attempts=3, batch_key="b")
    lin = ol.write_lineage(source="/staging/b.parquet", source_format="parquet", table_path=t.base_uri,
                           summary=summary)
    doc = serialise(lin)
    validate_event(doc)
    assert doc["inputs"] == [{"namespace": "file", "name": "/staging/b.parquet", "facets": {},
                              "inputFacets": {}}]
    out = doc["outputs"][0]
    assert (out["namespace"], out["name"]) == ("file", f"{tmp_path}/t")
    fields = {f["name"]: f["type"] for f in out["facets"]["schema"]["fields"]}
    assert {"id": "long", "p": "string", "ts": "long", "name": "string"}.items() <= fields.items()
    assert out["outputFacets"]["outputStatistics"]["rowCount"] == 3
    assert out["outputFacets"]["outputStatistics"]["size"] == summary["bytes_written"] > 0
    facet = doc["run"]["facets"]["hudi_occ"]
    assert (facet["instant"], facet["operation"], facet["conflictRetries"], facet["attempts"]) == (
        r.instant.requested_time, "upsert", 2, 3)
    assert facet["tableUri"] == f"hudi://file{tmp_path}/t"
    # a SQL source is no dataset
    assert ol.write_lineage(source="select 1", source_format="sql", table_path=t.base_uri,
                            summary=summary).inputs == []


def test_lineage_failures_never_raise(caplog):
    # a summary whose schema is not JSON: the facet is lost, the event is not
    lin = ol.write_lineage(source="/s", source_format="parquet", table_path="/t",
                           summary={"instant": "1", "operation": "upsert", "schema": "{not json",
                                    "rows_written": 1})
    assert "schema" not in lin.outputs[0].facets and lin.outputs[0].outputFacets["outputStatistics"].rowCount == 1
    assert "could not read the schema" in caplog.text
    # anything worse: an empty lineage, logged
    lin = ol.write_lineage(source="/s", source_format="parquet", table_path="/t",
                           summary={"instant": "1", "conflict_retries": "many"})
    assert (lin.inputs, lin.outputs, lin.run_facets) == ([], [], {})
    assert "could not build the lineage" in caplog.text
    assert ol.inject_parent_job({"a": "b"}, context=None) == {"a": "b"}  # a broken context


@pytest.mark.slow  # ~1 min; the default run keeps the facets of a real commit and the asset e2e tests
@pytest.mark.zookeeper
@pytest.mark.timeout(900)
def test_dags_test_emits_valid_lineage_and_an_asset_event(airflow_env, tmp_path):
    """One real run of the ingestion DAG: OpenLineage events to a file, the asset event in the
    metadata database."""
    events = tmp_path / "ol-events.jsonl"
    env = {"AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(events),
                                                         "append": True}),
           "AIRFLOW__OPENLINEAGE__NAMESPACE": "hudi-occ-test", "HUDI_OCC_WRITE_WINDOW": "off"}
    p = airflow_env.dags_test("hudi_occ_ingestion", "ol-ingestion", env=env)
    log = finish(p)
    assert p.returncode == 0 and "state=success" in log, log[-4000:]

    docs = [json.loads(line) for line in events.read_text().splitlines() if line.strip()]
    for d in docs:
        validate_event(d)
    done = [d for d in docs if d.get("eventType") == "COMPLETE" and d["job"]["name"].endswith(".upsert")]
    assert len(done) == 1, [(d.get("eventType"), d["job"]["name"]) for d in docs]
    ev = done[0]
    facet = ev["run"]["facets"]["hudi_occ"]
    table = Table.open(airflow_env.table)
    inst = table.timeline().get(facet["instant"])
    assert inst is not None and inst.is_completed and facet["operation"] == "upsert"
    assert ev["outputs"][0]["namespace"] == "file" and ev["outputs"][0]["name"] == airflow_env.table
    rows = ev["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"]
    md = table.timeline().commit_metadata(inst)
    assert rows == sum(s.num_writes for s in md.write_stats()) > 0
    assert {f["name"] for f in ev["outputs"][0]["facets"]["schema"]["fields"]} >= {"id", "day", "ts"}
    assert ev["inputs"] and ev["inputs"][0]["namespace"] == "file"
    assert ev["inputs"][0]["name"].startswith(airflow_env.staging)
    # the parent-job properties went to spark-submit (the OpenLineage provider's helper)
    assert "spark.openlineage.parentJobName" in log

    out = airflow_env.airflow("assets", "details", "--uri", assets.table_uri(airflow_env.table),
                              "-o", "json", check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    extras = asset_event_extras(airflow_env, assets.table_uri(airflow_env.table))
    mine = [e for e in extras if e.get("instant") == facet["instant"]]
    assert len(mine) == 1, extras
    e = mine[0]
    assert (e["operation"], e["outcome"], e["rows_written"]) == ("upsert", "committed", rows)
    assert e["rows_inserted"] + e["rows_updated"] >= 1 and e["conflict_retries"] == 0
    assert e["table_uri"] == assets.table_uri(airflow_env.table) and "schema" not in e

