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

import os
import time
from typing import Any, Callable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_hudi_occ.core.commit import merge
from airflow_hudi_occ.core.commit.file_group_work import MAX_THREADS, FileGroupWork, map_bounded
from airflow_hudi_occ.core.format.base_file import (MERGE_DICTIONARY_COLUMNS, REWRITTEN_META_COLUMNS, key_range,
                                                    check_ordering_values, check_record_keys,
                                                    compares_ordering_values, key_part_array, new_file_id,
                                                    python_spelled_float_keys, read_parquet,
                                                    read_parquet_columns, KeyProbe,
                                                    record_key_array, far_value_text, rows_out_of_python_range,
                                                    with_constant_columns, with_meta_columns,
                                                    values_identify_keys, write_parquet, write_parquet_chunks,
                                                    write_token)
from airflow_hudi_occ.core.format.bucket_index import bucket_id, hash_fields
from airflow_hudi_occ.core.config import BulkInsertSortMode, ReadConfig, WriteConfig
from airflow_hudi_occ.core.errors import ConfigError, InvalidPartitionPathError, InvalidRecordKeyError
from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.core.format.layout import META_COLUMNS, base_file_name, bucket_id_of, join_partition
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.format.instant_time import InstantTimeGenerator
from airflow_hudi_occ.core.format import partition_path
from airflow_hudi_occ.core.format.metadata import WriteStat
from airflow_hudi_occ.core.format.schema import avro_schema_json, check_column_names, reconcile_table
from airflow_hudi_occ.core.table.table import COPY_ON_WRITE, MERGE_ON_READ, Table
from airflow_hudi_occ.core.commit.pipeline import (WriteEngine, WritePipeline, WritePlan,
                                                   planned_file_groups, write_marked)
from airflow_hudi_occ.core.commit.transaction import CommitResult, WriteTransaction
from airflow_hudi_occ.core.table.time_travel import check_as_of_readable

#: batches smaller than this are tagged on one thread
PARALLEL_MIN_ROWS = 50_000
#: up to this many partition values (the product over partition fields), a batch is split by
#: one pass per partition rather than by a sort
FEW_PARTITIONS = 256
#: rows per row group of a base file this writer writes: its meta columns are built one chunk
#: at a time (peak memory of a 2 M-row write: 3.7x the batch with whole file groups)
WRITE_CHUNK_ROWS = 131_072
OPERATIONS = {"upsert": "UPSERT", "insert": "INSERT", "delete": "DELETE",
              "insert_overwrite": "INSERT_OVERWRITE", "bulk_insert": "BULK_INSERT"}


def partition_path_of(table: Table, row_values: dict) -> str:
    """The partition path of one row (``core/format/partition_path``: Hudi's spelling, and
    refused when it would leave the table); :func:`partition_groups` does the same for a
    whole batch at once."""
    cfg = table.config
    fields = cfg.partition_fields
    return partition_path.partition_path(fields, [row_values[f] for f in fields],
                                         hive_style=cfg.hive_style_partitioning,
                                         url_encode=cfg.url_encode_partitions)


class PartitionGroups(dict):
    """partition path -> indices of its rows; ``mixed`` names the paths that more than one
    value combination spells (a null and the literal Hive default; ``("x/y", "z")`` and
    ``("x", "y/z")``): only there do a partition's rows differ in their partition columns."""

    def __init__(self):
        super().__init__()
        self.mixed: set[str] = set()


def partition_groups(table: Table, data: pa.Table) -> PartitionGroups:
    """For each partition path, the indices of its rows in ``data`` (in batch order).

    Vectorised: each partition column is dictionary-encoded, so ``str()`` runs once per
    distinct value rather than per row, the per-field codes are combined into one integer code,
    and one stable sort groups the rows. No row is copied here; callers ``take`` one
    partition at a time, so a batch is never held twice."""
    fields = table.config.partition_fields
    n = data.num_rows
    if not fields:
        out = PartitionGroups()
        out[""] = pa.array(np.arange(n, dtype=np.int64))
        return out
    missing = [f for f in fields if f not in data.column_names]
    if missing:
        raise ConfigError(f"the data lacks the partition columns {missing}",
                          key="hoodie.table.partition.fields", value=",".join(fields),
                          remedy="add the columns; the partition column stays in the data")
    hive, encode = table.config.hive_style_partitioning, table.config.url_encode_partitions
    codes = None
    texts: list[list[str]] = []
    values: list[list] = []
    for f in fields:
        col = data.column(f)
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        enc = pc.dictionary_encode(col, null_encoding="encode")
        _check_spellable(f, enc.dictionary)
        # once per distinct value: a hostile value is refused here, before the instant exists
        values.append(enc.dictionary.to_pylist())
        labels = [partition_path.field_text(f, v, hive_style=hive, url_encode=encode) for v in values[-1]]
        idx = enc.indices.to_numpy(zero_copy_only=False)
        codes = idx if codes is None else codes.astype(np.int64) * max(len(labels), 1) + idx
        texts.append(labels)
    sizes = [len(t) for t in texts]

    def label(code: int) -> str:
        parts = []
        for i in reversed(range(len(sizes))):
            parts.append((fields[i], values[i][code % sizes[i]], texts[i][code % sizes[i]]))
            code //= sizes[i]
        parts.reverse()
        # each segment may be valid and the whole too long for the store: refused here too
        return partition_path.check_path_length(partition_path.join_fields(t for _, _, t in parts),
                                                {f: (v, t) for f, v, t in parts},
                                                root=table.storage.root, protocol=table.storage.protocol)

    out = PartitionGroups()

    def add(path: str, indices: np.ndarray) -> None:
        if path in out:  # another value combination spelling the same path: one group
            out.mixed.add(path)
            indices = np.sort(np.concatenate([out[path].to_numpy(), indices]))
        out[path] = pa.array(indices)

    if n and int(np.prod(sizes, dtype=np.float64)) <= FEW_PARTITIONS:
        # few partitions (the common case): one pass per partition over the small codes, so
        # the only large array made is the indices themselves (a sort needs four of them)
        for code in np.flatnonzero(np.bincount(codes)):
            add(label(int(code)), np.flatnonzero(codes == code))
        return out
    # a stable radix sort when the codes fit 16 bits
    order = np.argsort(codes.astype(np.uint16) if n and codes.max() < 65536 else codes, kind="stable")
    ordered = codes[order]
    starts = np.concatenate([[0], np.flatnonzero(ordered[1:] != ordered[:-1]) + 1]) if n else np.array([], np.int64)
    bounds = list(starts) + [n]
    for a, b in zip(bounds[:-1], bounds[1:]):
        add(label(int(ordered[a])), order[a:b])
    return out


def _check_spellable(field: str, values: pa.Array) -> None:
    """Refuse a date or timestamp partition value outside the years 1-9999: its path is spelled
    from Python's ``date`` / ``datetime``, which end there (pyarrow raised a raw
    ``OverflowError``)."""
    far = rows_out_of_python_range(values)
    if far is None or not pc.any(far).as_py():
        return
    shown = far_value_text(values, int(pc.index(far, True).as_py()))
    raise InvalidPartitionPathError(
        f"partition column {field!r} has the value {shown}, outside the years 1-9999 a partition "
        "path can spell; nothing was written", column=field, value=shown,
        remedy="correct or filter the values, or partition by another column")


def split_by_partition(table: Table, data: pa.Table) -> dict[str, pa.Table]:
    """The batch split by partition path (each partition's rows in batch order)."""
    return {p: data.take(idx) for p, idx in partition_groups(table, data).items()}


def check_float_key_spelling(table: Table, data: pa.Table, partitions: list[str]) -> None:
    """Refuse a batch with a floating-point record key field into partitions whose stored keys
    this library spelled as Python does (``nan``, ``inf``, ``1e+20``, a float's double digits)
    before it spelled them as Java does (``base_file.java_float_text``): the batch's ``NaN``
    would not match the stored ``nan``: the key would be stored twice (upsert) or not deleted
    (delete); insert and insert_overwrite look no stored key up. Read before the
    instant exists: the stored keys of the latest slices of the batch's partitions (log files
    too, merge-on-read), only when a key field is floating point. A table with virtual keys
    stores no key text: nothing to check."""
    fields = table.config.record_key_fields
    floats = {f: not pa.types.is_float64(data.schema.field(f).type) for f in fields
              if f in data.column_names and pa.types.is_floating(data.schema.field(f).type)}
    if not floats or not partitions or not table.config.populates_meta_fields:
        return
    view = FileSystemView(table, partitions=partitions)
    if table.config.table_type == MERGE_ON_READ:
        from airflow_hudi_occ.core.table.mor_reader import merge_file_slices, read_file_slice
        stored = (read_file_slice(table, fs).column("_hoodie_record_key") if fs.log_files else
                  read_parquet_columns(table.storage, fs.base.base_file.relative_path,
                                       ["_hoodie_record_key"]).column(0)
                  for fs in merge_file_slices(table, view))
    else:
        stored = (read_parquet_columns(table.storage, s.base_file.relative_path, ["_hoodie_record_key"]).column(0)
                  for s in view.latest_file_slices())
    for keys in stored:
        found = python_spelled_float_keys(keys, fields, floats)
        if found:
            column = ",".join(floats)
            raise InvalidRecordKeyError(
                f"the table at {table.base_uri!r} holds record keys of the floating-point key "
                f"column {column!r} spelled as Python spells them (e.g. {', '.join(map(repr, found))}), "
                "as this library wrote them before it spelled keys as Java Hudi does (NaN, "
                "Infinity, 1.0E20); this batch's keys would not match them and a key would be "
                "stored twice, so nothing was written", column=column,
                remedy=(("rewrite the partitions the batch writes with this version: read them "
                         "(read_table) and write them back with operation='insert_overwrite' (every key "
                         "is then spelled as Java spells it)") if table.config.table_type != MERGE_ON_READ
                        else ("copy the table into a new one with this version (read_table, then an "
                              "insert: every key is then spelled as Java spells it)"))
                       + ", or key the table by a string column holding the stored spelling")


def _hits(batch: pa.Array, stored: pa.Array) -> np.ndarray:
    """``batch`` values present in ``stored``: the hash table is built on the batch (usually
    the smaller side) and probed with the stored values, then on the few stored hits."""
    found = stored.filter(pc.is_in(stored, value_set=batch))
    return pc.is_in(batch, value_set=found).to_numpy(zero_copy_only=False)


#: the bulk_insert sort modes that sort a partition path's rows by record key. In one process
#: the batch is one input task: GLOBAL_SORT and PARTITION_SORT lay its files out alike, and
#: the repartitioning modes (one file per partition path, as here anyway) keep input order
SORTS_BY_KEY = (BulkInsertSortMode.GLOBAL_SORT, BulkInsertSortMode.PARTITION_SORT)


def sorted_by_key(data: pa.Table, idx: pa.Array, key_fields) -> pa.Array:
    """``idx`` (one partition path's rows) ordered by their record key text, as Java's sort
    partitioners order ``_hoodie_record_key`` (stable: equal keys keep their input order)."""
    keys = record_key_array(data.select(list(key_fields)).take(idx), key_fields)
    return idx.take(pc.sort_indices(pa.table({"k": keys, "i": pa.array(np.arange(len(idx)))}),
                                    sort_keys=[("k", "ascending"), ("i", "ascending")]))


class ArrowTableWriter:
    """Writes Arrow batches to a copy-on-write table, one instant per :meth:`write`; the
    tagging (which rows go to which file group) and the base-file writer the merge-on-read
    writer shares."""

    #: the table type this writer writes
    table_type = COPY_ON_WRITE

    def __init__(self, table: Table, config: WriteConfig | None = None, *, writer_id: str | None = None,
                 lock_manager=None, threads: int | None = None,
                 time_generator: InstantTimeGenerator | None = None):
        if table.config.table_type != self.table_type:
            # a copy-on-write commit would rewrite base files where Hudi appends log blocks
            raise ConfigError(f"table {table.name} is MERGE_ON_READ: this writer writes "
                              "copy-on-write commits", key="hoodie.table.type", value=MERGE_ON_READ,
                              remedy="write merge-on-read tables with "
                                     "airflow_hudi_occ.core.commit.mor_writer.MergeOnReadWriter")
        self.table = table
        #: instant times for every write (None: the process's generator); injectable so tests
        #: can write a table's history as if it had happened over past days
        self.time_generator = time_generator
        self.config = config or WriteConfig()
        self.writer_id = writer_id
        self._lock_manager = lock_manager
        #: file groups written at once (memory: this many file groups' data besides the batch)
        self.threads = min(threads or os.cpu_count() or 1, MAX_THREADS)

    def write(self, data: pa.Table, operation: str = "upsert", *, checkpoint: str | None = None,
              batch_key: str | None = None, attempt: int = 1,
              before_file: Callable[[WriteTransaction, str, str], None] | None = None,
              before_commit: Callable[[WriteTransaction], None] | None = None,
              recover: bool = True) -> CommitResult:
        """Write one batch as one instant. Hooks let tests pause or crash at precise steps.

        With a ``batch_key`` the write is idempotent: a batch already committed returns that
        commit (``outcome == "already_committed"``) and writes nothing; a dead writer's staged
        instant of the batch is re-committed (``"recommitted"``, unless ``recover=False``).
        The stages are ``core/commit/pipeline``'s; this writer supplies the planner and the
        file writer (:class:`CopyOnWriteEngine`)."""
        return self.pipeline().run(self.engine(data, operation, before_file), checkpoint=checkpoint,
                                   batch_key=batch_key, attempt=attempt, recover=recover,
                                   before_commit=before_commit)

    def pipeline(self) -> WritePipeline:
        return WritePipeline(writer_id=self.writer_id, lock_manager=self._lock_manager,
                             time_generator=self.time_generator)

    def engine(self, data: pa.Table, operation: str, before_file=None) -> "CopyOnWriteEngine":
        """The engine of one write of ``data`` (a new one per attempt)."""
        return CopyOnWriteEngine(self, data, operation, before_file)

    # -- tagging --------------------------------------------------------------------------------

    def tag(self, view: FileSystemView, data: pa.Table, op: str, groups, threads: int):
        """Tag the batch: which rows go to which file group. Only key columns are read here
        (of the batch and of the stored base files); no data is copied or merged yet.
        Partitions are tagged on several threads (hashing and parquet reads release the GIL)."""
        planned = map_bounded(lambda pg: self._plan_partition(view, data, op, *pg), groups, threads)
        work: list[FileGroupWork] = []
        replaced: dict[str, list[str]] = {}
        for (part, _), (w, r) in zip(groups, planned):
            work.extend(w)
            if r is not None:
                replaced[part] = r
        return work, replaced

    def combines(self, op: str) -> bool:
        """Whether a write of ``op`` combines the batch's copies of a key by their ordering
        value: all but Hudi's copy-on-write bulk_insert, which writes the batch as given,
        duplicate keys included (the Spark engine's too), unless it asks to combine
        (``hoodie.combine.before.insert``); merge-on-read and the bucket index always combine."""
        return (op != "bulk_insert" or self.config.index.buckets is not None
                or self.table.config.table_type == MERGE_ON_READ or self.config.combine_before_insert)

    def _plan_partition(self, view: FileSystemView, data: pa.Table, op: str, part: str, idx: pa.Array):
        key_fields = self.table.config.record_key_fields
        if op == "bulk_insert" and self.config.bulk_insert_sort_mode in SORTS_BY_KEY:
            idx = sorted_by_key(data, idx, key_fields)
        pre = self.table.config.ordering_field  # None under COMMIT_TIME_ORDERING
        need = list(dict.fromkeys([*key_fields, *([pre] if pre and pre in data.column_names else [])]))
        num_buckets = self.config.index.buckets
        if not self.combines(op):  # the batch as given, duplicate keys included
            return ([FileGroupWork(part, new_file_id(), None, idx)] if len(idx) else []), None
        keyed = data.select(need).take(idx)
        # one key field: its raw values identify records as well as their text, and hash
        # faster (integers); the key text is spelled only where it is compared with stored keys.
        # Not floats: NaN != NaN would keep two rows of key NaN, -0.0 == 0.0 merge two keys
        single = len(key_fields) == 1 and values_identify_keys(keyed.schema.field(key_fields[0]).type)
        keys = None if single else record_key_array(keyed, key_fields)
        ident = keyed.column(key_fields[0]).combine_chunks() if single else keys
        chosen = merge.dedupe_indices(ident, keyed.column(pre) if pre in need else None)
        if chosen is not None:
            idx, keyed = idx.take(chosen), keyed.take(chosen)
            keys = None if keys is None else keys.take(chosen)
        if op in ("insert", "bulk_insert") and num_buckets is None:  # no lookup: new file groups
            return ([FileGroupWork(part, new_file_id(), None, idx)] if len(idx) else []), None
        if keys is None:
            keys = record_key_array(keyed, key_fields)
        slices = view.latest_file_slices(part)
        if num_buckets is not None and op != "insert_overwrite":
            return self._plan_buckets(part, data, idx, keys, slices, op, num_buckets), None
        if op == "insert_overwrite":
            return [FileGroupWork(part, new_file_id(), None, idx)], [s.file_id for s in slices]
        if op in ("insert", "bulk_insert") or not slices:
            return ([FileGroupWork(part, new_file_id(), None, idx)] if op != "delete" and len(idx) else []), None
        ids = None
        if merge.integer_key_column(key_fields, keyed) is not None:
            ids = keyed.column(key_fields[0]).combine_chunks()
        return self._tag_into(part, idx, keys, slices, op, new_groups=True, ids=ids), None

    def _plan_buckets(self, part, data, idx, keys, slices, op, num_buckets):
        """Bucket index: every key of a bucket goes to that bucket's one file group."""
        hashed = hash_fields(self.config.index, self.table.config.record_key_fields)
        rows = data.select(hashed).take(idx)
        cols = [key_part_array(rows.column(f)).to_pylist() for f in hashed]
        by_bucket: dict[int, list[int]] = {}
        for i, vals in enumerate(zip(*cols)):  # Java's String.hashCode per key: not vectorised
            by_bucket.setdefault(bucket_id(vals, num_buckets), []).append(i)
        existing = {}
        for sl in slices:
            b = bucket_id_of(sl.file_id)
            if b is not None:
                existing[int(b)] = sl
        out = []
        for b, pos in sorted(by_bucket.items()):
            sel = pa.array(pos, pa.int64())
            sub_idx, sub_keys = idx.take(sel), keys.take(sel)
            sl = existing.get(b)
            if sl is None:
                if op != "delete":
                    out.append(FileGroupWork(part, new_file_id(bucket=b), None, sub_idx))
                continue
            out.extend(self._tag_into(part, sub_idx, sub_keys, [sl], op, new_groups=False,
                                      append_fresh=True))
        return out

    def _stored_hits(self, s, keys: pa.Array, ids: pa.Array | None, key_fields,
                     batch_range: KeyProbe | None = None) -> np.ndarray:
        """Which batch keys the file slice holds. With an integer key field, the stored file's
        column of it is read and compared (a fraction of the cost of the key text); otherwise
        its ``_hoodie_record_key`` column. A file whose key range (parquet statistics) misses the
        batch's is not read at all."""
        rel = s.base_file.relative_path
        virtual = not self.table.config.populates_meta_fields
        if ids is not None or (virtual and len(key_fields) == 1):
            range_column = key_fields[0]  # the key's own column: its values are the key text
        else:
            range_column = None if virtual else "_hoodie_record_key"
        span = key_range(self.table.storage, rel, range_column) if range_column else None
        if span is not None and batch_range is not None and not batch_range.may_hold(span):
            return np.zeros(len(keys), dtype=bool)  # no key of the batch can be in it: not read
        if ids is not None:
            stored = read_parquet_columns(self.table.storage, rel, [key_fields[0]])
            if merge.integer_key_column(key_fields, stored) is not None:
                col = stored.column(0).combine_chunks()
                probe = ids if ids.type == col.type else ids.cast(pa.int64())
                col = col if col.type == probe.type else col.cast(pa.int64())
                return _hits(probe, col)
        if virtual:  # no _hoodie_record_key column: the key is spelled from its fields
            stored = read_parquet_columns(self.table.storage, rel, list(key_fields))
            return _hits(keys, record_key_array(stored, key_fields).cast(keys.type))
        bkeys = read_parquet_columns(self.table.storage, rel, ["_hoodie_record_key"]).column(0)
        return _hits(keys, bkeys.combine_chunks())

    def _tag_into(self, part, idx, keys, slices, op, *, new_groups: bool, append_fresh: bool = False,
                  ids: pa.Array | None = None):
        """The file groups among ``slices`` that hold the batch's keys (read from their
        ``_hoodie_record_key`` column alone); fresh keys go to a new file group (simple index)
        or into the one given slice (bucket index)."""
        mode = merge.DELETE if op == "delete" else merge.UPSERT
        work: list[FileGroupWork] = []
        claimed = np.zeros(len(keys), dtype=bool)
        key_fields = self.table.config.record_key_fields
        batch_range = None if append_fresh and op != "delete" else KeyProbe(ids if ids is not None else keys)
        for s in slices:
            if append_fresh and op != "delete":
                mine = np.ones(len(keys), dtype=bool)
            else:
                mine = self._stored_hits(s, keys, ids, key_fields, batch_range)
            if not mine.any():
                continue
            claimed |= mine
            work.append(FileGroupWork(part, s.file_id, s, idx.filter(pa.array(mine)), mode))
        if op != "delete" and new_groups and not claimed.all():
            work.append(FileGroupWork(part, new_file_id(), None, idx.filter(pa.array(~claimed))))
        return work

    # -- executing --------------------------------------------------------------------------------

    def mark(self, tx: WriteTransaction, w: FileGroupWork, before_file) -> str:
        """The file group's marker (and partition metadata), before any of its data exists."""
        name = base_file_name(w.file_id, write_token(0, 0, tx.attempt), tx.instant_time)
        if before_file:
            before_file(tx, w.partition, w.file_id)
        # the partition's metadata file beside the marker: neither needs the other, both come
        # before the data file (one round trip on an object store, not two: issue 43)
        self.table.storage.concurrently(
            [lambda: tx.create_marker(w.partition, name, "MERGE" if w.prev is not None else "CREATE"),
             lambda: w.partition and self.table.write_partition_metadata(w.partition, tx.instant_time)])
        return name

    def write_base_file(self, tx: WriteTransaction, data: pa.Table, w: FileGroupWork, name: str, *,
                    mixed: set[str] | None = None) -> WriteStat:
        rel = join_partition(w.partition, name)
        t0 = time.time()
        key_fields = self.table.config.record_key_fields
        rows = data.take(w.indices)
        updates = deletes = 0
        inserts = rows.num_rows
        commit_times = keys = None
        if w.prev is not None:
            base = read_parquet(self.table.storage, w.prev.base_file.relative_path, skip=REWRITTEN_META_COLUMNS,
                                dictionary=MERGE_DICTIONARY_COLUMNS)
            res = merge.merge_file_group(base, rows, record_key_array(rows, key_fields), mode=w.mode,
                                         instant=tx.instant_time,
                                         precombine=self.table.config.ordering_field,
                                         order=merge.STORED_ORDER,
                                         match_on=merge.integer_key_column(key_fields, base, rows),
                                         key_fields=key_fields)
            del base
            # stored records keep their stored key text, as Hudi copies them (and as the Spark
            # executor does); only the batch's keys are spelled here
            rows, commit_times, keys = res.user, res.commit_times, res.keys
            updates, deletes, inserts = res.updates, res.deletes, res.inserts
        n = rows.num_rows
        # a new file group's rows share their partition columns' values, unless other values
        # spell the same path (``mixed``; None: not known); a merged file's stored rows are left alone
        pure = mixed is not None and w.prev is None and w.partition not in mixed
        constant = self.table.config.partition_fields if pure else ()
        if self.table.config.populates_meta_fields:
            def chunks():  # meta columns a chunk at a time: memory bounded by the chunk
                for off in range(0, max(n, 1), WRITE_CHUNK_ROWS):
                    yield with_constant_columns(with_meta_columns(
                        rows.slice(off, WRITE_CHUNK_ROWS), instant_time=tx.instant_time,
                        partition=w.partition, file_name=name, key_fields=key_fields,
                        keys=None if keys is None else keys.slice(off, WRITE_CHUNK_ROWS),
                        commit_times=None if commit_times is None else commit_times.slice(off, WRITE_CHUNK_ROWS),
                        seqno_start=off, dictionary_constants=True), constant)
            size = write_parquet_chunks(self.table.storage, rel, chunks(), self.config.parquet)
        else:  # virtual keys: the user's columns alone, as Hudi writes them
            size = write_parquet(self.table.storage, rel, with_constant_columns(rows, constant),
                                 self.config.parquet)
        ms = int((time.time() - t0) * 1000)
        return WriteStat(file_id=w.file_id, path=rel, partition_path=w.partition,
                         prev_commit=w.prev.instant_time if w.prev is not None else "null",
                         num_writes=n, num_deletes=deletes,
                         num_update_writes=updates, num_inserts=inserts,
                         file_size_in_bytes=size, total_write_bytes=size,
                         prev_base_file=w.prev.base_file.name if w.prev is not None else None,
                         create_time_ms=ms if w.prev is None else 0,
                         upsert_time_ms=ms if w.prev is not None else 0)


class CopyOnWriteEngine(WriteEngine):
    """The Arrow copy-on-write engine of one write: tagging by :class:`ArrowTableWriter`
    (simple or bucket index), then one parquet base file per touched file group, every
    marker before any data file."""

    marks_here = True

    def __init__(self, writer: ArrowTableWriter, data: pa.Table, operation: str, before_file=None):
        op = operation.lower()
        if op not in self.operations():
            raise ConfigError(f"unknown write operation {operation!r}", key="hoodie.datasource.write.operation",
                              value=operation, remedy=f"use one of {sorted(OPERATIONS)}")
        self.writer = writer
        self.table = writer.table
        self.config = writer.config
        self.operation = op
        self.data = data
        self.before_file = before_file
        self.by_path: PartitionGroups | None = None

    @staticmethod
    def operations():
        return OPERATIONS

    @property
    def action(self) -> Action:
        return Action.REPLACE_COMMIT if self.operation == "insert_overwrite" else Action.COMMIT

    @property
    def operation_type(self) -> str:
        return OPERATIONS[self.operation]

    def check_input(self) -> None:
        check_column_names(self.data.schema)
        keys = self.table.config.record_key_fields
        missing = [k for k in keys if k not in self.data.column_names]
        if missing:
            raise ConfigError(f"the data lacks the record key columns {missing}",
                              key="hoodie.datasource.write.recordkey.field", value=",".join(keys))
        check_record_keys(self.data, keys)
        if compares_ordering_values(self.operation, self.writer.combines(self.operation)):
            check_ordering_values(self.data, self.table.config.ordering_field)

    def prepare(self) -> str:
        self.data = self.data.drop_columns([c for c in META_COLUMNS if c in self.data.column_names])
        return avro_schema_json(self.data.schema, self.table.name)

    def reconcile(self, table_json: str) -> str:
        self.data = reconcile_table(self.data, table_json)
        return avro_schema_json(self.data.schema, self.table.name)

    def check_batch(self, schema_json: str) -> None:
        # hostile partition values are refused here, before the instant exists
        self.by_path = partition_groups(self.table, self.data)
        if self.operation in ("upsert", "delete"):  # the operations that look stored keys up
            check_float_key_spelling(self.table, self.data, list(self.by_path))

    def footprint(self) -> list[str] | None:
        return list(self.by_path)

    @property
    def groups(self):
        return sorted(self.by_path.items())

    def plan(self, tx: WriteTransaction) -> WritePlan:
        groups = self.groups
        # tagging small batches on one thread: handing them out costs more than it saves
        threads = self.writer.threads if self.data.num_rows >= PARALLEL_MIN_ROWS else 1
        # the snapshot this write reads, listed for the partitions it touches only
        view = FileSystemView(self.table, tx.snapshot.timeline, partitions=[p for p, _ in groups])
        work, replaced = self.writer.tag(view, self.data, self.operation, groups, threads)
        touched = [(w.partition, w.file_id) for w in work if w.prev is not None]
        touched += [(p, f) for p, ids in replaced.items() for f in ids]
        return WritePlan(planned=planned_file_groups(work), touched=touched, timeline=view.timeline,
                         replaced=replaced, detail=work)

    def write_files(self, tx: WriteTransaction, plan: WritePlan, schema_json: str) -> list[WriteStat]:
        w = self.writer
        return write_marked(tx, plan.detail, lambda tx, item: w.mark(tx, item, self.before_file),
                            lambda tx, item, name: w.write_base_file(tx, self.data, item, name,
                                                                     mixed=self.by_path.mixed),
                            w.threads)


def read_table(table: Table, as_of: str | None = None, options: Mapping[str, Any] | None = None) -> pa.Table:
    """Snapshot (or as-of) read of the whole table through the file-system view; a
    merge-on-read table is read with its logs merged (``mor_reader``). ``options``: the
    reader's ``hoodie.*`` keys (:class:`~airflow_hudi_occ.core.config.ReadConfig`:
    ``hoodie.metadata.enable=false`` lists the storage even when the table has a metadata
    table)."""
    if table.config.table_type == MERGE_ON_READ:
        from airflow_hudi_occ.core.table.mor_reader import read_snapshot
        return read_snapshot(table, as_of=as_of, options=options)
    view = FileSystemView(table, as_of=as_of, metadata_enable=ReadConfig.from_options(options).metadata_enable)
    if as_of is not None:
        check_as_of_readable(table, as_of, view.timeline)
    parts = [read_parquet(table.storage, s.base_file.relative_path) for s in view.latest_file_slices()]
    if not parts:
        return pa.table({})
    return pa.concat_tables(parts, promote_options="permissive")
