"""Java's column and partition stats kept by every action of ours, not only copy-on-write
commits: merge-on-read deltacommits (log files indexed by their records), compaction,
clustering and insert_overwrite, on tables Java made at its DEFAULTS (``files``,
``column_stats``, ``partition_stats``), with ``hoodie.occ.metadata.files.maintain=true``.

After each action of ours: Java's snapshot read and its data-skipping read
(``hoodie.enable.data.skipping=true``, which prunes file slices by ``column_stats``) are exact,
our listing equals the storage, Java's metadata reader agrees with the files (every base file's
column stats as Java computes them from its footer; the partition stats the aggregate of the
partition's latest slices, log files included, as Java's writer computes them), and Java's next
write adds one deltacommit to the metadata table (no rebuild). Where Java's own action is
deterministic (its merge-on-read upsert), our records for it are Java's bytes.
"""

from __future__ import annotations

import os
import shutil

import pytest

from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.format.log_file import LogFileName
from airflow_hudi_occ.core.services.clustering import execute_clustering, schedule_clustering
from airflow_hudi_occ.core.services.compaction import execute_compaction, schedule_compaction
from airflow_hudi_occ.core.table.metadata_listing import read_metadata_listing
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.java_hudi import MetadataCheck, Read, Write
from airflow_hudi_occ.testing.tables import rows_by_key
from tests.interop.rows import apply, batch
from tests.interop.test_java_metadata_every_action import MAINTAIN as EVERY_ACTION, data_files, mdt_instants
from tests.interop.test_java_metadata_stats import (INDEXED, SKIPPING, STAT_FIELDS, aggregate,
                                                    assert_ours_equal_javas, corrupt_our_column_stats)
from tests.interop.test_java_metadata_table import COLS, KEYS, metadata_partitions, model_of

MAINTAIN = dict(EVERY_ACTION)


def latest_slices(table: Table, files: dict[str, int]) -> list[str]:
    """The files of each file group's latest slice among ``files`` (one partition's listing):
    the latest base file and the log files completed at or after it (a log-only group: all);
    file groups a completed replacecommit replaced left out."""
    timeline = table.timeline()
    replaced = {fid for inst in timeline.completed() if inst.action is Action.REPLACE_COMMIT
                for _, fid in timeline.commit_metadata(inst).replaced_file_groups()}
    bases: dict[str, str] = {}
    logs: dict[str, list[tuple[str, str]]] = {}
    for name in files:
        lf = LogFileName.parse(name)
        if (lf.file_id if lf is not None else name.split("_")[0]) in replaced:
            continue
        if lf is not None:
            done = timeline.get(lf.instant_time)
            if done is not None and done.is_completed:
                logs.setdefault(lf.file_id, []).append((done.completion_time, name))
            continue
        fid, instant = name.split("_")[0], name.rsplit("_", 1)[1].split(".")[0]
        if fid not in bases or instant > bases[fid].rsplit("_", 1)[1].split(".")[0]:
            bases[fid] = name
    out = list(bases.values())
    for fid, found in logs.items():
        since = bases[fid].rsplit("_", 1)[1].split(".")[0] if fid in bases else ""
        out += [name for done, name in found if done >= since]
    return sorted(out)


def assert_java_metadata_agrees(check: dict, path: str) -> None:
    """Java's metadata reader against the files: the listing is the storage; every base file's
    column stats are the footer's as Java computes them; every log file of a latest slice has
    its column stats as Java computes them from its records; every
    partition's stats are the aggregate over its latest slices, logs included."""
    table = Table.open(path)
    on_storage = {p: f for p, f in data_files(path).items() if f}
    assert check["files"] == on_storage
    col_stats = {(s["name"], s["column"]): s for s in check["column_stats"] if not s["deleted"]}
    part_stats = {(s["name"], s["column"]): s for s in check["partition_stats"]}
    for partition, files in check["file_stats"].items():
        per_file = {}
        for name, stats in files.items():
            assert sorted(s["column"] for s in stats) == sorted(INDEXED), name
            per_file[name] = stats
            for s in stats:
                recorded = col_stats.get((name, s["column"]))
                assert recorded is not None, f"no column_stats record for {partition}/{name} {s['column']}"
                assert {k: recorded[k] for k in STAT_FIELDS} == {k: s[k] for k in STAT_FIELDS}, (name, s["column"])
        latest = latest_slices(table, check["files"][partition])
        for name in latest:
            if LogFileName.parse(name) is not None:
                # the stats Java computes from the log file's records (getLogFileColumnRangeMetadata);
                # none for a log of deletes only, whose records are Java's empty ranges
                per_file[name] = check["log_stats"].get(partition, {}).get(name) or []
                if not per_file[name]:
                    assert all(col_stats[(name, c)]["value_count"] == 0 for c in INDEXED), name
                for s in per_file[name]:
                    recorded = col_stats.get((name, s["column"]))
                    assert recorded is not None, f"no column_stats record for log {partition}/{name} {s['column']}"
                    assert {k: recorded[k] for k in STAT_FIELDS} == {k: s[k] for k in STAT_FIELDS}, (name, s)
        for column in INDEXED:
            expected = aggregate([s for n in latest for s in per_file[n] if s["column"] == column])
            recorded = part_stats.get((partition, column))
            assert recorded is not None, f"no partition_stats record for {partition} {column}"
            assert {k: recorded[k] for k in STAT_FIELDS} == expected, (partition, column)


def check_step(java_hudi, path: str, model: dict, step: str, where: str, expect: set[int], *,
               metadata_check: bool = True) -> None:
    """Listing == storage; Java's snapshot and data-skipping reads exact; its checks pass."""
    listing = read_metadata_listing(Table.open(path))
    assert {p: f for p, f in listing.files.items() if f} == {p: f for p, f in data_files(path).items() if f}, step
    steps = [Read(path), Read(path, options=SKIPPING, where=where)]
    snap, hit, *check = java_hudi.run(*steps, *([MetadataCheck(path, INDEXED)] if metadata_check else []))
    assert rows_by_key(snap.rows, columns=COLS) == model, step
    assert rows_by_key(hit.rows, columns=COLS) == {k: model[k] for k in expect}, step
    if check:
        assert_java_metadata_agrees(check[0].metadata_check(), path)


def check_control(java_hudi, path: str, tmp_path, instant: str) -> None:
    """The same table with our log files' stats of ``v`` made wrong: Java's filtered read drops
    the row, so it does prune log files with ``column_stats``."""
    control = str(tmp_path / "control")
    shutil.copytree(path, control)
    assert corrupt_our_column_stats(control, instant, "v", "zzz0", "zzz1") >= 3
    [wrong] = java_hudi.run(Read(control, options=SKIPPING, where="v = 'ours-two'"))
    assert wrong.rows.num_rows == 0


def java_next_write_adds_one_deltacommit(java_hudi, path: str, model: dict) -> None:
    before = mdt_instants(path)
    more = [(3, "a", 9, "java-three"), (12, "d", 9, "java-twelve")]
    written, read = java_hudi.run(Write(path, batch(more), **KEYS), Read(path))
    apply(model, more, "upsert")
    assert rows_by_key(read.rows, columns=COLS) == model
    new = {t: names for t, names in mdt_instants(path).items() if t not in before}
    assert written.instant in new and new[written.instant][-1].endswith(".deltacommit")
    assert not any(t.startswith("0000000000000000") for t in new)  # not initialised again
    assert metadata_partitions(path) == ["column_stats", "files", "partition_stats"]


@pytest.mark.parametrize("version", [9, pytest.param(8, marks=pytest.mark.slow)])
def test_merge_on_read_upsert_and_compaction_keep_the_stats(tmp_path, java_hudi, version):
    path = str(tmp_path / "t")
    first = [(i, "a" if i % 2 else "b", 1, f"java{i}") for i in range(6)]
    java_hudi.run(Write(path, batch(first), operation="insert", table_type="MERGE_ON_READ",
                        table_version=version, **KEYS),
                  Write(path, batch([(1, "a", 2, "java-upd-one")]), **KEYS))
    assert metadata_partitions(path) == ["column_stats", "files", "partition_stats"]
    assert any(LogFileName.parse(n) for n in os.listdir(os.path.join(path, "a")))  # Java's log file
    # Java's deltacommit with a log file: our records for it, from scratch, are Java's bytes
    assert_ours_equal_javas(path)
    model = apply(model_of(first), [(1, "a", 2, "java-upd-one")], "upsert")

    # ours: updates in a and b (log files) and a new partition c (a base file; one null value)
    ours = [(1, "a", 3, "ours-one"), (2, "b", 3, "ours-two"), (9, "c", 3, "ours-nine"), (10, "c", 3, None)]
    res = MergeOnReadWriter(Table.open(path), WriteConfig.from_options(MAINTAIN)).write(batch(ours), "upsert")
    assert res.instant.action is Action.DELTA_COMMIT
    apply(model, ours, "upsert")
    assert any(f"_{res.instant.requested_time}.log." in n for n in os.listdir(os.path.join(path, "b")))
    check_step(java_hudi, path, model, "upsert", "v = 'ours-two' or v = 'ours-nine'", {2, 9})

    # the control (slow runs, for the default run's time): our log files' stats of v made wrong
    if os.environ.get("HUDI_OCC_SLOW") == "1":
        check_control(java_hudi, path, tmp_path, res.instant.requested_time)

    # our compaction: new base files over the slices with logs
    planned = schedule_compaction(Table.open(path), MAINTAIN, force=True)
    done = execute_compaction(Table.open(path), MAINTAIN, planned)
    assert Table.open(os.path.join(path, ".hoodie", "metadata")).timeline().get(done.instant).is_completed
    # Java's metadata checks after the compaction in slow runs (its base files' stats come from
    # footers, as a copy-on-write commit's: test_java_metadata_stats.py checks those by default)
    check_step(java_hudi, path, model, "compaction", "v = 'ours-one' or v = 'java4'", {1, 4},
               metadata_check=os.environ.get("HUDI_OCC_SLOW") == "1")
    java_next_write_adds_one_deltacommit(java_hudi, path, model)


@pytest.mark.slow
@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_clustering_and_insert_overwrite_keep_the_stats(tmp_path, java_hudi, table_type):
    path = str(tmp_path / "t")
    first = [(i, "a" if i % 2 else "b", 1, f"java{i}") for i in range(6)]
    java_hudi.run(Write(path, batch(first), operation="insert", table_type=table_type, **KEYS))
    model = model_of(first)
    writer = MergeOnReadWriter if table_type == "MERGE_ON_READ" else ArrowTableWriter
    ours = [(1, "a", 3, "ours-one"), (9, "c", 3, "ours-nine")]
    writer(Table.open(path), WriteConfig.from_options(MAINTAIN)).write(batch(ours), "upsert")
    apply(model, ours, "upsert")
    if table_type == "COPY_ON_WRITE":
        over = [(11, "c", 4, "ours-eleven")]
        res = writer(Table.open(path), WriteConfig.from_options(MAINTAIN)).write(batch(over), "insert_overwrite")
        assert res.instant.action is Action.REPLACE_COMMIT
        apply(model, over, "insert_overwrite")
        check_step(java_hudi, path, model, "insert_overwrite", "v = 'ours-eleven' or v = 'java4'", {11, 4})
    planned = schedule_clustering(Table.open(path), MAINTAIN)
    assert planned is not None
    execute_clustering(Table.open(path), MAINTAIN, planned)
    check_step(java_hudi, path, model, "clustering", "v = 'ours-one' or v = 'java4'", {1, 4})
    java_next_write_adds_one_deltacommit(java_hudi, path, model)
