"""Java Hudi reads tables our Spark engine wrote, after OUR services (issue 30 item 4, the
Spark engine's row; the core writer's is test_java_reads_ours_after_our_services).

Tables written by ``SparkHudiWriter`` (COW and MOR, versions 8 and 9) go through: an insert,
an upsert, a bulk_insert (second file groups, for clustering), a write killed (SIGKILL) after
its data files and rolled back by our rollback, a delete, an upsert (MOR: logs), the Spark
engine's compaction (MOR), the Spark engine's clustering, the Spark engine's insert_overwrite
of two of the three partitions from a small pandas frame (COW: the engine refuses it on MOR;
such a frame failed with ``Spark wrote 2 files for file group`` before
spark/session.task_ids_as_run), a last upsert, our clean and our archival. Java's snapshot,
read-optimised, time-travel (as of the last upsert's predecessor, kept by the clean) and
incremental reads (after that instant's completion) must equal the model and our reader, and
hudi-rs must agree.

The default run builds COW v9 only (one Spark session, one JVM call); ``HUDI_OCC_SLOW=1`` all
four, still one Spark session and one JVM call for every read. The dead write is a core-writer
process (testing/crash.py): killing a Spark driver would cost a second Spark start, and the
rollback does not care which engine wrote the files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pytest

from airflow_hudi_occ.core.commit.archival import run_archival
from airflow_hudi_occ.core.commit.rollback import rollback_pending_writes
from airflow_hudi_occ.core.commit.writer import read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.services.clean import run_clean
from airflow_hudi_occ.core.services.clustering import schedule_clustering
from airflow_hudi_occ.core.services.compaction import schedule_compaction
from airflow_hudi_occ.core.table.mor_reader import read_incremental, read_optimized
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.crash import run_writer
from airflow_hudi_occ.testing.java_hudi import Read
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key
from tests.interop.rows import COLS, SPARK_SCHEMA, apply, completed_actions

KINDS = [("COPY_ON_WRITE", 9), ("COPY_ON_WRITE", 8), ("MERGE_ON_READ", 8), ("MERGE_ON_READ", 9)]
IDS = [f"{t[:3].lower()}-v{v}" for t, v in KINDS]
DEFAULT = ("COPY_ON_WRITE", 9)
PARAMS = [pytest.param(k, id=i, marks=() if k == DEFAULT else pytest.mark.slow) for k, i in zip(KINDS, IDS)]
OURS = {**FAST_WRITE_OPTIONS, "hoodie.metadata.enable": "false",
        "hoodie.compact.inline.max.delta.commits": "1",
        "hoodie.clean.commits.retained": "2", "hoodie.keep.min.commits": "3", "hoodie.keep.max.commits": "4"}


def engine_options(table_type: str, version: int) -> dict:
    return {**OURS, "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "p",
            "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.table.name": "t",
            "hoodie.datasource.write.table.type": table_type,
            "hoodie.write.table.version": str(version)}


def built_kinds() -> list:
    return KINDS if os.environ.get("HUDI_OCC_SLOW") == "1" else [DEFAULT]


@dataclass
class Serviced:
    path: str
    model: dict = field(default_factory=dict)
    as_of: str = ""            # requested time of the write before the last upsert
    model_as_of: dict = field(default_factory=dict)
    after: str = ""            # its completion time
    done: dict = field(default_factory=dict)


def build(spark, path: str, table_type: str, version: int) -> Serviced:
    import pandas as pd

    from airflow_hudi_occ.spark.clustering import SparkClusteringExecutor
    from airflow_hudi_occ.spark.compaction import SparkCompactionExecutor
    from airflow_hudi_occ.spark.writer import SparkHudiWriter

    opts = engine_options(table_type, version)
    mor = table_type == "MERGE_ON_READ"
    writer = SparkHudiWriter(spark, path, opts)
    s = Serviced(path)

    def write(rows, op, frame=None):
        apply(s.model, rows, op)
        return writer.write(frame if frame is not None else spark.createDataFrame(rows, SPARK_SCHEMA), op)

    write([(i, "abc"[i % 3], 1, f"v{i}") for i in range(9)], "insert")
    write([(1, "b", 2, "one"), (2, "c", 2, "two"), (9, "a", 2, "nine")], "upsert")
    # new file groups beside the first ones (the engine's upserts top small files up): what
    # clustering merges
    write([(30, "a", 1, "thirty"), (31, "c", 1, "thirty-one")], "bulk_insert")
    table = Table.open(path)
    assert (table.config.table_type, table.config.version) == (table_type, version)
    dead = run_writer(path, OURS, [{"id": 3, "p": "a", "ts": 9, "v": "dead"},
                                   {"id": 100, "p": "b", "ts": 9, "v": "dead"}], crash_at="after_all_files")
    assert dead.killed, dead.stderr[-2000:]
    s.done["rollback"] = rollback_pending_writes(table, WriteConfig.from_options(OURS))
    write([(5, "c", 3, "gone")], "delete")
    write([(2, "c", 4, "two-again"), (7, "b", 4, "seven")], "upsert")
    if mor:
        assert schedule_compaction(table, OURS) is not None
        s.done["compaction"] = SparkCompactionExecutor(spark, path, OURS).execute()
    assert schedule_clustering(table, OURS) is not None
    s.done["clustering"] = SparkClusteringExecutor(spark, path, OURS).execute()
    if mor:
        last = write([(4, "b", 5, "four")], "upsert")
    else:
        rows = [(11, "a", 5, "eleven"), (12, "c", 5, "twelve"), (13, "a", 5, "thirteen"), (14, "c", 5, "fourteen")]
        frame = spark.createDataFrame(pd.DataFrame(rows, columns=COLS))  # driver-side, two tasks
        last = write(rows, "insert_overwrite", frame)
        s.done["insert_overwrite"] = last
    s.as_of, s.after, s.model_as_of = last.instant, last.completion_time, dict(s.model)
    write([(1, "b", 6, "one-last"), (20, "b", 6, "twenty")], "upsert")
    s.done["clean"] = run_clean(table, OURS)
    s.done["archival"] = run_archival(table, OURS)
    return s


@pytest.fixture(scope="module")
def read_by_java(tmp_path_factory, java_hudi, spark):
    root = tmp_path_factory.mktemp("spark-engine-services")
    built = {kind: build(spark, str(root / f"{kind[0][:3].lower()}_v{kind[1]}"), *kind)
             for kind in built_kinds()}
    steps, where = [], {}
    for kind, s in built.items():
        reads = {"snapshot": Read(s.path), "read_optimized": Read(s.path, query="read_optimized"),
                 "as_of": Read(s.path, query="time_travel", as_of=s.as_of),
                 "incremental": Read(s.path, query="incremental", start=s.after)}
        for name, step in reads.items():
            where[kind, name] = len(steps)
            steps.append(step)
    results = java_hudi.run(*steps)
    return built, {k: results[i].rows for k, i in where.items()}


@pytest.mark.parametrize("kind", PARAMS)
def test_our_services_did_their_work_on_spark_engine_tables(read_by_java, kind):
    built, _ = read_by_java
    s = built[kind]
    assert len(s.done["rollback"]) == 1 and s.done["rollback"][0].rollback_instant is not None
    if kind[0] == "MERGE_ON_READ":
        assert s.done["compaction"].completion_time and s.done["compaction"].to_json()["log_files_compacted"] > 0
    else:  # two partitions overwritten from a driver-side frame: one file group each
        stats = s.done["insert_overwrite"].stats
        assert sorted(st.partition_path for st in stats) == ["a", "c"] and sum(st.num_writes for st in stats) == 4
    assert s.done["clustering"].completion_time and s.done["clustering"].replaced
    assert s.done["clean"].deleted_files
    assert any(n.endswith(".parquet") for n in os.listdir(os.path.join(s.path, ".hoodie", "timeline", "history")))
    assert "clean" in completed_actions(s.path)


@pytest.mark.parametrize("kind", PARAMS)
def test_java_snapshot_of_spark_engine_tables_equals_the_model_hudi_rs_and_ours(read_by_java, kind):
    built, reads = read_by_java
    s = built[kind]
    java = rows_by_key(reads[kind, "snapshot"], columns=COLS)
    assert java == s.model
    assert rows_by_key(hudi_read(s.path), columns=COLS) == java
    assert rows_by_key(read_table(Table.open(s.path)), columns=COLS) == java
    assert 100 not in java and all(r["v"] != "dead" for r in java.values())


@pytest.mark.parametrize("kind", PARAMS)
def test_java_read_optimized_of_spark_engine_tables_equals_ours_and_hudi_rs(read_by_java, kind):
    built, reads = read_by_java
    s = built[kind]
    java = rows_by_key(reads[kind, "read_optimized"], columns=COLS)
    table = Table.open(s.path)
    ours = read_optimized(table) if kind[0] == "MERGE_ON_READ" else read_table(table)
    assert java == rows_by_key(ours, columns=COLS)
    assert java == rows_by_key(hudi_read(s.path, read_optimized=True), columns=COLS)
    if kind[0] == "COPY_ON_WRITE":
        assert java == s.model


@pytest.mark.parametrize("kind", PARAMS)
def test_java_time_travel_of_spark_engine_tables_after_clean_equals_the_model(read_by_java, kind):
    built, reads = read_by_java
    s = built[kind]
    java = rows_by_key(reads[kind, "as_of"], columns=COLS)
    assert java == s.model_as_of
    assert rows_by_key(hudi_read(s.path, as_of=s.as_of), columns=COLS) == java
    assert rows_by_key(read_table(Table.open(s.path), as_of=s.as_of), columns=COLS) == java


@pytest.mark.parametrize("kind", PARAMS)
def test_java_incremental_of_spark_engine_tables_equals_ours_and_hudi_rs(read_by_java, kind):
    """After the completion of the write before the last upsert: the last upsert's two rows."""
    built, reads = read_by_java
    s = built[kind]
    java = rows_by_key(reads[kind, "incremental"], columns=COLS)
    assert java == {k: s.model[k] for k in (1, 20)}
    assert rows_by_key(read_incremental(Table.open(s.path), start=s.after), columns=COLS) == java
    assert rows_by_key(hudi_read(s.path, start=s.after), columns=COLS) == java
