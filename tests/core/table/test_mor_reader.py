"""The MOR reader on hand-made log files: rollback command blocks and pending instants,
checked against hudi-rs."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import InvalidOrderingValueError
from airflow_hudi_occ.core.format.base_file import with_meta_columns
from airflow_hudi_occ.core.format.log_file import (LogFileName, avro_data_block, encode_blocks,
                                                   rollback_block, table_avro_schema)
from airflow_hudi_occ.core.table.mor_reader import merge_file_slices, read_snapshot
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key

COLS = ["id", "p", "ts", "v"]


def _table(tmp_path):
    t = Table.create(str(tmp_path / "mor"), "mor", record_key_fields=["id"], partition_fields=["p"],
                     precombine_field="ts", table_type="MERGE_ON_READ")
    w = MergeOnReadWriter(t, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    w.write(pa.table({"id": [1, 2], "p": ["a", "a"], "ts": [1, 1], "v": ["x", "y"]}), "insert")
    return t, w


def _log_bytes(t: Table, instant: str, file_id: str, rows: pa.Table, extra_blocks=()):
    schema = json.loads(t.timeline().commit_metadata(t.timeline().last_completed_write()).schema)
    full = with_meta_columns(rows, instant_time=instant, partition="a", file_name=file_id,
                             key_fields=["id"])
    block = avro_data_block(instant, json.dumps(table_avro_schema(schema)), full.to_pylist())
    return encode_blocks([block, *extra_blocks])


def test_rollback_command_block_hides_the_target_instant(tmp_path):
    t, w = _table(tmp_path)
    r2 = w.write(pa.table({"id": [1], "p": ["a"], "ts": [5], "v": ["rolled-back"]}), "upsert")
    r3 = w.write(pa.table({"id": [2], "p": ["a"], "ts": [5], "v": ["kept"]}), "upsert")
    [fs] = merge_file_slices(t)
    # append a rollback of r2's blocks to r3's log file (as Hudi does for a log it cannot delete)
    path = os.path.join(t.base_uri, fs.log_paths()[-1])
    with open(path, "ab") as f:
        f.write(encode_blocks([rollback_block(r3.instant.requested_time, r2.instant.requested_time)]))
    want = {1: {"id": 1, "p": "a", "ts": 1, "v": "x"}, 2: {"id": 2, "p": "a", "ts": 5, "v": "kept"}}
    assert rows_by_key(hudi_read(t.base_uri), columns=COLS) == want
    assert rows_by_key(read_snapshot(t), columns=COLS) == want


def test_log_file_of_a_pending_instant_is_invisible(tmp_path):
    t, w = _table(tmp_path)
    [fs] = merge_file_slices(t)
    pending = "29991231235959000"  # never on the timeline as completed
    os.makedirs(os.path.join(t.base_uri, ".hoodie", "timeline"), exist_ok=True)
    open(os.path.join(t.base_uri, ".hoodie", "timeline", f"{pending}.deltacommit.requested"), "wb").close()
    name = LogFileName(fs.base.file_id, pending, 1, "0-0-0").name
    with open(os.path.join(t.base_uri, "a", name), "wb") as f:
        f.write(_log_bytes(t, pending, fs.base.file_id,
                           pa.table({"id": [1], "p": ["a"], "ts": [9], "v": ["pending"]})))
    want = {1: {"id": 1, "p": "a", "ts": 1, "v": "x"}, 2: {"id": 2, "p": "a", "ts": 1, "v": "y"}}
    assert rows_by_key(hudi_read(t.base_uri), columns=COLS) == want
    assert rows_by_key(read_snapshot(t), columns=COLS) == want


def test_merge_on_read_is_created_at_versions_8_and_9_only(tmp_path):
    import pytest
    from airflow_hudi_occ.core.errors import ConfigError
    for v in (8, 9):
        t = Table.create(str(tmp_path / f"v{v}"), f"v{v}", record_key_fields=["id"],
                         table_type="MERGE_ON_READ", version=v)
        assert Table.open(t.base_uri).config.get("hoodie.table.version") == str(v)
    with pytest.raises(ConfigError):
        Table.create(str(tmp_path / "x"), "x", record_key_fields=["id"], table_type="MERGE_ON_WRITE")
    with pytest.raises(ConfigError):
        Table.create(str(tmp_path / "v7"), "v7", record_key_fields=["id"], table_type="MERGE_ON_READ",
                     version=7)
    t = Table.create(str(tmp_path / "m"), "m", record_key_fields=["id"], table_type="MERGE_ON_READ")
    assert Table.open(t.base_uri).config.get("hoodie.table.type") == "MERGE_ON_READ"


def test_a_reinsert_below_the_base_ordering_after_a_delete(tmp_path):
    """Base ts 5, delete, upsert ts 3, all before a compaction: Java Hudi gives the base row
    (its file-group reader folds the logs first, so the delete disappears into the later
    upsert, which then loses to the base on ordering; tests/interop/test_java_merge_semantics.py),
    and so do hudi-rs 0.5.0 and our reader, although a serial replay (and a copy-on-write
    table) would give the re-insert. Compaction keeps what every reader read."""
    import pyarrow as pa
    from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.services.compaction import run_compaction
    from airflow_hudi_occ.core.table.mor_reader import read_snapshot
    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read
    t = Table.create(str(tmp_path / "dr"), "dr", record_key_fields=["id"], partition_fields=["p"],
                     precombine_field="ts", table_type="MERGE_ON_READ")
    w = MergeOnReadWriter(t, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    w.write(pa.table({"id": [1, 2], "p": ["a", "a"], "ts": [5, 5], "v": ["base", "base"]}), "insert")
    w.write(pa.table({"id": [1], "p": ["a"], "ts": [0], "v": ["x"]}), "delete")
    w.write(pa.table({"id": [1], "p": ["a"], "ts": [3], "v": ["reinsert"]}), "upsert")

    def rows(tbl):
        return sorted((r["id"], r["ts"], r["v"]) for r in tbl.select(["id", "ts", "v"]).to_pylist())

    java = [(1, 5, "base"), (2, 5, "base")]
    assert rows(read_snapshot(t)) == java
    assert rows(hudi_read(t.base_uri)) == java
    run_compaction(t, WriteConfig.from_options({**FAST_WRITE_OPTIONS,
                                                "hoodie.compact.inline.max.delta.commits": "1"}))
    assert rows(hudi_read(t.base_uri)) == java == rows(read_snapshot(t))


def test_a_null_ordering_value_never_reaches_a_merge_on_read_log(tmp_path):
    """An upsert with a null ordering value onto a stored record (ts 1) is refused before its
    deltacommit (``InvalidOrderingValueError``, as Hudi 0.x refused such records), so no log
    record without one exists and the readers agree on the stored row. On main it committed:
    the library's reader (and its compaction) let the null win, hudi-rs 0.5.0 kept the stored
    record (it reads a null as 0: a stored -1 loses to it), and Java Hudi 1.2 could not read
    the table (``NullPointerException`` in ``BufferedRecordMergerFactory.shouldKeepNewerRecord``).
    The refusal itself, both table types: ``tests/core/commit/test_writer.py::
    test_a_null_ordering_value_is_refused_before_any_instant``."""
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=[],
                         precombine_field="ts", table_type="MERGE_ON_READ")
    schema = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.string())])
    w = MergeOnReadWriter(table, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    w.write(pa.Table.from_pylist([{"id": "a", "ts": 1, "v": "stored"}], schema=schema), "insert")
    with pytest.raises(InvalidOrderingValueError):
        w.write(pa.Table.from_pylist([{"id": "a", "ts": None, "v": "null"}], schema=schema), "upsert")
    ours = read_snapshot(Table.open(table.base_uri)).column("v").to_pylist()
    assert ours == hudi_read(table.base_uri).column("v").to_pylist() == ["stored"]


def test_a_column_added_by_an_update_in_a_log_is_read_and_compacted(tmp_path):
    """The schema evolves in a log: the base file has no ``v``, the update of key 1 in the log
    has ``v="x"``. The snapshot (and the compaction that merges the slice into a new base file)
    keeps ``v`` as Java and hudi-rs read it; before, the log's rows were read in the base
    file's columns and ``v`` came back null (found by Spark SQL through the catalog, issue 41)."""
    from airflow_hudi_occ.core.services.compaction import execute_compaction, schedule_compaction
    t = Table.create(str(tmp_path / "mor"), "mor", record_key_fields=["id"], partition_fields=["p"],
                     precombine_field="ts", table_type="MERGE_ON_READ")
    w = MergeOnReadWriter(t, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    w.write(pa.table({"id": [1, 2], "p": ["a", "a"], "ts": [1, 1]}), "insert")
    w.write(pa.table({"id": [1], "p": ["a"], "ts": [2], "v": ["x"]}), "upsert")
    [fs] = merge_file_slices(t)
    assert fs.base is not None and fs.log_files  # the update is in a log over the old base file
    want = {1: {"id": 1, "p": "a", "ts": 2, "v": "x"}, 2: {"id": 2, "p": "a", "ts": 1, "v": None}}
    assert rows_by_key(hudi_read(t.base_uri), columns=COLS) == want
    assert rows_by_key(read_snapshot(t), columns=COLS) == want
    opts = {**FAST_WRITE_OPTIONS, "hoodie.compact.inline.max.delta.commits": "1"}
    execute_compaction(t, opts, schedule_compaction(t, opts))
    [fs] = merge_file_slices(t)
    assert not fs.log_files
    assert rows_by_key(read_snapshot(t), columns=COLS) == want
    assert rows_by_key(hudi_read(t.base_uri), columns=COLS) == want
