"""``hoodie.datasource.write.reconcile.schema`` (``format/schema.reconcile_columns``, applied by
the write pipeline), judged by Java Hudi: a table of columns id, p, ts, v, w; then a batch
without w, then one without w whose ts is narrower (int). With the key true both Java and the
core writer read the same rows and columns after each batch; a batch that adds a column while
it lacks w is refused by both. Without the key (Hudi's default) we refuse a batch that lacks a
column, before any instant, with what to do."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.format.schema import SchemaError, reconcile_columns, avro_schema_json
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.java_hudi import Read, Write
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS

KEY = "hoodie.datasource.write.reconcile.schema"
FIRST = pa.table({"id": pa.array([1, 2], pa.int64()), "p": ["a", "a"], "ts": pa.array([1, 1], pa.int64()),
                  "v": ["a", "b"], "w": ["w1", "w2"]})
MISSING = pa.table({"id": pa.array([2, 3], pa.int64()), "p": ["a", "a"], "ts": pa.array([2, 2], pa.int64()),
                    "v": ["b2", "c2"]})
NARROW = pa.table({"id": pa.array([4], pa.int64()), "p": ["a"], "ts": pa.array([3], pa.int32()), "v": ["d"]})
NEW_AND_MISSING = pa.table({"id": pa.array([5], pa.int64()), "p": ["a"], "ts": pa.array([3], pa.int64()),
                            "v": ["e"], "x": pa.array([7], pa.int64())})
BATCHES = [FIRST, MISSING, NARROW]


def user_rows(t: pa.Table) -> tuple[list[str], list[tuple]]:
    t = t.drop_columns([c for c in t.column_names if c.startswith("_hoodie")])
    names = sorted(t.column_names)
    return names, sorted(tuple(r[n] for n in names) for r in t.to_pylist())


@pytest.fixture(scope="module")
def javas(tmp_path_factory, java_hudi):
    """Java's reads after each batch, and whether it took the batch that adds and lacks columns."""
    path = str(tmp_path_factory.mktemp("reconcile") / "t")
    opts = {"hoodie.metadata.enable": "false", KEY: "true"}
    steps = []
    for n, b in enumerate(BATCHES):
        first = dict(table_type="COPY_ON_WRITE", table_version=8, record_key="id", partition_fields="p",
                     ordering_field="ts") if n == 0 else {}
        steps += [Write(path, b, operation="upsert", options=opts, **first), Read(path)]
    steps.append(Write(path, NEW_AND_MISSING, operation="upsert", options=opts))
    results = java_hudi.run(*steps, check=False, continue_on_error=True)
    assert all(r.ok for r in results[:-1]), [r.error for r in results if not r.ok]
    return [results[i].rows for i in range(1, len(steps) - 1, 2)], results[-1].ok


def test_a_reconciled_write_reads_as_javas(javas, tmp_path):
    reads, java_took_new_and_missing = javas
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                     precombine_field="ts")
    w = ArrowTableWriter(t, WriteConfig.from_options({**FAST_WRITE_OPTIONS, KEY: "true"}))
    for b, java in zip(BATCHES, reads):
        w.write(b, "upsert")
        assert user_rows(read_table(Table.open(t.base_uri))) == user_rows(java)
    assert not java_took_new_and_missing
    before = t.timeline().instants
    with pytest.raises(SchemaError) as e:
        w.write(NEW_AND_MISSING, "upsert")
    assert e.value.columns == ["w"] and t.timeline().instants == before


def test_without_the_key_a_missing_column_is_refused_before_any_instant(tmp_path):
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                     precombine_field="ts")
    w = ArrowTableWriter(t, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    w.write(FIRST, "upsert")
    before = t.timeline().instants
    with pytest.raises(SchemaError) as e:
        w.write(MISSING, "upsert")
    assert e.value.columns == ["w"] and t.timeline().instants == before


def test_a_type_no_promotion_reaches_is_refused():
    table_json = avro_schema_json(FIRST.schema, "t")
    with pytest.raises(SchemaError) as e:
        reconcile_columns(pa.schema([("id", pa.string())]), table_json)
    assert e.value.columns == ["id"]
