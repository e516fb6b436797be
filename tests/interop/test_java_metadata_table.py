"""Java's metadata table on a table both write: ours never leaves it stale, keeps the partitions
it maintains up to date (its default, ``hoodie.occ.metadata.files.maintain=true``), and never
deletes an index Java built without being told to.

We never create a metadata table (docs/java-interop.md). A Java writer with
``hoodie.metadata.enable`` left at its default (true) builds one at its first write, from a
file listing; Hudi 1.2 at its defaults builds ``files``, ``column_stats`` and
``partition_stats``, and ``record_index`` too when the record index is on. Our writer keeps the
first three and refuses a table with any other (or with ``hoodie.occ.metadata.files.maintain
=false``): with ``hoodie.metadata.enable=false`` it removes the metadata table (as Java does
for a writer with it disabled), but partitions it does not maintain only with
``hoodie.occ.metadata.delete.unmaintained=true``, and none while Hudi's
``hoodie.metadata.auto.delete.partitions=false``. Java's reads must be exact at every step,
through the metadata table or not.
"""

from __future__ import annotations

import os

import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import MetadataTableEnabledError, UnmaintainedMetadataPartitionsError
from airflow_hudi_occ.core.table.metadata_listing import read_metadata_listing
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.java_hudi import Read, Write
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key, tree_snapshot
from tests.core.table.test_metadata_listing import storage_listing
from tests.interop.rows import batch

COLS = ["id", "p", "ts", "v"]
KEYS = dict(record_key="id", partition_fields="p", ordering_field="ts", table_name="t")
#: a Java writer with the record-level index on (Hudi's RECORD_INDEX index type uses it)
RLI = {"hoodie.metadata.record.index.enable": "true", "hoodie.index.type": "RECORD_INDEX"}
DISABLED = {"hoodie.metadata.enable": "false"}
DELETE = {**DISABLED, "hoodie.occ.metadata.delete.unmaintained": "true"}
#: ours with keeping the metadata table switched off (before issue 32, the default)
NOT_KEPT = {"hoodie.occ.metadata.files.maintain": "false"}
#: a Java writer whose metadata table holds the files partition alone
FILES_ONLY = {"hoodie.metadata.index.column.stats.enable": "false",
              "hoodie.metadata.index.partition.stats.enable": "false"}


def metadata_partitions(path: str) -> list[str]:
    value = Table.open(path).config.get("hoodie.table.metadata.partitions") or ""
    return sorted(p for p in value.split(",") if p)


def has_metadata_folder(path: str) -> bool:
    return os.path.exists(os.path.join(path, ".hoodie", "metadata"))


class Ours:
    """Our core writer on ``path``, keeping the model of what every reader must return."""

    def __init__(self, path: str, model: dict):
        self.path, self.model = path, model

    def __call__(self, rows, **options):
        ArrowTableWriter(Table.open(self.path), WriteConfig.from_options({**FAST_WRITE_OPTIONS, **options})) \
            .write(batch(rows), "upsert")
        self.model.update({r[0]: dict(zip(COLS, r)) for r in rows})


def model_of(rows) -> dict:
    return {r[0]: dict(zip(COLS, r)) for r in rows}


@pytest.mark.parametrize("version", [9, pytest.param(8, marks=pytest.mark.slow)])
def test_a_java_record_index_is_refused_until_deleting_it_is_asked_for(tmp_path, java_hudi, version):
    """Java builds a record-level index; each configuration of ours short of the explicit
    option is refused before anything is written, naming the index and both ways out; the
    explicit option deletes the metadata table in Java's order and the write is read exactly."""
    path = str(tmp_path / "t")
    first = [(i, "a" if i % 2 else "b", 1, f"java{i}") for i in range(6)]
    java_hudi.run(Write(path, batch(first), operation="insert", table_version=version, options=RLI, **KEYS))
    assert metadata_partitions(path) == ["column_stats", "files", "partition_stats", "record_index"]
    assert Table.open(path).version == version
    assert read_metadata_listing(Table.open(path)).files == storage_listing(path)  # our reader of it
    model = model_of(first)
    ours = Ours(path, model)
    snap = tree_snapshot(path)

    every = ("column_stats", "partition_stats", "record_index")
    # (options, what is unmaintained): at our defaults the commit keeps files and the stats,
    # so the record index alone is left; disabled or not kept, everything but files
    refusals = {"default": ({}, ("record_index",)), "disabled": (DISABLED, every),
                "disabled, auto-delete off": ({**DISABLED, "hoodie.metadata.auto.delete.partitions": "false"}, every),
                "explicit option, metadata left enabled": ({"hoodie.occ.metadata.delete.unmaintained": "true"},
                                                           ("record_index",)),
                "not kept": (NOT_KEPT, every)}
    for case, (options, unmaintained) in refusals.items():
        with pytest.raises(UnmaintainedMetadataPartitionsError) as refused:
            ours([(2, "b", 2, "refused")], **options)
        e = refused.value
        assert e.unmaintained == unmaintained, case
        assert "record_index" in e.message and "hoodie.metadata.record.index.enable=false" in e.remedy, case
        assert "hoodie.occ.metadata.delete.unmaintained=true" in e.remedy, case
        assert tree_snapshot(path) == snap, f"{case}: the table changed"

    ours([(2, "b", 2, "ours-two"), (7, "a", 2, "ours-seven")], **DELETE)
    assert metadata_partitions(path) == [] and not has_metadata_folder(path)
    assert rows_by_key(hudi_read(path), columns=COLS) == model
    assert rows_by_key(read_table(Table.open(path)), columns=COLS) == model


@pytest.mark.parametrize("version", [9, pytest.param(8, marks=pytest.mark.slow)])
def test_java_reads_through_the_metadata_table_our_commits_keep(tmp_path, java_hudi, version):
    """``hoodie.occ.metadata.files.maintain=true``: on a Java table whose metadata table holds
    only ``files``, our upsert (an update, a new partition) and delete each write the metadata
    table's deltacommit; Java's snapshot read through the metadata table is exact, and Java's
    next writer adds one deltacommit to it instead of rebuilding it."""
    path = str(tmp_path / "t")
    first = [(i, "a" if i % 2 else "b", 1, f"java{i}") for i in range(4)]
    java_hudi.run(Write(path, batch(first), operation="insert", table_version=version, options=FILES_ONLY, **KEYS))
    assert metadata_partitions(path) == ["files"] and Table.open(path).version == version
    model = model_of(first)
    maintain = {**FAST_WRITE_OPTIONS, "hoodie.occ.metadata.files.maintain": "true"}
    ours = [(2, "b", 2, "ours-two"), (9, "c", 2, "ours-nine")]
    ArrowTableWriter(Table.open(path), WriteConfig.from_options(maintain)).write(batch(ours), "upsert")
    model.update(model_of(ours))
    ArrowTableWriter(Table.open(path), WriteConfig.from_options(maintain)).write(batch([(1, "a", 3, "")]), "delete")
    del model[1]
    assert read_metadata_listing(Table.open(path)).files == storage_listing(path)
    assert rows_by_key(hudi_read(path), columns=COLS) == model
    timeline = os.path.join(path, ".hoodie", "metadata", ".hoodie", "timeline")
    before = set(os.listdir(timeline))

    more = [(3, "a", 4, "java-three")]
    through_mdt, _, again = java_hudi.run(Read(path), Write(path, batch(more), options=FILES_ONLY, **KEYS), Read(path))
    assert rows_by_key(through_mdt.rows, columns=COLS) == model
    model.update(model_of(more))
    assert rows_by_key(again.rows, columns=COLS) == model
    added = sorted(n for n in set(os.listdir(timeline)) - before if not n.startswith("."))
    assert sorted(n.rsplit(".", 1)[-1] for n in added) == ["deltacommit", "inflight", "requested"]  # one deltacommit
    assert not any(n.startswith("0000000000000000") for n in added)  # no re-initialisation
    assert metadata_partitions(path) == ["files"]
    assert read_metadata_listing(Table.open(path)).files == storage_listing(path)


@pytest.mark.slow
def test_java_gives_up_its_indexes_then_ours_removes_files_only(tmp_path, java_hudi):
    """The other way out: a Java writer with the indexes disabled (auto-delete at its default)
    deletes their partitions at its next write (HoodieTable.deleteMetadataIndexIfNecessary), so
    ours with ``hoodie.metadata.enable=false`` alone removes what is left (``files``); Java's
    next writer at its defaults rebuilds the metadata table, our rows included."""
    path = str(tmp_path / "t")
    first = [(i, "a" if i % 2 else "b", 1, f"java{i}") for i in range(4)]
    second = [(1, "a", 2, "java-one")]
    no_indexes = {"hoodie.metadata.record.index.enable": "false",
                  "hoodie.metadata.index.column.stats.enable": "false",
                  "hoodie.metadata.index.partition.stats.enable": "false"}
    java_hudi.run(Write(path, batch(first), operation="insert", options=RLI, **KEYS),
                  Write(path, batch(second), options=no_indexes, **KEYS))
    assert metadata_partitions(path) == ["files"]
    model = {**model_of(first), **model_of(second)}
    ours = Ours(path, model)
    with pytest.raises(MetadataTableEnabledError) as refused:
        ours([(3, "a", 3, "refused")], **NOT_KEPT)
    assert type(refused.value) is MetadataTableEnabledError  # files only: nothing unmaintained
    ours([(3, "a", 3, "ours-three")], **DISABLED)
    assert metadata_partitions(path) == [] and not has_metadata_folder(path)

    third = [(0, "b", 4, "java-zero")]
    _, read = java_hudi.run(Write(path, batch(third), **KEYS), Read(path))
    model.update(model_of(third))
    assert "files" in metadata_partitions(path)  # rebuilt from a listing, our file included
    assert rows_by_key(read.rows, columns=COLS) == model
    assert rows_by_key(hudi_read(path), columns=COLS) == model


@pytest.mark.slow
def test_java_at_its_defaults_builds_a_metadata_table_ours_refuses_then_removes(tmp_path, java_hudi):
    path = str(tmp_path / "t")
    Table.create(path, "t", record_key_fields=["id"], partition_fields=["p"],
                 precombine_field="ts", version=9)
    model: dict = {}
    ours = Ours(path, model)

    ours([(i, "a" if i % 2 else "b", 1, f"ours{i}") for i in range(4)])
    assert metadata_partitions(path) == [] and not has_metadata_folder(path)

    java_rows = [(1, "a", 2, "java-one"), (4, "b", 2, "java-four")]
    _, first_read = java_hudi.run(Write(path, batch(java_rows), operation="upsert"), Read(path))
    model.update(model_of(java_rows))
    # built from a listing of our files; Hudi 1.2's defaults add column and partition stats
    assert metadata_partitions(path) == ["column_stats", "files", "partition_stats"]
    assert has_metadata_folder(path)
    assert rows_by_key(first_read.rows, columns=COLS) == model
    assert rows_by_key(hudi_read(path), columns=COLS) == model

    for options in (NOT_KEPT, DISABLED):
        with pytest.raises(UnmaintainedMetadataPartitionsError) as refused:
            ours([(2, "b", 3, "refused")], **options)
        assert "files" in refused.value.partitions
        assert refused.value.unmaintained == ("column_stats", "partition_stats")

    ours([(2, "b", 3, "ours-two"), (5, "a", 3, "ours-five")], **DELETE)
    assert metadata_partitions(path) == [] and not has_metadata_folder(path)

    again = [(3, "a", 4, "java-three")]
    _, second_read = java_hudi.run(Write(path, batch(again), operation="upsert"), Read(path))
    model.update(model_of(again))
    assert "files" in metadata_partitions(path)  # rebuilt, our write included
    assert rows_by_key(second_read.rows, columns=COLS) == model
    assert rows_by_key(hudi_read(path), columns=COLS) == model
    assert rows_by_key(read_table(Table.open(path)), columns=COLS) == model


@pytest.mark.slow
def test_java_itself_leaves_the_metadata_table_stale_with_auto_delete_off_and_it_disabled(tmp_path, java_hudi):
    """Why ours refuses with ``hoodie.metadata.auto.delete.partitions=false`` rather than write:
    Java 1.2.0 with that and ``hoodie.metadata.enable=false`` neither deletes nor updates the
    metadata table, so Java's own reader through it (and hudi-rs) miss its commit's rows, while
    a listing finds them. Observed behaviour of Java 1.2.0, pinned so a change is noticed."""
    path = str(tmp_path / "t")
    first = [(1, "a", 1, "x"), (2, "b", 1, "y")]
    more = [(3, "a", 2, "z")]
    java_hudi.run(Write(path, batch(first), operation="insert", **KEYS),
                  Write(path, batch(more), options={**DISABLED, "hoodie.metadata.auto.delete.partitions": "false"},
                        **KEYS))
    assert "files" in metadata_partitions(path)  # kept
    through_mdt, listing = java_hudi.run(Read(path), Read(path, options=DISABLED))
    assert sorted(listing.rows.column("id").to_pylist()) == [1, 2, 3]
    assert sorted(through_mdt.rows.column("id").to_pylist()) == [1, 2]  # stale: row 3 missing
    assert sorted(hudi_read(path).column("id").to_pylist()) == [1, 2]
    # our reader of the listing sees the same staleness: Java's second commit's file is missing
    listing, on_storage = read_metadata_listing(Table.open(path)).files, storage_listing(path)
    missing = {p: set(on_storage[p]) - set(listing.get(p, {})) for p in on_storage}
    assert [len(m) for m in missing.values() if m] == [1] and not any(
        set(listing.get(p, {})) - set(on_storage[p]) for p in on_storage)
