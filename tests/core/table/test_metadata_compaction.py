"""The metadata table's own compaction, clean and archival after our commits
(core/table/metadata_compaction.py, metadata_clean.py, commit/metadata_services.py), on the Java
v9 fixture reduced to a files-only metadata table; hudi-rs reads through the metadata table.
Java's own reads of what these write are in tests/interop/test_java_metadata_compaction.py."""

from __future__ import annotations

import os

import pytest

from airflow_hudi_occ.core.commit.archival import metadata_table_bound, run_archival
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.format.hfile import read_hfile
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.format.metadata import CommitMetadata
from airflow_hudi_occ.core.format.metadata_record import decode_record, merge_records
from airflow_hudi_occ.core.table.metadata_compaction import (deltacommits_since_compaction, latest_compaction_time,
                                                             open_metadata_table)
from airflow_hudi_occ.core.table.metadata_listing import read_metadata_listing
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import hudi_read
from tests.core.table.test_metadata_commit import MAINTAIN, files_only_v9
from tests.core.table.test_metadata_listing import storage_listing
from tests.core.table.test_metadata_table import _v9_rows


def _write(path, options, n, before):
    for i in range(n):
        ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(options)).write(
            _v9_rows(before, [(f"N{i}", "us")]))


def our_base_files(path) -> list[str]:
    folder = os.path.join(path, ".hoodie", "metadata", "files")
    return sorted(n for n in os.listdir(folder) if n.endswith(".hfile") and "_0-0-0_" in n)


def test_compaction_at_the_trigger_folds_the_logs_into_a_base_file_readers_use(tmp_path, fast_options):
    path = files_only_v9(tmp_path)
    before = hudi_read(str(path))
    ids = set(before.column("txn_id").to_pylist())
    mdt = open_metadata_table(Table.open(str(path)))
    pending_deltacommits = deltacommits_since_compaction(mdt.timeline())  # the fixture's 7
    opts = {**fast_options, **MAINTAIN, "hoodie.metadata.compact.max.delta.commits": str(pending_deltacommits + 2)}
    _write(path, opts, 1, before)
    assert our_base_files(path) == [] and latest_compaction_time(mdt.timeline()) is None
    _write(path, opts, 1, before)  # the trigger: max deltacommits since the last compaction
    [base] = our_base_files(path)
    timeline = mdt.timeline()
    compaction = latest_compaction_time(timeline)
    assert base.endswith(f"_{compaction}.hfile") and deltacommits_since_compaction(timeline) == 0
    done = timeline.get(compaction)
    meta = CommitMetadata.decode(mdt.storage.read(timeline.file_path(done)))
    assert meta.operation_type == "COMPACT" and meta.compacted
    plan = timeline.compaction_plan(done)
    [op] = plan.operations
    assert (op.partition_path, op.file_id) == ("files", "files-0000-0")
    logs = sorted(n for n in os.listdir(os.path.join(path, ".hoodie", "metadata", "files")) if ".log." in n
                  and not n.endswith(".crc"))
    assert sorted(op.delta_file_names) == logs and len(logs) == 6  # Java's 4 (its init's included), ours 2
    [stat] = meta.write_stats()
    assert stat.path == f"files/{base}" and stat.prev_commit == op.base_instant_time

    # the base file holds the merged listing: what the logs said, now in one HFile
    hf = read_hfile((tmp_path / path / ".hoodie/metadata/files" / base).read_bytes())
    records = {k: decode_record(v) for k, v in hf.entries}
    assert all(r["_hoodie_file_name"] == base for r in records.values())
    on_storage = storage_listing(path)
    assert {k: {n for n, i in r["filesystemMetadata"].items() if not i["isDeleted"]}
            for k, r in records.items() if k != "__all_partitions__"} == {p: set(f) for p, f in on_storage.items()}
    listing = read_metadata_listing(Table.open(str(path)))
    assert listing.files == on_storage and listing.instants == [compaction]

    _write(path, opts, 1, before)  # a log after the base file: read on top of it
    listing = read_metadata_listing(Table.open(str(path)))
    assert listing.files == storage_listing(path) and listing.instants[0] == compaction
    assert set(hudi_read(str(path)).column("txn_id").to_pylist()) == ids | {"N0"}
    # our own readers list through the metadata table too (core/table/file_listing.py)
    assert set(read_table(Table.open(str(path))).column("txn_id").to_pylist()) == ids | {"N0"}


def test_merging_keeps_javas_rules():
    add = lambda files, kind=2: {"type": kind, "filesystemMetadata": files}  # noqa: E731
    a, b = {"size": 5, "isDeleted": False}, {"size": 9, "isDeleted": False}
    gone = {"size": 0, "isDeleted": True}
    assert merge_records(add({"x": a}), add({"x": b}))["filesystemMetadata"] == {"x": b}  # the larger size
    assert merge_records(add({"x": b}), add({"x": a}))["filesystemMetadata"] == {"x": b}
    assert merge_records(add({"x": a, "y": a}), add({"x": gone}))["filesystemMetadata"] == {"y": a}
    assert merge_records(add({"y": a}), add({"x": gone}))["filesystemMetadata"] == {"y": a, "x": gone}
    assert merge_records(None, add({"x": gone}))["filesystemMetadata"] == {"x": gone}
    with pytest.raises(ValueError, match="no merge rule"):
        merge_records(add({}, kind=7), add({}, kind=7))  # a secondary index: not ours
    with pytest.raises(ValueError, match="types"):
        merge_records(add({}, kind=1), add({}))


def test_data_table_archival_waits_for_the_metadata_tables_compaction(tmp_path, fast_options):
    """Java's rule: nothing is archived before the metadata table's first compaction, and no
    write completed after its latest one; then archival runs with the switch on (it used to be
    refused) and the table reads the same."""
    path = files_only_v9(tmp_path)
    before = hudi_read(str(path))
    keep = {"hoodie.keep.min.commits": "3", "hoodie.keep.max.commits": "4", "hoodie.clean.commits.retained": "2",
            "hoodie.archive.automatic": "false"}
    opts = {**fast_options, **MAINTAIN, **keep, "hoodie.metadata.compact.max.delta.commits": "50"}
    _write(path, opts, 4, before)
    held = run_archival(Table.open(str(path)), opts)
    assert held.archived == [] and held.boundary_reason == "no compaction yet on the metadata table"

    opts["hoodie.metadata.compact.max.delta.commits"] = "2"
    _write(path, opts, 1, before)  # compacts after its commit
    compaction = latest_compaction_time(open_metadata_table(Table.open(str(path))).timeline())
    assert compaction is not None
    _write(path, opts, 1, before)  # completed after the compaction: holds archival there
    table = Table.open(str(path))
    last = table.timeline().last_completed_write()
    bound, why = metadata_table_bound(table, table.timeline())
    assert bound == last.requested_time and "latest compaction" in why
    result = run_archival(table, opts)  # the fixture's replacecommit holds it earlier still
    assert result.archived and all(t < compaction for t in result.archived)
    expected = set(before.column("txn_id").to_pylist()) | {f"N{i}" for i in range(4)} | {"N0"}
    assert set(hudi_read(str(path)).column("txn_id").to_pylist()) == expected
    assert read_metadata_listing(Table.open(str(path))).files == storage_listing(path)


def test_a_commit_whose_archival_the_metadata_table_holds_back_takes_no_third_lock(
        tmp_path, fast_options, monkeypatch):
    """Past the keep limit, automatic archival is due after every commit, but while the
    metadata table has not compacted nothing may go: the commit finds that out from its own
    timeline, without taking the table lock a third time (issue 43: at 8 writers that hold came
    on a third of the commits, about 1 s each, every writer waiting). Once the metadata table's
    compaction lets old writes go, the commit takes the lock and archives them."""
    from airflow_hudi_occ.core.concurrency.locks.base import LockManager
    path = files_only_v9(tmp_path)
    before = hudi_read(str(path))
    holds = []
    raw_acquire = LockManager.acquire

    def counted(self, *args, **kwargs):
        holds.append(1)
        return raw_acquire(self, *args, **kwargs)

    monkeypatch.setattr(LockManager, "acquire", counted)

    def holds_of_one_write(opts, i):
        holds.clear()
        _write_one(path, opts, i, before)
        return len(holds)

    keep = {"hoodie.keep.min.commits": "3", "hoodie.keep.max.commits": "4", "hoodie.clean.commits.retained": "2"}
    opts = {**fast_options, **MAINTAIN, **keep, "hoodie.metadata.compact.max.delta.commits": "50"}
    plain = holds_of_one_write({**opts, "hoodie.archive.automatic": "false"}, 0)
    active = lambda: [i.requested_time for i in Table.open(str(path)).timeline().completed()]  # noqa: E731
    for i in range(1, 6):  # past the keep limit of 4, with no compaction of the metadata table
        assert holds_of_one_write(opts, i) == plain
    assert len(active()) > 4  # due all along, and nothing archived
    due = len(active())
    opts["hoodie.metadata.compact.max.delta.commits"] = "2"
    # compacts the metadata table after its commit, so nothing completed after the compaction
    # holds archival back: the commit takes the lock once more and old writes go
    assert holds_of_one_write(opts, 6) == plain + 1 and len(active()) < due
    expected = set(before.column("txn_id").to_pylist()) | {f"N{i}" for i in range(7)}
    assert set(hudi_read(str(path)).column("txn_id").to_pylist()) == expected


def _write_one(path, options, i, before):
    ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(options)).write(
        _v9_rows(before, [(f"N{i}", "us")]))


@pytest.mark.slow
def test_clean_and_archival_of_the_metadata_table_at_javas_defaults(tmp_path, fast_options):
    """Enough commits for the metadata table's clean (KEEP_LATEST_COMMITS, 20 retained, from the
    data table's policy) and archival (keep limits 21/31, never past the data table's earliest
    active write): old slices go, readers stay exact."""
    path = files_only_v9(tmp_path)
    before = hudi_read(str(path))
    opts = {**fast_options, **MAINTAIN, "hoodie.metadata.compact.max.delta.commits": "3"}
    _write(path, opts, 40, before)
    mdt = open_metadata_table(Table.open(str(path)))
    timeline = mdt.timeline()
    cleans = [i for i in timeline if i.action is Action.CLEAN and i.is_completed]
    assert cleans, "the metadata table was never cleaned"
    # archived up to the data table's earliest active write (the fixture's replacecommit holds
    # the data table's own archival, so the metadata table keeps the deltacommits after it)
    data_first = Table.open(str(path)).timeline().completed_writes()[0].requested_time
    assert min(i.requested_time for i in timeline) >= data_first  # the initialisation's went
    assert (tmp_path / path / ".hoodie/metadata/.hoodie/timeline/history").exists()
    names = os.listdir(os.path.join(path, ".hoodie", "metadata", "files"))
    assert len([n for n in names if n.endswith(".hfile")]) < 10  # 13 compactions, old ones cleaned
    assert read_metadata_listing(Table.open(str(path))).files == storage_listing(path)
    assert set(hudi_read(str(path)).column("txn_id").to_pylist()) == \
        set(before.column("txn_id").to_pylist()) | {f"N{i}" for i in range(40)}


def test_only_partitions_with_merge_rules_are_compacted():
    from airflow_hudi_occ.core.table.metadata_compaction import compactable
    assert compactable("files") and compactable("record_index") and compactable("bloom_filters")
    assert compactable("column_stats") and compactable("partition_stats")  # format/column_stats_record's rule
    assert not compactable("secondary_index_by_name") and not compactable("something_new")
