"""Table schemas: Arrow <-> the Avro schema Hudi records in every commit.

Readers (Java Hudi, hudi-rs) take the table schema from the latest commit's
``extraMetadata.schema`` and cast parquet columns to it, so the schema written there must
describe the data exactly: nullable columns are ``["null", T]`` unions with default null, as
Java Hudi writes them. Evolution follows Hudi's default rule: new nullable columns may be
added; dropping a column or changing a type is refused *before* any data is written.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import pyarrow as pa

from airflow_hudi_occ.core.errors import HudiOccError
from airflow_hudi_occ.core.format.layout import META_COLUMNS


class SchemaError(HudiOccError):
    """The incoming data's schema cannot be written to this table."""

    def __init__(self, message: str, *, columns: list[str] | None = None, remedy: str | None = None):
        self.columns = columns or []
        super().__init__(message, remedy=remedy)


#: Avro's rule for a field name (the Avro specification's "Names"): what Java Hudi's schema
#: parser and hudi-rs accept; a column named otherwise makes the commit's schema unreadable
AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _name_problems(fields, where: str) -> tuple[list[str], list[str]]:
    """(duplicated names, names Avro refuses) among ``fields`` and inside their structs, each
    spelled with the path to it (``s.x``)."""
    dup, bad = [], []
    counts = Counter(f.name for f in fields)
    dup += [f"{where}{n}" for n, c in counts.items() if c > 1]
    for f in fields:
        if f.name not in META_COLUMNS and not AVRO_NAME.fullmatch(f.name):
            bad.append(f"{where}{f.name}")
        t = f.type
        while pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
            t = t.item_type if pa.types.is_map(t) else t.value_type
        if pa.types.is_struct(t):
            d, b = _name_problems(list(t), f"{where}{f.name}.")
            dup += d
            bad += b
    return dup, bad


def check_column_names(schema: pa.Schema) -> None:
    """Refuse a batch whose column names a Hudi table cannot hold, before anything is read or
    written: a name twice (Arrow then fails the write half-way with ``KeyError: Field "x"
    exists 2 times``, after its instant exists; Avro and Spark refuse it too), in a struct
    too, or a name Avro refuses (a space, a leading digit, non-ASCII, empty: the commit would
    record a schema Java Hudi and hudi-rs cannot parse, the table unreadable to them). Meta
    columns (``_hoodie_*``) in a batch are dropped as Java Hudi drops them, once each."""
    dup, bad = _name_problems(list(schema), "")
    if dup:
        raise SchemaError(
            f"the batch has the column(s) {', '.join(map(repr, dup))} more than once; a Hudi "
            "table's schema holds each name once, so nothing was written", columns=dup,
            remedy="rename or drop the duplicates before the write (e.g. "
                   "table.rename_columns([...]) or a select of distinct names)")
    if bad:
        raise SchemaError(
            f"the column name(s) {', '.join(map(repr, bad))} are not Avro field names (letters, "
            "digits and '_', not starting with a digit): Java Hudi and hudi-rs could not read the "
            "table's schema, so nothing was written", columns=bad,
            remedy="rename them before the write, e.g. "
                   f"{', '.join(repr(b) + ' -> ' + repr(_avro_name(b.rsplit('.', 1)[-1])) for b in bad[:3])}")


def _avro_name(name: str) -> str:
    """A suggestion: ``name`` with every character Avro refuses as ``_``."""
    fixed = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return fixed if fixed and not fixed[0].isdigit() else f"_{fixed}"


def _avro_type(t: pa.DataType, name: str, namespace: str) -> Any:
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t) or pa.types.is_uint8(t) \
            or pa.types.is_uint16(t):
        return "int"
    if pa.types.is_integer(t):
        return "long"
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "bytes"
    if pa.types.is_date32(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        lt = "timestamp-millis" if t.unit in ("s", "ms") else "timestamp-micros"
        return {"type": "long", "logicalType": lt}
    if pa.types.is_decimal(t):
        return {"type": "bytes", "logicalType": "decimal", "precision": t.precision, "scale": t.scale}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"type": "array", "items": _nullable(_avro_type(t.value_type, name, namespace))}
    if pa.types.is_map(t):
        return {"type": "map", "values": _nullable(_avro_type(t.item_type, name, namespace))}
    if pa.types.is_struct(t):
        return {"type": "record", "name": name, "namespace": namespace,
                "fields": [_field(f, f"{namespace}.{name}") for f in t]}
    raise SchemaError(f"column {name!r} has type {t}, which Hudi tables cannot store",
                      columns=[name], remedy="cast it to a supported type before writing")


def _nullable(avro: Any) -> Any:
    return ["null", avro]


def _field(f: pa.Field, namespace: str) -> dict:
    t = _avro_type(f.type, f.name, namespace)
    return {"name": f.name, "type": _nullable(t), "default": None}


def arrow_to_avro(schema: pa.Schema, table_name: str) -> dict:
    ns = f"hoodie.{table_name}"
    return {"type": "record", "name": f"{table_name}_record", "namespace": ns,
            "fields": [_field(f, ns) for f in schema if f.name not in META_COLUMNS]}


def avro_schema_json(schema: pa.Schema, table_name: str) -> str:
    return json.dumps(arrow_to_avro(schema, table_name), separators=(",", ":"))


_AVRO_PRIMITIVES = {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
                    "double": pa.float64(), "string": pa.string(), "bytes": pa.binary()}


def _arrow_type(t: Any) -> pa.DataType:
    t = _strip_null(t)
    if isinstance(t, str):
        if t in _AVRO_PRIMITIVES:
            return _AVRO_PRIMITIVES[t]
        raise SchemaError(f"Avro type {t!r} has no Arrow counterpart here")
    if isinstance(t, list):
        raise SchemaError(f"Avro union {t!r} is not a nullable type")
    logical = t.get("logicalType")
    if logical == "date":
        return pa.date32()
    if logical in ("timestamp-millis", "timestamp-micros"):
        return pa.timestamp("ms" if logical == "timestamp-millis" else "us", tz="UTC")
    if logical == "decimal":
        return pa.decimal128(t["precision"], t.get("scale", 0))
    kind = t.get("type")
    if kind == "array":
        return pa.list_(_arrow_type(t["items"]))
    if kind == "map":
        return pa.map_(pa.string(), _arrow_type(t["values"]))
    if kind == "record":
        return pa.struct([pa.field(f["name"], _arrow_type(f["type"])) for f in t["fields"]])
    return _arrow_type(kind)


def avro_to_arrow(schema_json: str | dict) -> pa.Schema:
    """The Arrow schema of an Avro record schema (a log block's SCHEMA header): what a reader
    needs for a file group that has log files only, with no parquet file to take types from."""
    rec = json.loads(schema_json) if isinstance(schema_json, str) else schema_json
    return pa.schema([pa.field(f["name"], _arrow_type(f["type"])) for f in rec["fields"]])


def _strip_null(t: Any) -> Any:
    if isinstance(t, list):
        rest = [x for x in t if x != "null"]
        return rest[0] if len(rest) == 1 else rest
    return t


def _norm(t: Any) -> Any:
    """A comparable form of an Avro type, ignoring names, namespaces and docs."""
    t = _strip_null(t)
    if isinstance(t, dict):
        kind = t.get("type")
        if kind == "record":
            return ("record", tuple((f["name"], _norm(f["type"])) for f in t.get("fields", [])))
        if kind == "array":
            return ("array", _norm(t.get("items")))
        if kind == "map":
            return ("map", _norm(t.get("values")))
        if t.get("logicalType") == "decimal":  # fixed or bytes: the same logical type
            return ("decimal", t.get("precision"), t.get("scale", 0))
        if "logicalType" in t:
            return (kind, t["logicalType"])
        return _norm(kind)
    return t


def _is_nullable(t: Any) -> bool:
    return isinstance(t, list) and "null" in t


def evolve(old_json: str | None, new_json: str) -> str:
    """The schema to record for a write: the table's own when the data adds nothing (so a
    table written by Java keeps its exact Avro types), else the data's; refused when
    incompatible."""
    check_evolution(old_json, new_json)
    if old_json:
        old_names = {f["name"] for f in json.loads(old_json).get("fields", [])}
        new_names = {f["name"] for f in json.loads(new_json).get("fields", [])}
        if new_names <= old_names:
            return old_json
    return new_json


def check_evolution(old_json: str | None, new_json: str) -> None:
    """Refuse an incompatible schema change; allow identical schemas and added nullable columns."""
    if not old_json:
        return
    try:
        old = json.loads(old_json)
        new = json.loads(new_json)
    except ValueError as e:
        raise SchemaError(f"the table's recorded schema is not valid JSON: {e}") from e
    old_fields = {f["name"]: f for f in old.get("fields", [])}
    new_fields = {f["name"]: f for f in new.get("fields", [])}
    missing = [n for n in old_fields if n not in new_fields]
    if missing:
        raise SchemaError(f"the data lacks columns the table has: {missing}", columns=missing,
                          remedy="add the columns (null is fine), set "
                                 "hoodie.datasource.write.reconcile.schema=true to have them written "
                                 "as null, or write to a new table")
    changed = [n for n in old_fields if _norm(old_fields[n]["type"]) != _norm(new_fields[n]["type"])]
    if changed:
        detail = ", ".join(f"{n}: {_norm(old_fields[n]['type'])} -> {_norm(new_fields[n]['type'])}"
                           for n in changed)
        raise SchemaError(f"incompatible type change for columns {detail}", columns=changed,
                          remedy="cast the columns to the table's types")
    added_required = [n for n in new_fields if n not in old_fields and not _is_nullable(new_fields[n]["type"])]
    if added_required:
        raise SchemaError(f"new columns must be nullable: {added_required}", columns=added_required)


#: Avro type promotions a reconciled batch's column may take to reach the table's type (Avro's
#: schema-resolution rules, which Hudi's reconciliation follows): narrower numbers widen
_PROMOTIONS = {("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"),
               ("long", "double"), ("float", "double"), ("string", "bytes"), ("bytes", "string")}


def reconcile_columns(batch: pa.Schema, table_json: str) -> list[tuple[str, pa.DataType | None, bool]]:
    """What ``hoodie.datasource.write.reconcile.schema=true`` makes of a batch, as Java Hudi
    does: the table's columns first, in its order (a column the batch lacks is null, a column
    of a narrower type is widened to the table's), then the batch's new columns (the table's
    schema grows). One ``(name, type to cast to or None, in the batch)`` per column; a type no
    promotion reaches is refused naming the columns, and so is a batch that adds columns while
    it lacks some of the table's (Java refuses it: its writer schema is then the batch's)."""
    table_fields = [f for f in json.loads(table_json).get("fields", []) if f["name"] not in META_COLUMNS]
    mine = {f["name"]: f for f in json.loads(avro_schema_json(batch, "t"))["fields"]}
    out: list[tuple[str, pa.DataType | None, bool]] = []
    narrower: list[str] = []
    for f in table_fields:
        name, want = f["name"], _norm(f["type"])
        if name not in mine:
            out.append((name, _arrow_type(f["type"]), False))
            continue
        have = _norm(mine[name]["type"])
        if have == want:
            out.append((name, None, True))
        elif (have, want) in _PROMOTIONS:
            out.append((name, _arrow_type(f["type"]), True))
        else:
            narrower.append(f"{name}: {have} -> {want}")
    if narrower:
        raise SchemaError(
            f"the batch's columns cannot be reconciled with the table's types ({', '.join(narrower)}): "
            "only a number may widen (int to long, float to double, ...)",
            columns=[n.split(":")[0] for n in narrower], remedy="cast the columns to the table's types")
    known = {f["name"] for f in table_fields}
    added = [n for n in batch.names if n not in known and n not in META_COLUMNS]
    missing = [name for name, _, present in out if not present]
    if added and missing:
        # Java takes the table's schema only for a batch that adds nothing; one that adds
        # columns is its own writer schema, and then lacking the table's columns is refused
        raise SchemaError(
            f"the batch adds the columns {added} and lacks the table's {missing}: a batch that adds "
            "columns is not reconciled (Java Hudi refuses it too)", columns=missing,
            remedy="give the batch the table's columns too (null is fine), or add the new columns "
                   "in a batch of their own")
    return out + [(n, None, True) for n in added]


def reconcile_table(data: pa.Table, table_json: str) -> pa.Table:
    """``data`` as :func:`reconcile_columns` makes it (Arrow)."""
    cols, names = [], []
    for name, to, present in reconcile_columns(data.schema, table_json):
        if not present:
            cols.append(pa.nulls(data.num_rows, to))
        else:
            c = data.column(name)
            cols.append(c.cast(to) if to is not None else c)
        names.append(name)
    return pa.Table.from_arrays(cols, names=names)
