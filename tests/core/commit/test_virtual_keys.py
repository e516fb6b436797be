"""Tables with virtual keys (``hoodie.populate.meta.fields=false``): base files without the
five meta columns, the record key computed from the key fields, as Hudi writes them.

The core writer keeps them that way through inserts, upserts, deletes and clustering; hudi-rs
reads exactly the model's rows; writers that would mix meta columns into such a table refuse
it before anything is written.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.services.clustering import execute_clustering, schedule_clustering
from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.format.layout import META_COLUMNS
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key

VIRTUAL = {"hoodie.populate.meta.fields": "false"}


def _table(tmp_path, key_type):
    return Table.create(str(tmp_path / f"vk_{key_type}"), "vk", record_key_fields=["id"],
                        partition_fields=["p"], precombine_field="ts", extra_properties=VIRTUAL)


def _key(key_type, i):
    return f"k{i:04d}" if key_type == "text" else i


def _rows(key_type, ids, ts, v):
    return pa.table({"id": [_key(key_type, i) for i in ids], "p": [f"p{i % 2}" for i in ids],
                     "ts": [ts] * len(ids), "v": [v] * len(ids)})


def _base_files(table):
    return [s.base_file.relative_path for s in FileSystemView(table).latest_file_slices()]


@pytest.mark.parametrize("key_type", ["int", "text"])
def test_writes_keep_virtual_keys_and_hudi_rs_reads_the_model(tmp_path, key_type):
    table = _table(tmp_path, key_type)
    assert table.config.populates_meta_fields is False
    w = ArrowTableWriter(table, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    model = {}

    def apply(ids, ts, v, op="upsert"):
        w.write(_rows(key_type, ids, ts, v), op)
        for i in ids:
            k = _key(key_type, i)
            if op == "delete":
                model.pop(k, None)
            elif k not in model or ts >= model[k][0]:
                model[k] = (ts, v)

    apply(range(0, 40), 1, "a", "insert")
    apply(range(30, 50), 2, "b")          # updates 30..39, inserts 40..49
    apply(range(0, 5), 0, "stale")        # older than stored: the stored rows stay
    apply(range(10, 15), 9, "gone", "delete")
    for rel in _base_files(table):
        names = pq.read_schema(table.storage.path(rel)).names
        assert not set(META_COLUMNS) & set(names), f"{rel} has meta columns: {names}"
    got = {k: (r["ts"], r["v"]) for k, r in rows_by_key(hudi_read(table.base_uri), "id").items()}
    assert got == model
    assert len(got) == 45


def test_clustering_keeps_virtual_keys(tmp_path):
    table = _table(tmp_path, "int")
    w = ArrowTableWriter(table, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    for n in range(3):  # three small file groups per partition
        w.write(_rows("int", range(n * 10, n * 10 + 10), 1, f"c{n}"), "insert")
    before = rows_by_key(hudi_read(table.base_uri), "id")
    opts = {**FAST_WRITE_OPTIONS, "hoodie.clustering.plan.strategy.small.file.limit": str(1 << 30)}
    assert schedule_clustering(table, opts) is not None
    execute_clustering(table, opts)
    files = _base_files(table)
    assert len(files) == 2  # one per partition
    for rel in files:
        assert not set(META_COLUMNS) & set(pq.read_schema(table.storage.path(rel)).names)
    assert rows_by_key(hudi_read(table.base_uri), "id") == before


def test_a_writer_that_writes_meta_columns_refuses_the_table(tmp_path):
    with pytest.raises(ConfigError) as e:
        Table.create(str(tmp_path / "mor"), "mor", record_key_fields=["id"], table_type="MERGE_ON_READ",
                     extra_properties=VIRTUAL)
    assert e.value.key == "hoodie.populate.meta.fields"
    table = _table(tmp_path, "int")
    with pytest.raises(ConfigError) as e:
        table.require_meta_fields("the Spark engine")
    assert "virtual keys" in str(e.value) and "ArrowTableWriter" in e.value.remedy
    assert table.timeline().completed() == []  # nothing was written
