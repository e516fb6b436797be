"""AWS Glue as the sync's target, against moto's Glue (in process, no AWS).

What this proves: the sync's calls are ones Glue's API accepts with these shapes (moto
validates the operations and their parameters), the table definition and the partitions
after each step, the only-forward sync times and drops, as for the Hive Metastore. What it
cannot prove without AWS: Glue's own limits and consistency (throttling, eventual
visibility of a partition to Athena, IAM), nor that Athena reads the table through Hudi
(docs/catalog-sync.md)."""

from airflow_hudi_occ.core.catalog.changes import LAST_COMMIT_TIME_SYNC
from airflow_hudi_occ.core.catalog.glue import GlueCatalog
from airflow_hudi_occ.core.catalog.sync import INPUT_FORMAT, sync_table
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import MetaSyncConfig, WriteConfig
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS
from tests.core.catalog.rows import batch



def test_glue_sync_registers_and_follows_the_table(moto_glue, tmp_path):
    opts = {**FAST_WRITE_OPTIONS, "hoodie.datasource.meta.sync.enable": "true",
            "hoodie.meta.sync.client.tool.class": "org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool",
            "hoodie.datasource.hive_sync.database": "lake"}
    table = Table.create(str(tmp_path / "g"), "g", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    w = ArrowTableWriter(table, WriteConfig.from_options(opts))
    rep = w.write(batch([(1, "a", 1), (2, "b", 1)]), "upsert").catalog_sync
    assert rep.created == ["g"] and rep.added == {"g": ["a", "b"]}
    cat = GlueCatalog(MetaSyncConfig.from_options(opts))
    t = cat.get_table("lake", "g")
    assert t.table_type == "EXTERNAL_TABLE" and t.input_format == INPUT_FORMAT
    assert t.partition_keys == [("p", "string")] and t.columns[-2:] == [("id", "bigint"), ("ts", "bigint")]
    assert t.params["spark.sql.sources.provider"] == "hudi" and t.serde_params["path"] == table.base_uri.rstrip("/")
    rep = w.write(batch([(3, "c", 2)], v=["x"]), "upsert").catalog_sync
    assert rep.schema_changed == ["g"] and rep.instants_read == 1
    t = cat.get_table("lake", "g")
    assert t.columns[-1] == ("v", "string")
    assert sorted(cat.partition_values("lake", "g")) == [("a",), ("b",), ("c",)]
    last = [i for i in table.timeline().completed() if i.action is Action.COMMIT][-1]
    assert t.params[LAST_COMMIT_TIME_SYNC] == last.requested_time
    # a second sync with nothing new keeps everything; the sync point does not move back
    again = sync_table(table, WriteConfig.from_options(opts))
    assert again.last_commit_time_sync == last.requested_time
    assert cat.get_table("lake", "g").params[LAST_COMMIT_TIME_SYNC] == last.requested_time

