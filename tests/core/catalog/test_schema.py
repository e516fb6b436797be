"""The catalog's view of a commit's schema: Hive types and Spark's schema JSON, as Java's
HiveSyncTool derives them from the parquet schema parquet-avro writes."""

import json

import pyarrow as pa

from airflow_hudi_occ.core.catalog.schema import spark_schema_json, table_columns
from airflow_hudi_occ.core.format.layout import META_COLUMNS
from airflow_hudi_occ.core.format.schema import avro_schema_json


def test_every_column_type_maps_to_hive_and_spark_as_java_does():
    schema = pa.schema([("i", pa.int32()), ("l", pa.int64()), ("s", pa.string()), ("b", pa.bool_()),
                        ("f", pa.float32()), ("d", pa.float64()), ("bin", pa.binary()),
                        ("dt", pa.date32()), ("ts", pa.timestamp("us", tz="UTC")),
                        ("dec", pa.decimal128(10, 2)), ("arr", pa.list_(pa.int64())),
                        ("m", pa.map_(pa.string(), pa.string())),
                        ("st", pa.struct([("x", pa.int32()), ("y", pa.string())]))])
    cols = table_columns(avro_schema_json(schema, "t"))
    assert [c.name for c in cols[:5]] == list(META_COLUMNS)
    got = {c.name: (c.hive_type, c.spark_type) for c in cols[5:]}
    assert got == {
        "i": ("int", "integer"), "l": ("bigint", "long"), "s": ("string", "string"),
        "b": ("boolean", "boolean"), "f": ("float", "float"), "d": ("double", "double"),
        "bin": ("binary", "binary"), "dt": ("date", "date"), "ts": ("bigint", "timestamp"),
        "dec": ("decimal(10,2)", "decimal(10,2)"),
        "arr": ("array<bigint>", {"type": "array", "elementType": "long", "containsNull": True}),
        "m": ("map<string,string>", {"type": "map", "keyType": "string", "valueType": "string",
                                     "valueContainsNull": True}),
        "st": ("struct<x:int,y:string>", {"type": "struct", "fields": [
            {"name": "x", "type": "integer", "nullable": True, "metadata": {}},
            {"name": "y", "type": "string", "nullable": True, "metadata": {}}]}),
    }
    # hoodie.datasource.hive_sync.support_timestamp: Hive sees a timestamp
    ts = {c.name: c.hive_type for c in table_columns(avro_schema_json(schema, "t"), support_timestamp=True)}
    assert ts["ts"] == "timestamp"
    # omit_metadata_fields
    assert [c.name for c in table_columns(avro_schema_json(schema, "t"), with_meta_fields=False)][0] == "i"


def test_spark_schema_json_is_sparks_compact_structtype_json():
    cols = table_columns(avro_schema_json(pa.schema([("id", pa.int64())]), "t"), with_meta_fields=False)
    text = spark_schema_json(cols)
    assert text == '{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}'
    assert json.loads(text)["fields"][0]["name"] == "id"
