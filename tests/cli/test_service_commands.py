"""The commands that write: ``hudi-occ sync`` (the catalog; against moto's Glue here, the Hive
Metastore in tests/core/catalog/test_sync.py)."""

from __future__ import annotations

import json

from airflow_hudi_occ.cli import main
from airflow_hudi_occ.core.catalog.glue import GlueCatalog
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import MetaSyncConfig, WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS
from tests.core.catalog.rows import batch


def test_hudi_occ_sync_catches_the_catalog_up(moto_glue, tmp_path, capsys):
    """Commits made with the sync off (a catalog that was down): `hudi-occ sync` registers
    them all in one pass; a second run reads nothing new."""
    table = Table.create(str(tmp_path / "c"), "c", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    w = ArrowTableWriter(table, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    for i, p in enumerate("abc"):
        w.write(batch([(i, p, i)]), "upsert")
    argv = ["sync", table.base_uri, "--option", "hoodie.datasource.hive_sync.mode=glue",
            "--option", "hoodie.datasource.hive_sync.database=lake", "--json"]
    for k, v in FAST_WRITE_OPTIONS.items():
        argv += ["--option", f"{k}={v}"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["created"] == ["c"] and doc["full_listing"] and doc["added"] == {"c": ["a", "b", "c"]}
    assert sorted(GlueCatalog(MetaSyncConfig.from_options({})).partition_values("lake", "c")) == [("a",), ("b",), ("c",)]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["instants_read"] == 0 and doc["created"] == [] and doc["added"] == {}
