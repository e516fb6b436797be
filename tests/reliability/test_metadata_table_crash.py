"""Kill points inside the removal of Hudi's metadata table (``hoodie.metadata.enable=false``),
and inside the steps of ours that keep it (``hoodie.occ.metadata.files.maintain=true``).

A writer SIGKILLed at each step (backup written; properties replaced; folder half deleted) must
leave a table that hudi-rs, which lists files through an enabled metadata table, reads exactly
as committed; the next writer finishes the removal and commits; nothing is left behind
(no backup file, no metadata folder, no pending instant).
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.metadata_table import PARTITIONS_KEY
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.crash import METADATA_COMMIT_POINTS, METADATA_TABLE_POINTS, run_writer
from airflow_hudi_occ.testing.tables import hudi_read, java_fixture

from .conftest import age_lock_file, lock_options


def _row(schema: pa.Schema, txn_id: str) -> dict:
    r = {n: None for n in schema.names}
    r.update({"txn_id": txn_id, "region": "us", "txn_ts": 1})
    return r


@pytest.mark.parametrize("point", METADATA_TABLE_POINTS)
def test_kill_inside_metadata_table_removal(tmp_path, point):
    path = java_fixture("v9_txns_simple_overwrite", tmp_path)
    before = hudi_read(str(path))
    ids = sorted(before.column("txn_id").to_pylist())
    schema = before.drop_columns([c for c in before.column_names if c.startswith("_hoodie_")]).schema
    opts = {**lock_options("filesystem"), "hoodie.metadata.enable": "false",
            "hoodie.occ.metadata.delete.unmaintained": "true"}  # the fixture has a record index

    rows = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist([_row(schema, "DEAD")], schema=schema), rows)
    child = run_writer(str(path), opts, [], rows_parquet=str(rows), crash_at=point,
                       writer_id=f"mdt-{point}")
    assert child.killed, f"child did not die at {point}: rc={child.returncode}\n{child.stderr[-3000:]}"
    assert child.crash["point"] == point

    # 0 exposed, 0 lost: the dead writer had created no instant; every committed row reads
    table = Table.open(str(path))
    assert sorted(hudi_read(str(path)).column("txn_id").to_pylist()) == ids
    assert not table.timeline().pending()
    if point != "mdt_after_backup":
        assert table.config.get(PARTITIONS_KEY) == ""  # readers left the metadata table already

    # the dead writer held the file lock; it is taken over (its holder is gone from this host;
    # aged as well, so the expiry alone would also let the next writer in)
    age_lock_file(str(path / ".hoodie" / "lock"), 120)
    nxt = pa.Table.from_pylist([_row(schema, "NEXT")], schema=schema)
    ArrowTableWriter(table, WriteConfig.from_options(opts)).write(nxt)
    assert sorted(hudi_read(str(path)).column("txn_id").to_pylist()) == sorted(ids + ["NEXT"])
    assert not (path / ".hoodie" / "metadata").exists()
    assert not (path / ".hoodie" / "hoodie.properties.backup").exists()
    assert not Table.open(str(path)).timeline().pending()


@pytest.mark.parametrize("point", METADATA_COMMIT_POINTS)
def test_kill_inside_the_metadata_tables_deltacommit(tmp_path, point):
    """``hoodie.occ.metadata.files.maintain=true`` on a files-only metadata table: a writer
    killed with the metadata table's log file written, or its deltacommit completed, before the
    data instant completes. hudi-rs, which lists files through the metadata table, reads exactly
    the committed rows (0 exposed, 0 lost); the next writer commits and is read."""
    from airflow_hudi_occ.core.table.metadata_listing import read_metadata_listing
    path = java_fixture("v9_txns_simple_overwrite", tmp_path)
    Table.open(str(path)).update_properties({PARTITIONS_KEY: "files"})
    before = hudi_read(str(path))
    ids = sorted(before.column("txn_id").to_pylist())
    schema = before.drop_columns([c for c in before.column_names if c.startswith("_hoodie_")]).schema
    opts = {**lock_options("filesystem"), "hoodie.occ.metadata.files.maintain": "true"}
    rows = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist([_row(schema, "DEAD")], schema=schema), rows)
    child = run_writer(str(path), opts, [], rows_parquet=str(rows), crash_at=point, writer_id=f"mdtc-{point}")
    assert child.killed, f"child did not die at {point}: rc={child.returncode}\n{child.stderr[-3000:]}"
    dead = child.crash["instant"]

    table = Table.open(str(path))
    assert sorted(hudi_read(str(path)).column("txn_id").to_pylist()) == ids  # nothing exposed, nothing lost
    assert dead in {i.requested_time for i in table.timeline().pending()}
    mdt = Table.open(str(path / ".hoodie" / "metadata")).timeline().get(dead)
    if point == "mdt_files_after_log":
        # the log file is staged before the lock (metadata_commit.stage_metadata_logs): no
        # metadata-table instant names it yet, so no reader can take its records
        assert mdt is None
    else:
        assert mdt is not None and mdt.is_completed

    if point != "mdt_files_after_log":  # staged before the lock: the dead writer held none
        age_lock_file(str(path / ".hoodie" / "lock"), 120)
    nxt = pa.Table.from_pylist([_row(schema, "NEXT")], schema=schema)
    ArrowTableWriter(table, WriteConfig.from_options(opts)).write(nxt)
    assert sorted(hudi_read(str(path)).column("txn_id").to_pylist()) == sorted(ids + ["NEXT"])
    # the listing holds every file on storage, the dead instant's only if its deltacommit completed
    from tests.core.table.test_metadata_listing import storage_listing
    listed = {p: f for p, f in read_metadata_listing(Table.open(str(path))).files.items() if f}
    keep_dead = point == "mdt_files_after_deltacommit"
    expected = {p: {n: size for n, size in files.items() if keep_dead or not n.endswith(f"_{dead}.parquet")}
                for p, files in storage_listing(path).items()}
    assert any(n.endswith(f"_{dead}.parquet") for files in storage_listing(path).values() for n in files)
    assert listed == {p: f for p, f in expected.items() if f}


@pytest.mark.parametrize("table_type,point,finisher", [
    ("COPY_ON_WRITE", "mdt_rollback_before_complete", "ours"),
    pytest.param("COPY_ON_WRITE", "mdt_rollback_after_complete", "ours", marks=pytest.mark.slow),
    pytest.param("COPY_ON_WRITE", "mdt_clean_after_deltacommit", "ours", marks=pytest.mark.slow),
    pytest.param("MERGE_ON_READ", "mdt_rollback_before_complete", "ours", marks=pytest.mark.slow),
    pytest.param("MERGE_ON_READ", "mdt_clean_after_deltacommit", "ours", marks=pytest.mark.slow),
    pytest.param("COPY_ON_WRITE", "mdt_rollback_before_complete", "java", marks=pytest.mark.slow),
    pytest.param("COPY_ON_WRITE", "mdt_rollback_after_complete", "java", marks=pytest.mark.slow),
    pytest.param("MERGE_ON_READ", "mdt_rollback_before_complete", "java", marks=pytest.mark.slow),
    pytest.param("COPY_ON_WRITE", "mdt_clean_after_deltacommit", "java", marks=pytest.mark.slow)])
def test_kill_inside_the_metadata_steps_of_a_clean_or_a_rollback(tmp_path, java_hudi, table_type, point,
                                                                 finisher):
    """``hoodie.occ.metadata.files.maintain=true`` on a Java table with a files-only metadata
    table. Rollback: a writer dies after its metadata-table deltacommit (before its own
    completion); the process rolling it back is killed inside the metadata table's rollback
    of that deltacommit, or after it, before the data rollback completes. Clean: a clean is
    killed after its metadata-table deltacommit, before it completes. Copy-on-write in the
    default run; merge-on-read (the dying write appends a log file) slow. At the kill and after
    the next clean of ours (which finishes the interrupted rollback or clean), Java's snapshot
    read through the metadata table and hudi-rs's are exact: 0 exposed, 0 lost; then the
    listing equals the storage, nothing is pending on either timeline, and Java's next writer
    adds one deltacommit to the metadata table. ``finisher="java"`` (slow): a Java writer comes
    first after the kill and finishes the interrupted rollback or clean itself (the data
    table's and the metadata table's), and its read is exact."""
    from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
    from airflow_hudi_occ.core.services.clean import run_clean
    from airflow_hudi_occ.core.services.compaction import execute_compaction, schedule_compaction
    from airflow_hudi_occ.core.table.metadata_listing import read_metadata_listing
    from airflow_hudi_occ.testing.java_hudi import Read, Write
    from airflow_hudi_occ.testing.tables import rows_by_key
    from tests.interop.rows import ONE_VERSION, RETAIN_1, apply, batch
    from tests.interop.test_java_metadata_every_action import data_files, mdt_instants
    from tests.interop.test_java_metadata_table import COLS, FILES_ONLY, KEYS, model_of

    path = str(tmp_path / "t")
    first = [(i, "a" if i % 2 else "b", 1, f"java{i}") for i in range(4)]
    java_hudi.run(Write(path, batch(first), operation="insert", table_type=table_type, table_version=9,
                        options=FILES_ONLY, **KEYS))
    model = model_of(first)
    mor = table_type == "MERGE_ON_READ"
    opts = {**lock_options("filesystem"), "hoodie.occ.metadata.files.maintain": "true",
            **(ONE_VERSION if mor else RETAIN_1)}
    for ts in (2, 3):  # old versions for a clean (merge-on-read: log files, then a compaction)
        rows = [(1, "a", ts, f"ours{ts}")]
        (MergeOnReadWriter if mor else ArrowTableWriter)(Table.open(path), WriteConfig.from_options(opts)).write(
            batch(rows))
        apply(model, rows, "upsert")
    if mor:
        execute_compaction(Table.open(path), opts, schedule_compaction(Table.open(path), opts, force=True))

    def exact(step: str) -> None:
        [read] = java_hudi.run(Read(path))
        assert rows_by_key(read.rows, columns=COLS) == model, step
        assert rows_by_key(hudi_read(path), columns=COLS) == model, step

    if point.startswith("mdt_rollback"):
        dying = run_writer(path, opts, [{"id": 0, "p": "b", "ts": 9, "v": "dead"}],
                           crash_at="mdt_files_after_deltacommit", writer_id="dies")
        assert dying.killed, dying.stderr[-3000:]
        dead = dying.crash["instant"]
        age_lock_file(os.path.join(path, ".hoodie", "lock"), 120)
        child = run_writer(path, opts, [], action="rollback", instant=dead, crash_at=point, writer_id=point)
    else:
        child = run_writer(path, opts, [], action="clean", crash_at=point, writer_id=point)
    assert child.killed, f"child did not die at {point}: rc={child.returncode}\n{child.stderr[-3000:]}"
    assert child.crash["point"] == point
    exact(f"after the kill at {point}")

    age_lock_file(os.path.join(path, ".hoodie", "lock"), 120)
    if finisher == "java":
        java_rows = [(5, "b", 7, "java-five")]
        _, read = java_hudi.run(Write(path, batch(java_rows), options=FILES_ONLY, **KEYS), Read(path))
        apply(model, java_rows, "upsert")
        assert rows_by_key(read.rows, columns=COLS) == model
    run_clean(Table.open(path), opts)  # LAZY: finishes the interrupted rollback; or the clean
    exact("after the next clean")
    listing = read_metadata_listing(Table.open(path))
    assert {p: f for p, f in listing.files.items() if f} == {p: f for p, f in data_files(path).items() if f}
    assert not Table.open(path).timeline().pending()
    assert not Table.open(os.path.join(path, ".hoodie", "metadata")).timeline().pending()
    if point.startswith("mdt_rollback"):
        assert dead not in mdt_instants(path) and Table.open(path).timeline().get(dead) is None

    before = mdt_instants(path)
    more = [(3, "a", 4, "java-three")]
    written, read = java_hudi.run(Write(path, batch(more), options=FILES_ONLY, **KEYS), Read(path))
    apply(model, more, "upsert")
    assert rows_by_key(read.rows, columns=COLS) == model
    assert mdt_instants(path)[written.instant][-1].endswith(".deltacommit")
    assert not any(t.startswith("0000000000000000") for t in set(mdt_instants(path)) - set(before))


@pytest.mark.parametrize("next_writer", ["ours", pytest.param("java", marks=pytest.mark.slow)])
def test_kill_inside_the_metadata_tables_compaction(tmp_path, request, next_writer):
    """A writer killed mid-compaction of the metadata table (its new base file written, the
    plan requested and inflight, the compaction not completed), after its data instant
    completed: the commit is read (0 lost), the half-done compaction is not (0 exposed: readers
    keep the previous slice); the next writer re-runs the pending compaction from its plan (as
    Java's ``runAnyPendingCompactions`` does, its base file rewritten) and commits. With
    ``java`` the reads are Java's, through the metadata table, and Java's writer is the next."""
    from airflow_hudi_occ.core.format.instant import Action
    from airflow_hudi_occ.core.table.metadata_compaction import latest_compaction_time, open_metadata_table
    from airflow_hudi_occ.testing.crash import METADATA_COMPACTION_POINTS
    point = "mdt_compaction_after_base"
    assert point in METADATA_COMPACTION_POINTS
    path, ids, schema = _files_only_table(tmp_path)
    opts = _compacting_options(path)
    compaction = _kill_writing(tmp_path, path, opts, schema, point).crash["compaction"]

    table = Table.open(str(path))
    assert not table.timeline().pending()  # the data instant completed before the compaction
    timeline = open_metadata_table(table).timeline()
    assert [i.requested_time for i in timeline.pending_compactions()] == [compaction]
    assert latest_compaction_time(timeline) is None
    base = [n for n in os.listdir(path / ".hoodie/metadata/files") if n.endswith(f"_{compaction}.hfile")]
    assert len(base) == 1  # written, not yet completed
    committed = sorted(ids + ["DEAD"])
    table = _next_write(request, next_writer, table, opts, path, schema, committed)
    timeline = open_metadata_table(table).timeline()
    assert not timeline.pending_compactions()
    done = timeline.get(compaction)
    assert done is not None and done.is_completed and done.action is Action.COMMIT
    assert not table.timeline().pending()


@pytest.mark.parametrize("next_writer", ["ours", pytest.param("java", marks=pytest.mark.slow)])
def test_kill_inside_the_metadata_tables_clean(tmp_path, request, next_writer):
    """A writer killed inside the metadata table's clean (its old slice's files deleted, the
    clean requested and inflight, not completed; run after the data instant completed, before
    the metadata table's compaction): the commit is read, nothing the readers use was deleted
    (the latest slice is never cleaned), and the next writer, ours or Java's, finishes the
    pending clean. The metadata table cleans by file versions here (2 kept, from
    ``hoodie.clean.fileversions.retained=1``) so that a few commits reach it."""
    from airflow_hudi_occ.core.format.instant import Action
    from airflow_hudi_occ.core.table.metadata_compaction import open_metadata_table
    from airflow_hudi_occ.testing.crash import METADATA_COMPACTION_POINTS
    point = "mdt_clean_after_delete"
    assert point in METADATA_COMPACTION_POINTS
    path, _, schema = _files_only_table(tmp_path)
    opts = {**lock_options("filesystem"), "hoodie.occ.metadata.files.maintain": "true",
            "hoodie.metadata.compact.max.delta.commits": "3", "hoodie.clean.policy": "KEEP_LATEST_FILE_VERSIONS",
            "hoodie.clean.fileversions.retained": "1"}
    # the fixture's 7 deltacommits: our 1st commit compacts, the 4th cleans nothing (2 slices)
    # and compacts, the 7th cleans the initialisation's slice: the child's
    for i in range(6):
        ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(opts)).write(
            pa.Table.from_pylist([_row(schema, f"W{i}")], schema=schema))
    ids = sorted(hudi_read(str(path)).column("txn_id").to_pylist())
    init_base = [n for n in os.listdir(path / ".hoodie/metadata/files") if n.endswith("_00000000000000000.hfile")]
    assert init_base
    child = _kill_writing(tmp_path, path, opts, schema, point)
    assert f"files/{init_base[0]}" in child.crash["deleted"]

    table = Table.open(str(path))
    timeline = open_metadata_table(table).timeline()
    assert [i.action for i in timeline.pending()] == [Action.CLEAN]
    committed = sorted(ids + ["DEAD"])
    table = _next_write(request, next_writer, table, opts, path, schema, committed)
    timeline = open_metadata_table(table).timeline()
    assert not timeline.pending(), [str(i) for i in timeline.pending()]


@pytest.mark.parametrize("point,next_writer", [
    ("mdt_compaction_after_requested", "ours"),
    pytest.param("mdt_compaction_after_inflight", "ours", marks=pytest.mark.slow),
    pytest.param("mdt_compaction_after_requested", "java", marks=pytest.mark.slow),
    pytest.param("mdt_compaction_after_inflight", "java", marks=pytest.mark.slow),
    pytest.param("mdt_compaction_after_requested", "java-v8", marks=pytest.mark.slow)])
def test_kill_after_the_metadata_tables_compaction_is_planned(tmp_path, request, point, next_writer):
    """A writer killed right after it planned the metadata table's compaction
    (``<c>.compaction.requested`` written; or also ``.inflight``), before any base file, its
    data instant completed: Java (through the metadata table, its timeline seeing the same
    pending compaction as ours) and hudi-rs read exactly the committed rows; the next writer,
    ours or Java's (slow), executes that plan under its own instant time, as Java's
    ``runPendingTableServicesOperations`` does (a pending compaction is run, not scheduled
    again), so the metadata table ends with that one compaction, no second one; Java's
    metadata check then lists the storage's files and its read is exact."""
    from airflow_hudi_occ.core.format.instant import Action, State
    from airflow_hudi_occ.core.table.metadata_compaction import BASE_FILE_RE, open_metadata_table
    from airflow_hudi_occ.testing.crash import METADATA_COMPACTION_POINTS
    from airflow_hudi_occ.testing.java_hudi import MetadataCheck, Read, Timelines
    from tests.core.table.test_metadata_listing import storage_listing
    assert point in METADATA_COMPACTION_POINTS
    java = request.getfixturevalue("java_hudi")
    next_writer, _, version = next_writer.partition("-v")  # "java-v8": a version-8 table
    path, ids, schema = _files_only_table(tmp_path, int(version or 9), java)
    opts = _compacting_options(path)
    compaction = _kill_writing(tmp_path, path, opts, schema, point).crash["compaction"]
    committed = sorted(ids + ["DEAD"])

    table = Table.open(str(path))
    assert not table.timeline().pending()  # the data instant completed before the compaction
    mdt_path = str(path / ".hoodie" / "metadata")
    timeline = open_metadata_table(table).timeline()
    [pending] = timeline.pending_compactions()
    assert pending.requested_time == compaction
    assert pending.state is (State.REQUESTED if point.endswith("requested") else State.INFLIGHT)
    assert not [n for n in os.listdir(path / ".hoodie/metadata/files") if n.endswith(f"_{compaction}.hfile")]
    if next_writer == "ours":  # (Java's writer reads first itself)
        read, seen = java.run(Read(str(path)), Timelines(mdt_path))
        assert sorted(read.rows.column("txn_id").to_pylist()) == committed
        assert _java_active(seen) == _our_active(timeline)
    table = _next_write(request, next_writer, table, opts, path, schema, committed)

    timeline = open_metadata_table(table).timeline()
    assert not timeline.pending()
    assert [i.requested_time for i in timeline.completed() if i.action is Action.COMMIT] == [compaction]
    bases = [m["file_id"] for n in os.listdir(path / ".hoodie/metadata/files")
             if (m := BASE_FILE_RE.match(n)) and m["instant"] == compaction]
    assert bases and len(bases) == len(set(bases))  # one new base file per file group
    check, read = java.run(MetadataCheck(str(path)), Read(str(path)))
    assert check.metadata_check()["files"] == {p: f for p, f in storage_listing(path).items() if f}
    assert sorted(read.rows.column("txn_id").to_pylist()) == sorted(committed + ["NEXT"])


@pytest.mark.parametrize("point,next_writer", [
    ("mdt_archive_after_history", "ours"),
    pytest.param("mdt_archive_before_manifest", "ours", marks=pytest.mark.slow),
    pytest.param("mdt_archive_after_delete", "ours", marks=pytest.mark.slow),
    pytest.param("mdt_archive_after_history", "java", marks=pytest.mark.slow),
    pytest.param("mdt_archive_after_delete", "java", marks=pytest.mark.slow),
    pytest.param("mdt_archive_after_history", "ours-v8", marks=pytest.mark.slow),
    pytest.param("mdt_archive_after_history", "java-archiving", marks=pytest.mark.slow)])
def test_kill_inside_the_metadata_tables_archival(tmp_path, request, point, next_writer):
    """A writer killed inside the metadata table's archival, after its data instant completed
    and its compaction (which lets the archival past the initialisation's deltacommits): with
    the archived instants in the LSM history and still on the active timeline, or deleted from
    it before the history's compaction (slow: the history's file written, no manifest naming
    it yet). Keep limits lowered (2/3: the metadata table's 3/4) so
    that the child's commit archives and the next archival comes within a few commits. At the kill
    and after each next writer: Java's ``HoodieActiveTimeline`` and ``HoodieArchivedTimeline``
    of the metadata table equal ours (our timeline, the history's rows as stored), no instant
    is in the history twice, and none is lost (every instant seen is active or archived); the
    next writer, ours or Java's (slow; ``java-archiving``: with our keep limits, so that Java's
    writer archives the metadata table itself and finishes the interrupted archival without
    archiving anything twice), commits and reads exactly; our next archival finishes
    the interrupted one (no instant both archived and active) and archives on; Java's next
    write succeeds and reads exactly."""
    from airflow_hudi_occ.testing.crash import METADATA_ARCHIVAL_POINTS
    from airflow_hudi_occ.testing.java_hudi import Read, Timelines
    assert point in METADATA_ARCHIVAL_POINTS
    java = request.getfixturevalue("java_hudi")
    next_writer, _, version = next_writer.partition("-v")  # "ours-v8": a version-8 table
    path, ids, schema = _files_only_table(tmp_path, int(version or 9), java)
    # a new table's metadata table has fewer instants than the fixture's: two commits of ours
    # first, so that the child's (which compacts) finds more than the 4 it keeps
    warm = [f"W{i}" for i in range(2 if version else 0)]
    opts = _compacting_options(path, len(warm) + 1, **{"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
                                                       "hoodie.clean.commits.retained": "1"})
    for txn_id in warm:
        ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(opts)).write(
            pa.Table.from_pylist([_row(schema, txn_id)], schema=schema))
    mdt_path = str(path / ".hoodie" / "metadata")
    seen = {i.requested_time for i in Table.open(mdt_path).timeline()}
    child = _kill_writing(tmp_path, path, opts, schema, point)
    committed = sorted(ids + warm + ["DEAD"])

    def same_in_java_and_ours(step: str, *more) -> list:
        """Java's timelines of the metadata table equal ours (taken before ``more``, Java steps
        run after its reading), nothing archived twice nor lost; the results of ``more``."""
        mdt = Table.open(mdt_path)
        ours, archived = _our_active(mdt.timeline()), _archived_rows(mdt)  # before ``more`` runs
        found, *rest = java.run(Timelines(mdt_path), *more)
        assert _java_active(found) == ours, step
        assert sorted((i["requested"], i["action"], i["completed"]) for i in found.timelines()["archived"]) \
            == archived, step
        times = [t for t, _, _ in archived]
        assert len(times) == len(set(times)), f"{step}: archived twice: {times}"
        seen.update(t for t, _, _ in ours)
        assert seen <= set(times) | {t for t, _, _ in ours}, f"{step}: lost"
        return rest

    archived = {t for t, _, _ in _archived_rows(Table.open(mdt_path))}
    active = {i.requested_time for i in Table.open(mdt_path).timeline()}
    if point == "mdt_archive_after_history":
        assert set(child.crash["archived"]) <= archived & active  # archived, not yet deleted
    elif point == "mdt_archive_before_manifest":  # a history file no manifest names: unread
        history = path / ".hoodie/metadata/.hoodie/timeline/history"
        orphans = [n for n in os.listdir(history) if n.endswith(".parquet")]
        assert not archived and orphans
    else:
        assert archived and not archived & active
    [read] = same_in_java_and_ours("after the kill", Read(str(path)))
    assert sorted(read.rows.column("txn_id").to_pylist()) == committed

    _next_write(request, next_writer, Table.open(str(path)), opts, path, schema, committed)
    same_in_java_and_ours("after the next writer")
    if next_writer == "java-archiving":  # Java's archival finished the interrupted one itself
        mdt = Table.open(mdt_path)
        assert not {t for t, _, _ in _archived_rows(mdt)} & {i.requested_time for i in mdt.timeline()}
    # our next archival of the metadata table: the commit after the data table's own archival
    # (the metadata table's waits for it, and runs first within a commit, as in Java's writer;
    # with Java's writer next, whose archival keeps Hudi's limits, that is two commits on)
    more = []
    while len(more) < 3:
        more.append(f"MORE{len(more)}")
        ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(opts)).write(
            pa.Table.from_pylist([_row(schema, more[-1])], schema=schema))
        mdt = Table.open(mdt_path)
        again = {t for t, _, _ in _archived_rows(mdt)}
        if again > archived:
            break
    assert again > archived, "the metadata table was not archived again"
    assert not again & {i.requested_time for i in mdt.timeline()}  # the interrupted one finished
    if point == "mdt_archive_before_manifest":  # the unpublished file: rewritten and published
        from airflow_hudi_occ.core.table.history import TimelineHistory
        named = {f.name for f in TimelineHistory(mdt).files()}
        assert [n for n in orphans if os.path.exists(history / n)] == [n for n in orphans if n in named]
    _, read = same_in_java_and_ours("after the next archival", _java_write(path, pa.Table.from_pylist(
        [_row(schema, "JAVA")], schema=schema)), Read(str(path)))
    assert sorted(read.rows.column("txn_id").to_pylist()) == sorted(committed + ["NEXT", *more, "JAVA"])


def _our_active(timeline) -> list[tuple[str, str, str]]:
    return sorted((i.requested_time, i.action.value, i.state.value) for i in timeline)


def _java_active(step) -> list[tuple[str, str, str]]:
    return sorted((i["requested"], i["action"], i["state"].lower()) for i in step.timelines()["active"])


def _archived_rows(table) -> list[tuple[str, str, str | None]]:
    """Every row of ``table``'s LSM history as stored, duplicates kept (our reader drops them):
    ``(instant time, action, completion time)``, sorted."""
    from airflow_hudi_occ.core.table.history import TimelineHistory
    history = TimelineHistory(table)
    rows = []
    for f in history.files():
        t = pq.read_table(os.path.join(history.folder, f.name), columns=["instantTime", "action", "completionTime"])
        rows += zip(*(t.column(c).to_pylist() for c in t.column_names))
    return sorted(rows)


def _next_write(request, next_writer: str, table, opts: dict, path, schema, committed: list):
    """After a kill inside the metadata table's services: hudi-rs reads exactly ``committed``
    and our listing equals the storage; the next writer (``ours``, or Java's at a files-only
    metadata table, whose read through the metadata table must first be exactly ``committed``)
    writes the row ``NEXT``, once the dead writer's lock has expired; then hudi-rs reads
    ``committed`` and ``NEXT`` and the listing equals the storage. Returns the table reopened."""
    from airflow_hudi_occ.core.table.metadata_listing import read_metadata_listing
    from tests.core.table.test_metadata_listing import storage_listing
    assert sorted(hudi_read(str(path)).column("txn_id").to_pylist()) == committed
    assert read_metadata_listing(table).files == storage_listing(path)
    _write_next(request, next_writer, table, opts, path, schema, committed)
    table = Table.open(str(path))
    assert sorted(hudi_read(str(path)).column("txn_id").to_pylist()) == sorted(committed + ["NEXT"])
    assert read_metadata_listing(table).files == storage_listing(path)
    return table


def _write_next(request, next_writer: str, table, opts: dict, path, schema, committed: list) -> None:
    age_lock_file(str(path / ".hoodie" / "lock"), 120)
    nxt = pa.Table.from_pylist([_row(schema, "NEXT")], schema=schema)
    if next_writer == "ours":
        ArrowTableWriter(table, WriteConfig.from_options(opts)).write(nxt)
        return
    from airflow_hudi_occ.testing.java_hudi import Read
    java = request.getfixturevalue("java_hudi")
    # "java-archiving": Java's writer with our keep limits, so that it archives too
    keep = {k: v for k, v in opts.items() if k.startswith("hoodie.keep.") or k == "hoodie.clean.commits.retained"}
    through_mdt, _ = java.run(Read(str(path)), _java_write(path, nxt, keep if next_writer == "java-archiving" else {}))
    assert sorted(through_mdt.rows.column("txn_id").to_pylist()) == committed


def _java_write(path, rows: pa.Table, options: dict | None = None, **write):
    """Java's upsert of ``rows`` on the files-only fixture (its keys; no other metadata
    partition; ``options`` added)."""
    from airflow_hudi_occ.testing.java_hudi import Write
    return Write(str(path), rows, record_key="txn_id", partition_fields="region", ordering_field="txn_ts",
                 table_name="v9_txns_cow_simple_overwrite", options={
                     "hoodie.metadata.index.column.stats.enable": "false",
                     "hoodie.metadata.index.partition.stats.enable": "false",
                     "hoodie.metadata.record.index.enable": "false", **(options or {})}, **write)


def _files_only_table(tmp_path, version: int = 9, java=None):
    """A table with a files-only metadata table (what our writer keeps): its path, its rows'
    ids (sorted) and its data schema. Version 9: the fixture, its other metadata partitions
    dropped from the table's config; version 8: the fixture's rows inserted by Java (``java``)
    into a new version-8 table."""
    path = java_fixture("v9_txns_simple_overwrite", tmp_path)
    Table.open(str(path)).update_properties({PARTITIONS_KEY: "files"})
    before = hudi_read(str(path))
    data = before.drop_columns([c for c in before.column_names if c.startswith("_hoodie_")])
    if version != 9:
        path = tmp_path / f"v{version}"
        java.run(_java_write(path, data, operation="insert", table_type="COPY_ON_WRITE", table_version=version))
        assert Table.open(str(path)).version == version
    return path, sorted(before.column("txn_id").to_pylist()), data.schema


def _compacting_options(path, commits: int = 1, **extra) -> dict:
    """Our writer keeping the metadata table, its compaction trigger set so that the
    deltacommit of our ``commits``-th commit from now reaches it."""
    from airflow_hudi_occ.core.table.metadata_compaction import deltacommits_since_compaction, open_metadata_table
    trigger = deltacommits_since_compaction(open_metadata_table(Table.open(str(path))).timeline()) + commits
    return {**lock_options("filesystem"), "hoodie.occ.metadata.files.maintain": "true",
            "hoodie.metadata.compact.max.delta.commits": str(trigger), **extra}


def _kill_writing(tmp_path, path, opts: dict, schema, point: str):
    """A child writing the row ``DEAD``, SIGKILLed at ``point``; its result."""
    rows = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist([_row(schema, "DEAD")], schema=schema), rows)
    child = run_writer(str(path), opts, [], rows_parquet=str(rows), crash_at=point, writer_id=point)
    assert child.killed, f"child did not die at {point}: rc={child.returncode}\n{child.stderr[-3000:]}"
    assert child.crash["point"] == point
    return child
