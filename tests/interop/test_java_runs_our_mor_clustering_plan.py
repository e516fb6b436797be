"""Java executes a clustering plan we scheduled on a merge-on-read table whose file groups have
log files (an update and a delete), and the rows survive.

Java's clustering executor reads exactly the slice a plan names (base file +
``deltaFilePaths``); a plan naming no log files made Java rewrite the base files alone,
bringing back the updated rows' old values and the deleted rows. Here: a table Java wrote
at its defaults (metadata table on: ``files``, ``column_stats``, ``partition_stats``), a
Java update and our update and delete in log files; we schedule the plan, and on a copy of
the same table Java schedules its own: the slices of both plans are the same records
(base file, log files in Java's order, full paths). Then Java runs OUR plan; Java's
snapshot read, hudi-rs and our reader return the model, and Java's metadata reader agrees
with the files. The reverse (slow): Java schedules a plan over log files, we execute it.
"""

from __future__ import annotations

import os
import shutil

import pytest

from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.commit.writer import read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.format.metadata import decode_record
from airflow_hudi_occ.core.format.log_file import LogFileName
from airflow_hudi_occ.core.services.clustering import execute_clustering, schedule_clustering
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.java_hudi import MetadataCheck, Read, Service, Write
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key
from tests.interop.rows import apply, batch
from tests.interop.test_java_metadata_every_action import MAINTAIN, data_files
from tests.interop.test_java_metadata_stats_actions import assert_java_metadata_agrees
from tests.interop.test_java_metadata_stats import INDEXED, STAT_FIELDS
from tests.interop.test_java_metadata_table import COLS, KEYS, model_of

#: Java's planner as ours is configured: every file group small, sorted by id, so that a
#: partition's one file group is planned too
JAVA_CLUSTER = {"hoodie.clustering.plan.strategy.small.file.limit": str(100 * 1024 * 1024),
                "hoodie.clustering.plan.strategy.sort.columns": "id"}


def table_with_logs(java_hudi, path: str, version: int = 9, *, ours: bool = False) -> dict:
    """A merge-on-read table Java wrote at its defaults (ids 0-5 in a and b), then a Java
    update of 1 and our update of 2 and delete of 3 and 4, all in log files: the model.
    ``ours``: the table is ours from the start (our inserts and our update of 1)."""
    first = [(i, "a" if i % 2 else "b", 1, f"java{i}") for i in range(6)]
    if ours:
        Table.create(path, "t", record_key_fields=["id"], partition_fields=["p"], precombine_field="ts",
                     table_type="MERGE_ON_READ", version=version)
        for rows, op in ((first, "insert"), ([(1, "a", 2, "java-upd-one")], "upsert")):
            MergeOnReadWriter(Table.open(path), WriteConfig.from_options(MAINTAIN)).write(batch(rows), op)
    else:
        java_hudi.run(Write(path, batch(first), operation="insert", table_type="MERGE_ON_READ",
                            table_version=version, **KEYS),
                      Write(path, batch([(1, "a", 2, "java-upd-one")]), **KEYS))
    model = apply(model_of(first), [(1, "a", 2, "java-upd-one")], "upsert")
    writer = MergeOnReadWriter(Table.open(path), WriteConfig.from_options(MAINTAIN))
    writer.write(batch([(2, "b", 3, "ours-two")]), "upsert")
    apply(model, [(2, "b", 3, "ours-two")], "upsert")
    gone = [(3, "a", 4, ""), (4, "b", 4, "")]
    MergeOnReadWriter(Table.open(path), WriteConfig.from_options(MAINTAIN)).write(batch(gone), "delete")
    apply(model, gone, "delete")
    for part in ("a", "b"):
        assert sum(1 for n in os.listdir(os.path.join(path, part)) if LogFileName.parse(n)) >= 2, part
    return model


def plan_slices(path: str, instant: str) -> dict[tuple[str, str], dict]:
    """The slices of a pending clustering plan as Avro records (Java's 1.x timeline names a
    plan ``<t>.clustering.requested``; ours ``<t>.replacecommit.requested``), by file group,
    paths relative to the table (the table may have been copied)."""
    folder = os.path.join(path, ".hoodie", "timeline")
    [name] = [n for n in os.listdir(folder) if n.startswith(f"{instant}.")
              and n.endswith((".clustering.requested", ".replacecommit.requested"))]
    with open(os.path.join(folder, name), "rb") as f:
        rec = decode_record(f.read(), name)
    root = path.rstrip("/") + "/"
    out = {}
    for g in rec["clusteringPlan"]["inputGroups"]:
        for s in g["slices"]:
            s = dict(s)
            s["dataFilePath"] = s["dataFilePath"].removeprefix(root).removeprefix("file:" + root)
            s["deltaFilePaths"] = [d.removeprefix(root).removeprefix("file:" + root) for d in s["deltaFilePaths"]]
            out[s["partitionPath"], s["fileId"]] = s
    return out


def assert_readers_read(java_hudi, path: str, model: dict, *, ours_last: bool) -> None:
    """Java's snapshot read, hudi-rs and our reader return the model; Java's metadata reader
    lists the files on storage with every base file's column stats as Java computes them from
    its footer. When the last action was ours, every record of ours is checked (partition
    stats over the latest slices); after Java's own clustering its partition stats are Java's
    business (Java merges them with the earlier ones: value counts add up)."""
    read, check = java_hudi.run(Read(path), MetadataCheck(path, INDEXED))
    assert rows_by_key(read.rows, columns=COLS) == model
    assert rows_by_key(hudi_read(path), columns=COLS) == model
    assert rows_by_key(read_table(Table.open(path)), columns=COLS) == model
    found = check.metadata_check()
    if ours_last:
        assert_java_metadata_agrees(found, path)
        return
    assert found["files"] == {p: f for p, f in data_files(path).items() if f}
    recorded = {(s["name"], s["column"]): s for s in found["column_stats"] if not s["deleted"]}
    for files in found["file_stats"].values():
        for name, stats in files.items():
            for s in stats:
                assert {k: recorded[name, s["column"]][k] for k in STAT_FIELDS} == \
                    {k: s[k] for k in STAT_FIELDS}, (name, s["column"])


@pytest.mark.parametrize("version,ours", [(9, False), pytest.param(8, False, marks=pytest.mark.slow),
                                          pytest.param(9, True, marks=pytest.mark.slow)],
                         ids=["java-table-v9", "java-table-v8", "our-table-v9"])
def test_java_runs_our_plan_over_log_files_and_keeps_their_updates_and_deletes(tmp_path, java_hudi, version, ours):
    path = str(tmp_path / "t")
    model = table_with_logs(java_hudi, path, version, ours=ours)
    twin = str(tmp_path / "twin")
    shutil.copytree(path, twin)

    ours = schedule_clustering(Table.open(path), {**MAINTAIN, **JAVA_CLUSTER})
    assert ours is not None
    [javas] = java_hudi.run(Service(twin, "cluster", options=JAVA_CLUSTER, schedule_only=True))
    assert javas.raw["scheduled"] is not None
    mine, theirs = plan_slices(path, ours), plan_slices(twin, javas.raw["scheduled"])
    assert any(s["deltaFilePaths"] for s in mine.values())
    assert mine == theirs

    [ran] = java_hudi.run(Service(path, "cluster", instant=ours))
    assert [(c["requested"], c["action"]) for c in ran.completed] == [(ours, "replacecommit")]
    assert_readers_read(java_hudi, path, model, ours_last=False)


@pytest.mark.slow
def test_we_run_javas_plan_over_log_files(tmp_path, java_hudi):
    path = str(tmp_path / "t")
    model = table_with_logs(java_hudi, path)
    [javas] = java_hudi.run(Service(path, "cluster", options=JAVA_CLUSTER, schedule_only=True))
    planned = javas.raw["scheduled"]
    assert planned is not None and any(s["deltaFilePaths"] for s in plan_slices(path, planned).values())
    done = execute_clustering(Table.open(path), {**MAINTAIN, **JAVA_CLUSTER}, planned)
    assert done.instant == planned
    assert_readers_read(java_hudi, path, model, ours_last=True)
