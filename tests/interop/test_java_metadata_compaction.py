"""Java and the metadata table our writer compacts, cleans and archives
(``hoodie.occ.metadata.files.maintain=true``; core/table/metadata_compaction.py,
core/commit/metadata_services.py): many commits of ours on a Java table whose metadata table
holds only ``files``, ``hoodie.metadata.compact.max.delta.commits`` lowered to keep it cheap and
the data table's keep limits lowered so it archives. The metadata table compacts exactly at
Java's trigger, Java reads exactly through it and reads our base HFile with its own reader,
Java's next writer adds one deltacommit (no rebuild, no compaction of its own), our listing is
the storage's, and the data table archived as far as the metadata table allows.
"""

from __future__ import annotations

import os

import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.format.hfile import read_hfile
from airflow_hudi_occ.core.table.metadata_compaction import deltacommits_since_compaction, open_metadata_table
from airflow_hudi_occ.core.table.metadata_listing import read_metadata_listing
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.java_hudi import Read, ReadHFile, Write
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key
from tests.core.table.test_metadata_listing import storage_listing
from tests.interop.rows import batch
from tests.interop.test_java_metadata_table import COLS, FILES_ONLY, KEYS, metadata_partitions, model_of

MAX_DELTA_COMMITS = 4
OURS = {**FAST_WRITE_OPTIONS, "hoodie.occ.metadata.files.maintain": "true",
        "hoodie.metadata.compact.max.delta.commits": str(MAX_DELTA_COMMITS),
        "hoodie.keep.min.commits": "3", "hoodie.keep.max.commits": "5", "hoodie.clean.commits.retained": "2"}


def our_base_files(path: str) -> list[str]:
    folder = os.path.join(path, ".hoodie", "metadata", "files")
    return sorted(n for n in os.listdir(folder) if n.endswith(".hfile") and "_0-0-0_" in n)


@pytest.mark.parametrize("version", [9, pytest.param(8, marks=pytest.mark.slow)])
def test_java_reads_through_the_metadata_table_our_commits_compact(tmp_path, java_hudi, version):
    path = str(tmp_path / "t")
    first = [(i, "abc"[i % 3], 1, f"java{i}") for i in range(6)]
    java_hudi.run(Write(path, batch(first), operation="insert", table_version=version, options=FILES_ONLY, **KEYS))
    assert Table.open(path).version == version
    assert metadata_partitions(path) == ["files"]
    model = model_of(first)
    pending = deltacommits_since_compaction(open_metadata_table(Table.open(path)).timeline())

    compacted_after = []
    for n in range(12):
        rows = [(n % 6, "abc"[n % 3], 2 + n, f"ours{n}"), (100 + n, "abcd"[n % 4], 2, f"new{n}")]
        before = our_base_files(path)
        ArrowTableWriter(Table.open(path), WriteConfig.from_options(OURS)).write(batch(rows), "upsert")
        model.update(model_of(rows))
        if our_base_files(path) != before:
            compacted_after.append(n + 1)
        pending += 1
        if pending >= MAX_DELTA_COMMITS:  # Java's trigger, counted independently of the code
            pending = 0
    assert deltacommits_since_compaction(open_metadata_table(Table.open(path)).timeline()) == pending
    assert compacted_after and all(b - a == MAX_DELTA_COMMITS for a, b in zip(compacted_after, compacted_after[1:]))
    assert len(compacted_after) == 3, compacted_after  # 2 Java deltacommits + 12 of ours, every 4th
    assert read_metadata_listing(Table.open(path)).files == storage_listing(path)
    # the data table archived, as far as the metadata table's latest compaction allowed
    assert os.path.isdir(os.path.join(path, ".hoodie", "timeline", "history"))
    assert len(Table.open(path).timeline().completed_writes()) < 13

    timeline = os.path.join(path, ".hoodie", "metadata", ".hoodie", "timeline")
    names_before = set(os.listdir(timeline))
    base = os.path.join(path, ".hoodie", "metadata", "files", our_base_files(path)[-1])
    ours_hfile = read_hfile(open(base, "rb").read())
    keys = [k for k, _ in ours_hfile.entries]
    more = [(3, "a", 40, "java-three"), (200, "e", 1, "java-new")]
    through_mdt, hf, _, again = java_hudi.run(
        Read(path), ReadHFile(base, lookups=keys, meta=["bloomFilter"], info=["schema", "maxRecordKey"]),
        Write(path, batch(more), options=FILES_ONLY, **KEYS), Read(path))
    assert rows_by_key(through_mdt.rows, columns=COLS) == model
    got = hf.hfile()
    assert got["entries"] == sorted(ours_hfile.entries) and got["count"] == len(keys)
    assert set(got["lookups"].values()) == {0}  # every key found by Java's seek
    assert got["meta"]["bloomFilter"] == ours_hfile.meta["bloomFilter"]
    model.update(model_of(more))
    assert rows_by_key(again.rows, columns=COLS) == model
    added = sorted(n for n in set(os.listdir(timeline)) - names_before if not n.startswith("."))
    assert sorted(n.rsplit(".", 1)[-1] for n in added) == ["deltacommit", "inflight", "requested"], added
    assert metadata_partitions(path) == ["files"]
    assert read_metadata_listing(Table.open(path)).files == storage_listing(path)
    assert rows_by_key(hudi_read(path), columns=COLS) == model
    assert rows_by_key(read_table(Table.open(path)), columns=COLS) == model


@pytest.mark.slow
def test_java_reads_after_our_clean_and_archival_of_the_metadata_table(tmp_path, java_hudi):
    """40 commits of ours at Hudi's keep and clean defaults (``max.delta.commits=3``): the
    metadata table is compacted, cleaned (old slices deleted) and archived (its history written
    by us); Java reads exact through it; Java's next writers work on it (no re-initialisation;
    with a trigger of 1 the second compacts over our base file and logs) and read exact, and so
    do we and hudi-rs through Java's base file."""
    from airflow_hudi_occ.core.format.instant import Action
    path = str(tmp_path / "t")
    first = [(i, "abc"[i % 3], 1, f"java{i}") for i in range(6)]
    java_hudi.run(Write(path, batch(first), operation="insert", table_version=9, options=FILES_ONLY, **KEYS))
    model = model_of(first)
    opts = {**FAST_WRITE_OPTIONS, "hoodie.occ.metadata.files.maintain": "true",
            "hoodie.metadata.compact.max.delta.commits": "3"}
    for n in range(40):
        rows = [(n % 6, "abc"[n % 3], 2 + n, f"ours{n}"), (100 + n, "abcd"[n % 4], 2, f"new{n}")]
        ArrowTableWriter(Table.open(path), WriteConfig.from_options(opts)).write(batch(rows), "upsert")
        model.update(model_of(rows))
    mdt = open_metadata_table(Table.open(path))
    timeline = mdt.timeline()
    assert [i for i in timeline if i.action is Action.CLEAN and i.is_completed], "never cleaned"
    assert os.path.isdir(os.path.join(path, ".hoodie", "metadata", ".hoodie", "timeline", "history"))
    assert not any(i.requested_time.startswith("0000000000000000") for i in timeline)  # archived
    assert read_metadata_listing(Table.open(path)).files == storage_listing(path)
    more = [(3, "a", 90, "java-three")]
    ours_last = our_base_files(path)[-1]
    # Java's writer with a trigger of 1 compacts at its start: its compactor reads our
    # base file and our logs, and writes its own base file over them (its first write adds the
    # deltacommit that its second one's trigger counts)
    more2 = [(201, "b", 1, "java-201")]
    java = {**FILES_ONLY, "hoodie.metadata.compact.max.delta.commits": "1"}
    through_mdt, _, _, again = java_hudi.run(Read(path), Write(path, batch(more), options=java, **KEYS),
                                             Write(path, batch(more2), options=java, **KEYS), Read(path))
    assert rows_by_key(through_mdt.rows, columns=COLS) == model
    model.update(model_of(more))
    model.update(model_of(more2))
    assert rows_by_key(again.rows, columns=COLS) == model
    folder = os.path.join(path, ".hoodie", "metadata", "files")
    javas = [n for n in os.listdir(folder) if n.endswith(".hfile") and "_0-0-0_" not in n
             and n.rsplit("_", 1)[1] > ours_last.rsplit("_", 1)[1]]
    assert javas, "Java's writer did not compact over our base file"
    assert not any(n.startswith("0000000000000000") and "deltacommit" in n
                   for n in os.listdir(os.path.join(path, ".hoodie", "metadata", ".hoodie", "timeline")))
    assert read_metadata_listing(Table.open(path)).files == storage_listing(path)
    assert rows_by_key(hudi_read(path), columns=COLS) == model
    assert rows_by_key(read_table(Table.open(path)), columns=COLS) == model
