"""Java Hudi reads our tables after OUR services and operations (issue 30 item 4).

Tables our core writers wrote (COW and MOR, versions 8 and 9) go through, all by this project:
an insert, an upsert, a write killed after its data files and rolled back by our rollback
(``rollback_pending_writes``), a delete, an upsert (MOR: logs), our compaction (MOR), our
clustering, our insert_overwrite of a partition (COW: the MOR writer has none), a last upsert,
our clean and our archival. Java's snapshot, read-optimised, time-travel (as of the last
upsert's predecessor, still readable after the clean) and incremental reads (after that
instant's completion) must equal the model and our reader, and hudi-rs must agree. All four
tables are read in one JVM.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pytest

from airflow_hudi_occ.core.commit.archival import run_archival
from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.commit.rollback import rollback_pending_writes
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.services.clean import run_clean
from airflow_hudi_occ.core.services.clustering import execute_clustering, schedule_clustering
from airflow_hudi_occ.core.services.compaction import run_compaction
from airflow_hudi_occ.core.table.mor_reader import read_incremental, read_optimized
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.crash import run_writer
from airflow_hudi_occ.testing.java_hudi import Read
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key
from tests.interop.rows import COLS, apply, batch, completed_actions

KINDS = [("COPY_ON_WRITE", 8), ("COPY_ON_WRITE", 9), ("MERGE_ON_READ", 8), ("MERGE_ON_READ", 9)]
IDS = [f"{t[:3].lower()}-v{v}" for t, v in KINDS]
OURS = {**FAST_WRITE_OPTIONS, "hoodie.metadata.enable": "false",
        "hoodie.compact.inline.max.delta.commits": "1",
        "hoodie.clean.commits.retained": "2", "hoodie.keep.min.commits": "3", "hoodie.keep.max.commits": "4"}


@dataclass
class Serviced:
    table: Table
    model: dict = field(default_factory=dict)
    as_of: str = ""            # requested time of the write before the last upsert
    model_as_of: dict = field(default_factory=dict)
    after: str = ""            # its completion time
    done: dict = field(default_factory=dict)   # what each service of ours returned
    archived: int = 0


def build(base: str, table_type: str, version: int) -> Serviced:
    table = Table.create(base, "t", record_key_fields=["id"], partition_fields=["p"], precombine_field="ts",
                         table_type=table_type, version=version)
    mor = table_type == "MERGE_ON_READ"
    cfg = WriteConfig.from_options(OURS)
    writer = (MergeOnReadWriter if mor else ArrowTableWriter)(table, cfg)
    s = Serviced(table)

    def write(rows, op):
        apply(s.model, rows, op)
        return writer.write(batch(rows), op)

    write([(i, "a" if i % 2 else "b", 1, f"v{i}") for i in range(8)], "insert")
    write([(1, "a", 2, "one"), (2, "b", 2, "two"), (8, "b", 2, "eight")], "upsert")
    dead = run_writer(table.base_uri, OURS, [{"id": 3, "p": "a", "ts": 9, "v": "dead"},
                                             {"id": 100, "p": "b", "ts": 9, "v": "dead"}],
                      crash_at="after_all_files")
    assert dead.killed, dead.stderr[-2000:]
    s.done["rollback"] = rollback_pending_writes(table, cfg)
    write([(5, "a", 3, "gone")], "delete")
    write([(2, "b", 4, "two-again"), (7, "a", 4, "seven")], "upsert")
    if mor:
        s.done["compaction"] = run_compaction(table, OURS)
    assert schedule_clustering(table, OURS) is not None
    s.done["clustering"] = execute_clustering(table, OURS)
    if mor:
        last = write([(4, "b", 5, "four")], "upsert")
    else:
        last = write([(11, "a", 5, "eleven"), (13, "a", 5, "thirteen")], "insert_overwrite")
    s.as_of, s.after, s.model_as_of = last.instant.requested_time, last.instant.completion_time, dict(s.model)
    write([(1, "a", 6, "one-last"), (20, "b", 6, "twenty")], "upsert")
    s.done["clean"] = run_clean(table, OURS)
    s.done["archival"] = run_archival(table, OURS)
    return s


@pytest.fixture(scope="module")
def read_by_java(tmp_path_factory, java_hudi):
    root = tmp_path_factory.mktemp("our-services")
    built = {kind: build(str(root / name), *kind) for kind, name in zip(KINDS, IDS)}
    steps, where = [], {}
    for kind, s in built.items():
        path = s.table.base_uri
        reads = {"snapshot": Read(path), "read_optimized": Read(path, query="read_optimized"),
                 "as_of": Read(path, query="time_travel", as_of=s.as_of),
                 "incremental": Read(path, query="incremental", start=s.after)}
        for name, step in reads.items():
            where[kind, name] = len(steps)
            steps.append(step)
    results = java_hudi.run(*steps)
    return built, {k: results[i].rows for k, i in where.items()}


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_our_services_did_their_work(read_by_java, kind):
    built, _ = read_by_java
    s = built[kind]
    path = s.table.base_uri
    assert len(s.done["rollback"]) == 1 and s.done["rollback"][0].rollback_instant is not None
    if kind[0] == "MERGE_ON_READ":
        compacted = s.done["compaction"]["executed"]
        assert compacted["outcome"] == "committed" and compacted["log_files_compacted"] > 0
    assert s.done["clustering"].completion_time and s.done["clustering"].replaced
    assert s.done["clean"].deleted_files
    # archival (ours, after each commit and at the end) moved the oldest instants to the history
    assert any(n.endswith(".parquet") for n in os.listdir(os.path.join(path, ".hoodie", "timeline", "history")))
    assert "clean" in completed_actions(path)


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_java_snapshot_equals_the_model_hudi_rs_and_ours(read_by_java, kind):
    built, reads = read_by_java
    s = built[kind]
    java = rows_by_key(reads[kind, "snapshot"], columns=COLS)
    assert java == s.model
    assert rows_by_key(hudi_read(s.table.base_uri), columns=COLS) == java
    assert rows_by_key(read_table(Table.open(s.table.base_uri)), columns=COLS) == java
    assert 100 not in java and all(r["v"] != "dead" for r in java.values())  # the dead write's rows nowhere


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_java_read_optimized_equals_ours_and_hudi_rs(read_by_java, kind):
    """MOR: the compacted and clustered base files, without the last two upserts' logs."""
    built, reads = read_by_java
    s = built[kind]
    java = rows_by_key(reads[kind, "read_optimized"], columns=COLS)
    table = Table.open(s.table.base_uri)
    ours = read_optimized(table) if kind[0] == "MERGE_ON_READ" else read_table(table)
    assert java == rows_by_key(ours, columns=COLS)
    assert java == rows_by_key(hudi_read(s.table.base_uri, read_optimized=True), columns=COLS)
    if kind[0] == "COPY_ON_WRITE":
        assert java == s.model


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_java_time_travel_after_clean_equals_the_model(read_by_java, kind):
    built, reads = read_by_java
    s = built[kind]
    java = rows_by_key(reads[kind, "as_of"], columns=COLS)
    assert java == s.model_as_of
    assert rows_by_key(hudi_read(s.table.base_uri, as_of=s.as_of), columns=COLS) == java
    assert rows_by_key(read_table(Table.open(s.table.base_uri), as_of=s.as_of), columns=COLS) == java


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_java_incremental_after_our_services_equals_ours_and_hudi_rs(read_by_java, kind):
    """After the completion of the write before the last upsert: the last upsert's two rows."""
    built, reads = read_by_java
    s = built[kind]
    java = rows_by_key(reads[kind, "incremental"], columns=COLS)
    assert set(java) == {1, 20}
    assert java == {k: s.model[k] for k in (1, 20)}
    ours = read_incremental(Table.open(s.table.base_uri), start=s.after)
    assert rows_by_key(ours, columns=COLS) == java
    assert rows_by_key(hudi_read(s.table.base_uri, start=s.after), columns=COLS) == java
