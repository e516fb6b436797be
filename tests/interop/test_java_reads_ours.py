"""Java Hudi reads the tables our writers write: COW (``ArrowTableWriter``) and MOR
(``MergeOnReadWriter``), table versions 8 and 9, partitioned or not, each after an insert, an
upsert (MOR: a log file) and a delete.

Java is the reference: its snapshot must equal the model, and hudi-rs and our reader must
agree with it; its read-optimised, time-travel and incremental reads must equal ours. All
the tables are read in one JVM (Spark and Hudi take seconds to start).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.mor_reader import read_incremental, read_optimized
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.java_hudi import Read
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key

COLS = ["id", "p", "ts", "v"]
#: (table type, table version, partitioned)
KINDS = [("COPY_ON_WRITE", 8, True), ("COPY_ON_WRITE", 9, True), ("MERGE_ON_READ", 8, True),
         ("MERGE_ON_READ", 9, True), ("COPY_ON_WRITE", 9, False), ("MERGE_ON_READ", 8, False)]
IDS = [f"{t[:3].lower()}-v{v}" + ("" if part else "-unpartitioned") for t, v, part in KINDS]


def batch(rows) -> pa.Table:
    return pa.table({"id": pa.array([r[0] for r in rows], pa.int64()), "p": [r[1] for r in rows],
                     "ts": pa.array([r[2] for r in rows], pa.int64()), "v": pa.array([r[3] for r in rows], pa.string())})


@dataclass
class Built:
    """A table we wrote, the model after each commit and the commits' instants."""

    table: Table
    models: list[dict] = field(default_factory=list)
    instants: list = field(default_factory=list)  # core Instant of each commit, in order

    @property
    def model(self) -> dict:
        return self.models[-1]


def build(base: str, table_type: str, version: int, partitioned: bool) -> Built:
    """Insert 8 rows over two partitions, upsert 2 of them and add one, delete one."""
    table = Table.create(base, "t", record_key_fields=["id"], partition_fields=["p"] if partitioned else [],
                         precombine_field="ts", table_type=table_type, version=version)
    cls = MergeOnReadWriter if table_type == "MERGE_ON_READ" else ArrowTableWriter
    writer = cls(table, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    built, model = Built(table), {}

    def commit(rows, op):
        result = writer.write(batch(rows), op)
        for r in rows:
            if op == "delete":
                model.pop(r[0], None)
            else:
                model[r[0]] = dict(zip(COLS, r))
        built.models.append(dict(model))
        built.instants.append(result.instant)

    commit([(i, "a" if i % 2 else "b", 1, f"v{i}") for i in range(8)], "insert")
    commit([(1, "a", 2, "one"), (2, "b", 2, "two"), (8, "b", 2, "eight")], "upsert")
    commit([(3, "a", 3, "gone")], "delete")
    return built


@pytest.fixture(scope="module")
def ours_read_by_java(tmp_path_factory, java_hudi):
    """The tables, and Java's reads of each, from one JVM."""
    root = tmp_path_factory.mktemp("ours")
    built = {kind: build(str(root / name), *kind) for kind, name in zip(KINDS, IDS)}
    steps, where = [], {}
    for kind, b in built.items():
        path, (c1, c2, _) = b.table.base_uri, b.instants
        reads = {"snapshot": Read(path),
                 "read_optimized": Read(path, query="read_optimized"),
                 "as_of_1": Read(path, query="time_travel", as_of=c1.requested_time),
                 "as_of_2": Read(path, query="time_travel", as_of=c2.requested_time),
                 "incremental_after_1": Read(path, query="incremental", start=c1.completion_time)}
        for name, step in reads.items():
            where[kind, name] = len(steps)
            steps.append(step)
    results = java_hudi.run(*steps)
    return built, {k: results[i].rows for k, i in where.items()}


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_java_snapshot_equals_the_model_hudi_rs_and_ours(ours_read_by_java, kind):
    built, reads = ours_read_by_java
    b = built[kind]
    java = rows_by_key(reads[kind, "snapshot"], columns=COLS)
    assert java == b.model
    assert rows_by_key(hudi_read(b.table.base_uri), columns=COLS) == java
    assert rows_by_key(read_table(Table.open(b.table.base_uri)), columns=COLS) == java


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_java_read_optimized_equals_ours(ours_read_by_java, kind):
    """Base files only: on MOR the upsert's updates and the delete sit in log files, so the
    read-optimised view shows the insert's rows plus the upsert's new key (a new file group
    starts with a base file); on COW it is the snapshot."""
    built, reads = ours_read_by_java
    b = built[kind]
    java = rows_by_key(reads[kind, "read_optimized"], columns=COLS)
    table = Table.open(b.table.base_uri)
    ours = read_optimized(table) if kind[0] == "MERGE_ON_READ" else read_table(table)
    assert java == rows_by_key(ours, columns=COLS)
    assert java == rows_by_key(hudi_read(b.table.base_uri, read_optimized=True), columns=COLS)
    expected = ({**b.models[0], 8: b.models[1][8]} if kind[0] == "MERGE_ON_READ" else b.model)
    assert java == expected


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_java_time_travel_equals_the_model_at_each_commit(ours_read_by_java, kind):
    built, reads = ours_read_by_java
    b = built[kind]
    table = Table.open(b.table.base_uri)
    for n in (1, 2):
        java = rows_by_key(reads[kind, f"as_of_{n}"], columns=COLS)
        assert java == b.models[n - 1], f"as of commit {n}"
        ours = read_table(table, as_of=b.instants[n - 1].requested_time)
        assert rows_by_key(ours, columns=COLS) == java, f"ours as of commit {n}"


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_java_incremental_after_the_first_commit_equals_ours(ours_read_by_java, kind):
    """Writes completed after the insert's completion time: the upsert's three rows (the
    delete removes a row and adds none)."""
    built, reads = ours_read_by_java
    b = built[kind]
    java = rows_by_key(reads[kind, "incremental_after_1"], columns=COLS)
    ours = read_incremental(Table.open(b.table.base_uri), start=b.instants[0].completion_time)
    assert java == rows_by_key(ours, columns=COLS)
    assert set(java) == {1, 2, 8}
