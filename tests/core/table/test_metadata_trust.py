"""A metadata table that is not the table's (issue 40, item 7; core/table/metadata_trust.py):
two tables made from the Java v9 fixture (its metadata table reduced to files) and written by
the core writer, one's ``.hoodie/metadata`` copied into the other (a restore gone wrong). The
copy's deltacommits of the other table's instants are found; a write on it is refused before
any instant exists, the table byte-identical, with the fix in the error, and the fix works;
a table's own metadata table is never taken for another's (initialisation, a pending or
rolled-back data instant, data instants archived, the metadata table's log compaction). The
readers' side is in tests/core/table/test_file_listing.py, Java's in
tests/interop/test_java_foreign_metadata_table.py."""

from __future__ import annotations

import os
import shutil

import pytest

from airflow_hudi_occ.core.commit.archival import run_archival
from airflow_hudi_occ.core.commit.rollback import rollback_instant
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import ForeignMetadataTableError
from airflow_hudi_occ.core.services.clean import run_clean
from airflow_hudi_occ.core.table.history import TimelineHistory
from airflow_hudi_occ.core.table.metadata_compaction import open_metadata_table
from airflow_hudi_occ.core.table.metadata_table import METADATA_FOLDER, PARTITIONS_KEY
from airflow_hudi_occ.core.table.metadata_trust import SOLO_COMMIT_TIMESTAMP, foreign_instants
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.table.write_guard import check_for_write
from airflow_hudi_occ.testing.tables import hudi_read, tree_snapshot
from tests.core.table.test_metadata_commit import files_only_v9
from tests.core.table.test_metadata_table import _ids, _v9_rows


def write(path, options, ids_regions, like=None):
    """One upsert of the core writer (the metadata table kept, the default) of rows shaped as
    ``like`` (default: the table's, read by hudi-rs); its instant."""
    before = like if like is not None else hudi_read(str(path))
    return ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(options)).write(
        _v9_rows(before, ids_regions)).instant.requested_time


def copy_metadata_table(src, dst) -> None:
    """``src``'s metadata table in place of ``dst``'s, as a careless restore would put it."""
    shutil.rmtree(dst / METADATA_FOLDER)
    shutil.copytree(src / METADATA_FOLDER, dst / METADATA_FOLDER)


def two_tables(tmp_path, options):
    """Tables A and B, one commit of the core writer each (A's partition zz, B's yy), then A's
    metadata table copied into B. Returns A, B, A's and B's instants and B's rows (hudi-rs,
    through B's own metadata table, before the copy)."""
    a, b = files_only_v9(tmp_path / "a"), files_only_v9(tmp_path / "b")
    a_instant = write(a, options, [("A1", "us"), ("A2", "zz")])
    b_instant = write(b, options, [("B1", "eu"), ("B2", "yy")])
    b_rows = hudi_read(str(b))
    assert foreign_instants(Table.open(str(a))) == () and foreign_instants(Table.open(str(b))) == ()
    copy_metadata_table(a, b)
    return a, b, a_instant, b_instant, b_rows


def test_a_metadata_table_copied_from_another_table_is_found(tmp_path, fast_options):
    a, b, a_instant, b_instant, _ = two_tables(tmp_path, fast_options)
    # A's commit is the one instant B never had (the fixture's commits are both tables')
    assert foreign_instants(Table.open(str(b))) == (a_instant,)
    assert foreign_instants(Table.open(str(a))) == ()


def test_a_write_on_it_is_refused_before_any_instant_and_the_fix_works(tmp_path, fast_options):
    a, b, a_instant, b_instant, b_rows = two_tables(tmp_path, fast_options)
    snap = tree_snapshot(b)
    opts = WriteConfig.from_options(fast_options)
    with pytest.raises(ForeignMetadataTableError) as e:
        ArrowTableWriter(Table.open(str(b)), opts).write(_v9_rows(b_rows, [("B3", "eu")]))
    err = e.value
    mdt = str(b / METADATA_FOLDER)
    assert err.path == mdt and err.instants == (a_instant,) and err.base_path == str(b)
    assert mdt in err.message and a_instant in err.message and "never had" in err.message
    assert "hoodie.metadata.enable=false" in err.remedy and mdt in err.remedy
    assert tree_snapshot(b) == snap  # no instant, no attempt record, nothing appended to A's
    # the Spark job's fail-fast check and a table service say the same, changing nothing
    with pytest.raises(ForeignMetadataTableError):
        check_for_write(Table.open(str(b)), opts)
    with pytest.raises(ForeignMetadataTableError):
        run_clean(Table.open(str(b)), fast_options)
    assert tree_snapshot(b) == snap

    # the fix the error names: one write with the metadata table disabled removes it (as Java)
    write(b, {**fast_options, "hoodie.metadata.enable": "false"}, [("B3", "eu")], b_rows)
    table = Table.open(str(b))
    assert not (b / METADATA_FOLDER).exists() and not table.config.get(PARTITIONS_KEY)
    expected = sorted(_ids(b_rows) + ["B3"])
    assert _ids(hudi_read(str(b))) == expected == _ids(read_table(table))
    write(b, fast_options, [("B4", "eu")])  # and writers with the default go on
    assert _ids(hudi_read(str(b))) == sorted(expected + ["B4"])


def test_a_table_of_other_columns_and_instants_is_refused_too(tmp_path, fast_options):
    """The metadata table of another table altogether (the Java-written copy_on_write table of
    the v9_files_metadata_actions fixture: other columns, other instants)."""
    from airflow_hudi_occ.testing.tables import java_fixture
    b = files_only_v9(tmp_path / "b")
    write(b, fast_options, [("B1", "eu")])
    like = hudi_read(str(b))
    java_fixture("v9_files_metadata_actions", tmp_path / "other")
    other = tmp_path / "other" / "copy_on_write"
    copy_metadata_table(other, b)
    theirs = sorted(i.requested_time for i in Table.open(str(other)).timeline().completed()
                    if i.requested_time in {t.requested_time for t in open_metadata_table(
                        Table.open(str(other))).timeline().completed()})
    assert foreign_instants(Table.open(str(b))) == tuple(theirs) and len(theirs) == 5
    assert _ids(read_table(Table.open(str(b)))) == _ids(like)  # B's 4 rows, listed from storage
    snap = tree_snapshot(b)
    with pytest.raises(ForeignMetadataTableError) as e:
        write(b, fast_options, [("B2", "eu")], like)
    assert "5 completed deltacommit(s)" in e.value.message
    assert tree_snapshot(b) == snap


def test_the_tables_own_metadata_table_is_never_taken_for_another(tmp_path, fast_options):
    """No false alarm: the fixture's initialisation deltacommits, a data instant pending (its
    deltacommit completed, the data instant not), the same rolled back, data instants archived
    while the metadata table keeps their deltacommits, and the metadata table's own log
    compaction; a deltacommit of none of these is foreign."""
    path = files_only_v9(tmp_path)
    mdt_timeline = open_metadata_table(Table.open(str(path))).timeline()
    assert [i for i in mdt_timeline.completed() if i.requested_time.startswith(SOLO_COMMIT_TIMESTAMP)]
    assert foreign_instants(Table.open(str(path))) == ()

    # a data instant in flight whose metadata-table deltacommit completed (Java's order, killed
    # between the two), then rolled back by us
    last = write(path, fast_options, [("N0", "us")])
    timeline = Table.open(str(path)).timeline()
    os.unlink(timeline.file_path(timeline.get(last)))
    assert Table.open(str(path)).timeline().get(last).is_pending
    assert foreign_instants(Table.open(str(path))) == ()
    rollback_instant(Table.open(str(path)), last, WriteConfig.from_options(fast_options))
    assert foreign_instants(Table.open(str(path))) == ()

    # data instants archived (after the metadata table's first compaction), their
    # deltacommits still on the metadata table's active timeline: the next write goes through
    keep = {"hoodie.keep.min.commits": "3", "hoodie.keep.max.commits": "4", "hoodie.clean.commits.retained": "2",
            "hoodie.archive.automatic": "false", "hoodie.metadata.compact.max.delta.commits": "2"}
    opts = {**fast_options, **keep}
    for i in range(1, 6):
        write(path, opts, [(f"N{i}", "us")])
    table = Table.open(str(path))
    archived = run_archival(table, opts).archived
    mdt_times = {i.requested_time for i in open_metadata_table(table).timeline().completed()}
    assert set(archived) & mdt_times and not set(archived) & {i.requested_time for i in table.timeline()}
    assert set(archived) <= TimelineHistory(table).instant_times()
    assert foreign_instants(Table.open(str(path))) == ()
    write(path, opts, [("N6", "us")])

    # the metadata table's own log compaction: requested as logcompaction, completed as a
    # deltacommit at an instant no data table has; the same deltacommit without that request
    # is foreign
    folder = path / METADATA_FOLDER / ".hoodie" / "timeline"
    t, done = "20991231235959000", "20991231235959100"
    (folder / f"{t}.logcompaction.requested").write_bytes(b"")
    (folder / f"{t}.logcompaction.inflight").write_bytes(b"")
    (folder / f"{t}_{done}.deltacommit").write_bytes(b"")
    assert foreign_instants(Table.open(str(path))) == ()
    (folder / f"{t}.logcompaction.requested").unlink()
    (folder / f"{t}.logcompaction.inflight").unlink()
    assert foreign_instants(Table.open(str(path))) == (t,)
