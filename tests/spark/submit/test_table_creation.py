"""The table a first write creates, made by whichever comes first: the write operator before
its first write's admission, or the job. Both call ``open_or_create_table``; of first writers
racing, one creates the table and the others open that one."""

from __future__ import annotations

import threading

import pytest

from airflow_hudi_occ.core.errors import TableLocationNotEmptyError
from airflow_hudi_occ.core.format.properties import parse_properties
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.spark.submit.options import SparkWriteOptions
from airflow_hudi_occ.spark.submit.table_creation import default_table_name, open_or_create_table

OPTS = {"hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.table.type": "MERGE_ON_READ"}


def test_the_name_is_the_folders_made_an_identifier():
    assert default_table_name("/lake/orders/") == "orders"
    assert default_table_name("s3://b/2024-orders") == "t_2024_orders"


def test_first_writers_racing_make_one_table_from_their_options(tmp_path):
    path = str(tmp_path / "orders")
    opts = SparkWriteOptions.from_options(OPTS)
    made, errors = [], []
    start = threading.Barrier(4)

    def create():
        try:
            start.wait()
            made.append(open_or_create_table(path, opts))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(made) == 4
    props = parse_properties((tmp_path / "orders" / ".hoodie" / "hoodie.properties").read_text())
    assert props["hoodie.table.name"] == "orders" and props["hoodie.table.type"] == "MERGE_ON_READ"
    assert props["hoodie.table.recordkey.fields"] == "id"
    t = Table.open(path)
    assert (t.config.record_key_fields, t.config.partition_fields) == (["id"], ["p"])


def test_a_folder_holding_other_files_is_refused(tmp_path):
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "part-0.parquet").write_bytes(b"x")
    with pytest.raises(TableLocationNotEmptyError):
        open_or_create_table(str(tmp_path / "plain"), SparkWriteOptions.from_options(OPTS))
