"""Reading the file listing of Hudi's metadata table (core/table/metadata_listing.py) from the
Java v9 fixture: it equals the storage, and only completed deltacommits count."""

from __future__ import annotations

import json
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


#: the listing as a process without caches reads it, in JSON
FRESH_READER = """
import json, sys
from airflow_hudi_occ.core.table.metadata_listing import read_metadata_listing
from airflow_hudi_occ.core.table.table import Table
print(json.dumps(read_metadata_listing(Table.open(sys.argv[1])).files))
"""

#: a writer in its own process (its own caches, as another task's): one commit into ``path``
OTHER_WRITER = """
import sys
import pyarrow as pa
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS
from tests.core.table.test_metadata_table import _v9_rows
table = Table.open(sys.argv[1])
ArrowTableWriter(table, WriteConfig.from_options(dict(FAST_WRITE_OPTIONS))).write(
    _v9_rows(read_table(table), [("OTHER", "eu")]))
"""


def test_after_its_own_deltacommit_a_process_reads_the_listing_without_listing_the_folder(
        tmp_path, fast_options, monkeypatch):
    """A process that completed the metadata table's latest deltacommit knows the ``files``
    folder after it (its names before, and the log file it wrote) and the log's bytes: its next
    listing lists the folder and reads that log only when another commit came between (issue
    43: a single writer's tagging made both requests at every commit). What it reads then is
    what a process without those caches reads, and what the storage holds."""
    import subprocess
    import sys
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.format.storage import Storage
    from airflow_hudi_occ.core.table import metadata_listing
    from airflow_hudi_occ.core.table.metadata_table import PARTITIONS_KEY
    from tests.core.table.test_metadata_table import _v9_rows
    path = java_fixture(V9, tmp_path)
    # Java 1.2's defaults (the fixture's writer had the record index on too, which we refuse)
    Table.open(str(path)).update_properties({PARTITIONS_KEY: "files,column_stats,partition_stats"})
    writer = ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(fast_options))
    files_folder = str(path / ".hoodie" / "metadata" / "files")
    asked: list[tuple[str, str]] = []
    raw_list, raw_read = Storage.list_names, Storage.read

    def list_names(self, folder):
        asked.append(("list", folder))
        return raw_list(self, folder)

    def read(self, p, *a, **kw):
        asked.append(("read", p))
        return raw_read(self, p, *a, **kw)
    monkeypatch.setattr(Storage, "list_names", list_names)
    monkeypatch.setattr(Storage, "read", read)

    def listed_now() -> tuple[metadata_listing.MetadataListing, list]:
        asked.clear()
        listing = read_metadata_listing(Table.open(str(path)))
        return listing, [(k, p) for k, p in asked if p.startswith(files_folder)]

    for i in range(2):
        writer.write(_v9_rows(read_table(Table.open(str(path))), [(f"OWN{i}", "us")]))
        listing, files_asked = listed_now()
        assert files_asked == [], files_asked  # neither listed nor read: known from the commit
        assert listing.files == storage_listing(path)
    subprocess.run([sys.executable, "-c", OTHER_WRITER, str(path)], check=True, timeout=300,
                   cwd=os.getcwd())
    listing, files_asked = listed_now()
    assert ("list", files_folder) in files_asked  # another commit came between: listed again
    assert listing.files == storage_listing(path)
    # a process without any of the caches reads the same listing
    fresh = subprocess.run([sys.executable, "-c", FRESH_READER, str(path)], check=True, timeout=300,
                           capture_output=True, text=True, cwd=os.getcwd())
    assert json.loads(fresh.stdout) == listing.files
