"""parquet-mr's row-group rule replayed (``core/format/row_groups``): the plain sizes it counts,
where it closes a group, and the same groups whatever chunks the rows come in. Java Hudi is the
judge in tests/core/format/test_base_file_parquet_options.py."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_hudi_occ.core.config import ParquetConfig
from airflow_hudi_occ.core.format.base_file import parquet_writer
from airflow_hudi_occ.core.format.row_groups import ParquetMrRowGroups, plain_sizes


def test_plain_sizes_are_what_parquet_mr_buffers():
    assert plain_sizes(pa.array(["ab", None, ""])).tolist() == [6.0, 0.0, 4.0]  # 4-byte length + bytes
    assert plain_sizes(pa.array([1, None, 3], pa.int64())).tolist() == [8.0, 0.0, 8.0]
    assert plain_sizes(pa.array([1, 2], pa.int32())).tolist() == [4.0, 4.0]
    assert plain_sizes(pa.array([True, False])).tolist() == [0.125, 0.125]
    d = pa.DictionaryArray.from_arrays(pa.array([1, 0, None, 1], pa.int32()), pa.array(["x", "long"]))
    assert plain_sizes(d).tolist() == [8.0, 5.0, 0.0, 8.0]  # a dictionary column counts its values
    assert plain_sizes(pa.chunked_array([["a"], ["bcd"]])).tolist() == [5.0, 7.0]


def test_a_group_closes_within_two_records_of_the_block_at_parquet_mrs_checks():
    """10 plain bytes a row, a 10,000-byte block: parquet-mr checks at 100 records, then half-way
    to the estimate (550, 775, ... 998, 999) and closes once the buffered bytes exceed the
    block less two records: at 999 records, 9,990 bytes."""
    t = pa.table({"s": pa.array(["xxxxxx"] * 3000)})
    assert ParquetMrRowGroups(10_000).close_points(t) == [999, 999, 999]  # 3 rows still open


def test_closed_pages_count_at_their_written_size():
    """A page closes at 90% of the page size (checked every 100 records) and then counts at
    its written size: the better a column compresses, the more rows a group takes; at a page
    size above the block no page closes and the ratio does not matter."""
    t = pa.table({"s": pa.array(["xxxxxx"] * 20_000)})
    small_pages = [ParquetMrRowGroups(10_000, 1_000, {"s": r}).close_points(t)[0] for r in (1.0, 0.5, 0.1)]
    assert small_pages[0] == 999 and small_pages[0] < small_pages[1] < small_pages[2]
    assert ParquetMrRowGroups(10_000, 1 << 20, {"s": 0.1}).close_points(t)[0] == 999


def test_chunks_make_the_same_row_groups_as_one_table():
    """The rows of an open group wait for the next chunk: the groups depend on the rows, not on
    how the writer cut them."""
    rng = np.random.default_rng(3)
    n = 30_000
    t = pa.table({"id": pa.array(np.arange(n), pa.int64()),
                  "v": pa.array([f"v{x}" for x in rng.integers(0, 10**9, n)])})
    parquet = ParquetConfig(block_size=64 * 1024)

    def groups(chunks):
        buf = io.BytesIO()
        with parquet_writer(buf, t.schema, sample=chunks[0], parquet=parquet) as w:
            for c in chunks:
                w.write_table(c)
        meta = pq.ParquetFile(io.BytesIO(buf.getvalue())).metadata
        return [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]

    whole = groups([t])
    assert len(whole) > 5 and sum(whole) == n
    assert groups([t.slice(i, 1234) for i in range(0, n, 1234)]) == whole
