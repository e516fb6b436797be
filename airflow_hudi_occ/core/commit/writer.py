"""A single-process Arrow writer: the write path of the library without Spark.

It does, in one process, what the Spark engine does across executors: tag each record with
its file group (simple index: the keys of the latest file slices), write one parquet base file
per touched file group behind the early conflict check and the marker, and commit through
:class:`WriteTransaction`. It serves small writers (an Airflow task, the demo), the tests, and
as the *serial replay* oracle of the stress tests: replaying committed batches through it in
completion order must give the same table.

Operations: ``upsert`` (merge by record key; with a precombine field the larger value wins,
as Hudi's EVENT_TIME_ORDERING), ``insert`` (new file groups, no lookup), ``delete`` (by key),
``insert_overwrite`` (replace every file group of the touched partitions).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from airflow_hudi_occ.core.commit import merge
from airflow_hudi_occ.core.format.base_file import (new_file_id, read_parquet, record_key_array, with_meta_columns,
                                                    write_parquet, write_token)
from airflow_hudi_occ.core.format.bucket_index import HASH_FIELD, bucket_config, bucket_id
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.concurrency.clustering_gate import check_write_against_pending_clustering
from airflow_hudi_occ.core.errors import BatchAlreadyCommittedError, ConfigError
from airflow_hudi_occ.core.table.file_system_view import FileSystemView, base_file_name, bucket_id_of
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.format.layout import join_partition
from airflow_hudi_occ.core.format.metadata import WriteStat
from airflow_hudi_occ.core.format.schema import avro_schema_json, evolve
from airflow_hudi_occ.core.table.table import META_COLUMNS, Table
from airflow_hudi_occ.core.commit.recovery import committed_batch_result, prepare_batch
from airflow_hudi_occ.core.commit.transaction import CommitResult, WriteTransaction
from airflow_hudi_occ.core.table.time_travel import check_as_of_readable

OPERATIONS = {"upsert": "UPSERT", "insert": "INSERT", "delete": "DELETE",
              "insert_overwrite": "INSERT_OVERWRITE", "bulk_insert": "BULK_INSERT"}


def partition_path_of(table: Table, row_values: dict) -> str:
    fields = table.config.partition_fields
    if not fields:
        return ""
    parts = []
    for f in fields:
        v = row_values[f]
        v = "__HIVE_DEFAULT_PARTITION__" if v is None else str(v)
        parts.append(f"{f}={v}" if table.config.hive_style_partitioning else v)
    return "/".join(parts)


def split_by_partition(table: Table, data: pa.Table) -> dict[str, pa.Table]:
    fields = table.config.partition_fields
    if not fields:
        return {"": data}
    missing = [f for f in fields if f not in data.column_names]
    if missing:
        raise ConfigError(f"the data lacks the partition columns {missing}",
                          key="hoodie.table.partition.fields", value=",".join(fields),
                          remedy="add the columns; the partition column stays in the data")
    cols = [data.column(f).to_pylist() for f in fields]
    idx: dict[str, list[int]] = {}
    for i, vals in enumerate(zip(*cols)):
        idx.setdefault(partition_path_of(table, dict(zip(fields, vals))), []).append(i)
    return {p: data.take(pa.array(rows, pa.int64())) for p, rows in idx.items()}


@dataclass
class _Work:
    partition: str
    file_id: str
    prev: object | None  # FileSlice
    rows: pa.Table  # final user rows (without meta columns)
    commit_times: pa.Array | None  # None: every row takes this instant
    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    keys: pa.Array | None = None  # record keys of ``rows`` (None: computed from the key fields)


class ArrowTableWriter:
    def __init__(self, table: Table, config: WriteConfig | None = None, *, writer_id: str | None = None,
                 lock_manager=None):
        self.table = table
        self.config = config or WriteConfig()
        self.writer_id = writer_id
        self._lock_manager = lock_manager

    def write(self, data: pa.Table, operation: str = "upsert", *, checkpoint: str | None = None,
              batch_key: str | None = None, attempt: int = 1,
              before_file: Callable[[WriteTransaction, str, str], None] | None = None,
              before_commit: Callable[[WriteTransaction], None] | None = None,
              recover: bool = True) -> CommitResult:
        """Write one batch as one instant. Hooks let tests pause or crash at precise steps.

        With a ``batch_key`` the write is idempotent: a batch already committed returns that
        commit (``outcome == "already_committed"``) and writes nothing; a dead writer's staged
        instant of the batch is re-committed (``"recommitted"``, unless ``recover=False``)."""
        op = operation.lower()
        if op not in OPERATIONS:
            raise ConfigError(f"unknown write operation {operation!r}", key="hoodie.datasource.write.operation",
                              value=operation, remedy=f"use one of {sorted(OPERATIONS)}")
        keys = self.table.config.record_key_fields
        missing = [k for k in keys if k not in data.column_names]
        if missing:
            raise ConfigError(f"the data lacks the record key columns {missing}",
                              key="hoodie.datasource.write.recordkey.field", value=",".join(keys))
        if recover:
            early = prepare_batch(self.table, self.config, batch_key, writer_id=self.writer_id,
                                  attempt=attempt, lock_manager=self._lock_manager)
            if early is not None:
                return early
        data = data.drop_columns([c for c in META_COLUMNS if c in data.column_names])
        schema_json = avro_schema_json(data.schema, self.table.name)
        tl = self.table.timeline()
        last = tl.last_completed_write()
        if last is not None and op != "delete":
            schema_json = evolve(tl.commit_metadata(last).schema, schema_json)
        action = Action.REPLACE_COMMIT if op == "insert_overwrite" else Action.COMMIT
        tx = WriteTransaction(self.table, self.config, action=action, operation_type=OPERATIONS[op],
                              writer_id=self.writer_id, attempt=attempt, checkpoint=checkpoint,
                              batch_key=batch_key, lock_manager=self._lock_manager)
        tx.begin()
        try:
            view = FileSystemView(self.table)  # the snapshot this write reads
            if last is not None and op == "delete":
                schema_json = tl.commit_metadata(last).schema or schema_json
            work, replaced = self._plan(tx, view, data, op)
            # Refused before any data file exists: clustering would drop these updates.
            touched = [(w.partition, w.file_id) for w in work if w.prev is not None]
            touched += [(p, f) for p, ids in replaced.items() for f in ids]
            check_write_against_pending_clustering(view.timeline, touched, tx.instant, self.config)
            tx.start_inflight(planned_file_groups=[(w.partition, w.file_id) for w in work])
            stats = []
            for w in work:
                stats.append(self._write_file(tx, w, before_file))
            if before_commit:
                before_commit(tx)
            return tx.commit(stats, schema=schema_json,
                             replaced=replaced if action is Action.REPLACE_COMMIT else None)
        except BatchAlreadyCommittedError as e:  # a twin of this batch won under the lock
            return committed_batch_result(self.table, self.table.timeline().get(e.committed_instant),
                                          attempted_instant=e.instant)
        except BaseException as e:
            tx.abort(reason=f"{type(e).__name__}: {e}", error=e)
            raise

    # -- tagging --------------------------------------------------------------------------------

    def _plan(self, tx: WriteTransaction, view: FileSystemView, data: pa.Table, op: str):
        key_fields = self.table.config.record_key_fields
        pre = self.table.config.precombine_field
        work: list[_Work] = []
        replaced: dict[str, list[str]] = {}
        num_buckets = bucket_config(self.config.options)
        for part, rows in sorted(split_by_partition(self.table, data).items()):
            rows = merge.dedupe(rows, key_fields, pre)
            slices = view.latest_file_slices(part)
            if num_buckets is not None and op != "insert_overwrite":
                work.extend(self._plan_buckets(tx, part, rows, slices, op, num_buckets))
                continue
            if op == "insert_overwrite":
                replaced[part] = [s.file_id for s in slices]
                work.append(_Work(part, new_file_id(), None, rows, None,
                                  inserts=rows.num_rows))
                continue
            if op in ("insert", "bulk_insert") or not slices:
                if op != "delete" and rows.num_rows:
                    work.append(_Work(part, new_file_id(), None, rows,
                                      None, inserts=rows.num_rows))
                continue
            work.extend(self._merge_into(tx, part, rows, slices, op, new_groups=True))
        return work, replaced

    def _plan_buckets(self, tx, part, rows, slices, op, num_buckets):
        """Bucket index: every key of a bucket goes to that bucket's one file group."""
        hash_fields = [f.strip() for f in (HASH_FIELD.get(self.config.options) or "").split(",")
                       if f.strip()] or self.table.config.record_key_fields
        cols = [rows.column(f).to_pylist() for f in hash_fields]
        by_bucket: dict[int, list[int]] = {}
        for i, vals in enumerate(zip(*cols)):
            by_bucket.setdefault(bucket_id(vals, num_buckets), []).append(i)
        existing = {}
        for sl in slices:
            b = bucket_id_of(sl.file_id)
            if b is not None:
                existing[int(b)] = sl
        out = []
        for b, idx in sorted(by_bucket.items()):
            sub = rows.take(pa.array(idx, pa.int64()))
            sl = existing.get(b)
            if sl is None:
                if op != "delete":
                    out.append(_Work(part, new_file_id(bucket=b), None, sub,
                                     None, inserts=sub.num_rows))
                continue
            out.extend(self._merge_into(tx, part, sub, [sl], op, new_groups=False, append_fresh=True))
        return out

    def _merge_into(self, tx, part, rows, slices, op, *, new_groups: bool, append_fresh: bool = False):
        """Merge ``rows`` into the file groups among ``slices`` that hold their keys; fresh keys
        go to a new file group (simple index) or into the one given slice (bucket index)."""
        keys = record_key_array(rows, self.table.config.record_key_fields)
        mode = merge.DELETE if op == "delete" else merge.UPSERT
        work: list[_Work] = []
        claimed = pa.array([False] * rows.num_rows, pa.bool_())
        for s in slices:
            base = read_parquet(self.table.storage, s.base_file.relative_path)
            bkeys = base.column("_hoodie_record_key").combine_chunks()
            hits = pc.is_in(keys, value_set=bkeys)
            mine = hits if not append_fresh or op == "delete" else pa.array([True] * rows.num_rows)
            if not pc.any(mine).as_py():
                continue
            claimed = pc.or_(claimed, mine)
            res = merge.merge_file_group(base, rows.filter(mine), keys.filter(mine), mode=mode,
                                         instant=tx.instant_time, precombine=self.table.config.precombine_field,
                                         order=merge.STORED_ORDER)
            # keys=None: the keys are spelled again from the merged rows, as this writer always did
            work.append(_Work(part, s.file_id, s, res.user, res.commit_times, updates=res.updates,
                              deletes=res.deletes, inserts=res.inserts))
        if op != "delete" and new_groups:
            fresh = pc.invert(claimed)
            if pc.any(fresh).as_py():
                t = rows.filter(fresh)
                work.append(_Work(part, new_file_id(), None, t, None, inserts=t.num_rows,
                                  keys=keys.filter(fresh)))
        return work

    # -- executing --------------------------------------------------------------------------------

    def _write_file(self, tx: WriteTransaction, w: _Work, before_file) -> WriteStat:
        token = write_token(0, 0, tx.attempt)
        name = base_file_name(w.file_id, token, tx.instant_time)
        rel = join_partition(w.partition, name)
        io_type = "MERGE" if w.prev is not None else "CREATE"
        if before_file:
            before_file(tx, w.partition, w.file_id)
        tx.create_marker(w.partition, name, io_type)
        if w.partition:
            self.table.write_partition_metadata(w.partition, tx.instant_time)
        t0 = time.time()
        full = with_meta_columns(w.rows, instant_time=tx.instant_time, partition=w.partition,
                                 file_name=name, key_fields=self.table.config.record_key_fields,
                                 keys=w.keys, commit_times=w.commit_times)
        size = write_parquet(self.table.storage, rel, full)
        ms = int((time.time() - t0) * 1000)
        return WriteStat(file_id=w.file_id, path=rel, partition_path=w.partition,
                         prev_commit=w.prev.instant_time if w.prev is not None else "null",
                         num_writes=full.num_rows, num_deletes=w.deletes,
                         num_update_writes=w.updates, num_inserts=w.inserts,
                         file_size_in_bytes=size, total_write_bytes=size,
                         prev_base_file=w.prev.base_file.name if w.prev is not None else None,
                         create_time_ms=ms if w.prev is None else 0,
                         upsert_time_ms=ms if w.prev is not None else 0)


def read_table(table: Table, as_of: str | None = None) -> pa.Table:
    """Snapshot (or as-of) read of the whole table through the file-system view."""
    view = FileSystemView(table, as_of=as_of)
    if as_of is not None:
        check_as_of_readable(table, as_of, view.timeline)
    parts = [read_parquet(table.storage, s.base_file.relative_path) for s in view.latest_file_slices()]
    if not parts:
        return pa.table({})
    return pa.concat_tables(parts, promote_options="permissive")
