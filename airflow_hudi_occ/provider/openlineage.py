"""OpenLineage for the provider's operators: what a write read and wrote, and what it committed.

The operators' ``get_openlineage_facets_on_complete`` return :func:`write_lineage` /
:func:`service_lineage`: the source dataset of a write as input, the table as output (its
schema from the commit, rowCount and size from the commit's write stats) and a run facet
``hudi_occ`` (instant, operation, conflict retries). Datasets are named by OpenLineage's
conventions for files and object stores (namespace ``file`` or ``<scheme>://<bucket>``, name
the path), so they meet the events Spark's own OpenLineage listener sends about the same
files.

Errors: lineage must never fail a task. The OpenLineage provider already calls these methods
inside its own try/except, but a broken facet would still lose the whole event; every
builder here catches, logs with the cause, and returns what it could build (at worst an
empty ``OperatorLineage``). Nothing here is imported unless the OpenLineage provider is
installed.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from typing import Any

import attr

log = logging.getLogger(__name__)

#: the ``_schemaURL`` of the hudi_occ run facet. The schema ships with the package
#: (airflow_hudi_occ/provider/schemas/HudiOccRunFacet.json) and is published nowhere, so it is
#: named by a URN rather than by a URL that would not answer.
RUN_FACET_SCHEMA_URL = "urn:airflow-hudi-occ:schemas:HudiOccRunFacet.json#/$defs/HudiOccRunFacet"

# Hudi's Avro primitive types -> the type names the OpenLineage schema facet usually carries
_AVRO_TYPES = {"string": "string", "int": "int", "long": "long", "float": "float",
               "double": "double", "boolean": "boolean", "bytes": "binary", "null": "null"}


def dataset_namespace_and_name(path: str) -> tuple[str, str]:
    """OpenLineage naming of a path: local ``("file", "/abs/path")``; object stores and HDFS
    ``("<scheme>://<bucket or host>", "<key>")`` (``s3a`` written as ``s3``, as Spark's
    integration does)."""
    split = urllib.parse.urlsplit(str(path))
    scheme = split.scheme.lower()
    if not scheme or len(scheme) == 1 or scheme in ("file", "local"):
        p = split.path if scheme else str(path)
        return "file", "/" + "/".join(s for s in p.split("/") if s)
    if scheme in ("s3a", "s3n"):
        scheme = "s3"
    if scheme == "gcs":
        scheme = "gs"
    name = "/".join(s for s in split.path.split("/") if s)
    return f"{scheme}://{split.netloc}", name or "/"


def dataset_for_path(path: str, facets: dict | None = None):
    from airflow.providers.common.compat.openlineage.facet import Dataset

    ns, name = dataset_namespace_and_name(path)
    return Dataset(namespace=ns, name=name, facets=facets or {})


def _facet_classes():
    from airflow.providers.common.compat.openlineage.facet import (OutputStatisticsOutputDatasetFacet,
                                                                    RunFacet, SchemaDatasetFacet,
                                                                    SchemaDatasetFacetFields)
    return OutputStatisticsOutputDatasetFacet, RunFacet, SchemaDatasetFacet, SchemaDatasetFacetFields


def schema_facet(avro_schema: str | None):
    """The schema facet of a table from the Avro schema its commit recorded (Hudi keeps the
    writer schema in every commit's extra metadata); None without one."""
    if not avro_schema:
        return None
    _, _, SchemaDatasetFacet, Field = _facet_classes()
    doc = json.loads(avro_schema)
    fields = []
    for f in doc.get("fields") or []:
        t = f.get("type")
        if isinstance(t, list):  # a union with null: nullable
            t = next((x for x in t if x != "null"), "null")
        if isinstance(t, dict):
            t = t.get("logicalType") or t.get("type") or "record"
        fields.append(Field(name=f["name"], type=_AVRO_TYPES.get(str(t), str(t))))
    return SchemaDatasetFacet(fields=fields)


def run_facet_class():
    """``HudiOccRunFacet``, made once the OpenLineage classes are importable."""
    global _RUN_FACET
    if _RUN_FACET is None:
        _, RunFacet, _, _ = _facet_classes()

        @attr.define
        class HudiOccRunFacet(RunFacet):
            """What one Hudi OCC task run did: its instant, operation and conflict retries."""

            instant: str | None = attr.field(default=None)
            completionTime: str | None = attr.field(default=None)  # noqa: N815 - OpenLineage spells camelCase
            operation: str | None = attr.field(default=None)
            outcome: str | None = attr.field(default=None)
            conflictRetries: int = attr.field(default=0)  # noqa: N815
            attempts: int = attr.field(default=0)
            batchKey: str | None = attr.field(default=None)  # noqa: N815
            tableUri: str | None = attr.field(default=None)  # noqa: N815

            @staticmethod
            def _get_schema() -> str:
                return RUN_FACET_SCHEMA_URL

        _RUN_FACET = HudiOccRunFacet
    return _RUN_FACET


_RUN_FACET = None


def _lineage(inputs: list, outputs: list, run_facets: dict):
    from airflow.providers.common.compat.openlineage.facet import InputDataset

    from airflow.providers.openlineage.extractors import OperatorLineage
    ins = [InputDataset(namespace=d.namespace, name=d.name, facets=d.facets) for d in inputs]
    return OperatorLineage(inputs=ins, outputs=outputs, run_facets=run_facets)


def table_output(table_path: str, commit: dict | None):
    """The table as an output dataset: schema from the commit, rowCount/size from its stats."""
    Stats, _, _, _ = _facet_classes()
    facets: dict[str, Any] = {}
    commit = commit or {}
    try:
        sf = schema_facet(commit.get("schema"))
        if sf is not None:
            facets["schema"] = sf
    except Exception:  # noqa: BLE001 - a schema we cannot read costs the facet, not the event
        log.warning("OpenLineage: could not read the schema of %s", table_path, exc_info=True)
    output_facets: dict[str, Any] = {}
    if commit.get("rows_written") is not None:
        output_facets["outputStatistics"] = Stats(rowCount=int(commit["rows_written"]),
                                                  size=int(commit.get("bytes_written") or 0),
                                                  fileCount=int(commit.get("files_written") or 0))
    from airflow.providers.common.compat.openlineage.facet import OutputDataset
    ns, name = dataset_namespace_and_name(table_path)
    return OutputDataset(namespace=ns, name=name, facets=facets, outputFacets=output_facets)


def write_lineage(*, source: str | None, source_format: str | None, table_path: str | None,
                  summary: dict | None):
    """The OperatorLineage of a write (``summary``: what the operator recorded at the end)."""
    try:
        inputs = []
        if source and source_format != "sql":
            inputs.append(dataset_for_path(source))
        outputs = [table_output(table_path, summary)] if table_path else []
        return _lineage(inputs, outputs, _run_facets(summary))
    except Exception:  # noqa: BLE001 - lineage must never fail the task
        log.warning("OpenLineage: could not build the lineage of the write to %s", table_path,
                    exc_info=True)
        return _empty()


def service_lineage(*, table_path: str | None, summary: dict | None):
    """The OperatorLineage of a table service: the table is both read and written."""
    try:
        if not table_path:
            return _empty()
        outputs = [table_output(table_path, summary)]
        return _lineage([dataset_for_path(table_path)], outputs, _run_facets(summary))
    except Exception:  # noqa: BLE001 - lineage must never fail the task
        log.warning("OpenLineage: could not build the lineage of the service on %s", table_path,
                    exc_info=True)
        return _empty()


def _run_facets(summary: dict | None) -> dict:
    if not summary:
        return {}
    cls = run_facet_class()
    return {"hudi_occ": cls(instant=summary.get("instant"),
                            completionTime=summary.get("completion_time"),
                            operation=summary.get("operation"), outcome=summary.get("outcome"),
                            conflictRetries=int(summary.get("conflict_retries") or 0),
                            attempts=int(summary.get("attempts") or 0),
                            batchKey=summary.get("batch_key"), tableUri=summary.get("table_uri"))}


def _empty():
    from airflow.providers.openlineage.extractors import OperatorLineage
    return OperatorLineage()


def inject_parent_job(conf: dict, context) -> dict:
    """``conf`` with OpenLineage's parent-job properties for Spark (so the Spark integration,
    where the job has it, links its run to this task's), when the OpenLineage provider has the
    helper and OpenLineage is enabled (configured with a transport); ``conf`` unchanged
    otherwise, and on any error.

    Unlike the Spark provider's operators, this does not wait for ``[openlineage]
    spark_inject_parent_job_info``: these operators always run a Spark job of their own, and
    ``spark.openlineage.*`` properties are inert where Spark has no OpenLineage listener."""
    try:
        from airflow.providers.openlineage.conf import is_disabled
        from airflow.providers.openlineage.utils.spark import (
            inject_parent_job_information_into_spark_properties)
    except ImportError:
        return conf
    try:
        if is_disabled():
            return conf
        return inject_parent_job_information_into_spark_properties(dict(conf), context)
    except Exception:  # noqa: BLE001 - lineage must never fail the task
        log.warning("OpenLineage: could not add the parent job to the Spark properties",
                    exc_info=True)
        return conf
