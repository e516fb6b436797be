"""Our writers write to tables Java Hudi wrote, and Java reads the result.

Java writes each table with its own datasource at its defaults except
``hoodie.metadata.enable=false`` (our writers refuse a table with an enabled metadata table:
docs/java-interop.md): a bulk_insert, an upsert and a delete. Our reader must read exactly the
model; our writer then updates one of Java's rows, adds one and deletes one; Java's snapshot
and read-optimised reads, hudi-rs and our reader must then all agree with the model.
Two JVMs for all the tables: one writes them all, one reads them all.
"""

from __future__ import annotations

import pytest

from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.mor_reader import read_optimized
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.java_hudi import Read, Write
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key
from tests.interop.rows import batch

COLS = ["id", "p", "ts", "v"]
KINDS = [("COPY_ON_WRITE", 8), ("COPY_ON_WRITE", 9), ("MERGE_ON_READ", 8), ("MERGE_ON_READ", 9)]
IDS = [f"{t[:3].lower()}-v{v}" for t, v in KINDS]
JAVA_OPTIONS = {"hoodie.metadata.enable": "false"}


class Model(dict):
    def apply(self, rows, op):
        for r in rows:
            if op == "delete":
                self.pop(r[0], None)
            else:
                self[r[0]] = dict(zip(COLS, r))
        return self


JAVA_WRITES = [
    ([(i, "a" if i % 2 else "b", 1, f"java{i}") for i in range(6)], "bulk_insert"),
    ([(1, "a", 2, "java-one"), (6, "b", 2, "java-six")], "upsert"),
    ([(5, "a", 3, "x")], "delete"),
]
OUR_WRITES = [
    ([(0, "b", 5, "ours-zero"), (7, "a", 5, "ours-seven")], "upsert"),
    ([(2, "b", 5, "x")], "delete"),
]


@pytest.fixture(scope="module")
def java_tables(tmp_path_factory, java_hudi):
    root = tmp_path_factory.mktemp("java-written")
    paths = {kind: str(root / f"{kind[0].lower()}_v{kind[1]}") for kind in KINDS}
    steps = []
    for (table_type, version), path in paths.items():
        for n, (rows, op) in enumerate(JAVA_WRITES):
            steps.append(Write(path, batch(rows), operation=op, options=JAVA_OPTIONS,
                               **(dict(table_type=table_type, table_version=version, record_key="id",
                                       partition_fields="p", ordering_field="ts") if n == 0 else {})))
    # one more: a version 8 table that our writer will upgrade to 9 (hoodie.properties replaced)
    upgraded = str(root / "cow_v8_upgraded_by_us")
    steps.append(Write(upgraded, batch(JAVA_WRITES[0][0]), operation="insert", options=JAVA_OPTIONS,
                       table_type="COPY_ON_WRITE", table_version=8, record_key="id",
                       partition_fields="p", ordering_field="ts"))
    paths["upgraded"] = upgraded
    java_hudi.run(*steps)
    model = Model()
    for rows, op in JAVA_WRITES:
        model.apply(rows, op)
    return paths, model


@pytest.fixture(scope="module")
def then_ours_then_java(java_tables, java_hudi):
    """Our reads of Java's tables, our writes on them, then Java's reads (one JVM)."""
    paths, java_model = java_tables
    paths = dict(paths)
    upgraded = paths.pop("upgraded")
    ours_before = {kind: read_table(Table.open(p)) for kind, p in paths.items()}
    model = Model(java_model)
    for rows, op in OUR_WRITES:
        model.apply(rows, op)
    ArrowTableWriter(Table.open(upgraded), WriteConfig.from_options(
        {**FAST_WRITE_OPTIONS, **JAVA_OPTIONS, "hoodie.write.table.version": "9"})).write(
        batch(OUR_WRITES[0][0]), "upsert")
    for kind, path in paths.items():
        table = Table.open(path)
        cls = MergeOnReadWriter if kind[0] == "MERGE_ON_READ" else ArrowTableWriter
        writer = cls(table, WriteConfig.from_options({**FAST_WRITE_OPTIONS, **JAVA_OPTIONS}))
        for rows, op in OUR_WRITES:
            writer.write(batch(rows), op)
    steps, where = [], {}
    for kind, path in paths.items():
        for query in ("snapshot", "read_optimized"):
            where[kind, query] = len(steps)
            steps.append(Read(path, query=query))
    where["upgraded", "snapshot"] = len(steps)
    steps.append(Read(upgraded))
    results = java_hudi.run(*steps, check=False)
    reads = {k: (results[i].rows if results[i].ok else results[i].error) for k, i in where.items()}
    return paths, java_model, ours_before, model, reads


def read_or_raise(read):
    if isinstance(read, Exception):
        raise read
    return read


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_java_wrote_the_version_and_type_asked_for(java_tables, kind):
    table = Table.open(java_tables[0][kind])
    assert (table.config.table_type, table.config.version) == kind


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_our_reader_reads_what_java_wrote(then_ours_then_java, kind):
    _, java_model, ours_before, _, _ = then_ours_then_java
    assert rows_by_key(ours_before[kind], columns=COLS) == java_model


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_java_reads_our_writes_on_its_table(then_ours_then_java, kind):
    paths, _, _, model, java_reads = then_ours_then_java
    java = rows_by_key(read_or_raise(java_reads[kind, "snapshot"]), columns=COLS)
    assert java == model
    assert rows_by_key(hudi_read(paths[kind]), columns=COLS) == model
    assert rows_by_key(read_table(Table.open(paths[kind])), columns=COLS) == model


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_java_read_optimized_after_our_writes_equals_ours_and_hudi_rs(then_ours_then_java, kind):
    paths, _, _, model, java_reads = then_ours_then_java
    java = rows_by_key(read_or_raise(java_reads[kind, "read_optimized"]), columns=COLS)
    table = Table.open(paths[kind])
    ours = read_optimized(table) if kind[0] == "MERGE_ON_READ" else read_table(table)
    assert java == rows_by_key(ours, columns=COLS)
    assert java == rows_by_key(hudi_read(paths[kind], read_optimized=True), columns=COLS)
    if kind[0] == "COPY_ON_WRITE":
        assert java == model


def test_java_reads_a_table_after_our_writer_upgraded_its_properties(then_ours_then_java):
    """Our upgrade 8 -> 9 replaces ``hoodie.properties``. Java on a local disk had written a
    Hadoop checksum (``.hoodie.properties.crc``) beside it; left in place, Java's next read
    fails its checksum and the table is unreadable ("Could not load Hoodie properties"), so
    our writer deletes it with the file it replaces."""
    *_, java_reads = then_ours_then_java
    java = rows_by_key(read_or_raise(java_reads["upgraded", "snapshot"]), columns=COLS)
    expected = Model().apply(JAVA_WRITES[0][0], "insert").apply(OUR_WRITES[0][0], "upsert")
    assert java == expected
