"""A Java writer at Hudi's defaults on a table of ours: the metadata table.

We never create a metadata table (docs/java-interop.md). A Java writer with
``hoodie.metadata.enable`` left at its default (true) builds one on our table at its first
write, from a file listing; our writer then refuses the table until it runs with
``hoodie.metadata.enable=false``, which removes the metadata table (as Java does for a writer
with it disabled); the next Java writer at its defaults builds it again. Java's reads must be
exact at every step, through the metadata table or not.
"""

from __future__ import annotations

import os

import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import MetadataTableEnabledError
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.java_hudi import Read, Write
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key
from tests.interop.rows import batch

COLS = ["id", "p", "ts", "v"]


def metadata_partitions(path: str) -> list[str]:
    value = Table.open(path).config.get("hoodie.table.metadata.partitions") or ""
    return [p for p in value.split(",") if p]


@pytest.mark.slow
def test_java_at_its_defaults_builds_a_metadata_table_ours_refuses_then_removes(tmp_path, java_hudi):
    path = str(tmp_path / "t")
    Table.create(path, "t", record_key_fields=["id"], partition_fields=["p"],
                 precombine_field="ts", version=9)
    model: dict = {}

    def ours(rows, **options):
        ArrowTableWriter(Table.open(path), WriteConfig.from_options({**FAST_WRITE_OPTIONS, **options})) \
            .write(batch(rows), "upsert")
        model.update({r[0]: dict(zip(COLS, r)) for r in rows})

    ours([(i, "a" if i % 2 else "b", 1, f"ours{i}") for i in range(4)])
    assert metadata_partitions(path) == [] and not os.path.exists(os.path.join(path, ".hoodie", "metadata"))

    java_rows = [(1, "a", 2, "java-one"), (4, "b", 2, "java-four")]
    _, first_read = java_hudi.run(Write(path, batch(java_rows), operation="upsert"), Read(path))
    model.update({r[0]: dict(zip(COLS, r)) for r in java_rows})
    assert "files" in metadata_partitions(path)  # built from a listing of our files
    assert os.path.isdir(os.path.join(path, ".hoodie", "metadata"))
    assert rows_by_key(first_read.rows, columns=COLS) == model
    assert rows_by_key(hudi_read(path), columns=COLS) == model

    with pytest.raises(MetadataTableEnabledError) as refused:
        ours([(2, "b", 3, "refused")])
    assert "files" in refused.value.partitions

    ours([(2, "b", 3, "ours-two"), (5, "a", 3, "ours-five")], **{"hoodie.metadata.enable": "false"})
    assert metadata_partitions(path) == [] and not os.path.exists(os.path.join(path, ".hoodie", "metadata"))

    again = [(3, "a", 4, "java-three")]
    _, second_read = java_hudi.run(Write(path, batch(again), operation="upsert"), Read(path))
    model.update({r[0]: dict(zip(COLS, r)) for r in again})
    assert "files" in metadata_partitions(path)  # rebuilt, our write included
    assert rows_by_key(second_read.rows, columns=COLS) == model
    assert rows_by_key(hudi_read(path), columns=COLS) == model
    assert rows_by_key(read_table(Table.open(path)), columns=COLS) == model
