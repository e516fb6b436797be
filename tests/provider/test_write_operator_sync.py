"""HudiWriteOperator's retry after a commit whose catalog sync failed: the batch is found
committed before any spark-submit, and the catalog is synced then (moto's Glue stands for the
catalog; the Hive Metastore path is core's, tests/core/catalog)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_hudi_occ.core.catalog.glue import GlueCatalog
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import MetaSyncConfig, WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider.operators import write as ops
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS
from tests.provider.test_write_operator_recovery import StubTI

ROWS = [{"id": 1, "p": "a", "ts": 1}, {"id": 2, "p": "b", "ts": 1}]


def test_a_retry_of_a_committed_batch_syncs_the_catalog(moto_glue, tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    key = "ingest/manual__1/upsert"  # the operator's default batch key for StubTI
    # the first try: committed, its sync never happened (the catalog was down)
    ArrowTableWriter(table, WriteConfig.from_options(FAST_WRITE_OPTIONS)).write(
        pa.Table.from_pylist(ROWS), "upsert", batch_key=key)
    src = str(tmp_path / "src.parquet")
    pq.write_table(pa.Table.from_pylist(ROWS), src)
    opts = {**FAST_WRITE_OPTIONS, "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.hive_sync.enable": "true", "hoodie.datasource.hive_sync.mode": "glue",
            "hoodie.datasource.hive_sync.database": "lake"}
    op = ops.HudiWriteOperator(task_id="upsert", source=src, table_path=table.base_uri, options=opts,
                               conflict_retries=0, write_windows=None)
    out = op.execute({"ti": StubTI()})
    assert out["outcome"] == "already_committed" and out["attempts"] == []  # no spark-submit
    assert out["catalog_sync"]["created"] == ["t"]
    assert out["catalog_sync"]["last_commit_time_sync"] == out["instant"]
    assert sorted(GlueCatalog(MetaSyncConfig.from_options(opts)).partition_values("lake", "t")) == [("a",), ("b",)]
