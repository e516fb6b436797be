"""Replacecommits and schema evolution across Java Hudi and ours, in one JVM.

- our ``insert_overwrite`` of one partition (a replacecommit), read by Java;
- Java's ``insert_overwrite`` of one partition of a table of ours, read by Java, hudi-rs and
  our reader, then our upsert on top, read by all three;
- our writer adding a nullable column (schema evolution), read by Java with nulls for the
  rows written before.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.java_hudi import Read, Write
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key

COLS = ["id", "p", "ts", "v"]
OURS = {**FAST_WRITE_OPTIONS, "hoodie.metadata.enable": "false"}


def batch(rows, extra: dict | None = None) -> pa.Table:
    cols = {"id": pa.array([r[0] for r in rows], pa.int64()), "p": pa.array([r[1] for r in rows], pa.string()),
            "ts": pa.array([r[2] for r in rows], pa.int64()), "v": pa.array([r[3] for r in rows], pa.string())}
    return pa.table({**cols, **(extra or {})})


def new_table(path: str) -> tuple[Table, ArrowTableWriter]:
    t = Table.create(path, "t", record_key_fields=["id"], partition_fields=["p"], precombine_field="ts",
                     version=9)
    return t, ArrowTableWriter(t, WriteConfig.from_options(OURS))


START = [(i, "a" if i % 2 else "b", 1, f"v{i}") for i in range(6)]


def model_of(rows) -> dict:
    return {r[0]: dict(zip(COLS, r)) for r in rows}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, java_hudi):
    root = tmp_path_factory.mktemp("overwrite")
    # ours overwrites partition a
    ours_ow, w = new_table(str(root / "ours_overwrite"))
    w.write(batch(START), "insert")
    w.write(batch([(10, "a", 2, "new-a")]), "insert_overwrite")
    # Java overwrites partition b of a table of ours
    java_ow, w2 = new_table(str(root / "java_overwrite"))
    w2.write(batch(START), "insert")
    # ours adds a column
    evolved, w3 = new_table(str(root / "evolved"))
    w3.write(batch(START[:3]), "insert")
    w3.write(batch([(1, "a", 2, "one"), (7, "a", 2, "seven")], {"w": pa.array([11, 77], pa.int64())}), "upsert")
    first = java_hudi.run(Read(ours_ow.base_uri),
                          Write(java_ow.base_uri, batch([(20, "b", 2, "java-b")]), operation="insert_overwrite",
                                options={"hoodie.metadata.enable": "false"}),
                          Read(java_ow.base_uri), Read(evolved.base_uri))
    # our upsert on the table Java overwrote, then Java reads it again
    ArrowTableWriter(Table.open(java_ow.base_uri), WriteConfig.from_options(OURS)).write(
        batch([(1, "a", 3, "ours-one"), (20, "b", 3, "ours-twenty")]), "upsert")
    again = java_hudi.run(Read(java_ow.base_uri))
    return {"ours_ow": ours_ow.base_uri, "java_ow": java_ow.base_uri, "evolved": evolved.base_uri}, first, again


def test_java_reads_our_insert_overwrite(runs):
    paths, first, _ = runs
    expected = {k: v for k, v in model_of(START).items() if v["p"] != "a"} | model_of([(10, "a", 2, "new-a")])
    assert rows_by_key(first[0].rows, columns=COLS) == expected
    assert rows_by_key(hudi_read(paths["ours_ow"]), columns=COLS) == expected


def test_java_insert_overwrite_on_our_table_then_ours_on_top(runs):
    paths, first, again = runs
    assert [c["action"] for c in first[1].completed] == ["replacecommit"]
    expected = {k: v for k, v in model_of(START).items() if v["p"] != "b"} | model_of([(20, "b", 2, "java-b")])
    assert rows_by_key(first[2].rows, columns=COLS) == expected
    expected |= model_of([(1, "a", 3, "ours-one"), (20, "b", 3, "ours-twenty")])
    assert rows_by_key(again[0].rows, columns=COLS) == expected
    assert rows_by_key(hudi_read(paths["java_ow"]), columns=COLS) == expected
    assert rows_by_key(read_table(Table.open(paths["java_ow"])), columns=COLS) == expected


def test_java_reads_our_added_column_with_nulls_before_it(runs):
    paths, first, _ = runs
    expected = {k: {**v, "w": None} for k, v in model_of(START[:3]).items()}
    expected[1] = {**model_of([(1, "a", 2, "one")])[1], "w": 11}
    expected[7] = {**model_of([(7, "a", 2, "seven")])[7], "w": 77}
    assert rows_by_key(first[3].rows, columns=COLS + ["w"]) == expected
    assert rows_by_key(hudi_read(paths["evolved"]), columns=COLS + ["w"]) == expected
