"""Tagging in the Arrow writer: which stored files a batch's keys are looked up in.

A file whose key range (its parquet footer's statistics) misses every key of the batch is not
read; a file that may hold one is, and an update still lands in the file group that holds its
key. Checked by counting the column reads and by reading the table back with hudi-rs.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit import writer as writer_module
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key


def _rows(ids, v, as_text=False):
    return pa.table({"id": [f"k{i:05d}" if as_text else i for i in ids], "p": ["a"] * len(ids),
                     "ts": [1] * len(ids), "v": [v] * len(ids)})


@pytest.fixture
def column_reads(monkeypatch):
    reads = []
    real = writer_module.read_parquet_columns

    def counting(storage, rel, columns):
        reads.append(rel)
        return real(storage, rel, columns)

    monkeypatch.setattr(writer_module, "read_parquet_columns", counting)
    return reads


@pytest.mark.parametrize("as_text", [False, True], ids=["integer-key", "text-key"])
def test_files_outside_the_batch_key_range_are_not_read(tmp_path, column_reads, as_text):
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    w = ArrowTableWriter(table, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    for n in range(3):  # three file groups in one partition: ids 0-9, 100-109, 200-209
        w.write(_rows(range(n * 100, n * 100 + 10), f"v{n}", as_text))
    assert len(FileSystemView(table).latest_file_slices("a")) == 3
    column_reads.clear()

    # fresh keys above every range: nothing is read, one new file group
    w.write(_rows(range(300, 305), "fresh", as_text))
    assert column_reads == []

    # an update of ids 105-107 (and a fresh key in the same range): only the middle file is read
    column_reads.clear()
    result = w.write(_rows([105, 106, 107, 150], "upd", as_text))
    assert len(column_reads) == 1
    touched = {s.file_id for s in result.metadata.write_stats() if s.prev_commit != "null"}
    assert len(touched) == 1

    got = rows_by_key(hudi_read(table.base_uri), "id")
    key = (lambda i: f"k{i:05d}") if as_text else (lambda i: i)
    assert len(got) == 30 + 5 + 1  # no key duplicated by a skipped lookup
    assert [got[key(i)]["v"] for i in (105, 106, 107, 150)] == ["upd"] * 4
    assert got[key(104)]["v"] == "v1" and got[key(0)]["v"] == "v0"


def test_text_keys_are_never_pruned_by_an_integer_order(tmp_path, column_reads):
    """'10' < '9' as text: a range of text keys says nothing about integers, so such files are read."""
    assert writer_module._disjoint(("10", "9"), (5, 6)) is False
    assert writer_module._disjoint((10, 19), (20, 30)) is True
    assert writer_module._disjoint(("k1", "k3"), ("k4", "k9")) is True
    assert writer_module._disjoint(("k1", "k5"), ("k4", "k9")) is False


def test_a_merge_on_read_table_is_refused_naming_its_writer(tmp_path):
    from airflow_hudi_occ.core.errors import ConfigError
    table = Table.create(str(tmp_path / "mor"), "mor", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts", table_type="MERGE_ON_READ")
    with pytest.raises(ConfigError) as e:
        ArrowTableWriter(table, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    assert "MergeOnReadWriter" in e.value.remedy
    assert table.timeline().completed() == []
