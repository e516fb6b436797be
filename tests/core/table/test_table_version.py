"""Versions 8 and 9: a table keeps its version unless the writer asks for 9; the upgrade is
Hudi's properties change; hudi-rs reads old and new rows either way."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import ConfigError, UnsupportedTableVersionError
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import hudi_read, java_fixture, rows_by_key, tree_snapshot

V8 = "v8_simplekeygen_nonhivestyle"
HUDI = "org.apache.hudi.common.model."


def _v8_row(before: pa.Table, id_: int) -> pa.Table:
    schema = before.drop_columns([c for c in before.column_names if c.startswith("_hoodie_")]).schema
    r = {n: None for n in schema.names}
    r.update({"id": id_, "name": f"n{id_}", "byteField": 20, "longField": 1})
    return pa.Table.from_pylist([r], schema=schema)


def _names(t: pa.Table) -> dict:
    return {k: v["name"] for k, v in rows_by_key(t, columns=["id", "name"]).items()}


def test_a_v8_table_stays_v8_by_default(tmp_path, fast_options):
    path = java_fixture(V8, tmp_path)
    before = hudi_read(str(path))
    ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(fast_options)).write(_v8_row(before, 99))
    t = Table.open(str(path))
    assert t.version == 8 and t.config.get("hoodie.table.precombine.field") == "longField"


def test_java_v8_table_upgraded_to_9_on_request(tmp_path, fast_options):
    path = java_fixture(V8, tmp_path)
    before = hudi_read(str(path))
    opts = {**fast_options, "hoodie.write.table.version": "9"}
    ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(opts)).write(_v8_row(before, 99))
    props = Table.open(str(path)).config.properties
    assert props["hoodie.table.version"] == "9"
    assert props["hoodie.table.initial.version"] == "8"
    assert props["hoodie.table.ordering.fields"] == "longField"
    assert "hoodie.table.precombine.field" not in props
    assert props["hoodie.table.legacy.payload.class"] == HUDI + "DefaultHoodieRecordPayload"
    assert "hoodie.compaction.payload.class" not in props
    assert props["hoodie.record.merge.mode"] == "EVENT_TIME_ORDERING"
    assert _names(hudi_read(str(path))) == _names(before) | {99: "n99"}


def test_upgrade_refused_without_auto_upgrade_and_downgrade_refused(tmp_path, fast_options):
    path = java_fixture(V8, tmp_path)
    before = hudi_read(str(path))
    snap = tree_snapshot(path)
    opts = {**fast_options, "hoodie.write.table.version": "9", "hoodie.write.auto.upgrade": "false"}
    with pytest.raises(UnsupportedTableVersionError) as e:
        ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(opts)).write(_v8_row(before, 99))
    assert "hoodie.write.auto.upgrade" in e.value.remedy
    assert tree_snapshot(path) == snap
    ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(
        {**fast_options, "hoodie.write.table.version": "9"})).write(_v8_row(before, 99))
    snap = tree_snapshot(path)
    with pytest.raises(UnsupportedTableVersionError) as e:
        ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(
            {**fast_options, "hoodie.write.table.version": "8"})).write(_v8_row(before, 100))
    assert "downgrade" in str(e.value)
    assert tree_snapshot(path) == snap


def test_unknown_payload_class_is_not_upgraded(tmp_path, fast_options):
    path = java_fixture(V8, tmp_path)
    t = Table.open(str(path))
    t.update_properties({"hoodie.compaction.payload.class": "com.example.MyPayload"})
    before = hudi_read(str(path))
    with pytest.raises(UnsupportedTableVersionError) as e:
        ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(
            {**fast_options, "hoodie.write.table.version": "9"})).write(_v8_row(before, 99))
    assert "com.example.MyPayload" in str(e.value)
    assert Table.open(str(path)).version == 8


def test_new_table_at_version_9(tmp_path, fast_options):
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                     precombine_field="ts", version=9)
    ArrowTableWriter(t, WriteConfig.from_options(fast_options)).write(
        pa.table({"id": [1, 2, 1], "p": ["a", "b", "a"], "ts": [1, 1, 2], "v": ["x", "y", "z"]}))
    props = Table.open(str(tmp_path / "t")).config.properties
    assert props["hoodie.table.version"] == "9" and props["hoodie.table.ordering.fields"] == "ts"
    assert "hoodie.table.precombine.field" not in props
    got = rows_by_key(hudi_read(str(tmp_path / "t")), columns=["id", "v"])
    assert {k: r["v"] for k, r in got.items()} == {1: "z", 2: "y"}


def test_write_table_version_is_checked():
    with pytest.raises(ConfigError) as e:
        WriteConfig.from_options({"hoodie.write.table.version": "7"})
    assert e.value.key == "hoodie.write.table.version"


def test_properties_backup_is_read_when_the_file_is_missing(tmp_path):
    """A writer that died between Java's 'delete' and 'write' steps leaves only the backup."""
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"])
    meta = tmp_path / "t" / ".hoodie"
    (meta / "hoodie.properties").rename(meta / "hoodie.properties.backup")
    assert Table.open(str(tmp_path / "t")).name == "t"
