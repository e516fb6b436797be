"""Our readers list files through Hudi's metadata table (core/table/file_listing.py), on the
Java v9 fixture (copy-on-write, written by Java 1.2 with its metadata table): the rows equal
those read through a storage listing, no partition folder is listed, records of a data
instant in flight or rolled back are not read, and a listing that does not decode is refused.
The merge-on-read case (Java-written) is tests/interop/test_java_metadata_listing.py."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.rollback import rollback_instant
from airflow_hudi_occ.core.commit.writer import read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import CorruptMetadataError
from airflow_hudi_occ.core.format.layout import PARTITION_METADATA_FILE
from airflow_hudi_occ.core.format.storage import Storage
from airflow_hudi_occ.core.table.file_listing import (SOURCE_METADATA_TABLE, SOURCE_STORAGE, file_listing,
                                                      uses_metadata_table)
from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.core.table.metadata_listing import read_metadata_listing
from airflow_hudi_occ.core.table.metadata_table import INFLIGHT_PARTITIONS_KEY, PARTITIONS_KEY
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import ListCalls, java_fixture

V9 = "v9_txns_simple_overwrite"
#: the fixture's commits: two upserts, then an insert_overwrite (a replacecommit)
FIRST, LAST = "20260403183955124", "20260403184001282"
STORAGE = {"hoodie.metadata.enable": "false"}


def by_key(t: pa.Table) -> pa.Table:
    return t.sort_by("txn_id")


def listed(view: FileSystemView) -> set[str]:
    """The data files the view's listing names (the storage also has partition markers)."""
    return {n for p in view.partitions() for n in view.listing.names(p) if n != PARTITION_METADATA_FILE}


def test_reads_through_the_metadata_table_equal_reads_through_the_storage(tmp_path, monkeypatch):
    path = java_fixture(V9, tmp_path)
    table = Table.open(str(path))
    assert uses_metadata_table(table) and not uses_metadata_table(table, metadata_enable=False)
    calls = ListCalls(monkeypatch)
    through_mdt = read_table(table)
    assert calls.of_data(table) == []  # no partition folder listed: the metadata table was used
    calls.clear()
    through_storage = read_table(table, options=STORAGE)
    assert len(calls.of_data(table)) == 4  # the walk for partitions, then each of the three
    assert through_mdt.num_rows > 0 and by_key(through_mdt).equals(by_key(through_storage))
    # time travel to the first commit: the files it sees are listed the same way
    calls.clear()
    old = read_table(table, as_of=FIRST)
    assert calls.of_data(table) == []
    assert by_key(old).equals(by_key(read_table(table, as_of=FIRST, options=STORAGE)))
    assert set(old.column("_hoodie_commit_time").to_pylist()) == {FIRST}
    # the view names the same files either way (files the replacecommit replaced included)
    assert listed(FileSystemView(table)) == listed(FileSystemView(table, metadata_enable=False))


def test_records_of_a_data_instant_in_flight_or_rolled_back_are_not_read(tmp_path):
    path = java_fixture(V9, tmp_path)
    expected = read_table(Table.open(str(path)), as_of="20260403184001000")  # before the last commit
    # the last commit's deltacommit completed on the metadata table, its data instant did not
    # (a writer killed between the two, as Java orders them)
    (path / ".hoodie" / "timeline" / f"{LAST}_20260403184002260.replacecommit").unlink()
    table = Table.open(str(path))
    view = FileSystemView(table)
    assert view.listing.source == SOURCE_METADATA_TABLE
    assert view.timeline.get(LAST).is_pending and LAST in view.listing.untrusted_instants()
    of_last = {n for n in listed(FileSystemView(table, metadata_enable=False)) if n.endswith(f"_{LAST}.parquet")}
    assert len(of_last) == 3  # on storage ...
    assert not listed(view) & of_last  # ... but not named by the listing a reader trusts
    unfiltered = read_metadata_listing(table)  # every completed deltacommit: they are there
    assert of_last <= {n for files in unfiltered.files.values() for n in files}
    assert by_key(read_table(table)).equals(by_key(expected))
    assert by_key(read_table(table, options=STORAGE)).equals(by_key(expected))

    # rolled back by us (which leaves the metadata table's deltacommit completed): still not read
    done = rollback_instant(table, LAST, WriteConfig.from_options({"hoodie.write.lock.provider": "filesystem"}))
    assert done.rollback_instant and not any(f.endswith(f"_{LAST}.parquet") for f in os.listdir(path / "us"))
    table = Table.open(str(path))
    view = FileSystemView(table)
    assert not view.timeline.get(LAST) and LAST in view.listing.untrusted_instants()
    assert not listed(view) & of_last
    assert by_key(read_table(table)).equals(by_key(expected))


def test_where_the_listing_comes_from(tmp_path):
    path = java_fixture(V9, tmp_path)
    table = Table.open(str(path))
    assert file_listing(table).source == SOURCE_METADATA_TABLE
    assert file_listing(table, metadata_enable=False).source == SOURCE_STORAGE
    # a files partition still being built is not read
    table.update_properties({PARTITIONS_KEY: "column_stats", INFLIGHT_PARTITIONS_KEY: "files"})
    assert file_listing(Table.open(str(path))).source == SOURCE_STORAGE
    # a table without a metadata table (Java v8 fixture)
    plain = Table.open(str(java_fixture("v8_simplekeygen_nonhivestyle", tmp_path)))
    assert file_listing(plain).source == SOURCE_STORAGE


def test_a_listing_that_does_not_decode_is_refused_never_replaced_by_the_storage(tmp_path):
    path = java_fixture(V9, tmp_path)
    files = path / ".hoodie" / "metadata" / "files"
    log = files / f".files-0000-0_{LAST}.log.1_11-67-244"
    data = bytearray(log.read_bytes())
    data[200:400] = b"\x07" * 200  # inside the HFile data block
    log.write_bytes(bytes(data))
    with pytest.raises(CorruptMetadataError) as e:
        read_table(Table.open(str(path)))
    assert "metadata table" in e.value.message and "hoodie.metadata.enable=false" in e.value.remedy
    assert read_table(Table.open(str(path)), options=STORAGE).num_rows > 0  # the way out it names

    # the properties say the files partition is complete, but nothing of it is left
    for f in files.iterdir():
        f.unlink()
    with pytest.raises(CorruptMetadataError):
        read_table(Table.open(str(path)))


def test_a_metadata_table_removed_after_the_properties_were_read_lists_the_storage(tmp_path):
    path = java_fixture(V9, tmp_path)
    expected = read_table(Table.open(str(path)))
    stale = Table.open(str(path))  # still says files is complete
    from airflow_hudi_occ.core.table.metadata_table import remove_metadata_table
    remove_metadata_table(Table.open(str(path)))  # what a writer with hoodie.metadata.enable=false does
    view = FileSystemView(stale)
    assert view.listing.source == SOURCE_METADATA_TABLE and view.listing.fallback is None
    assert by_key(read_table(stale)).equals(by_key(expected))
    assert listed(view) == listed(FileSystemView(Table.open(str(path))))
    assert view.listing.fallback is not None


from tests.spark.test_s3 import s3  # noqa: E402,F401 - the loopback S3 server with its request log, bucket "lake"


def list_requests(s3) -> list[dict]:
    """The ListObjects requests the server answered so far (what a listing costs on S3)."""
    import json
    rows = [json.loads(line) for line in s3.log_path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["m"] == "GET" and "list-type" in (r.get("q") or "")]


def test_on_s3_the_partition_folders_are_not_listed(tmp_path, s3, monkeypatch):
    from airflow_hudi_occ.testing.s3 import hudi_read_s3
    local = java_fixture(V9, tmp_path)
    url = "s3://lake/v9"
    Storage(url, s3.storage_options).fs.put(str(local) + "/", "lake/v9", recursive=True)
    table = Table.open(url, s3.storage_options)
    calls = ListCalls(monkeypatch)
    before = len(list_requests(s3))
    through_mdt = read_table(table)
    mdt_requests = list_requests(s3)[before:]
    assert calls.of_data(table) == []
    before = len(list_requests(s3))
    through_storage = read_table(table, options=STORAGE)
    storage_requests = list_requests(s3)[before:]
    assert len(calls.of_data(table)) == 4
    assert by_key(through_mdt).equals(by_key(through_storage))
    assert sorted(through_mdt.column("txn_id").to_pylist()) == sorted(
        hudi_read_s3(url, s3.storage_options).column("txn_id").to_pylist())
    # on the wire: every ListObjects through the metadata table is below .hoodie/ (the data
    # timeline, the metadata table's timeline and its files folder); the storage listing walks
    # the whole table and lists each partition folder
    assert mdt_requests and all(r["q"].split("prefix=")[1].startswith("v9%2F.hoodie%2F") for r in mdt_requests)
    assert [r for r in storage_requests if "prefix=v9%2Fus%2F" in r["q"]]
    assert len(storage_requests) > len(mdt_requests)


def test_a_metadata_table_of_another_table_is_not_read_the_storage_is(tmp_path, fast_options, caplog):
    """Issue 40, item 7: B's metadata table replaced by A's (core/table/metadata_trust.py).
    Java 1.2 and hudi-rs 0.5 take the copy's records (B's own commit missing, A's partition zz
    named: docs/hostile-input.md); our readers list the storage, with a warning, and read B's
    rows."""
    from tests.core.table.test_metadata_trust import two_tables
    a, b, a_instant, b_instant, b_rows = two_tables(tmp_path, fast_options)
    table = Table.open(str(b))
    with caplog.at_level("WARNING", logger="airflow_hudi_occ.core.table.file_listing"):
        view = FileSystemView(table)
        names = listed(view)
    assert view.listing.source == SOURCE_METADATA_TABLE and view.listing.foreign == (a_instant,)
    storage_view = FileSystemView(table, metadata_enable=False)
    assert names == listed(storage_view) and any(f"_{b_instant}." in n for n in names)
    assert view.partitions() == storage_view.partitions() and "zz" not in view.partitions()
    [warning] = [r.getMessage() for r in caplog.records if "belongs to another table" in r.getMessage()]
    assert str(b / ".hoodie" / "metadata") in warning and a_instant in warning
    # the rows are B's: as hudi-rs read them through B's own metadata table before the copy
    assert by_key(read_table(table)).equals(by_key(read_table(table, options=STORAGE)))
    assert sorted(read_table(table).column("txn_id").to_pylist()) == sorted(b_rows.column("txn_id").to_pylist())


def test_a_metadata_table_older_than_the_table_is_not_taken_for_archived_files(tmp_path, fast_options):
    """The copy is the v9 fixture's, whose instants are older than every instant of B: a view
    takes a file older than the active timeline for an archived, hence committed, one, so the
    copy's names used to be read as B's files (a raw FileNotFoundError on read, and on a
    write after its instant was requested). Now the storage is listed, and a write refused."""
    import shutil

    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.errors import ForeignMetadataTableError
    from airflow_hudi_occ.testing.tables import tree_snapshot
    other = java_fixture(V9, tmp_path / "other")
    b = tmp_path / "b"
    Table.create(str(b), "b", record_key_fields=["id"], partition_fields=["day"], precombine_field="ts")
    config = WriteConfig.from_options(fast_options)
    ArrowTableWriter(Table.open(str(b)), config).write(
        pa.table({"id": ["1", "2"], "day": ["us", "eu"], "ts": [1, 1], "v": ["x", "y"]}))
    # B's properties name its metadata table (Java built one), the folder holds the fixture's
    Table.open(str(b)).update_properties({PARTITIONS_KEY: "files"})
    shutil.copytree(other / ".hoodie" / "metadata", b / ".hoodie" / "metadata")
    table = Table.open(str(b))
    view = FileSystemView(table)
    assert listed(view) == listed(FileSystemView(table, metadata_enable=False))
    assert view.listing.foreign == (FIRST, "20260403183959838", LAST)
    assert sorted(read_table(table).column("id").to_pylist()) == ["1", "2"]
    snap = tree_snapshot(b)
    with pytest.raises(ForeignMetadataTableError):
        ArrowTableWriter(Table.open(str(b)), config).write(
            pa.table({"id": ["3"], "day": ["eu"], "ts": [2], "v": ["z"]}))
    assert tree_snapshot(b) == snap
