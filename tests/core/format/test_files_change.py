"""The ``files`` records of each action, built from the action's own metadata, equal the records
Java wrote for the same action.

The fixture ``v9_files_metadata_actions.zip`` holds the ``.hoodie`` folders (timelines and
metadata tables; the data files are left out, nothing here reads them) of two tables Java Hudi
1.2.0 wrote with a files-only metadata table (:func:`make_fixture`): a copy-on-write one
(insert, upsert with a new partition, insert_overwrite, clustering, clean) and a merge-on-read
one (insert, upsert: log files and a new partition, compaction, clustering, clean). For every
completed data instant, the one HFile data block of the metadata table's log file at the same
instant holds Java's records; :class:`FilesChange` of the instant's commit or clean metadata,
through :func:`files_records`, must give the same keys, types and file maps.
"""

from __future__ import annotations

import os
import shutil

import pytest

from airflow_hudi_occ.core.format.files_change import FilesChange
from airflow_hudi_occ.core.format.hfile import read_hfile
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.format.log_file import BlockType, HeaderKey, LogFileName, decode_blocks
from airflow_hudi_occ.core.format.metadata import CleanMetadata, WriteStat
from airflow_hudi_occ.core.format.metadata_record import decode_record, files_records
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import java_fixture

FIXTURE = "v9_files_metadata_actions"


def java_records(path: str, instant_time: str) -> dict[str, dict]:
    """The records of the metadata table's log file Java wrote at ``instant_time``."""
    folder = os.path.join(path, ".hoodie", "metadata", "files")
    [name] = [n for n in os.listdir(folder)
              if (LogFileName.parse(n) or LogFileName("x", "")).instant_time == instant_time]
    with open(os.path.join(folder, name), "rb") as f:
        [block] = decode_blocks(f.read())
    assert block.block_type is BlockType.HFILE_DATA and block.header[HeaderKey.INSTANT_TIME] == instant_time
    return {k: decode_record(v, block.header[HeaderKey.SCHEMA]) for k, v in read_hfile(block.content).entries}


def change_of(table: Table, timeline, inst) -> tuple[str, FilesChange]:
    if inst.action is Action.CLEAN:
        path = timeline.file_path(inst)
        return "clean", FilesChange.of_clean(CleanMetadata.decode(table.storage.read(path), path))
    meta = timeline.commit_metadata(inst)
    return meta.operation_type or inst.action.value, FilesChange.of_write_stats(meta.write_stats())


def comparable(records: dict[str, dict]) -> dict:
    return {k: (r["type"], {n: (i["size"], i["isDeleted"]) for n, i in (r["filesystemMetadata"] or {}).items()})
            for k, r in records.items()}


def check_table(path: str) -> list[str]:
    table = Table.open(path)
    timeline = table.timeline()
    seen = []
    for inst in timeline.completed():
        kind, change = change_of(table, timeline, inst)
        assert comparable(files_records(change)) == comparable(java_records(path, inst.requested_time)), \
            f"{os.path.basename(path)} {inst.requested_time} {kind}"
        seen.append(kind)
    return seen


def test_our_records_of_each_java_action_equal_javas(tmp_path):
    root = java_fixture(FIXTURE, tmp_path).parent
    assert check_table(str(root / "copy_on_write")) == ["INSERT", "UPSERT", "INSERT_OVERWRITE", "CLUSTER", "clean"]
    assert check_table(str(root / "merge_on_read")) == ["INSERT", "UPSERT", "COMPACT", "CLUSTER", "clean"]


def test_a_change_of_write_stats_keeps_the_larger_size_and_every_partition():
    stats = [WriteStat(file_id="f", path="a/.f_1.log.1_0-0-0", partition_path="a", file_size_in_bytes=5),
             WriteStat(file_id="f", path="a/.f_1.log.1_0-0-0", partition_path="a", file_size_in_bytes=9),
             WriteStat(file_id="g", path="", partition_path="b")]
    change = FilesChange.of_write_stats(stats)
    assert change.added == {"a": {".f_1.log.1_0-0-0": 9}, "b": {}}
    assert change.partitions_added == ("a", "b")
    records = files_records(change)
    assert set(records) == {"__all_partitions__", "a", "b"} and records["b"]["filesystemMetadata"] == {}
    assert files_records(FilesChange()) == {} and FilesChange().is_empty


def make_fixture(java_hudi, out: str) -> None:
    """Write the fixture's two tables with Java into ``out`` (``copy_on_write``,
    ``merge_on_read``); zipped without data files and ``.crc`` files it is the fixture."""
    from airflow_hudi_occ.testing.java_hudi import Service, Write
    from tests.interop.rows import ONE_VERSION, RETAIN_1, batch
    from tests.interop.test_java_metadata_table import FILES_ONLY, KEYS
    for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ"):
        path = os.path.join(out, table_type.lower())
        first = [(i, "a" if i % 2 else "b", 1, f"java{i}") for i in range(4)]
        steps = [Write(path, batch(first), operation="insert", table_type=table_type, table_version=9,
                       options=FILES_ONLY, **KEYS),
                 Write(path, batch([(1, "a", 2, "up1"), (2, "b", 2, "up2"), (7, "c", 2, "new7")]),
                       options=FILES_ONLY, **KEYS)]
        if table_type == "MERGE_ON_READ":
            steps.append(Service(path, "compact", options={**FILES_ONLY, "hoodie.compact.inline.max.delta.commits": "1"}))
        else:
            steps.append(Write(path, batch([(8, "c", 3, "ow8")]), operation="insert_overwrite",
                               options=FILES_ONLY, **KEYS))
        steps += [Service(path, "cluster", options=FILES_ONLY),
                  Service(path, "clean", options={**FILES_ONLY, **(ONE_VERSION if table_type == "MERGE_ON_READ"
                                                                    else RETAIN_1)})]
        java_hudi.run(*steps)


@pytest.mark.slow
def test_the_fixture_is_what_java_writes_today(tmp_path, java_hudi):
    """The fixture made again with the installed Java Hudi: the same comparison holds."""
    make_fixture(java_hudi, str(tmp_path))
    assert check_table(str(tmp_path / "copy_on_write"))[-1] == "clean"
    assert check_table(str(tmp_path / "merge_on_read"))[-1] == "clean"
    shutil.rmtree(tmp_path / "copy_on_write", ignore_errors=True)
