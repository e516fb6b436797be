"""Our copy-on-write commits keep a files-only metadata table up to date
(``hoodie.occ.metadata.files.maintain=true``; core/table/metadata_commit.py), checked with
hudi-rs, which lists files through the metadata table, and with our reader of the listing."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import MetadataTableEnabledError, UnmaintainedMetadataPartitionsError
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.table.metadata_listing import read_metadata_listing
from airflow_hudi_occ.core.table.metadata_table import PARTITIONS_KEY
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import hudi_read, java_fixture, tree_snapshot
from tests.core.table.test_metadata_listing import storage_listing
from tests.core.table.test_metadata_table import V9, _ids, _v9_rows

MAINTAIN = {"hoodie.occ.metadata.files.maintain": "true"}


def files_only_v9(tmp_path):
    """The Java v9 fixture with its metadata table reduced to the files partition (the other
    partitions' folders stay; no reader looks at a partition hoodie.properties does not list)."""
    path = java_fixture(V9, tmp_path)
    Table.open(str(path)).update_properties({PARTITIONS_KEY: "files"})
    return path


def test_our_commits_are_listed_in_the_metadata_table_and_read_through_it(tmp_path, fast_options):
    path = files_only_v9(tmp_path)
    before = hudi_read(str(path))
    opts = {**fast_options, **MAINTAIN}
    first = ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(opts)).write(
        _v9_rows(before, [("NEW1", "us"), ("NEW2", "zz")]))
    second = ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(opts)).write(
        _v9_rows(before, [("NEW3", "eu")]))
    # hudi-rs lists files through the metadata table: without our deltacommits it would miss them
    assert _ids(hudi_read(str(path))) == sorted(_ids(before) + ["NEW1", "NEW2", "NEW3"])
    listing = read_metadata_listing(Table.open(str(path)))
    assert listing.files == storage_listing(path) and "zz" in listing.partitions
    assert listing.instants[-2:] == [first.instant.requested_time, second.instant.requested_time]
    mdt = Table.open(str(path / ".hoodie" / "metadata")).timeline()
    for result in (first, second):
        own = mdt.get(result.instant.requested_time)
        assert own.action is Action.DELTA_COMMIT and own.is_completed
        assert own.completion_time < result.instant.completion_time  # Java's order
    assert Table.open(str(path)).config.get(PARTITIONS_KEY) == "files"


def test_what_the_switch_does_not_cover_is_still_refused(tmp_path, fast_options):
    """Every write, service, rollback and archival keeps the listing now; a caller of the guard
    without ``files_writer`` is refused, a metadata table being built
    (inflight partitions) is not ours to keep, and partitions nobody maintains stay refused."""
    path = files_only_v9(tmp_path)
    snap = tree_snapshot(path)
    opts = WriteConfig.from_options({**fast_options, **MAINTAIN})
    from airflow_hudi_occ.core.table.write_guard import check_for_write, prepare_for_write
    check_for_write(Table.open(str(path)), opts)  # the Spark job's preflight: its commit keeps it
    with pytest.raises(MetadataTableEnabledError) as e:
        prepare_for_write(Table.open(str(path)), opts)  # a caller that does not write the listing
    assert "this call is not one of them" in e.value.message
    Table.open(str(path)).update_properties({"hoodie.table.metadata.partitions.inflight": "column_stats"})
    with pytest.raises(UnmaintainedMetadataPartitionsError):
        check_for_write(Table.open(str(path)), opts)
    Table.open(str(path)).update_properties({"hoodie.table.metadata.partitions.inflight": ""})
    snap = tree_snapshot(path)
    # the switch never covers partitions it does not maintain
    Table.open(str(path)).update_properties({PARTITIONS_KEY: "files,record_index"})
    snap = tree_snapshot(path)
    with pytest.raises(UnmaintainedMetadataPartitionsError):
        ArrowTableWriter(Table.open(str(path)), opts).write(_v9_rows(hudi_read(str(path)), [("X", "us")]))
    assert tree_snapshot(path) == snap


def test_a_deltacommit_a_dead_attempt_left_is_finished_or_kept(tmp_path, fast_options):
    """A staged batch is re-committed after its writer died: the metadata table's deltacommit of
    that instant may already be pending (requested, log file) or completed; writing it again
    finishes or keeps it, and never lists a file twice."""
    from airflow_hudi_occ.core.format.instant import State
    from airflow_hudi_occ.core.format.metadata import WriteStat
    from airflow_hudi_occ.core.table.metadata_commit import write_files_deltacommit
    path = files_only_v9(tmp_path)
    table = Table.open(str(path))
    stats = [WriteStat(file_id="f1", path="us/f1-0_0-0-0_20990101000000000.parquet", partition_path="us",
                       file_size_in_bytes=10)]
    first = write_files_deltacommit(table, "20990101000000000", stats, "20990101000000100")
    again = write_files_deltacommit(table, "20990101000000000", stats, "20990101000000200")
    assert again == first and again.completion_time == "20990101000000100"
    mdt_timeline = path / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    (mdt_timeline / "20990101000000000_20990101000000100.deltacommit").unlink()  # left inflight
    assert Table.open(str(path / ".hoodie" / "metadata")).timeline().get("20990101000000000").state is State.INFLIGHT
    done = write_files_deltacommit(table, "20990101000000000", stats, "20990101000000300")
    assert done.is_completed and done.completion_time == "20990101000000300"
    listing = read_metadata_listing(Table.open(str(path)))
    assert listing.files["us"]["f1-0_0-0-0_20990101000000000.parquet"] == 10
    assert listing.instants.count("20990101000000000") == 1


def test_one_deltacommit_writes_a_log_file_per_file_group_and_lists_each(tmp_path):
    """The seam every action uses: any number of metadata partitions and file groups, one log
    file with one HFile block each, named as Java names them, every one in the commit metadata;
    a change's deletions and dropped partitions reach the listing."""
    from airflow_hudi_occ.core.format.files_change import FilesChange
    from airflow_hudi_occ.core.format.log_file import BlockType, decode_blocks
    from airflow_hudi_occ.core.format.metadata_record import decode_record
    from airflow_hudi_occ.core.format.hfile import read_hfile
    from airflow_hudi_occ.core.table.metadata_commit import files_block, write_metadata_deltacommit
    from airflow_hudi_occ.core.table.metadata_listing import FILES_FILE_ID
    path = files_only_v9(tmp_path)
    table = Table.open(str(path))
    before = read_metadata_listing(table)
    part, old = next((p, sorted(f)[0]) for p, f in sorted(before.files.items()) if f)
    change = FilesChange(added={"zz": {"a.parquet": 7}}, deleted={part: (old,)}, partitions_added=("zz",))
    other = {"k1": files_block(FilesChange(added={"q": {"b.parquet": 1}}))[("files", FILES_FILE_ID)]["q"]}
    blocks = {**files_block(change), ("column_stats", "col-stats-0000-0"): other,
              ("column_stats", "col-stats-0001-0"): {}}
    done = write_metadata_deltacommit(table, "20990101000000000", blocks, "20990101000000100")
    mdt = Table.open(str(path / ".hoodie" / "metadata"))
    meta = mdt.timeline().commit_metadata(done)
    assert sorted(s.path for s in meta.write_stats()) == [
        "column_stats/.col-stats-0000-0_20990101000000000.log.1_0-0-0",
        "files/.files-0000-0_20990101000000000.log.1_0-0-0"]
    for s in meta.write_stats():
        data = (path / ".hoodie" / "metadata" / s.path).read_bytes()
        assert s.file_size_in_bytes == len(data)
        [block] = decode_blocks(data)
        assert block.block_type is BlockType.HFILE_DATA
        keys = {k: decode_record(v) for k, v in read_hfile(block.content).entries}
        assert set(keys) == ({"__all_partitions__", part, "zz"} if s.partition_path == "files" else {"k1"})
    after = read_metadata_listing(Table.open(str(path)))
    assert after.files["zz"] == {"a.parquet": 7} and old not in after.files[part]
    gone = FilesChange(partitions_deleted=("zz",))
    write_metadata_deltacommit(table, "20990101000000200", files_block(gone), "20990101000000300")
    assert "zz" not in read_metadata_listing(Table.open(str(path))).partitions


def test_log_files_staged_before_the_lock_are_kept_replaced_or_deleted(tmp_path):
    """A commit writes its deltacommit's log files before the lock (issue 43): nobody reads
    them before the deltacommit completes; under the lock a file whose records are still the
    ones is kept as written, one whose records moved is replaced, one no longer wanted deleted;
    a rollback of an instant the metadata table never had deletes what was staged for it."""
    from airflow_hudi_occ.core.format.files_change import FilesChange
    from airflow_hudi_occ.core.table.metadata_clean import _file_groups
    from airflow_hudi_occ.core.table.metadata_commit import (files_block, rollback_metadata_deltacommit,
                                                             stage_metadata_logs, write_metadata_deltacommit)
    path = files_only_v9(tmp_path)
    table = Table.open(str(path))
    before = read_metadata_listing(table)
    t = "20990101000000000"
    files = path / ".hoodie" / "metadata" / "files"
    staged_change = files_block(FilesChange(added={"zz": {"a.parquet": 7}}, partitions_added=("zz",)))
    other = {"k1": files_block(FilesChange(added={"q": {"b.parquet": 1}}))[("files", "files-0000-0")]["q"]}
    staged = stage_metadata_logs(table, t, {**staged_change, ("column_stats", "col-stats-0000-0"): other})()
    log = files / f".files-0000-0_{t}.log.1_0-0-0"
    stats_log = path / ".hoodie" / "metadata" / "column_stats" / f".col-stats-0000-0_{t}.log.1_0-0-0"
    assert log.exists() and stats_log.exists() and len(staged) == 2
    # written, not yet read: the listing is what it was
    assert read_metadata_listing(Table.open(str(path))).files == before.files
    # a metadata clean takes it as pending (the newest slice), as Java's file group does
    mdt = Table.open(str(path / ".hoodie" / "metadata"))
    groups = _file_groups(mdt, "files", mdt.timeline())
    assert any(log.name in s.files and s.pending for s in groups["files-0000-0"])

    kept_bytes = log.read_bytes()
    write_metadata_deltacommit(table, t, staged_change, "20990101000000100", staged=staged)
    assert log.read_bytes() == kept_bytes  # the same records: kept as staged
    assert not stats_log.exists()  # no longer wanted: deleted
    assert read_metadata_listing(Table.open(str(path))).files["zz"] == {"a.parquet": 7}

    t2 = "20990101000000200"
    staged = stage_metadata_logs(table, t2, files_block(FilesChange(added={"zz": {"b.parquet": 1}})))()
    moved = files_block(FilesChange(added={"zz": {"c.parquet": 3}}))  # what is true under the lock
    write_metadata_deltacommit(table, t2, moved, "20990101000000300", staged=staged)
    after = read_metadata_listing(Table.open(str(path)))
    assert after.files["zz"] == {"a.parquet": 7, "c.parquet": 3}  # the staged b.parquet is not

    t3 = "20990101000000400"
    stage_metadata_logs(table, t3, files_block(FilesChange(added={"zz": {"d.parquet": 1}})))()
    assert rollback_metadata_deltacommit(table, t3, "20990101000000500", "20990101000000600") is None
    assert not (files / f".files-0000-0_{t3}.log.1_0-0-0").exists()
