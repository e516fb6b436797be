"""Hudi's parquet keys (``hoodie.parquet.compression.codec``, ``.block.size``, ``.page.size``)
on the base files the core writer writes (``core/format/base_file.parquet_writer``), judged by
Java Hudi: given the same options and rows, its base files carry the same codec and row groups
of the same number of rows as parquet-mr closes them (``core/format/row_groups``); and unset,
nothing changes (snappy, a row group per written chunk)."""

from __future__ import annotations

import glob
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import ParquetConfig, WriteConfig
from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.format.base_file import BLOCK_SAMPLE_ROWS, page_ratios, parquet_write_options
from airflow_hudi_occ.core.format.row_groups import ParquetMrRowGroups
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS

ROWS = 120_000
BLOCK = 512 * 1024
PARQUET_OPTIONS = {"hoodie.parquet.compression.codec": "gzip", "hoodie.parquet.block.size": str(BLOCK),
                   "hoodie.parquet.page.size": str(64 * 1024)}
#: rows and options of each case Java judges: small pages (a column's pages close inside a row
#: group and count written), and Hudi's 1 MB pages over a smaller block (no page closes: a group
#: holds a block of plain values, many more groups than a block of written bytes makes)
CASES = {"gzip-64k-pages": (ROWS, PARQUET_OPTIONS),
         "256k-block-1m-pages": (60_000, {"hoodie.parquet.compression.codec": "snappy",
                                          "hoodie.parquet.block.size": str(256 * 1024)})}


def batch(n: int = ROWS) -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table({"id": pa.array(np.arange(n), pa.int64()), "p": pa.array(["a"] * n),
                     "ts": pa.array(np.arange(n), pa.int64()),
                     "v": pa.array([f"value-{i}-{x}" for i, x in enumerate(rng.integers(0, 10**9, n))])})


def base_files(path: str) -> list[pq.FileMetaData]:
    return [pq.ParquetFile(f).metadata for f in sorted(glob.glob(os.path.join(path, "a", "*.parquet")))]


def codecs(meta: pq.FileMetaData) -> set[str]:
    return {meta.row_group(i).column(j).compression for i in range(meta.num_row_groups)
            for j in range(meta.num_columns)}


def group_bytes(meta: pq.FileMetaData) -> list[int]:
    """Each row group's bytes as written (compressed column chunks)."""
    return [sum(meta.row_group(i).column(j).total_compressed_size for j in range(meta.num_columns))
            for i in range(meta.num_row_groups)]


def group_rows(meta: pq.FileMetaData) -> list[int]:
    return [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]


def ours(path: str, options: dict, rows: int = ROWS) -> Table:
    t = Table.create(path, "t", record_key_fields=["id"], partition_fields=["p"], precombine_field="ts")
    ArrowTableWriter(t, WriteConfig.from_options({**FAST_WRITE_OPTIONS, **options})).write(batch(rows), "insert")
    return t


@pytest.fixture(scope="module", params=sorted(CASES))
def written(request, tmp_path_factory, java_hudi):
    rows, options = CASES[request.param]
    root = tmp_path_factory.mktemp("parquet")
    java_path, our_path = str(root / "java"), str(root / "ours")
    java_hudi.write(java_path, batch(rows), operation="insert", table_type="COPY_ON_WRITE", table_version=8,
                    record_key="id", partition_fields="p", ordering_field="ts",
                    options={"hoodie.metadata.enable": "false", **options})
    ours(our_path, options, rows)
    return java_path, our_path, rows, options


def test_the_codec_and_row_groups_are_java_hudis(written):
    java_path, our_path, rows, options = written
    java, mine = base_files(java_path), base_files(our_path)
    assert len(java) == len(mine) == 1
    codec = options.get("hoodie.parquet.compression.codec", "snappy").upper()
    assert codecs(java[0]) == codecs(mine[0]) == {codec}
    jr, our = group_rows(java[0]), group_rows(mine[0])
    block = int(options["hoodie.parquet.block.size"])
    assert len(jr) > 3 and all(b <= block for b in group_bytes(mine[0])), group_bytes(mine[0])
    full = sorted(jr[:-1])[len(jr[:-1]) // 2]  # Java's full groups (the last is what is left)
    if int(options.get("hoodie.parquet.page.size", 1 << 20)) >= block:
        # no page closes inside a group: a group is a block of plain values, on both sides.
        # Within 5% a group: the same rows gave Java's groups exactly in one checkout and 2.2%
        # smaller ones in a fresh clone (1435/1395 rows against our 1466/1426); the old rule
        # (a block of written bytes) made 4 groups where Java makes 42
        assert abs(len(our) - len(jr)) <= max(1, len(jr) // 20), f"java {jr} ours {our}"
        assert all(abs(a - b) <= 0.05 * b for a, b in zip(our[:-1], jr[:-1])), f"java {jr} ours {our}"
    else:
        # pages close inside a group and the buffered size saws (a closing page drops from
        # plain to written bytes): where a size check lands decides the group, so one byte
        # more or less a row moves it (ours: a file name a byte shorter than Java's, whose
        # write token is 0-9-11). Same order; on Java's own rows the replay gives Java's
        # groups (below)
        assert abs(len(our) - len(jr)) <= max(2, len(jr) // 4), f"java {jr} ours {our}"
        assert all(full / 1.75 <= r <= full * 1.75 for r in our[:-1]), f"java {jr} ours {our}"


def test_the_replay_on_javas_own_rows_gives_javas_row_groups(written):
    """parquet-mr's rule as ``core/format/row_groups`` replays it, given the rows of Java's
    base file (and the compression our writer measures on its first rows): Java's groups."""
    java_path, _, _, options = written
    f = sorted(glob.glob(os.path.join(java_path, "a", "*.parquet")))[0]
    rows = pq.read_table(f).combine_chunks()
    parquet = ParquetConfig.from_options(options)
    ratios = page_ratios(rows.slice(0, BLOCK_SAMPLE_ROWS), parquet_write_options(rows, parquet))
    replay = ParquetMrRowGroups(parquet.block_size, parquet.page_size, ratios).close_points(rows)
    jr = group_rows(pq.ParquetFile(f).metadata)
    # Java's last group is the rows left when the file closed: the replay may close one more
    # group within them (a check Java never reached).
    if int(options.get("hoodie.parquet.page.size", 1 << 20)) >= int(options["hoodie.parquet.block.size"]):
        # no page closes inside a group: within 5% a group
        assert len(jr) - 1 <= len(replay) <= len(jr), f"java {jr} replay {replay}"
        assert all(abs(a - b) <= 0.05 * b for a, b in zip(replay, jr[:-1])), f"java {jr} replay {replay}"
    else:
        # pages close inside a group and the buffered size saws: where a check lands decides
        # the group, and which pages a check sees closed depends on the compression of each
        # page (one checkout: Java 11,538-11,755 a group, the replay within 4%; a fresh clone:
        # Java 11,430-18,971, the replay 11,292-19,202). The same count, within the same band
        full = sorted(jr[:-1])[len(jr[:-1]) // 2]
        assert abs(len(replay) - len(jr)) <= max(2, len(jr) // 4), f"java {jr} replay {replay}"
        assert all(full / 1.75 <= r <= full * 1.75 for r in replay[:-1]), f"java {jr} replay {replay}"


def test_the_rows_read_back_whole(written):
    rows = written[2]
    t = read_table(Table.open(written[1]))
    assert t.num_rows == rows and sorted(t.column("id").to_pylist()) == list(range(rows))


def test_unset_keys_write_as_before(tmp_path):
    """No key, no change: snappy, and one row group per chunk the writer writes."""
    meta = base_files(str(ours(str(tmp_path / "t"), {}).base_uri))[0]
    assert codecs(meta) == {"SNAPPY"} and meta.num_row_groups == 1
    opts = parquet_write_options(batch(10))
    assert opts["compression"] == "snappy" and "data_page_size" not in opts


def test_the_page_size_reaches_the_parquet_writer():
    opts = parquet_write_options(batch(10), ParquetConfig.from_options(PARQUET_OPTIONS))
    assert opts["compression"] == "gzip" and opts["data_page_size"] == 64 * 1024


@pytest.mark.parametrize("codec", ["lz4", "brotli", "lzo", "rle"])
def test_a_codec_java_would_not_read_alike_is_refused_before_anything(tmp_path, codec):
    with pytest.raises(ConfigError) as e:
        WriteConfig.from_options({"hoodie.parquet.compression.codec": codec})
    assert e.value.key == "hoodie.parquet.compression.codec" and "zstd" in e.value.remedy
