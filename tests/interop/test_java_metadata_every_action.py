"""Every action of ours keeps Java's files-only metadata table, and Java reads through it.

``hoodie.occ.metadata.files.maintain=true`` on a table Java created with its metadata table
holding ``files`` alone (issue 32, item 1): our upsert (a copy-on-write commit, a
merge-on-read deltacommit), insert_overwrite (copy-on-write), compaction (merge-on-read),
clustering, clean and the rollback of a write that died between its metadata-table
deltacommit and its own completion each leave a listing equal to the storage, and Java's
snapshot read, which lists files through the metadata table, returns exactly the model after
each. Java's next writer then adds its deltacommit to the metadata table instead of rebuilding
it. One JVM session answers every Java step (the ``java_hudi`` fixture).
"""

from __future__ import annotations

import os

import pytest

from airflow_hudi_occ.core.commit import transaction
from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.format.log_file import LogFileName
from airflow_hudi_occ.core.services.clean import run_clean
from airflow_hudi_occ.core.services.clustering import execute_clustering, schedule_clustering
from airflow_hudi_occ.core.services.compaction import execute_compaction, schedule_compaction
from airflow_hudi_occ.core.table.metadata_listing import read_metadata_listing
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.java_hudi import Read, Write
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, rows_by_key
from tests.interop.rows import ONE_VERSION, RETAIN_1, apply, batch
from tests.interop.test_java_metadata_table import COLS, FILES_ONLY, KEYS, metadata_partitions, model_of

MAINTAIN = {**FAST_WRITE_OPTIONS, "hoodie.occ.metadata.files.maintain": "true",
            # clustering rewrites every partition's file groups (each is small), sorted by id, so
            # a partition with one file group is rewritten too
            "hoodie.clustering.plan.strategy.small.file.limit": str(100 * 1024 * 1024),
            "hoodie.clustering.plan.strategy.sort.columns": "id"}


def data_files(path: str) -> dict[str, dict[str, int]]:
    """Every base and log file on storage, by partition folder, with its size (what the
    ``files`` partition must list)."""
    out: dict[str, dict[str, int]] = {}
    for part in sorted(os.listdir(path)):
        if part.startswith("."):
            continue
        names = os.listdir(os.path.join(path, part))
        out[part] = {n: os.path.getsize(os.path.join(path, part, n)) for n in names
                     if n.endswith(".parquet") or LogFileName.parse(n) is not None}
    return out


def mdt_instants(path: str) -> dict[str, list[str]]:
    """The metadata table's timeline: requested time -> the names of its instant files."""
    out: dict[str, list[str]] = {}
    folder = os.path.join(path, ".hoodie", "metadata", ".hoodie", "timeline")
    for n in sorted(os.listdir(folder)):
        if n[:1].isdigit():
            out.setdefault(n.split(".", 1)[0].split("_", 1)[0], []).append(n)
    return out


class DiedBeforeCompletion(Exception):
    """What the patched data completion raises: the writer dies after its metadata-table
    deltacommit, before its own instant completes."""


def check(java_hudi, path: str, model: dict, step: str) -> None:
    listing = read_metadata_listing(Table.open(path))
    assert {p: f for p, f in listing.files.items() if f} == {p: f for p, f in data_files(path).items() if f}, step
    [read] = java_hudi.run(Read(path))
    assert rows_by_key(read.rows, columns=COLS) == model, step


@pytest.mark.parametrize("table_type,version", [
    ("COPY_ON_WRITE", 9), ("MERGE_ON_READ", 9),
    pytest.param("COPY_ON_WRITE", 8, marks=pytest.mark.slow),
    pytest.param("MERGE_ON_READ", 8, marks=pytest.mark.slow)])
def test_every_action_of_ours_keeps_the_files_partition(tmp_path, java_hudi, monkeypatch, table_type, version):
    path = str(tmp_path / "t")
    mor = table_type == "MERGE_ON_READ"
    first = [(i, "a" if i % 2 else "b", 1, f"java{i}") for i in range(6)]
    java_hudi.run(Write(path, batch(first), operation="insert", table_type=table_type, table_version=version,
                        options=FILES_ONLY, **KEYS))
    assert metadata_partitions(path) == ["files"] and Table.open(path).version == version
    model = model_of(first)
    writer = MergeOnReadWriter if mor else ArrowTableWriter

    def write(rows, op="upsert"):
        res = writer(Table.open(path), WriteConfig.from_options(MAINTAIN)).write(batch(rows), op)
        apply(model, rows, op)
        return res.instant

    def mdt_action(instant_time: str) -> str:
        done = Table.open(os.path.join(path, ".hoodie", "metadata")).timeline().get(instant_time)
        assert done is not None and done.is_completed, instant_time
        return done.action.value

    # 1. an upsert: updates (log files on MOR) and a new partition
    t = write([(1, "a", 2, "ours-one"), (2, "b", 2, "ours-two"), (10, "c", 2, "ours-ten")])
    assert mdt_action(t.requested_time) == "deltacommit" and t.action in (Action.COMMIT, Action.DELTA_COMMIT)
    check(java_hudi, path, model, "upsert")

    # 2. copy-on-write: insert_overwrite of one partition (new files only; the replaced ones
    #    leave the listing at clean); merge-on-read: compaction of the slices with log files
    if not mor:
        t = write([(11, "c", 3, "ours-eleven")], "insert_overwrite")
        assert t.action is Action.REPLACE_COMMIT and mdt_action(t.requested_time) == "deltacommit"
        check(java_hudi, path, model, "insert_overwrite")
    else:
        planned = schedule_compaction(Table.open(path), MAINTAIN, force=True)
        assert planned is not None and planned not in mdt_instants(path)  # a plan changes no file
        done = execute_compaction(Table.open(path), MAINTAIN, planned)
        assert mdt_action(done.instant) == "deltacommit"
        check(java_hudi, path, model, "compaction")

    # 3. clustering: every partition's file groups rewritten into new ones
    planned = schedule_clustering(Table.open(path), MAINTAIN)
    assert planned is not None
    done = execute_clustering(Table.open(path), MAINTAIN, planned)
    assert mdt_action(done.instant) == "deltacommit"
    check(java_hudi, path, model, "clustering")

    # 4. clean: the versions clustering (and the overwrite, the compaction) left behind
    cleaned = run_clean(Table.open(path), {**MAINTAIN, **(ONE_VERSION if mor else RETAIN_1)})
    assert cleaned.clean_instant is not None and cleaned.deleted_files
    assert mdt_action(cleaned.clean_instant) == "deltacommit"
    check(java_hudi, path, model, "clean")

    # 5. a write that dies between its metadata-table deltacommit and its own completion; its
    #    rollback rolls the metadata table's deltacommit back at the rollback's own instant
    orig_complete = transaction.complete

    def dies(table, inst, *a, **kw):
        raise DiedBeforeCompletion(inst.requested_time)
    monkeypatch.setattr(transaction, "complete", dies)
    with pytest.raises(DiedBeforeCompletion) as died:
        writer(Table.open(path), WriteConfig.from_options(MAINTAIN)).write(batch([(2, "b", 9, "dead")]), "upsert")
    monkeypatch.setattr(transaction, "complete", orig_complete)
    dead = str(died.value)
    timeline = Table.open(path).timeline()
    assert timeline.get(dead) is None  # rolled back by the writer's abort
    rollback = next(i for i in timeline.completed() if i.action is Action.ROLLBACK)
    assert dead not in mdt_instants(path)
    assert [n.rsplit(".", 1)[-1] for n in mdt_instants(path)[rollback.requested_time]][-1] == "rollback"
    check(java_hudi, path, model, "rollback")

    # 6. Java's next writer adds its deltacommit to the metadata table, no rebuild
    before = mdt_instants(path)
    more = [(3, "a", 4, "java-three"), (12, "d", 4, "java-twelve")]
    written, read = java_hudi.run(Write(path, batch(more), options=FILES_ONLY, **KEYS), Read(path))
    apply(model, more, "upsert")
    assert rows_by_key(read.rows, columns=COLS) == model
    new = {t: names for t, names in mdt_instants(path).items() if t not in before}
    assert written.instant in new and new[written.instant][-1].endswith(".deltacommit")
    assert not any(t.startswith("0000000000000000") for t in new)  # not initialised again
    assert set(before) <= set(mdt_instants(path))
    assert metadata_partitions(path) == ["files"]
    listing = read_metadata_listing(Table.open(path))
    assert {p: f for p, f in listing.files.items() if f} == {p: f for p, f in data_files(path).items() if f}


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", pytest.param("COPY_ON_WRITE", marks=pytest.mark.slow)])
def test_the_spark_engine_keeps_the_files_partition(tmp_path, java_hudi, spark, table_type):
    """The Spark engine commits through the core transaction (spark/writer.py), so its
    merge-on-read deltacommit (log files for the updates, a new base file for the new
    partition) and its copy-on-write commit write the metadata table's deltacommit too: the
    listing equals the storage, and Java's read through the metadata table is exact."""
    from airflow_hudi_occ.spark.writer import SparkHudiWriter
    path = str(tmp_path / "t")
    first = [(i, "a" if i % 2 else "b", 1, f"java{i}") for i in range(4)]
    java_hudi.run(Write(path, batch(first), operation="insert", table_type=table_type, table_version=9,
                        options=FILES_ONLY, **KEYS))
    ours = [(1, "a", 2, "spark-one"), (2, "b", 2, "spark-two"), (9, "c", 2, "spark-nine")]
    options = {**MAINTAIN, "hoodie.datasource.write.recordkey.field": "id",
               "hoodie.datasource.write.partitionpath.field": "p",
               "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.table.name": "t"}
    res = SparkHudiWriter(spark, path, options).write(
        spark.createDataFrame(ours, "id long, p string, ts long, v string"), "upsert")
    done = Table.open(os.path.join(path, ".hoodie", "metadata")).timeline().get(res.instant)
    assert done is not None and done.is_completed and done.completion_time < res.completion_time
    if table_type == "MERGE_ON_READ":
        assert any(LogFileName.parse(n) for n in data_files(path)["a"])  # the update went to a log file
    listing = read_metadata_listing(Table.open(path))
    assert {p: f for p, f in listing.files.items() if f} == {p: f for p, f in data_files(path).items() if f}
    [read] = java_hudi.run(Read(path))
    assert rows_by_key(read.rows, columns=COLS) == apply(model_of(first), ours, "upsert")
