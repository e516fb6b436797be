"""A metadata table copied from another table, with Java Hudi 1.2 (issue 40, item 7;
core/table/metadata_trust.py). Java writes tables A and B (its metadata table at its defaults:
files, column_stats, partition_stats), our core writer adds a commit to each, then A's
``.hoodie/metadata`` is copied into B (a restore gone wrong):

- Java's own metadata reader takes the copy's records (``getValidInstantTimestamps`` counts
  every completed deltacommit not pending on the data table): it lists A's files for B and
  fails reading them there; ours lists B's storage;
- our writer refuses B, the table byte-identical;
- the fix the error names (one write with ``hoodie.metadata.enable=false``, which removes the
  metadata table) followed by a Java write, which builds B's metadata table again from the
  storage: then Java's metadata reader, ours and the storage list the same files, and Java,
  hudi-rs and our reader read B's rows.

About 30 s, the JVM start included (three Java runs in one kept JVM; measured 28.5 s)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import ForeignMetadataTableError
from airflow_hudi_occ.core.format.log_file import LogFileName
from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.core.table.metadata_listing import read_metadata_listing
from airflow_hudi_occ.core.table.metadata_table import METADATA_FOLDER
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.java_hudi import MetadataCheck, Read, Write
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key, tree_snapshot
from tests.interop.rows import batch
from tests.interop.test_java_metadata_every_action import data_files
from tests.interop.test_java_metadata_table import COLS, KEYS, metadata_partitions, model_of


def listed(path: str) -> dict[str, set[str]]:
    """What our readers list for the table: partition -> file names (the view's listing)."""
    view = FileSystemView(Table.open(path))
    out = {p: {n for n in view.listing.names(p) if n.endswith(".parquet") or LogFileName.parse(n)}
           for p in view.partitions()}
    return {p: f for p, f in out.items() if f}


def names(files: dict[str, dict[str, int]]) -> dict[str, set[str]]:
    return {p: set(f) for p, f in files.items() if f}


def test_java_takes_a_foreign_metadata_table_ours_does_not_and_the_fix_rebuilds_it(tmp_path, java_hudi,
                                                                                  fast_options):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    first = dict(table_type="COPY_ON_WRITE", table_version=9, operation="insert", **KEYS)
    # B first: A's instants are then later than B's, so Java's view does not take A's files for
    # archived ones of B (it would fail to open them), it leaves them out
    b_rows = [(i, f"b{i % 2}", 1, f"b{i}") for i in range(6)]
    a_rows = [(i, f"a{i % 2}", 1, f"a{i}") for i in range(6)]
    java_hudi.run(Write(b, batch(b_rows), **first), Write(a, batch(a_rows), **first))
    assert metadata_partitions(b) == metadata_partitions(a) == ["column_stats", "files", "partition_stats"]
    ours = WriteConfig.from_options(fast_options)
    b_more, a_more = [(10, "b0", 2, "b10")], [(10, "a0", 2, "a10")]
    ArrowTableWriter(Table.open(b), ours).write(batch(b_more))
    ArrowTableWriter(Table.open(a), ours).write(batch(a_more))
    model = model_of(b_rows + b_more)
    assert rows_by_key(read_table(Table.open(b)), columns=COLS) == model
    shutil.rmtree(Path(b) / METADATA_FOLDER)
    shutil.copytree(Path(a) / METADATA_FOLDER, Path(b) / METADATA_FOLDER)

    # Java's metadata reader takes A's files for B (its check then fails reading the footer of
    # one in A's partition under B); ours lists B's storage
    [check] = java_hudi.run(MetadataCheck(b), check=False)
    assert not check.ok and "FileNotFoundException" in str(check.error)
    assert any(f"{b}/{p}/{n}" in str(check.error) for p, files in data_files(a).items() for n in files)
    assert listed(b) == names(data_files(b))
    assert rows_by_key(read_table(Table.open(b)), columns=COLS) == model

    # our writer refuses it, changing nothing
    snap = tree_snapshot(b)
    with pytest.raises(ForeignMetadataTableError) as e:
        ArrowTableWriter(Table.open(b), ours).write(batch([(11, "b1", 2, "b11")]))
    assert str(Path(b) / METADATA_FOLDER) in e.value.message and e.value.instants
    assert tree_snapshot(b) == snap

    # the fix the error names: our write with the metadata table disabled removes it (its stats
    # partitions, A's, with it: the error says so); Java's next write builds B's own from the
    # storage, and every reader agrees again
    assert "hoodie.occ.metadata.delete.unmaintained=true" in e.value.remedy
    fix = [(11, "b1", 2, "b11")]
    remove = {"hoodie.metadata.enable": "false", "hoodie.occ.metadata.delete.unmaintained": "true"}
    ArrowTableWriter(Table.open(b), WriteConfig.from_options({**fast_options, **remove})).write(batch(fix))
    assert metadata_partitions(b) == [] and not (Path(b) / METADATA_FOLDER).exists()
    again = [(12, "b0", 3, "b12")]
    _, check, java_read = java_hudi.run(Write(b, batch(again), **{**KEYS}), MetadataCheck(b), Read(b))
    model = model_of(b_rows + b_more + fix + again)
    assert "files" in metadata_partitions(b)
    on_storage = data_files(b)
    assert names(check.metadata_check()["files"]) == names(on_storage) == listed(b)
    assert {p: f for p, f in read_metadata_listing(Table.open(b)).files.items() if f} == {
        p: f for p, f in on_storage.items() if f}
    assert FileSystemView(Table.open(b)).listing.foreign == ()
    assert rows_by_key(java_read.rows, columns=COLS) == model
    assert rows_by_key(read_table(Table.open(b)), columns=COLS) == model
    assert rows_by_key(hudi_read(b), columns=COLS) == model
