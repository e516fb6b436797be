"""Hudi's metadata table: a commit never leaves it stale (kept, refused, or removed first when
``hoodie.metadata.enable=false``), checked with hudi-rs, which lists files through it; partitions
this writer does not maintain (the v9 fixture's record_index, column_stats, partition_stats) are
never deleted without ``hoodie.occ.metadata.delete.unmaintained=true``, and never when Hudi's
``hoodie.metadata.auto.delete.partitions=false``."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import (ConfigError, MetadataTableEnabledError,
                                          UnmaintainedMetadataPartitionsError)
from airflow_hudi_occ.core.table.metadata_table import (INFLIGHT_PARTITIONS_KEY, PARTITIONS_KEY,
                                                        judge_metadata_table, metadata_table_state)
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import hudi_read, java_fixture, tree_snapshot

V9 = "v9_txns_simple_overwrite"
V8 = "v8_simplekeygen_nonhivestyle"
#: what the v9 fixture's metadata table holds besides files (Java 1.2 at its defaults builds
#: column_stats and partition_stats; this fixture's writer had the record index on too)
V9_UNMAINTAINED = ("column_stats", "partition_stats", "record_index")
DELETE = {"hoodie.metadata.enable": "false", "hoodie.occ.metadata.delete.unmaintained": "true"}


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


@pytest.mark.parametrize("switch, unmaintained", [
    ({}, ("record_index",)),  # the default keeps files and the stats: the record index is left
    ({"hoodie.occ.metadata.files.maintain": "false"}, V9_UNMAINTAINED)], ids=["default", "not-kept"])
def test_java_v9_table_with_metadata_table_is_refused_and_left_untouched(tmp_path, fast_options, switch,
                                                                         unmaintained):
    path = java_fixture(V9, tmp_path)
    table = Table.open(str(path))
    state = metadata_table_state(table)
    assert state.enabled and "files" in state.partitions and state.folder_exists
    before = hudi_read(str(path))
    snap = tree_snapshot(path)
    with pytest.raises(UnmaintainedMetadataPartitionsError) as e:
        ArrowTableWriter(table, WriteConfig.from_options({**fast_options, **switch})).write(
            _v9_rows(before, [("NEW1", "us")]))
    assert "files" in e.value.partitions and tuple(sorted(e.value.unmaintained)) == unmaintained
    assert "hoodie.metadata.enable=false" in e.value.remedy
    assert "hoodie.occ.metadata.delete.unmaintained=true" in e.value.remedy
    assert "hoodie.metadata.record.index.enable=false" in e.value.remedy  # the way out in Java
    assert tree_snapshot(path) == snap
    assert _ids(hudi_read(str(path))) == _ids(before)


@pytest.mark.parametrize("extra", [{}, {"hoodie.metadata.auto.delete.partitions": "false"}],
                         ids=["disabled", "disabled-auto-delete-off"])
def test_disabled_metadata_table_with_indexes_is_refused_without_the_explicit_option(
        tmp_path, fast_options, extra):
    """``hoodie.metadata.enable=false`` alone used to delete the fixture's record index with the
    rest: now refused before anything is written, naming each index and its way out."""
    path = java_fixture(V9, tmp_path)
    snap = tree_snapshot(path)
    before = hudi_read(str(path))
    opts = {**fast_options, "hoodie.metadata.enable": "false", **extra}
    with pytest.raises(UnmaintainedMetadataPartitionsError) as e:
        ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(opts)).write(
            _v9_rows(before, [("NEW1", "us")]))
    assert sorted(e.value.unmaintained) == list(V9_UNMAINTAINED)
    for name in V9_UNMAINTAINED:
        assert name in e.value.message
    assert ("forbids that too" in e.value.remedy) == bool(extra)
    assert tree_snapshot(path) == snap


def test_disabled_metadata_table_is_removed_with_the_explicit_option_then_read_by_hudi_rs(tmp_path, fast_options):
    path = java_fixture(V9, tmp_path)
    table = Table.open(str(path))
    before = hudi_read(str(path))
    opts = {**fast_options, **DELETE}
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
    """A copy of the Java v8 table given the v9 fixture's metadata table layout (another
    table's listing: kept by nobody), with keeping it switched off: refused, then removed."""
    path = java_fixture(V8, tmp_path / "v8")
    v9 = java_fixture(V9, tmp_path / "v9")
    before = hudi_read(str(path))
    shutil.copytree(v9 / ".hoodie" / "metadata", path / ".hoodie" / "metadata")
    table = Table.open(str(path))
    table.update_properties({PARTITIONS_KEY: "files"})
    snap = tree_snapshot(path)
    not_kept = {**fast_options, "hoodie.occ.metadata.files.maintain": "false"}
    with pytest.raises(MetadataTableEnabledError) as e:
        ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(not_kept)).write(_v8_row(before, 99))
    assert "hoodie.occ.metadata.files.maintain=false" in e.value.message
    assert tree_snapshot(path) == snap
    opts = {**fast_options, "hoodie.metadata.enable": "false"}
    ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(opts)).write(_v8_row(before, 99))
    assert not (path / ".hoodie" / "metadata").exists()
    assert Table.open(str(path)).version == 8
    assert _ids(hudi_read(str(path)), "id") == sorted(_ids(before, "id") + [99])


def test_auto_delete_partitions_false_keeps_a_files_only_metadata_table_and_refuses(tmp_path, fast_options):
    """Hudi 1.2's veto: with ``hoodie.metadata.auto.delete.partitions=false`` Java never deletes the
    metadata table (and, observed, leaves it stale when its writer has it disabled), so ours
    refuses even a ``files``-only one rather than delete it; a leftover folder is left alone."""
    path = java_fixture(V8, tmp_path / "v8")
    before = hudi_read(str(path))
    shutil.copytree(java_fixture(V9, tmp_path / "v9") / ".hoodie" / "metadata", path / ".hoodie" / "metadata")
    Table.open(str(path)).update_properties({PARTITIONS_KEY: "files"})
    snap = tree_snapshot(path)
    veto = {**fast_options, "hoodie.metadata.enable": "false", "hoodie.metadata.auto.delete.partitions": "false"}
    with pytest.raises(MetadataTableEnabledError) as e:
        ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(veto)).write(_v8_row(before, 99))
    assert type(e.value) is MetadataTableEnabledError and e.value.partitions == ("files",)
    assert "hoodie.metadata.auto.delete.partitions=false" in e.value.message
    assert "hoodie.metadata.auto.delete.partitions" in e.value.remedy
    assert tree_snapshot(path) == snap

    Table.open(str(path)).update_properties({PARTITIONS_KEY: ""})  # a removal's leftover folder
    ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(veto)).write(_v8_row(before, 99))
    assert (path / ".hoodie" / "metadata").is_dir()  # not deleted: no reader uses it, and it is vetoed
    assert _ids(hudi_read(str(path)), "id") == sorted(_ids(before, "id") + [99])


def test_the_explicit_option_and_hudis_veto_together_are_a_config_error():
    with pytest.raises(ConfigError) as e:
        WriteConfig.from_options({"hoodie.metadata.enable": "false",
                                  "hoodie.occ.metadata.delete.unmaintained": "true",
                                  "hoodie.metadata.auto.delete.partitions": "false"})
    assert e.value.key == "hoodie.occ.metadata.delete.unmaintained" and e.value.remedy


@pytest.mark.parametrize("partitions, options, outcome", [
    ("files", {}, "keep"),
    ("files", {"hoodie.occ.metadata.files.maintain": "false"}, MetadataTableEnabledError),
    ("files", {"hoodie.metadata.enable": "false"}, "remove"),
    ("files", {"hoodie.metadata.enable": "false", "hoodie.metadata.auto.delete.partitions": "false"},
     MetadataTableEnabledError),
    ("files,record_index", {"hoodie.metadata.enable": "false"}, UnmaintainedMetadataPartitionsError),
    ("files,record_index", DELETE, "remove"),
    ("files,record_index", {"hoodie.occ.metadata.delete.unmaintained": "true"},  # enable left true
     UnmaintainedMetadataPartitionsError),
    ("files,secondary_index_by_name", {"hoodie.metadata.enable": "false"}, UnmaintainedMetadataPartitionsError),
    ("files,expr_index_day", {"hoodie.metadata.enable": "false"}, UnmaintainedMetadataPartitionsError),
    ("files,bloom_filters", {"hoodie.metadata.enable": "false"}, UnmaintainedMetadataPartitionsError),
    ("files,column_stats,partition_stats", {"hoodie.metadata.enable": "false"},
     UnmaintainedMetadataPartitionsError),
    ("files,column_stats,partition_stats", DELETE, "remove"),
    # Java 1.2's defaults: kept by every action (each writes the stats records), the Spark
    # job's preflight included; refused only to a caller that writes no listing
    ("files,column_stats,partition_stats", {}, "keep"),
    ("files,column_stats,partition_stats", {"hoodie.occ.metadata.files.maintain": "false"},
     UnmaintainedMetadataPartitionsError),
])
def test_the_judgement_for_each_partition_set(tmp_path, partitions, options, outcome):
    """The rules of the module doc on one table (no folder needed: the properties decide), and
    the Spark job's fail-fast check agrees with them."""
    from airflow_hudi_occ.core.table.write_guard import check_for_write
    path = java_fixture(V8, tmp_path)
    table = Table.open(str(path))
    table.update_properties({PARTITIONS_KEY: partitions})
    cfg = WriteConfig.from_options(options)
    if outcome == "remove":
        assert judge_metadata_table(table, cfg) is True
        check_for_write(table, cfg)
        return
    if outcome == "keep":  # every action that writes the listing keeps it; one that does not is refused
        assert judge_metadata_table(table, cfg, files_writer=True) is False
        check_for_write(table, cfg)
        with pytest.raises(MetadataTableEnabledError):
            judge_metadata_table(table, cfg)
        return
    for check in (judge_metadata_table, check_for_write):
        with pytest.raises(outcome) as e:
            check(table, cfg)
        assert type(e.value) is outcome
        if outcome is UnmaintainedMetadataPartitionsError:
            assert e.value.unmaintained == tuple(p for p in partitions.split(",") if p != "files")
            for p in e.value.unmaintained:
                assert p in e.value.message and p in e.value.remedy


def test_metadata_table_enabled_by_another_writer_during_a_write_aborts_it(tmp_path, fast_options):
    """A Java writer turns the metadata table on while we write (its partitions inflight while
    it builds them from a listing): the check under the lock at completion refuses, and the
    attempt is rolled back (no file, nothing pending)."""
    path = java_fixture(V8, tmp_path)
    table = Table.open(str(path))
    before = hudi_read(str(path))

    def java_enables_it(tx):
        other = Table.open(str(path))
        other.update_properties({INFLIGHT_PARTITIONS_KEY: "files"})  # no folder: hudi-rs still lists files

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
    assert sorted(d["metadata_table"]["unmaintained_partitions"]) == list(V9_UNMAINTAINED)
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "metadata table: enabled" in out and "hoodie.metadata.enable=false" in out
    assert "hoodie.occ.metadata.delete.unmaintained=true" in out
