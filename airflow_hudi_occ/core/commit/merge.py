"""The record merge: what a file group's new base file holds after a batch, in Arrow compute.

One implementation for every engine: the single-process writer (``commit/writer``) and the
Spark executor (``spark/executor``) both call :func:`merge_file_group`, and the writer also
calls :func:`dedupe` (Spark dedupes in its own SQL before the executors see the rows). No
per-row Python: keys are matched with ``is_in``/``index_in``, winners chosen with sorts.

The rules, Hudi's with the default ``EVENT_TIME_ORDERING`` payload:

- within a batch one record per key: the one with the largest ordering (precombine) value,
  the later row on a tie; a null ordering value loses to any other (all null: the first row;
  the writers refuse null ones before the instant, ``base_file.check_ordering_values``, so
  within a batch this rule meets a delete's rows only); without an ordering field, the last row;
- ``upsert``: a stored record whose key is in the batch is replaced by the incoming one unless
  the incoming ordering value is strictly smaller (both non-null); replaced and new records
  take this instant as ``_hoodie_commit_time``, untouched records keep theirs; keys not in the
  file group are appended (the caller passes only the keys that belong here);
- ``delete``: stored records whose key is in the batch are dropped;
- ``append``: the batch is appended without matching (inserts into a small file group).

The two engines wrote the same records in different row orders (and so with different
``_hoodie_commit_seqno`` values), and the order is kept per engine (``order=``):

- :data:`STORED_ORDER` (the core writer): the kept stored records, then the replacing records
  in the order of the stored records they replace, then the new keys in batch order; each
  stored record is judged on its own (a key stored twice is replaced, or kept, per copy);
- :data:`BATCH_ORDER` (the Spark executor): the kept stored records, then the incoming records
  in batch order; a key is judged once (kept if any stored copy is newer).

Without a target ``schema`` (the core writer) the stored and incoming rows are concatenated
with Arrow's permissive promotion (stored column order first, added columns after); with one
(Spark) both are conformed to it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_hudi_occ.core.format.base_file import record_key_array
from airflow_hudi_occ.core.format.layout import META_COLUMNS

UPSERT, DELETE, APPEND = "upsert", "delete", "append"
STORED_ORDER, BATCH_ORDER = "stored", "batch"


def _strictly_increasing(keys: pa.Array) -> bool:
    """Integer keys without nulls, each larger than the one before (ids written in order, the
    common case of an ingestion batch): distinct without hashing them."""
    if not pa.types.is_integer(keys.type) or keys.null_count or len(keys) < 2:
        return False
    a = keys.to_numpy(zero_copy_only=False)
    return bool((a[1:] > a[:-1]).all())


def dedupe_indices(keys: pa.Array, precombine: pa.Array | pa.ChunkedArray | None) -> pa.Array | None:
    """Which rows survive the in-batch dedupe (the rules in the module docstring), as indices
    in batch order; None when every key is distinct (nothing to drop, nothing to copy)."""
    n = len(keys)
    if n == 0 or _strictly_increasing(keys) or pc.count_distinct(keys).as_py() == n:
        return None
    idx = pa.array(np.arange(n, dtype=np.int64))
    if precombine is not None:
        pre = precombine.combine_chunks() if isinstance(precombine, pa.ChunkedArray) else precombine
        valid = pc.is_valid(pre)
        # among non-null values: largest, then latest; all null: the first row
        tie = pc.if_else(valid, idx, pc.negate(idx))
        order = [("v", valid), ("p", pre), ("t", tie)]
    else:
        order = [("t", idx)]
    t = pa.table({"k": keys, **{name: arr for name, arr in order}, "i": idx})
    perm = pc.sort_indices(t, sort_keys=[("k", "ascending")] + [(name, "ascending") for name, _ in order])
    ks = pc.take(keys, perm)
    last = pa.concat_arrays([pc.not_equal(ks.slice(0, n - 1), ks.slice(1)), pa.array([True])])
    chosen = pc.take(idx, perm).filter(last)
    return pc.take(chosen, pc.sort_indices(chosen))


def dedupe(rows: pa.Table, key_fields, precombine: str | None, keys: pa.Array | None = None) -> pa.Table:
    """One record per key within a batch (the rules in the module docstring), in batch order."""
    keys = record_key_array(rows, key_fields) if keys is None else keys
    pre = rows.column(precombine) if precombine and precombine in rows.column_names else None
    chosen = dedupe_indices(keys, pre)
    return rows if chosen is None else rows.take(chosen)


def conform(user: pa.Table, schema: pa.Schema | None) -> pa.Table:
    """The rows in the target schema: missing (added) columns are null, types cast."""
    if schema is None:
        return user
    cols = []
    for f in schema:
        if f.name in user.column_names:
            c = user.column(f.name)
            cols.append(c if c.type == f.type else c.cast(f.type))
        else:
            cols.append(pa.nulls(user.num_rows, f.type))
    return pa.Table.from_arrays(cols, schema=schema)


@dataclass
class MergeResult:
    """The new base file's user rows, their record keys and commit times, and the counts."""

    user: pa.Table
    keys: pa.Array
    #: a dictionary array (a file's commit times are few distinct values): the parquet writer
    #: then writes its dictionary as given instead of hashing every row's time again
    commit_times: pa.DictionaryArray
    updates: int = 0
    inserts: int = 0
    deletes: int = 0


TIMES_TYPE = pa.dictionary(pa.int32(), pa.string())


def stored_times(column: pa.ChunkedArray | pa.Array) -> pa.DictionaryArray:
    """A base file's ``_hoodie_commit_time`` as one :data:`TIMES_TYPE` array, whether it was
    read as a dictionary (``read_parquet(dictionary=...)``) or as strings."""
    if isinstance(column, pa.ChunkedArray):
        if pa.types.is_dictionary(column.type):
            column = column.unify_dictionaries()
        column = column.combine_chunks()
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column.cast(pa.string()))
    return column.cast(TIMES_TYPE)


def with_instant(times: pa.DictionaryArray, n: int, instant: str) -> pa.DictionaryArray:
    """``times`` followed by ``n`` rows of ``instant``, still one dictionary."""
    values = times.dictionary
    hit = pc.index(values, instant).as_py()
    if hit < 0:
        hit = len(values)
        values = pa.concat_arrays([values, pa.array([instant], pa.string())])
    indices = pa.concat_arrays([times.indices, pa.array(np.full(n, hit, dtype=np.int32))])
    return pa.DictionaryArray.from_arrays(indices, values)


def _count(mask) -> int:
    return pc.sum(mask.cast(pa.int64())).as_py() or 0


def _less(new: pa.Array, old: pa.Array) -> pa.Array:
    """``new < old`` per row, false where either is null; the stored values are read in the
    incoming type (a common type when they do not fit it)."""
    try:
        old_c = old if old.type == new.type else old.cast(new.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        common = pa.unify_schemas([pa.schema([("x", new.type)]), pa.schema([("x", old.type)])],
                                  promote_options="permissive").field("x").type
        new, old_c = new.cast(common), old.cast(common)
    return pc.fill_null(pc.less(new, old_c), False)


def _combine(stored: pa.Table, incoming: pa.Table, schema: pa.Schema | None) -> pa.Table:
    if schema is not None:
        return pa.concat_tables([conform(stored, schema), conform(incoming, schema)])
    if incoming.num_rows == 0:
        return stored
    return pa.concat_tables([stored, incoming], promote_options="permissive")


def integer_key_column(key_fields, *tables: pa.Table) -> str | None:
    """The one key field, when it is an integer column in every table: its values match records
    exactly as their key text does (the text of an integer is unique) and hash several times
    faster than strings. None otherwise (text keys are matched)."""
    fields = list(key_fields)
    if len(fields) != 1:
        return None
    f = fields[0]
    for t in tables:
        if f not in t.column_names or not pa.types.is_integer(t.schema.field(f).type):
            return None
    return f


def merge_file_group(base: pa.Table, incoming: pa.Table, incoming_keys: pa.Array, *, mode: str,
                     instant: str, precombine: str | None = None, schema: pa.Schema | None = None,
                     order: str = BATCH_ORDER, match_on: str | None = None,
                     key_fields=None) -> MergeResult:
    """Merge a deduped batch into one file group's stored base file (meta columns included).

    ``schema`` is the target schema of the user columns (None: see the module docstring; a
    delete keeps the stored schema either way); ``order`` is :data:`STORED_ORDER` or
    :data:`BATCH_ORDER`; ``match_on`` names an integer key column (:func:`integer_key_column`)
    to match records by instead of their key text. A base file of a table with virtual keys
    has no meta columns: its keys are spelled from ``key_fields`` and its commit times are
    unknown (null; such a table writes none)."""
    if order not in (STORED_ORDER, BATCH_ORDER):
        raise ValueError(f"unknown merge order {order!r}")
    if "_hoodie_record_key" in base.column_names:
        bkeys = base.column("_hoodie_record_key").combine_chunks().cast(pa.string())
        btimes = stored_times(base.column("_hoodie_commit_time"))
    elif key_fields:
        bkeys = record_key_array(base, key_fields).cast(pa.string())
        btimes = stored_times(pa.nulls(base.num_rows, pa.string()))
    else:
        raise ValueError("a base file without _hoodie_record_key needs key_fields (virtual keys)")
    buser = base.drop_columns([c for c in META_COLUMNS if c in base.column_names])
    ikeys = incoming_keys.cast(pa.string())
    # what records are matched by: the key text, or the integer key column (same result)
    bmatch, imatch = bkeys, ikeys
    if match_on is not None:
        bmatch = base.column(match_on).combine_chunks()
        imatch = incoming.column(match_on).combine_chunks()
        if imatch.type != bmatch.type:
            imatch = imatch.cast(pa.int64())
            bmatch = bmatch.cast(pa.int64())
    if mode == DELETE:
        hit = pc.is_in(bmatch, value_set=imatch)
        keep = pc.invert(hit)
        return MergeResult(buser.filter(keep), bkeys.filter(keep), btimes.filter(keep),
                           deletes=_count(hit))
    iuser = incoming.drop_columns([c for c in META_COLUMNS if c in incoming.column_names])
    iuser = conform(iuser, schema)
    if mode == APPEND:
        return MergeResult(_combine(buser, iuser, schema), pa.concat_arrays([bkeys, ikeys]),
                           with_instant(btimes, incoming.num_rows, instant), inserts=incoming.num_rows)
    if mode != UPSERT:
        raise ValueError(f"unknown merge mode {mode!r}")
    # for every stored row, the incoming row of its key (null: not in the batch)
    # hash tables are built on the batch side (small) and probed with the stored rows (large)
    pos = pc.index_in(bmatch, value_set=imatch)
    matched_b = pc.is_valid(pos)
    matched_i = pc.is_in(imatch, value_set=bmatch.filter(matched_b))
    older = pa.array(np.zeros(base.num_rows, dtype=bool))
    if precombine and precombine in buser.column_names and precombine in iuser.column_names:
        # the stored record stays when the incoming one is strictly older
        incoming_pre = pc.take(iuser.column(precombine).combine_chunks(), pos)
        older = _less(incoming_pre, buser.column(precombine).combine_chunks())
    if order == BATCH_ORDER:
        keep_old = bmatch.filter(older)
        base_keep = pc.or_(pc.invert(matched_b), pc.is_in(bmatch, value_set=keep_old))
        in_take = pc.invert(pc.is_in(imatch, value_set=keep_old))
        taken = iuser.filter(in_take)
        taken_keys, updates = ikeys.filter(in_take), _count(pc.and_(matched_i, in_take))
    else:
        base_keep = pc.or_(pc.invert(matched_b), older)
        replaced = pc.and_(matched_b, pc.invert(older))
        fresh = pc.invert(matched_i)
        take = pa.concat_arrays([pos.filter(replaced).cast(pa.int64()),
                                 pa.array(np.arange(incoming.num_rows, dtype=np.int64)).filter(fresh)])
        taken, taken_keys, updates = iuser.take(take), ikeys.take(take), _count(replaced)
    return MergeResult(
        _combine(buser.filter(base_keep), taken, schema),
        pa.concat_arrays([bkeys.filter(base_keep), taken_keys]),
        with_instant(btimes.filter(base_keep), len(taken_keys), instant),
        updates=updates, inserts=_count(pc.invert(matched_i)))


__all__ = ["UPSERT", "DELETE", "APPEND", "STORED_ORDER", "BATCH_ORDER", "MergeResult",
           "merge_file_group", "dedupe", "dedupe_indices", "conform", "integer_key_column"]
