"""Where Java Hudi's parquet writer closes a row group, for ``hoodie.parquet.block.size``.

Java Hudi writes base files with parquet-mr (1.13 in Spark 3.5 with Hudi 1.2), which does not
bound a row group by the bytes it writes. ``InternalParquetRecordWriter.checkBlockSizeReached``
asks the column store for its *buffered* size every so many records (100 records into a new
row group, then half-way to where the size per record says the block fills, at most 10,000
ahead) and closes the group once that size is within two records of the block size. A column's
buffered size is its open page's values in their plain encoding (``FallbackValuesWriter``
reports the raw size, a string's 4-byte length and its bytes, a long's 8 bytes, even while it
dictionary-encodes) plus the pages it closed in this group, compressed; its dictionary is not
counted. A page closes when its raw size comes within 10% of the page size or at 20,000
records, checked half-way to where the first page of any column fills (at least 100, at most
10,000 records on). So with a block smaller than a page takes to fill (Hudi's pages
are 1 MB), a Java row group holds a block's worth of *plain, uncompressed* values: many fewer
rows than a block of written bytes (60,000 rows of the tests' table at a 256 KB block: Java 42
groups of about 1,450 rows; counted in written bytes, as this project did before, 4).

:class:`ParquetMrRowGroups` replays those checks on the rows to write: each column's plain size
per row from the Arrow arrays, the bytes a closed page takes from that column's compression
ratio (measured by the caller on the file's first rows written aside with the file's options),
the same checks at the same record counts. What it leaves out: repetition and definition
levels (bit-packed, a bit or less per value), page headers, and a nested column's exact leaf
sizes (its Arrow buffers' bytes per row stand in). Where pages close inside a group the
buffered size saws (a closing page drops from plain to written bytes), so where a check lands
decides the group and a byte more or less a row can move it: on Java's own rows the replay
gives Java's groups (tests/core/format/test_base_file_parquet_options.py), on ours (a file name
a byte shorter than Java's) the same order of groups, not the same count.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: parquet-mr's ParquetProperties defaults (1.13), as Hudi's writer leaves them
MIN_RECORDS_FOR_CHECK = 100
MAX_RECORDS_FOR_CHECK = 10_000
PAGE_ROW_COUNT_LIMIT = 20_000
#: a page closes when its free space is at most this part of the page size
PAGE_TOLERANCE = 0.1
#: Hudi's ``hoodie.parquet.page.size`` default: the page size Java writes with when none is set
HUDI_PAGE_SIZE = 1024 * 1024


def plain_sizes(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Each value's bytes in parquet's plain encoding, as parquet-mr counts them before a page
    closes (a null: 0; a string or binary: 4 + its length; a number: its width; a dictionary
    column: its value's; a boolean: an eighth)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    t = column.type
    n = len(column)
    if pa.types.is_dictionary(t):
        values = plain_sizes(column.dictionary)
        idx = column.indices.to_numpy(zero_copy_only=False)
        out = np.zeros(n, dtype=np.float64)
        valid = ~np.asarray(column.is_null())
        out[valid] = values[idx[valid].astype(np.int64)]
        return out
    if pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t) \
            or pa.types.is_large_binary(t):
        lengths = pc.binary_length(column).to_numpy(zero_copy_only=False)
        return np.where(np.isnan(lengths.astype(np.float64)), 0.0, lengths.astype(np.float64) + 4)
    if pa.types.is_boolean(t):
        width = 0.125
    elif pa.types.is_decimal(t):
        # Spark (Java Hudi's writer) stores precision <= 9 as int32, <= 18 as int64
        width = 4 if t.precision <= 9 else 8 if t.precision <= 18 else t.byte_width
    elif pa.types.is_fixed_size_binary(t):
        width = t.byte_width
    elif pa.types.is_primitive(t):
        width = t.bit_width / 8
    else:  # nested: the Arrow buffers' bytes per row stand in for the leaves'
        width = column.nbytes / max(n, 1)
        return np.full(n, width, dtype=np.float64)
    out = np.full(n, width, dtype=np.float64)
    if column.null_count:
        out[np.asarray(column.is_null())] = 0.0
    return out


class ParquetMrRowGroups:
    """The row groups parquet-mr would close over a stream of rows (module docstring).

    :param block_size: ``hoodie.parquet.block.size``
    :param page_size: ``hoodie.parquet.page.size`` (None: Hudi's 1 MB)
    :param ratios: per column name, written bytes of a closed page per plain byte (a missing
        column: 1)
    """

    def __init__(self, block_size: int, page_size: int | None = None, ratios: dict[str, float] | None = None):
        self.block_size = block_size
        self.page_size = page_size or HUDI_PAGE_SIZE
        self.ratios = ratios or {}

    def sizes(self, table: pa.Table) -> np.ndarray:
        """Cumulative plain bytes per column: ``[column, row]``, row 0 all zeros."""
        cum = np.zeros((max(table.num_columns, 1), table.num_rows + 1), dtype=np.float64)
        for i, name in enumerate(table.column_names):
            np.cumsum(plain_sizes(table.column(name)), out=cum[i, 1:])
        return cum

    def close_points(self, table: pa.Table) -> list[int]:
        """The sizes (in rows) of the row groups parquet-mr closes over ``table``'s rows, the
        first group starting at its first row; the rows after the last are a group still open
        (more rows may follow; the file's end closes it whatever its size)."""
        cum = self.sizes(table)
        ratio = np.array([self.ratios.get(n, 1.0) for n in table.column_names] or [1.0])
        n = table.num_rows
        out: list[int] = []
        start = 0
        while True:
            size = self._next_group(cum, ratio, start, n)
            if size is None:
                return out
            out.append(size)
            start += size

    def _next_group(self, cum: np.ndarray, ratio: np.ndarray, start: int, n: int) -> int | None:
        """Records of the group starting at row ``start``, or None if it is still open at ``n``."""
        page_start = np.full(cum.shape[0], start, dtype=np.int64)
        closed = np.zeros(cum.shape[0], dtype=np.float64)
        cols = np.arange(cum.shape[0])
        next_page_check = next_mem_check = MIN_RECORDS_FOR_CHECK
        while True:
            r = min(next_page_check, next_mem_check)
            if start + r > n:
                return None
            end = start + r
            if r == next_page_check:  # ColumnWriteStoreBase.sizeCheck, at the end of a record
                used = cum[:, end] - cum[cols, page_start]
                rows = end - page_start
                full = (used >= self.page_size * (1 - PAGE_TOLERANCE)) | (rows >= PAGE_ROW_COUNT_LIMIT)
                closed[full] += used[full] * ratio[full]
                page_start[full] = end
                # the next check half-way to where the first page fills (estimateNextSizeCheck)
                remaining = np.where(full, self.page_size, self.page_size - used)
                fill = np.where(used > 0, rows * remaining // np.maximum(used, 1), MAX_RECORDS_FOR_CHECK)
                next_page_check = r + min(max(int(fill.min()) // 2, MIN_RECORDS_FOR_CHECK), MAX_RECORDS_FOR_CHECK)
                open_rows = end - page_start
                next_page_check = min(next_page_check, r + int((PAGE_ROW_COUNT_LIMIT - open_rows).min()))
            if r == next_mem_check:  # InternalParquetRecordWriter.checkBlockSizeReached
                mem = float((cum[:, end] - cum[cols, page_start]).sum() + closed.sum())
                record = max(int(mem) // r, 1)
                if mem > self.block_size - 2 * record:
                    return r
                next_mem_check = min(max(MIN_RECORDS_FOR_CHECK, (r + int(self.block_size / record)) // 2),
                                     r + MAX_RECORDS_FOR_CHECK)


__all__ = ["ParquetMrRowGroups", "plain_sizes"]
