"""``HudiTableServiceOperator(service="sync")``: the catalog brought up to the table, as a
commit's sync does (moto's Glue here; the Hive Metastore path is core's, tests/core/catalog)."""

from __future__ import annotations

from airflow_hudi_occ.core.catalog.glue import GlueCatalog
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import MetaSyncConfig, WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider.operators import table_service as ops
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS
from tests.core.catalog.rows import batch
from tests.provider.test_table_service_compact import _Events, _StubTI


def test_sync_action_registers_what_the_writers_committed(moto_glue, tmp_path):
    table = Table.create(str(tmp_path / "s"), "s", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    w = ArrowTableWriter(table, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    w.write(batch([(1, "a", 1), (2, "b", 1)]), "upsert")
    opts = {**FAST_WRITE_OPTIONS, "hoodie.datasource.hive_sync.mode": "glue",
            "hoodie.datasource.hive_sync.database": "lake"}
    op = ops.HudiTableServiceOperator(task_id="sync", service="sync", table_path=table.base_uri,
                                      hudi_conn_id=None, options=opts)
    out = op.execute({"ti": _StubTI(), "outlet_events": _Events()})
    last = table.timeline().completed()[-1]
    assert out["service"] == "sync" and out["created"] == ["s"]
    assert out["last_commit_time_sync"] == last.requested_time
    cat = GlueCatalog(MetaSyncConfig.from_options(opts))
    assert sorted(cat.partition_values("lake", "s")) == [("a",), ("b",)]
