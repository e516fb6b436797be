"""The metastore client: its extra is imported only when a sync is asked for, and a write that
asks for a sync without it is refused before its instant exists."""

import sys

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.catalog.hive import HiveMetastore
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import CatalogClientMissingError, CatalogSyncError
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS


def test_sync_without_the_extra_is_refused_before_any_instant(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pymetastore", None)  # import pymetastore -> ImportError
    monkeypatch.setitem(sys.modules, "pymetastore.hive_metastore", None)
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"])
    w = ArrowTableWriter(table, WriteConfig.from_options({
        **FAST_WRITE_OPTIONS, "hoodie.datasource.meta.sync.enable": "true"}))
    with pytest.raises(CatalogClientMissingError) as exc:
        w.write(pa.table({"id": pa.array([1], pa.int64())}), "insert")
    assert "airflow-hudi-occ[hive]" in exc.value.remedy and exc.value.extra == "hive"
    assert list(table.timeline()) == []
    # sync off: the same writer commits without the extra
    w = ArrowTableWriter(table, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    assert w.write(pa.table({"id": pa.array([1], pa.int64())}), "insert").outcome == "committed"


def test_a_uri_without_host_is_refused_naming_the_key():
    with pytest.raises(CatalogSyncError) as exc:
        HiveMetastore("thrift://:9083").connect()
    assert "hoodie.datasource.hive_sync.metastore.uris" in exc.value.remedy
