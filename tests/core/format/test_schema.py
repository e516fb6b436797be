"""The column names a Hudi table can hold (issue 40): each once, and each an Avro name.

Before, a batch with a column twice failed half-way (``KeyError: Field "amount" exists 2
times in schema``) after its instant existed, and names Avro refuses were committed into a
schema hudi-rs then could not parse (checked here with hudi-rs itself).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.format.schema import SchemaError, avro_schema_json, check_column_names
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import hudi_read


def _struct(*names):
    return pa.struct([pa.field(n, pa.int32()) for n in names])


@pytest.mark.parametrize("fields,columns", [
    ([("amount", pa.float64()), ("id", pa.int64()), ("amount", pa.float64())], ["amount"]),
    ([("_hoodie_record_key", pa.string()), ("_hoodie_record_key", pa.string())], ["_hoodie_record_key"]),
    ([("s", _struct("x", "x"))], ["s.x"]),
    ([("l", pa.list_(_struct("y", "y")))], ["l.y"]),
])
def test_a_name_twice_is_refused_naming_it(fields, columns):
    with pytest.raises(SchemaError) as e:
        check_column_names(pa.schema(fields))
    assert e.value.columns == columns and "more than once" in str(e.value) and "rename" in e.value.remedy


@pytest.mark.parametrize("name", ["my col", "1x", "é", "", "a-b", "tab\t"])
def test_a_name_avro_refuses_is_refused_with_a_suggestion(name):
    with pytest.raises(SchemaError) as e:
        check_column_names(pa.schema([("id", pa.int64()), (name, pa.string())]))
    assert e.value.columns == [name] and "not Avro field names" in str(e.value)
    assert repr(name) in e.value.remedy


def test_names_hudi_holds_pass():
    check_column_names(pa.schema([("id", pa.int64()), ("_x9", pa.string()), ("Amount", pa.int8()),
                                  ("amount", pa.int8()), ("_hoodie_commit_time", pa.string()),
                                  ("s", _struct("x", "y")), ("m", pa.map_(pa.string(), _struct("a")))]))


def test_hudi_rs_cannot_read_a_schema_with_a_name_avro_refuses(tmp_path):
    """Why names are checked at all: a commit recording such a schema makes the table
    unreadable to hudi-rs (and to Java Hudi's Avro parser). The commit is forged here by
    writing a valid batch and renaming a column in its recorded schema."""
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"])
    res = ArrowTableWriter(table).write(pa.table({"id": [1], "my_col": ["x"]}), "insert")
    assert hudi_read(table.base_uri).num_rows == 1
    assert '"my_col"' in avro_schema_json(pa.schema([("my_col", pa.string())]), "t")
    commit = next((tmp_path / "t" / ".hoodie" / "timeline").glob(f"{res.instant.requested_time}_*.commit"))
    data = commit.read_bytes()
    commit.write_bytes(data.replace(b"my_col", b"my col"))
    with pytest.raises(Exception, match="Invalid field name my col"):
        hudi_read(table.base_uri)
