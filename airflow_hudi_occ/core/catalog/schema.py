"""A commit's Avro schema as a catalog sees it: Hive column types and Spark's schema JSON.

Java's HiveSyncTool reads the table's parquet schema (Avro converted by parquet-avro) and maps
it to Hive types (``HiveSchemaUtil``) and to Spark's ``StructType`` JSON
(``Parquet2SparkSchemaUtils``), which it stores in the table properties so Spark SQL reads the
table through Hudi with the right types. The same two mappings, from the Avro schema the
commit metadata records, without the parquet detour (the types are the same ones:
``docs/catalog-sync.md`` lists them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from airflow_hudi_occ.core.format.layout import META_COLUMNS
from airflow_hudi_occ.core.format.schema import SchemaError

_HIVE = {"boolean": "boolean", "int": "int", "long": "bigint", "float": "float", "double": "double",
         "string": "string", "bytes": "binary", "fixed": "binary", "enum": "string"}
_SPARK = {"boolean": "boolean", "int": "integer", "long": "long", "float": "float", "double": "double",
          "string": "string", "bytes": "binary", "fixed": "binary", "enum": "string"}


@dataclass(frozen=True)
class Column:
    """One top-level column: its name, Hive type, Spark type (JSON value) and nullability."""

    name: str
    hive_type: str
    spark_type: Any
    nullable: bool


def _unnull(t: Any) -> tuple[Any, bool]:
    if isinstance(t, list):
        rest = [x for x in t if x != "null"]
        if len(rest) != 1:
            raise SchemaError(f"Avro union {t!r} has no Hive type", columns=[str(t)])
        return rest[0], len(rest) != len(t)
    return t, False


def _types(t: Any, support_timestamp: bool) -> tuple[str, Any]:
    """(Hive type, Spark type) of one Avro type without its null branch."""
    if isinstance(t, str):
        if t in _HIVE:
            return _HIVE[t], _SPARK[t]
        raise SchemaError(f"Avro type {t!r} has no Hive type", columns=[t])
    kind = t.get("type")
    logical = t.get("logicalType")
    if logical == "decimal":
        p, s = int(t["precision"]), int(t.get("scale", 0))
        return f"decimal({p},{s})", f"decimal({p},{s})"
    if logical == "date":
        return "date", "date"
    if logical in ("timestamp-micros", "timestamp-millis"):
        # parquet-avro writes micros as INT64 TIMESTAMP_MICROS: Hive sees a bigint unless
        # hoodie.datasource.hive_sync.support_timestamp; Spark reads a timestamp either way.
        # Millis are INT64 TIMESTAMP_MILLIS, which Java maps to bigint too.
        hive = "timestamp" if support_timestamp and logical == "timestamp-micros" else "bigint"
        return hive, "timestamp"
    if logical in ("local-timestamp-micros", "local-timestamp-millis"):
        return "bigint", "timestamp_ntz"
    if kind == "array":
        item, null = _unnull(t["items"])
        h, s = _types(item, support_timestamp)
        return f"array<{h}>", {"type": "array", "elementType": s, "containsNull": null}
    if kind == "map":
        val, null = _unnull(t["values"])
        h, s = _types(val, support_timestamp)
        return f"map<string,{h}>", {"type": "map", "keyType": "string", "valueType": s,
                                    "valueContainsNull": null}
    if kind == "record":
        cols = [column(f, support_timestamp) for f in t["fields"]]
        return ("struct<" + ",".join(f"{c.name}:{c.hive_type}" for c in cols) + ">",
                {"type": "struct", "fields": [_spark_field(c) for c in cols]})
    if isinstance(kind, (str, dict)):
        return _types(kind, support_timestamp)
    raise SchemaError(f"Avro type {t!r} has no Hive type", columns=[str(t)])


def column(f: dict, support_timestamp: bool = False) -> Column:
    t, nullable = _unnull(f["type"])
    hive, spark = _types(t, support_timestamp)
    return Column(f["name"], hive, spark, nullable)


def _spark_field(c: Column) -> dict:
    return {"name": c.name, "type": c.spark_type, "nullable": c.nullable, "metadata": {}}


def table_columns(schema_json: str, *, with_meta_fields: bool = True,
                  support_timestamp: bool = False) -> list[Column]:
    """The columns of a table whose commits record ``schema_json`` (the user's columns; Hudi's
    five meta columns first, as strings, unless ``with_meta_fields`` is false)."""
    rec = json.loads(schema_json)
    cols = [column(f, support_timestamp) for f in rec.get("fields", []) if f["name"] not in META_COLUMNS]
    if with_meta_fields:
        cols = [Column(m, "string", "string", True) for m in META_COLUMNS] + cols
    return cols


def spark_schema_json(columns: list[Column]) -> str:
    """Spark's ``StructType.json`` of ``columns`` (its compact spelling)."""
    return json.dumps({"type": "struct", "fields": [_spark_field(c) for c in columns]},
                      separators=(",", ":"))


__all__ = ["Column", "table_columns", "spark_schema_json", "column"]
