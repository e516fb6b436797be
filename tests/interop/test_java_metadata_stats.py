"""Java's column and partition stats kept by our commits: a table Java wrote at its defaults
(``files``, ``column_stats``, ``partition_stats``) written by ours with
``hoodie.occ.metadata.files.maintain=true``, then read, filtered, written and checked by Java.

What must hold (issue 32, item 2): Java's snapshot read through the metadata table is exact;
its read with data skipping on (``hoodie.enable.data.skipping=true``, a predicate on a data
column, which prunes files by ``column_stats``) is exact, where a wrong stat would drop rows
(the control below makes one wrong and sees the row dropped); Java's next writer adds one
deltacommit to the metadata table instead of rebuilding it; our clean turns the cleaned files'
column stats into tombstones; and Java's own metadata reader
agrees with the files (the equivalent of ``HoodieMetadataTableValidator``'s listing, column
stats and partition stats checks: every file's column stats record equals what Java computes
from the file's footer, every partition's stats equal the aggregate over its latest files).
"""

from __future__ import annotations

import os
import shutil

import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import MetadataTableConfig, WriteConfig
from airflow_hudi_occ.core.format.column_stats_record import TYPE_COLUMN_STATS
from airflow_hudi_occ.core.format.hfile import read_hfile
from airflow_hudi_occ.core.format.log_file import HeaderKey, decode_blocks, encode_blocks
from airflow_hudi_occ.core.format.log_file import LogFileName
from airflow_hudi_occ.core.format.metadata_record import decode_record, encode_record, hfile_data_block
from airflow_hudi_occ.core.services.clean import run_clean
from airflow_hudi_occ.core.table.metadata_listing import read_metadata_listing
from airflow_hudi_occ.core.table.metadata_stats import stats_blocks
from airflow_hudi_occ.core.table.metadata_table import metadata_table_state
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.crash import run_writer
from airflow_hudi_occ.testing.java_hudi import MetadataCheck, Read, Write
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, rows_by_key
from tests.core.table.test_metadata_listing import storage_listing
from tests.interop.rows import batch
from tests.interop.test_java_metadata_table import COLS, KEYS, metadata_partitions, model_of

MAINTAIN = {**FAST_WRITE_OPTIONS, "hoodie.occ.metadata.files.maintain": "true"}
SKIPPING = {"hoodie.enable.data.skipping": "true", "hoodie.metadata.enable": "true"}
#: what Java 1.2 indexes at its defaults on these tables: the three meta columns, then the data columns
INDEXED = ["_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key", "id", "p", "ts", "v"]
STAT_FIELDS = ("min", "max", "null_count", "value_count", "total_size", "total_uncompressed_size")


def java_stats_blocks(path: str, instant: str) -> dict[tuple[str, str], dict[str, bytes]]:
    """The stats records Java's deltacommit ``instant`` wrote: (partition, file group) -> {key: bytes}."""
    out: dict[tuple[str, str], dict[str, bytes]] = {}
    for partition in ("column_stats", "partition_stats"):
        folder = os.path.join(path, ".hoodie", "metadata", partition)
        for name in os.listdir(folder) if os.path.isdir(folder) else []:
            parsed = LogFileName.parse(name)
            if parsed is None or parsed.instant_time != instant:
                continue
            for block in decode_blocks(open(os.path.join(folder, name), "rb").read()):
                out.setdefault((partition, parsed.file_id), {}).update(read_hfile(block.content).entries)
    return out


def assert_ours_equal_javas(path: str, groups: int = 3) -> None:
    """Our records for Java's last commit, built from scratch from its commit metadata and its
    files' footers (columns, index version, keys, file groups, partition aggregates), are the
    bytes Java wrote (``groups``: col-stats-0000-0, -0001-0 and partition-stats-0000-0)."""
    table = Table.open(path)
    instant = table.timeline().completed()[-1]
    ours = stats_blocks(table, metadata_table_state(table), table.timeline().commit_metadata(instant),
                        MetadataTableConfig(),
                        timeline=table.timeline())
    javas = java_stats_blocks(path, instant.requested_time)
    assert sorted(ours) == sorted(javas) and len(javas) == groups
    for group, records in ours.items():
        assert {k: encode_record(r) for k, r in records.items()} == javas[group], group


def latest_files(files: dict[str, int]) -> list[str]:
    """The latest base file of each file group among ``files`` (``<fileId>_<token>_<instant>.parquet``)."""
    latest: dict[str, str] = {}
    for name in files:
        fid, instant = name.split("_")[0], name.rsplit("_", 1)[1].split(".")[0]
        if fid not in latest or instant > latest[fid].rsplit("_", 1)[1].split(".")[0]:
            latest[fid] = name
    return sorted(latest.values())


def aggregate(stats: list[dict], order=None) -> dict:
    """``order``: a sort key for the column's values as the check renders them (Java's order)."""
    def pick(fn, key):
        vals = [s[key] for s in stats if s[key] is not None]
        return fn(vals, key=order) if vals else None
    return {"min": pick(min, "min"), "max": pick(max, "max"),
            **{k: sum(s[k] for s in stats) for k in STAT_FIELDS[2:]}}


def assert_file_stats_recorded(col_stats: dict, partition: str, name: str, stats: list[dict], indexed) -> None:
    """One file's stats as Java computes them (``stats``: one per column) equal the live
    ``column_stats`` record of that file and column (``col_stats``: by (file name, column)),
    for exactly the ``indexed`` columns."""
    assert sorted(s["column"] for s in stats) == sorted(indexed), name
    for s in stats:
        recorded = col_stats.get((name, s["column"]))
        assert recorded is not None, f"no column_stats record for {partition}/{name} {s['column']}"
        assert {k: recorded[k] for k in STAT_FIELDS} == {k: s[k] for k in STAT_FIELDS}, (name, s["column"])


def assert_java_metadata_agrees(check: dict, path: str, indexed=INDEXED, order=None) -> None:
    """The validator's checks, on what Java's metadata reader returned (see the module doc);
    ``indexed``: the columns Java indexes, ``order``: {column: sort key} where Java's order is
    not the rendered values' (decimals, binary)."""
    on_storage = {p: f for p, f in storage_listing(path).items() if f}  # a rolled-back partition's folder stays
    assert check["partitions"] == sorted(on_storage)
    assert check["files"] == on_storage
    assert sum(len(files) for files in check["file_stats"].values()) == sum(len(f) for f in on_storage.values())
    col_stats = {(s["name"], s["column"]): s for s in check["column_stats"] if not s["deleted"]}
    part_stats = {(s["name"], s["column"]): s for s in check["partition_stats"]}
    for partition, files in check["file_stats"].items():
        for name, stats in files.items():
            assert_file_stats_recorded(col_stats, partition, name, stats, indexed)
        latest = latest_files(check["files"][partition])
        for column in indexed:
            expected = aggregate([s for n in latest for s in files[n] if s["column"] == column],
                                 (order or {}).get(column))
            recorded = part_stats.get((partition, column))
            assert recorded is not None, f"no partition_stats record for {partition} {column}"
            assert {k: recorded[k] for k in STAT_FIELDS} == expected, (partition, column)


def corrupt_our_column_stats(path: str, instant: str, column: str, low, high,
                             wrapper: str = "org.apache.hudi.avro.model.StringWrapper") -> int:
    """Rewrite our deltacommit's column_stats blocks with ``column``'s range set to [low, high]
    (in ``wrapper``) for every file: the negative control of the filtered read. Returns the
    records changed."""
    folder = os.path.join(path, ".hoodie", "metadata", "column_stats")
    changed = 0
    for name in os.listdir(folder):
        if f"_{instant}.log." not in name or name.endswith(".crc"):
            continue
        blocks = decode_blocks(open(os.path.join(folder, name), "rb").read())
        records = {}
        for block in blocks:
            for key, value in read_hfile(block.content).entries:
                record = decode_record(value, block.header.get(HeaderKey.SCHEMA))
                stats = record["ColumnStatsMetadata"]
                if record["type"] == TYPE_COLUMN_STATS and stats["columnName"] == column:
                    stats["minValue"], stats["maxValue"] = (wrapper, {"value": low}), (wrapper, {"value": high})
                    changed += 1
                records[key] = record
        with open(os.path.join(folder, name), "wb") as f:
            f.write(encode_blocks([hfile_data_block(instant, records)]))
    return changed


@pytest.mark.parametrize("version", [9, pytest.param(8, marks=pytest.mark.slow)])
def test_java_reads_filters_and_writes_through_the_stats_our_commits_keep(tmp_path, java_hudi, version):
    path = str(tmp_path / "t")
    first = [(i, "a" if i % 2 else "b", 1, f"java{i}") for i in range(6)]
    java_hudi.run(Write(path, batch(first), operation="insert", table_version=version, **KEYS))
    assert metadata_partitions(path) == ["column_stats", "files", "partition_stats"]
    assert_ours_equal_javas(path)
    model = model_of(first)

    # ours: an update in a, a new partition c (one null value), then a delete in b
    ours = [(1, "a", 2, "ours-one"), (9, "c", 2, "ours-nine"), (10, "c", 2, None)]
    ArrowTableWriter(Table.open(path), WriteConfig.from_options(MAINTAIN)).write(batch(ours), "upsert")
    model.update(model_of(ours))
    ArrowTableWriter(Table.open(path), WriteConfig.from_options(MAINTAIN)).write(batch([(2, "b", 3, "")]), "delete")
    del model[2]
    upsert, delete = [i.requested_time for i in Table.open(path).timeline().completed()[-2:]]
    assert read_metadata_listing(Table.open(path)).files == storage_listing(path)
    timeline = os.path.join(path, ".hoodie", "metadata", ".hoodie", "timeline")
    before = set(os.listdir(timeline))

    # the control: the same table with our files' stats of v made wrong
    control = str(tmp_path / "control")
    shutil.copytree(path, control)
    assert corrupt_our_column_stats(control, upsert, "v", "zzz0", "zzz1") == 2

    more = [(3, "a", 4, "java-three"), (11, "c", 4, "java-eleven")]
    snap, hit, wrong, _, after = java_hudi.run(
        Read(path), Read(path, options=SKIPPING, where="v = 'ours-nine'"),
        Read(control, options=SKIPPING, where="v = 'ours-nine'"),
        Write(path, batch(more), **KEYS), Read(path, options=SKIPPING, where="v >= 'ours' and id > 0"))
    assert rows_by_key(snap.rows, columns=COLS) == model
    assert rows_by_key(hit.rows, columns=COLS) == {9: model[9]}
    assert wrong.rows.num_rows == 0  # a wrong stat drops the row: the filtered read does use column_stats
    model.update(model_of(more))
    assert rows_by_key(after.rows, columns=COLS) == {k: r for k, r in model.items()
                                                     if r["v"] is not None and r["v"] >= "ours" and k > 0}
    assert rows_by_key(read_table(Table.open(path)), columns=COLS) == model

    # Java's next writer added one deltacommit to the metadata table, no rebuild
    added = sorted(n for n in set(os.listdir(timeline)) - before if not n.startswith("."))
    assert sorted(n.rsplit(".", 1)[-1] for n in added) == ["deltacommit", "inflight", "requested"]
    assert not any(n.startswith("0000000000000000") for n in added)
    assert metadata_partitions(path) == ["column_stats", "files", "partition_stats"]
    ours_files = {n for files in storage_listing(path).values() for n in files
                  if n.rsplit("_", 1)[1].split(".")[0] in (upsert, delete)}

    # our clean (one commit retained) deletes the older versions: their column stats become
    # tombstones in the clean's deltacommit, as Java's clean writes them
    cleaned = run_clean(Table.open(path), {**MAINTAIN, "hoodie.clean.commits.retained": "1"})
    gone = {os.path.basename(f) for f in cleaned.deleted_files}
    assert gone  # Java's first files, rewritten since
    check, snap_after_clean = java_hudi.run(MetadataCheck(path, INDEXED), Read(path))
    found = check.metadata_check()
    assert rows_by_key(snap_after_clean.rows, columns=COLS) == model
    live = {s["name"] for s in found["column_stats"] if not s["deleted"]}
    assert not gone & live, f"column stats of cleaned files still live: {sorted(gone & live)}"
    assert ours_files - gone and ours_files - gone <= live  # ours not cleaned still indexed
    assert_java_metadata_agrees(found, path)


@pytest.mark.slow
def test_a_table_without_partitions(tmp_path, java_hudi):
    """Java builds no partition_stats for a table without partitions; column_stats keys use its
    partition identifier ``.``: our records equal Java's, and Java's checks pass after ours."""
    path = str(tmp_path / "t")
    keys = {**KEYS, "partition_fields": ""}
    first = [(i, "a", 1, f"java{i}") for i in range(4)]
    java_hudi.run(Write(path, batch(first), operation="insert", **keys))
    assert metadata_partitions(path) == ["column_stats", "files"]
    assert_ours_equal_javas(path, groups=2)
    ours = [(1, "a", 2, "ours-one"), (8, "a", 2, "ours-eight")]
    ArrowTableWriter(Table.open(path), WriteConfig.from_options(MAINTAIN)).write(batch(ours), "upsert")
    model = {**model_of(first), **model_of(ours)}
    hit, check = java_hudi.run(Read(path, options=SKIPPING, where="v = 'ours-eight'"), MetadataCheck(path, INDEXED))
    assert rows_by_key(hit.rows, columns=COLS) == {8: model[8]}
    found = check.metadata_check()
    assert found["partitions"] == [""] and "error" in found["partition_stats"]  # no such metadata partition
    on_storage = {n: os.path.getsize(os.path.join(path, n)) for n in os.listdir(path) if n.endswith(".parquet")}
    assert found["files"] == {"": on_storage}
    col_stats = {(s["name"], s["column"]): s for s in found["column_stats"] if not s["deleted"]}
    for name, stats in found["file_stats"][""].items():
        assert sorted(s["column"] for s in stats) == sorted(INDEXED)
        for st in stats:
            assert {k: col_stats[(name, st["column"])][k] for k in STAT_FIELDS} == {k: st[k] for k in STAT_FIELDS}


@pytest.mark.slow
def test_a_writer_killed_after_its_stats_are_written_is_rolled_back_with_them(tmp_path, java_hudi):
    """Our writer SIGKILLed after the metadata table's deltacommit (files and stats records)
    completed, before its data instant: Java's reads are exact at the kill (its filtered read
    too); our next clean rolls the dead instant back, the metadata table's deltacommit with it
    in every partition (no column_stats record of the dead files remains), and Java's checks
    pass; Java's next write adds one deltacommit."""
    from tests.interop.test_java_metadata_every_action import mdt_instants
    from tests.reliability.conftest import age_lock_file, lock_options

    path = str(tmp_path / "t")
    first = [(i, "a" if i % 2 else "b", 1, f"java{i}") for i in range(4)]
    java_hudi.run(Write(path, batch(first), operation="insert", **KEYS))
    model = model_of(first)
    opts = {**lock_options("filesystem"), "hoodie.occ.metadata.files.maintain": "true"}
    dying = run_writer(path, opts, [{"id": 9, "p": "c", "ts": 9, "v": "dead"}],
                       crash_at="mdt_files_after_deltacommit", writer_id="dies")
    assert dying.killed, dying.stderr[-3000:]
    dead = dying.crash["instant"]
    assert dead in mdt_instants(path) and any(f"_{dead}.log." in n for n in os.listdir(
        os.path.join(path, ".hoodie", "metadata", "column_stats")))
    snap, hit = java_hudi.run(Read(path), Read(path, options=SKIPPING, where="v = 'dead' or v = 'java1'"))
    assert rows_by_key(snap.rows, columns=COLS) == model
    assert rows_by_key(hit.rows, columns=COLS) == {1: model[1]}

    age_lock_file(os.path.join(path, ".hoodie", "lock"), 120)
    run_clean(Table.open(path), opts)  # LAZY: rolls the dead writer back
    assert dead not in mdt_instants(path) and Table.open(path).timeline().get(dead) is None
    more = [(3, "a", 4, "java-three")]
    before = set(mdt_instants(path))
    written, read, check = java_hudi.run(Write(path, batch(more), **KEYS), Read(path), MetadataCheck(path, INDEXED))
    model.update(model_of(more))
    assert rows_by_key(read.rows, columns=COLS) == model
    assert [mdt_instants(path)[t][-1].rsplit(".", 1)[-1] for t in set(mdt_instants(path)) - before] == ["deltacommit"]
    found = check.metadata_check()
    assert not [s for s in found["column_stats"] if dead in s["name"]]
    assert_java_metadata_agrees(found, path)


@pytest.mark.parametrize("version", [pytest.param(9, marks=pytest.mark.slow)])
def test_java_reads_the_stats_our_compaction_merged(tmp_path, java_hudi, version):
    """Our metadata-table compaction (``hoodie.metadata.compact.max.delta.commits=2``) merges the
    stats partitions too (``merge_stats_records``): base HFiles in column_stats and
    partition_stats; Java's snapshot and filtered reads through them are exact, its next write
    adds one deltacommit, and its metadata checks pass."""
    from tests.interop.test_java_metadata_every_action import mdt_instants

    path = str(tmp_path / "t")
    first = [(i, "a" if i % 2 else "b", 1, f"java{i}") for i in range(6)]
    java_hudi.run(Write(path, batch(first), operation="insert", table_version=version, **KEYS))
    model = model_of(first)
    opts = {**MAINTAIN, "hoodie.metadata.compact.max.delta.commits": "2"}
    for rows in ([(1, "a", 2, "ours-one"), (9, "c", 2, "ours-nine")], [(2, "b", 3, "ours-two")]):
        ArrowTableWriter(Table.open(path), WriteConfig.from_options(opts)).write(batch(rows), "upsert")
        model.update(model_of(rows))
    compactions = [t for t, names in mdt_instants(path).items() if names[-1].endswith(".commit")]
    assert compactions, "our commits did not compact the metadata table"
    for partition in ("column_stats", "partition_stats"):
        assert any(n.endswith(".hfile") and compactions[-1] in n
                   for n in os.listdir(os.path.join(path, ".hoodie", "metadata", partition))), partition
    more = [(3, "a", 4, "java-three")]
    before = set(mdt_instants(path))
    snap, hit, written, after, check = java_hudi.run(
        Read(path), Read(path, options=SKIPPING, where="v = 'ours-nine' or v = 'java4'"),
        Write(path, batch(more), **KEYS), Read(path, options=SKIPPING, where="v >= 'ours' and id > 0"),
        MetadataCheck(path, INDEXED))
    assert rows_by_key(snap.rows, columns=COLS) == model
    assert rows_by_key(hit.rows, columns=COLS) == {9: model[9], 4: model[4]}
    model.update(model_of(more))
    assert rows_by_key(after.rows, columns=COLS) == {k: r for k, r in model.items()
                                                     if r["v"] is not None and r["v"] >= "ours" and k > 0}
    assert mdt_instants(path)[written.instant][-1].endswith(".deltacommit")
    assert not any(t.startswith("0000000000000000") for t in set(mdt_instants(path)) - before)
    assert_java_metadata_agrees(check.metadata_check(), path)
