"""A Java first write into the table the Java write operator made for it
(``provider/java_job.first_write_table_options`` and ``spark/submit/table_creation``, create-if-
absent before admission: docs/concurrency.md, "A table's first write"): Java's datasource,
given the options the operator gives it (as ``hudi-defaults.conf`` and its own script's),
writes into it without a config conflict and keeps its properties; Java, hudi-rs and our
reader read the rows."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.writer import read_table
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider.java_job import first_write_table_options
from airflow_hudi_occ.spark.submit.table_creation import open_or_create_table
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key

#: the operator's options (connection and task): what the user's script also sets
OPTIONS = {"hoodie.table.name": "orders", "hoodie.datasource.write.recordkey.field": "id",
           "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts",
           "hoodie.metadata.enable": "false"}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_java_first_write_into_the_table_the_operator_made(java_hudi, tmp_path, table_type):
    path = str(tmp_path / "orders")
    opts = {**OPTIONS, "hoodie.datasource.write.table.type": table_type}
    made = open_or_create_table(path, first_write_table_options(opts))
    before = dict(made.config.properties)
    assert made.version == 9 and made.config.table_type == table_type and made.timeline().completed() == []
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "p": ["a", "a", "b"],
                     "ts": pa.array([1, 1, 1], pa.int64()), "v": ["x", "y", "z"]})
    # the user's script: its own table settings, as the operator's job runs it
    res = java_hudi.write(path, rows, operation="upsert", table_name="orders", record_key="id",
                          partition_fields="p", ordering_field="ts", table_type=table_type,
                          options={"hoodie.metadata.enable": "false"})
    t = Table.open(path)
    assert [i.requested_time for i in t.timeline().completed() if i.is_write] == [res.instant]
    for k in ("hoodie.table.name", "hoodie.table.recordkey.fields", "hoodie.table.type",
              "hoodie.table.partition.fields", "hoodie.table.version"):
        assert t.config.properties.get(k) == before.get(k), k  # Java kept the table it was given
    want = {1: "x", 2: "y", 3: "z"}
    assert {k: r["v"] for k, r in rows_by_key(hudi_read(path)).items()} == want
    assert {k: r["v"] for k, r in rows_by_key(java_hudi.read(path)).items()} == want
    if table_type == "COPY_ON_WRITE":
        assert {k: r["v"] for k, r in rows_by_key(read_table(t)).items()} == want


def test_no_table_is_made_without_the_table_name_and_record_key():
    """Only the user's script knows them then: a table made from a guess would make Java
    refuse the write, so Java makes its own (and its first writes race)."""
    assert first_write_table_options({"hoodie.datasource.write.recordkey.field": "id"}) is None
    assert first_write_table_options({"hoodie.table.name": "orders"}) is None
    assert first_write_table_options({**OPTIONS, "hoodie.write.table.version": "8"}).write_config.write_table_version == 8
