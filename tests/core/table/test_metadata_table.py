"""Hudi's metadata table: a commit never leaves it stale (refused, or removed first when
``hoodie.metadata.enable=false``), checked with hudi-rs, which lists files through it."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import MetadataTableEnabledError
from airflow_hudi_occ.core.table.metadata_table import (INFLIGHT_PARTITIONS_KEY, PARTITIONS_KEY,
                                                        metadata_table_state)
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import hudi_read, java_fixture, tree_snapshot

V9 = "v9_txns_simple_overwrite"
V8 = "v8_simplekeygen_nonhivestyle"


def _v9_rows(before: pa.Table, ids_regions: list[tuple[str, str]]) -> pa.Table:
    schema = before.drop_columns([c for c in before.column_names if c.startswith("_hoodie_")]).schema
    rows = []
    for txn_id, region in ids_regions:
        r = {n: None for n in schema.names}
        r.update({"txn_id": txn_id, "region": region, "txn_ts": 1})
        rows.append(r)
    return pa.Table.from_pylist(rows, schema=schema)


def _ids(t: pa.Table, key: str = "txn_id") -> list:
    return sorted(t.column(key).to_pylist())


def test_java_v9_table_with_metadata_table_is_refused_and_left_untouched(tmp_path, fast_options):
    path = java_fixture(V9, tmp_path)
    table = Table.open(str(path))
    state = metadata_table_state(table)
    assert state.enabled and "files" in state.partitions and state.folder_exists
    before = hudi_read(str(path))
    snap = tree_snapshot(path)
    with pytest.raises(MetadataTableEnabledError) as e:
        ArrowTableWriter(table, WriteConfig.from_options(fast_options)).write(
            _v9_rows(before, [("NEW1", "us")]))
    assert "files" in e.value.partitions
    assert "hoodie.metadata.enable=false" in e.value.remedy
    assert tree_snapshot(path) == snap
    assert _ids(hudi_read(str(path))) == _ids(before)


def test_disabled_metadata_table_is_removed_then_the_commit_is_read_by_hudi_rs(tmp_path, fast_options):
    path = java_fixture(V9, tmp_path)
    table = Table.open(str(path))
    before = hudi_read(str(path))
    opts = {**fast_options, "hoodie.metadata.enable": "false"}
    ArrowTableWriter(table, WriteConfig.from_options(opts)).write(
        _v9_rows(before, [("NEW1", "us"), ("NEW2", "zz")]))
    assert not (path / ".hoodie" / "metadata").exists()
    reopened = Table.open(str(path))
    assert reopened.config.get(PARTITIONS_KEY) == "" and reopened.config.get(INFLIGHT_PARTITIONS_KEY) == ""
    assert reopened.version == 9 and reopened.config.get("hoodie.table.ordering.fields") == "txn_ts"
    assert not (path / ".hoodie" / "hoodie.properties.backup").exists()
    assert _ids(hudi_read(str(path))) == sorted(_ids(before) + ["NEW1", "NEW2"])


def test_a_table_without_the_enabled_partitions_but_a_leftover_folder_is_written(tmp_path, fast_options):
    """The state a removal interrupted after the properties change leaves: no reader uses the
    folder, so a writer with the default proceeds (and leaves the folder to a writer with
    ``false``)."""
    path = java_fixture(V9, tmp_path)
    table = Table.open(str(path))
    before = hudi_read(str(path))
    table.update_properties({PARTITIONS_KEY: "", INFLIGHT_PARTITIONS_KEY: ""})
    ArrowTableWriter(table, WriteConfig.from_options(fast_options)).write(_v9_rows(before, [("NEW1", "us")]))
    assert (path / ".hoodie" / "metadata").exists()
    assert _ids(hudi_read(str(path))) == sorted(_ids(before) + ["NEW1"])


def _v8_row(before: pa.Table, id_: int) -> pa.Table:
    schema = before.drop_columns([c for c in before.column_names if c.startswith("_hoodie_")]).schema
    r = {n: None for n in schema.names}
    r.update({"id": id_, "name": f"n{id_}", "byteField": 20, "longField": 1})
    return pa.Table.from_pylist([r], schema=schema)


def test_v8_fixture_given_a_metadata_table(tmp_path, fast_options):
    """A copy of the Java v8 table given the v9 fixture's metadata table layout."""
    path = java_fixture(V8, tmp_path / "v8")
    v9 = java_fixture(V9, tmp_path / "v9")
    before = hudi_read(str(path))
    shutil.copytree(v9 / ".hoodie" / "metadata", path / ".hoodie" / "metadata")
    table = Table.open(str(path))
    table.update_properties({PARTITIONS_KEY: "files"})
    snap = tree_snapshot(path)
    with pytest.raises(MetadataTableEnabledError):
        ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(fast_options)).write(_v8_row(before, 99))
    assert tree_snapshot(path) == snap
    opts = {**fast_options, "hoodie.metadata.enable": "false"}
    ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(opts)).write(_v8_row(before, 99))
    assert not (path / ".hoodie" / "metadata").exists()
    assert Table.open(str(path)).version == 8
    assert _ids(hudi_read(str(path)), "id") == sorted(_ids(before, "id") + [99])


def test_metadata_table_enabled_by_another_writer_during_a_write_aborts_it(tmp_path, fast_options):
    """A Java writer turns the metadata table on while we write: the check under the lock at
    completion refuses, and the attempt is rolled back (no file, nothing pending)."""
    path = java_fixture(V8, tmp_path)
    table = Table.open(str(path))
    before = hudi_read(str(path))

    def java_enables_it(tx):
        other = Table.open(str(path))
        other.update_properties({PARTITIONS_KEY: "files"})  # no folder: hudi-rs still lists files

    with pytest.raises(MetadataTableEnabledError):
        ArrowTableWriter(table, WriteConfig.from_options(fast_options)).write(
            _v8_row(before, 99), before_commit=java_enables_it)
    tl = Table.open(str(path)).timeline()
    assert not [i for i in tl.pending() if i.action.value == "commit"]
    assert len(tl.completed_writes()) == 2  # the fixture's own commits
    assert _ids(hudi_read(str(path)), "id") == _ids(before, "id")


def test_describe_and_cli_show_name_the_metadata_table(tmp_path, capsys):
    from airflow_hudi_occ.cli.app import main
    path = java_fixture(V9, tmp_path)
    d = Table.open(str(path)).describe()
    assert d["metadata_table"]["enabled"] and "record_index" in d["metadata_table"]["partitions"]
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "metadata table: enabled" in out and "hoodie.metadata.enable=false" in out
