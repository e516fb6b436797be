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
import pyarrow.parquet as pq

from airflow_hudi_occ.core.format.layout import META_COLUMNS, base_file_name, base_file_path  # noqa: F401


def new_file_id(bucket: int | None = None) -> str:
    u = str(uuid.uuid4())
    if bucket is not None:
        u = f"{bucket:08d}" + u[8:]
    return f"{u}-0"


def write_token(partition_id: int = 0, stage_id: int = 0, attempt_id: int = 0) -> str:
    return f"{partition_id}-{stage_id}-{attempt_id}"


def record_keys(table: pa.Table, key_fields: Sequence[str]) -> list[str]:
    """Hudi's record key: the field's value for one field, ``f1:v1,f2:v2`` for several."""
    cols = [table.column(f).to_pylist() for f in key_fields]
    if len(key_fields) == 1:
        return ["" if v is None else str(v) for v in cols[0]]
    return [",".join(f"{f}:{'' if v is None else v}" for f, v in zip(key_fields, row))
            for row in zip(*cols)]


def with_meta_columns(data: pa.Table, *, instant_time: str, partition: str, file_name: str,
                      key_fields: Sequence[str], commit_times: Iterable[str] | None = None,
                      seqno_start: int = 0, partition_id: int = 0) -> pa.Table:
    """Prepend the meta columns. ``commit_times`` keeps unchanged rows' original commit time."""
    n = data.num_rows
    data = data.drop_columns([c for c in META_COLUMNS if c in data.column_names])
    times = list(commit_times) if commit_times is not None else [instant_time] * n
    seq = [f"{instant_time}_{partition_id}_{seqno_start + i}" for i in range(n)]
    meta = [pa.array(times, pa.string()), pa.array(seq, pa.string()),
            pa.array(record_keys(data, key_fields), pa.string()),
            pa.array([partition] * n, pa.string()), pa.array([file_name] * n, pa.string())]
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
