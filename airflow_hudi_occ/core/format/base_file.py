"""Writing and reading base files: parquet with Hudi's five meta columns first.

Shared by the Spark executors (which hand over Arrow batches) and by tests that need tiny real
tables without Spark. Names follow Hudi: ``<fileId>_<writeToken>_<instant>.parquet`` with a
write token ``<partitionId>-<stageId>-<attemptId>``; fileIds are ``<uuid>-0`` (or, for the bucket
index, the uuid with its first 8 characters replaced by the zero-padded bucket number).
"""

from __future__ import annotations

import io
import posixpath
import uuid
from typing import Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_hudi_occ.core.format.layout import META_COLUMNS, base_file_name, base_file_path  # noqa: F401


def new_file_id(bucket: int | None = None) -> str:
    u = str(uuid.uuid4())
    if bucket is not None:
        u = f"{bucket:08d}" + u[8:]
    return f"{u}-0"


def write_token(partition_id: int = 0, stage_id: int = 0, attempt_id: int = 0) -> str:
    return f"{partition_id}-{stage_id}-{attempt_id}"


_PLAIN_TO_STRING = (pa.types.is_string, pa.types.is_large_string, pa.types.is_integer)


def _key_part(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """One key field as Hudi's record-key text: the value as a string, '' for null."""
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if any(test(col.type) for test in _PLAIN_TO_STRING):
        text = pc.cast(col, pa.string())  # equal to str() for these types
    else:  # floats, dates, decimals, ...: keep Python's str() of the value, as before
        text = pa.array([None if v is None else str(v) for v in col.to_pylist()], pa.string())
    return pc.fill_null(text, "")


def record_key_array(table: pa.Table, key_fields) -> pa.Array:
    """Hudi's record key of every row: the field's value for one field, ``f1:v1,f2:v2`` for several."""
    fields = list(key_fields)
    if len(fields) == 1:
        return _key_part(table.column(fields[0]))
    parts = []
    for f in fields:
        parts.append(pc.binary_join_element_wise(
            pa.array([f"{f}:"] * table.num_rows, pa.string()), _key_part(table.column(f)), ""))
    return pc.binary_join_element_wise(*parts, ",")


def with_meta_columns(data: pa.Table, *, instant_time: str, partition: str, file_name: str,
                      key_fields: Sequence[str] | None = None, keys: pa.Array | None = None,
                      commit_times: Iterable[str] | pa.Array | None = None, seqno_start: int = 0,
                      partition_id: int = 0, seq_prefix: str | None = None) -> pa.Table:
    """Prepend the meta columns. ``keys`` (else computed from ``key_fields``) are the record
    keys; ``commit_times`` keeps unchanged rows' original commit time; the sequence number is
    ``<seq_prefix><n>`` (default prefix ``<instant>_<partition_id>_``)."""
    n = data.num_rows
    data = data.drop_columns([c for c in META_COLUMNS if c in data.column_names])
    if keys is None:
        keys = record_key_array(data, key_fields)
    if commit_times is None:
        times = pa.array([instant_time] * n, pa.string())
    elif isinstance(commit_times, (pa.Array, pa.ChunkedArray)):
        times = commit_times.cast(pa.string())
    else:
        times = pa.array(list(commit_times), pa.string())
    prefix = f"{instant_time}_{partition_id}_" if seq_prefix is None else seq_prefix
    seq = pc.binary_join_element_wise(pa.array([prefix] * n, pa.string()),
                                      pc.cast(pa.array(range(seqno_start, seqno_start + n), pa.int64()),
                                              pa.string()), "")
    meta = [times, seq, keys.cast(pa.string()), pa.array([partition] * n, pa.string()),
            pa.array([file_name] * n, pa.string())]
    return pa.Table.from_arrays(meta + list(data.columns),
                                names=list(META_COLUMNS) + data.column_names)


def write_parquet(storage, relative_path: str, table: pa.Table) -> int:
    """Write a whole base file; returns its size in bytes."""
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="snappy")
    data = buf.getvalue()
    path = storage.path(relative_path)
    storage.makedirs(posixpath.dirname(path))
    try:
        storage.create_if_absent(path, data)
    except FileExistsError:
        raise FileExistsError(f"base file {relative_path} already exists; a base file is written "
                              "once per (fileId, write token, instant)") from None
    return len(data)


def read_parquet(storage, relative_path: str) -> pa.Table:
    return pq.read_table(io.BytesIO(storage.read(storage.path(relative_path))))
