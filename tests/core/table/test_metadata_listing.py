"""Reading the file listing of Hudi's metadata table (core/table/metadata_listing.py) from the
Java v9 fixture: it equals the storage, and only completed deltacommits count."""

from __future__ import annotations

import os

from airflow_hudi_occ.core.table.metadata_listing import read_metadata_listing
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import java_fixture

V9 = "v9_txns_simple_overwrite"


def storage_listing(path) -> dict[str, dict[str, int]]:
    """Every data file on storage, by partition folder, with its size."""
    out = {}
    for part in os.listdir(path):
        if part.startswith("."):
            continue
        out[part] = {f: os.path.getsize(os.path.join(path, part, f))
                     for f in os.listdir(os.path.join(path, part)) if f.endswith(".parquet")}
    return out


def test_the_listing_java_wrote_equals_the_storage(tmp_path):
    path = java_fixture(V9, tmp_path)
    listing = read_metadata_listing(Table.open(str(path)))
    assert listing.partitions == {"apac", "eu", "us"}
    assert listing.files == storage_listing(path)
    # the partition's initialisation, then the three data commits (the overwrite's replaced
    # files stay listed until a clean deletes them, as on storage)
    assert listing.instants == ["00000000000000000", "20260403183955124", "20260403183959838",
                                "20260403184001282"]


def test_a_deltacommit_that_did_not_complete_is_not_read(tmp_path):
    path = java_fixture(V9, tmp_path)
    timeline = path / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    (timeline / "20260403184001282_20260403184002226.deltacommit").unlink()  # left inflight
    listing = read_metadata_listing(Table.open(str(path)))
    assert listing.instants[-1] == "20260403183959838"
    on_storage = storage_listing(path)
    last = {p: {f for f in files if f.endswith("_20260403184001282.parquet")} for p, files in on_storage.items()}
    assert all(last.values())
    assert listing.files == {p: {f: s for f, s in files.items() if f not in last[p]}
                             for p, files in on_storage.items() if set(files) - last[p]}


def test_a_table_without_a_metadata_table_lists_nothing(tmp_path):
    path = java_fixture("v8_simplekeygen_nonhivestyle", tmp_path)
    listing = read_metadata_listing(Table.open(str(path)))
    assert listing.files == {} and listing.partitions == set() and listing.instants == []
