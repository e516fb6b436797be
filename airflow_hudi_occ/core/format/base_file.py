"""Writing and reading base files: parquet with Hudi's five meta columns first.

Shared by the Spark executors (which hand over Arrow batches) and by tests that need tiny real
tables without Spark. Names follow Hudi: ``<fileId>_<writeToken>_<instant>.parquet`` with a
write token ``<partitionId>-<stageId>-<attemptId>``; fileIds are ``<uuid>-0`` (or, for the bucket
index, the uuid with its first 8 characters replaced by the zero-padded bucket number).
"""

from __future__ import annotations

import base64
import collections
import contextlib
import decimal
import functools
import io
import math
import posixpath
import threading
import uuid
from typing import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_hudi_occ.core.config import ParquetConfig
from airflow_hudi_occ.core.errors import CorruptDataFileError, InvalidOrderingValueError, InvalidRecordKeyError
from airflow_hudi_occ.core.format.layout import META_COLUMNS
from airflow_hudi_occ.core.format.row_groups import ParquetMrRowGroups, plain_sizes


def new_file_id(bucket: int | None = None) -> str:
    u = str(uuid.uuid4())
    if bucket is not None:
        u = f"{bucket:08d}" + u[8:]
    return f"{u}-0"


def write_token(partition_id: int = 0, stage_id: int = 0, attempt_id: int = 0) -> str:
    return f"{partition_id}-{stage_id}-{attempt_id}"


def constant_strings(value: str, n: int) -> pa.Array:
    """``n`` copies of one string, built in Arrow (a Python list of 2 M strings costs ~0.1 s)."""
    if n == 0:
        return pa.array([], pa.string())
    return pc.take(pa.array([value], pa.string()), pa.array(np.zeros(n, dtype=np.int32)))


def constant_dictionary(value: str, n: int) -> pa.DictionaryArray:
    """``n`` copies of one string as a one-value dictionary: the parquet writer then writes the
    dictionary page and the indices as given instead of hashing ``n`` equal strings (measured:
    the three constant meta columns cost about as much as all the user columns of a base file
    when written as plain strings). :func:`write_parquet_chunks` records them as strings."""
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)),
                                          pa.array([value], pa.string()))


#: field metadata of a column :func:`with_constant_columns` made a one-value dictionary: the
#: file records its plain type (:func:`_stored_schema`)
CONSTANT_FIELD = b"airflow_hudi_occ.constant"


def with_constant_columns(table: pa.Table, names: Sequence[str]) -> pa.Table:
    """``table`` with the columns ``names``, which the caller knows hold one value in every row
    (a new file group's partition columns), as one-value dictionaries: the parquet writer then
    writes one dictionary entry instead of hashing every row (a 200 k-row file's partition
    column: about 8 ms as strings, 3.5 as a dictionary). A column holding a null, a nested
    column and one that is a dictionary already stay as they are."""
    for name in names:
        i = table.schema.get_field_index(name)
        if i < 0 or table.num_rows == 0:
            continue
        f = table.schema.field(i)
        if pa.types.is_dictionary(f.type) or pa.types.is_nested(f.type) or table.column(i).null_count:
            continue
        first = table.column(i).slice(0, 1).combine_chunks()
        values = pa.DictionaryArray.from_arrays(pa.array(np.zeros(table.num_rows, dtype=np.int32)), first)
        table = table.set_column(i, pa.field(name, values.type, f.nullable, metadata={CONSTANT_FIELD: b"1"}),
                                 values)
    return table


_PLAIN_TO_STRING = (pa.types.is_string, pa.types.is_large_string, pa.types.is_integer)


def java_float_text(value: float, single: bool = False) -> str:
    """A double (``single``: a float) as Java's ``Double.toString`` / ``Float.toString`` spell
    it, which is how Java Hudi spells a floating-point record key (``String.valueOf``):
    ``NaN``, ``Infinity``, ``-0.0`` apart from ``0.0``, ``123.456``, ``1.0E20``, ``1.0E-5``.
    Python's ``str()`` spells the same keys ``nan``, ``inf``, ``1e+20``, and a float through a
    Python double (``0.10000000149011612`` for ``0.1f``): a table Java also writes would hold
    one record under two keys.

    The digits are the shortest that read back as the value (Python's ``repr``; numpy's for a
    float), the closest of those; of one digit, the closest of one or two digits (Java's rule:
    ``4.9E-324``, not ``5E-324``). That is Java 19's algorithm; Java 17's older one gives more
    digits for a few values (``tests/core/format/test_base_file.py`` compares both on this
    machine's JVM). Decimal form for 10^-3 <= |x| < 10^7, else ``d.dddE<n>``. With ``single``
    the value is first rounded to a float, as Java's ``(float) x`` would."""
    if single:
        with np.errstate(over="ignore"):
            value = float(np.float32(value))
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    exact = abs(value)
    if single:
        parse = np.float32
        shortest = decimal.Decimal(np.format_float_scientific(np.float32(exact), unique=True))
    else:
        parse = float
        shortest = decimal.Decimal(repr(exact))
    digits = shortest.normalize().as_tuple()
    if len(digits.digits) == 1:  # of 1 or 2 digits, the closest to the value that reads back
        true = decimal.Decimal(exact)
        two = decimal.Context(prec=2, rounding=decimal.ROUND_HALF_EVEN).plus(true)
        if parse(str(two)) == parse(exact) and abs(two - true) < abs(shortest - true):
            digits = two.normalize().as_tuple()
    d = "".join(map(str, digits.digits))
    k = len(d) - 1 + digits.exponent  # the value is d[0].d[1:] x 10^k
    sign = "-" if value < 0 else ""
    if -3 <= k < 7:
        if k < 0:
            return f"{sign}0.{'0' * (-k - 1)}{d}"
        whole, frac = d[:k + 1].ljust(k + 1, "0"), d[k + 1:]
        return f"{sign}{whole}.{frac or '0'}"
    return f"{sign}{d[0]}.{d[1:] or '0'}E{k}"


def _java_float_texts(col: pa.Array) -> pa.Array:
    """:func:`java_float_text` of every value of a floating-point column (null stays null):
    spelled once per distinct bit pattern, so ``-0.0`` and ``0.0`` stay apart and every NaN is
    one ``NaN``."""
    single = not pa.types.is_float64(col.type)
    dtype, bits = (np.float32, np.uint32) if single else (np.float64, np.uint64)
    values = np.ascontiguousarray(pc.fill_null(col, 0).to_numpy(zero_copy_only=False).astype(dtype))
    uniq, inverse = np.unique(values.view(bits), return_inverse=True)
    texts = pa.array([java_float_text(float(v), single) for v in uniq.view(dtype)], pa.string())
    spelled = pc.take(texts, pa.array(inverse.reshape(-1).astype(np.int64)))
    return pc.if_else(pc.is_valid(col), spelled, pa.scalar(None, pa.string())) if col.null_count else spelled


#: a float key's text as this library spelled it before issue 40 (Python's ``str()``) where Java's
#: spelling differs, for doubles: ``nan``, ``inf``, an exponent ``e``, |x| >= 10^7 or < 10^-3
#: in decimal form. A float was spelled through a double: any text may be one
_PYTHON_ONLY_DOUBLE = r"nan|inf|e|^-?[0-9]{8}|^-?0\.000"


def python_spelled_float_keys(keys: pa.Array, key_fields: Sequence[str], float_fields: dict[str, bool],
                              limit: int = 3) -> list[str]:
    """Up to ``limit`` stored record keys whose text for a floating-point key field is Python's
    ``str()`` of the value and not Java's (:func:`java_float_text`): what this library wrote
    before it spelled keys as Java does. ``float_fields``: each floating-point key field and
    whether it is a float (single precision). A key Java spells differently is not one (Java
    17 writes more digits for a few values: its key text is its own, never Python's)."""
    keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    if not float_fields or len(keys) == 0:
        return []
    fields = list(key_fields)
    if len(fields) == 1 and not float_fields[fields[0]]:  # a double: only these texts can differ
        keys = keys.filter(pc.match_substring_regex(keys, _PYTHON_ONLY_DOUBLE))
    found: list[str] = []
    for key in pc.unique(keys).to_pylist():
        if key is None:
            continue
        if len(fields) == 1:
            parts = {fields[0]: key}
        else:
            parts = dict(p.split(":", 1) for p in key.split(",") if ":" in p)
        for f, single in float_fields.items():
            text = parts.get(f)
            try:
                value = float(text)
            except (TypeError, ValueError):
                continue
            if text == repr(value) and text != java_float_text(value, single):
                found.append(key)
                break
        if len(found) >= limit:
            break
    return found


def values_identify_keys(type_: pa.DataType) -> bool:
    """Whether a key column's values are equal exactly when their record-key texts are, so
    records may be matched by value (faster than text): every type but floating point, where
    NaN != NaN and -0.0 == 0.0 while their texts are one key and two."""
    return not pa.types.is_floating(type_)


def key_part_array(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """One key field as Hudi's record-key text: the value as Java spells it, '' for null
    (the bucket hash reads the same texts: Java hashes the fields of the record key)."""
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if any(test(col.type) for test in _PLAIN_TO_STRING):
        text = pc.cast(col, pa.string())  # equal to str() for these types
    elif pa.types.is_floating(col.type):
        text = _java_float_texts(col)
    else:  # dates, decimals, ...: keep Python's str() of the value, as before
        text = pa.array([None if v is None else str(v) for v in col.to_pylist()], pa.string())
    return pc.fill_null(text, "")


def record_key_array(table: pa.Table, key_fields) -> pa.Array:
    """Hudi's record key of every row: the field's value for one field, ``f1:v1,f2:v2`` for several."""
    fields = list(key_fields)
    if len(fields) == 1:
        return key_part_array(table.column(fields[0]))
    parts = []
    for f in fields:
        parts.append(pc.binary_join_element_wise(
            pa.scalar(f"{f}:", pa.string()), key_part_array(table.column(f)), ""))
    return pc.binary_join_element_wise(*parts, ",")


def _null_or_empty(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Per row: is this key field null, or text that is empty (the only types whose str()
    can be empty are the string ones)?"""
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    missing = pc.is_null(col)
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        missing = pc.or_(missing, pc.fill_null(pc.equal(col, ""), False))
    return missing


def invalid_key_error(key_fields: Sequence[str], rows: int, sample: str | None = None):
    """The error for ``rows`` rows without a record key, as every writer raises it (Java
    Hudi's HoodieKeyException: a single key field null or empty, or every field of a
    composite key)."""
    fields = list(key_fields)
    what = (f"the record key column {fields[0]!r} is null or empty" if len(fields) == 1 else
            f"every record key column of {fields} is null or empty")
    return InvalidRecordKeyError(
        f"{rows} row(s) have no record key: {what}{f' ({sample})' if sample else ''}; Hudi "
        "refuses such rows (HoodieKeyException) and nothing was written",
        column=",".join(fields), rows=rows)


def rows_without_key(table: pa.Table, key_fields) -> pa.Array | None:
    """Per row: has it no record key (:func:`invalid_key_error`'s rule)? None when no row can
    lack one (a key field of a non-string type without nulls). One vectorised pass; shared by
    :func:`check_record_keys` and the Spark write tasks that check their own rows."""
    fields = list(key_fields)
    if not fields or table.num_rows == 0:
        return None
    bad = None
    for f in fields:
        col = table.column(f)
        if col.null_count == 0 and not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            return None  # this field always has a value, so every row has a key
        m = _null_or_empty(col)
        bad = m if bad is None else pc.and_(bad, m)
    return bad


def check_record_keys(table: pa.Table, key_fields) -> None:
    """Refuse a batch with rows that have no record key (:func:`invalid_key_error`) or a key
    value that has no key text (:func:`rows_out_of_python_range`); vectorised passes over the
    key columns, before the write's instant exists."""
    bad = rows_without_key(table, key_fields)
    rows = 0 if bad is None else int(pc.sum(bad).as_py() or 0)
    if rows:
        first = int(pc.index(bad, True).as_py())
        raise invalid_key_error(list(key_fields), rows, f"the first is row {first} of the batch")
    for f in key_fields:
        far = rows_out_of_python_range(table.column(f))
        rows = 0 if far is None else int(pc.sum(far).as_py() or 0)
        if rows:
            first = int(pc.index(far, True).as_py())
            raise InvalidRecordKeyError(
                f"{rows} row(s) have a record key the key text cannot spell: column {f!r} holds "
                f"values outside the years 1-9999 (the first is row {first} of the batch: "
                f"{far_value_text(table.column(f), first)}); nothing was written", column=f, rows=rows,
                remedy="correct or filter the values (a sentinel such as 9999-12-31 is within "
                       "range), or key the table by another column")


def compares_ordering_values(operation: str, combines: bool) -> bool:
    """Does a write of ``operation`` compare its rows' ordering (precombine) values? Every
    write that combines a batch's copies of a key (``combines``) does, but a delete (it
    carries no ordering value): an upsert (with the stored records too), an insert and an
    insert_overwrite (both always combine here, stricter than Hudi's insert), a bulk_insert
    that combines (merge-on-read, the bucket index, ``hoodie.combine.before.insert``); not a
    copy-on-write bulk_insert that keeps duplicates. Hudi 0.x refused a null where it
    combined (``shouldCombine``: an upsert, a combine before insert); an insert is checked
    too because a null it stores meets the next upsert: on a merge-on-read table the
    library's reader let the later record win while hudi-rs kept the stored one (measured),
    and Java Hudi 1.2 fails on it."""
    return operation.lower() != "delete" and bool(combines)


def null_ordering_error(field: str, rows: int, sample: str | None = None) -> InvalidOrderingValueError:
    """The error for ``rows`` rows whose ordering value is null, as every writer raises it."""
    return InvalidOrderingValueError(
        f"{rows} row(s) have a null ordering value: the precombine column {field!r} is null"
        f"{f' ({sample})' if sample else ''}; a write that compares ordering values cannot "
        "order them (Hudi 0.x refused them, Hudi 1.x readers fail on them) and nothing was written",
        column=field, rows=rows,
        remedy=f"fill the ordering value (e.g. `coalesce({field}, 0)`) or filter the rows "
               f"(`{field} IS NOT NULL`) upstream")


def check_ordering_values(table: pa.Table, field: str | None) -> None:
    """Refuse a batch with rows whose ordering value is null (:func:`null_ordering_error`),
    for the writes :func:`compares_ordering_values` names: the column's null count, then one
    vectorised pass for the first such row, before the write's instant exists. A batch
    without the column is left to the writer's own rules."""
    if not field or field not in table.column_names:
        return
    col = table.column(field)
    rows = col.null_count
    if rows:
        first = int(pc.index(pc.is_null(col), True).as_py())
        raise null_ordering_error(field, rows, f"the first is row {first} of the batch")


#: the dates and times Python (hence the key text) holds: years 1 to 9999
_FIRST_DAY, _LAST_DAY = -719162, 2932896  # 0001-01-01 and 9999-12-31, days since 1970-01-01
_TIME_UNITS = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def far_value_text(column: pa.ChunkedArray | pa.Array, row: int) -> str:
    """A date or timestamp Python cannot hold, shown as what is stored (``3000000 days since
    1970-01-01``)."""
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_date32(col.type):
        return f"{col.cast(pa.int32())[row].as_py()} days since 1970-01-01"
    unit = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}.get(
        getattr(col.type, "unit", "ms"), "units")
    return f"{col.cast(pa.int64())[row].as_py()} {unit} since 1970-01-01"


def rows_out_of_python_range(column: pa.ChunkedArray | pa.Array) -> pa.Array | None:
    """Per row: is this date or timestamp outside the years 1-9999, where Python's ``date``
    and ``datetime`` (the key text is spelled from them) end? None for other types, or when
    no value is. A date32 or an int64 timestamp holds far more; pyarrow raises a raw
    ``OverflowError`` converting them. A timestamp with a zone is converted to that zone, so
    its bounds are a day inside."""
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_date32(col.type):
        raw, lo, hi = col.cast(pa.int32()), _FIRST_DAY, _LAST_DAY
    elif pa.types.is_date64(col.type):
        raw, lo, hi = col.cast(pa.int64()), _FIRST_DAY * 86_400_000, (_LAST_DAY + 1) * 86_400_000 - 1
    elif pa.types.is_timestamp(col.type):
        per_day = 86_400 * _TIME_UNITS[col.type.unit]
        first, last = _FIRST_DAY + (1 if col.type.tz else 0), _LAST_DAY - (1 if col.type.tz else 0)
        raw, lo, hi = col.cast(pa.int64()), first * per_day, (last + 1) * per_day - 1
    else:
        return None
    lo_hi = pc.min_max(raw).as_py()
    if lo_hi["min"] is None or (lo_hi["min"] >= lo and lo_hi["max"] <= hi):
        return None
    return pc.fill_null(pc.or_(pc.less(raw, lo), pc.greater(raw, hi)), False)


#: (prefix, start) -> the longest run of sequence numbers built for it; see :func:`sequence_numbers`
_SEQNOS: dict[tuple[str, int], pa.Array] = {}
_SEQNOS_MAX = 4  # a file's chunks; at most 4 x 131,072 strings (about 14 MB) are kept
_SEQNOS_LOCK = threading.Lock()


def sequence_numbers(prefix: str, start: int, n: int) -> pa.Array:
    """``<prefix><start>`` ... ``<prefix><start + n - 1>``. Every file of one commit by the
    core writer has the same prefix and counts from 0 in each chunk, so the column is built
    once per commit and sliced for the other files: spelling it cost 16 of the 25 ms that a
    200 k-row file's meta columns take. Arrow arrays are immutable, so sharing one is safe."""
    key = (prefix, start)
    with _SEQNOS_LOCK:
        have = _SEQNOS.get(key)
    if have is not None and len(have) >= n:
        return have.slice(0, n)
    # the prefix as a scalar: a third cheaper than joining with n copies of it
    seq = pc.binary_join_element_wise(pa.scalar(prefix, pa.string()),
                                      pc.cast(pa.array(np.arange(start, start + n, dtype=np.int64)),
                                              pa.string()), "")
    with _SEQNOS_LOCK:
        if key not in _SEQNOS and len(_SEQNOS) >= _SEQNOS_MAX:
            del _SEQNOS[next(iter(_SEQNOS))]  # the oldest
        _SEQNOS[key] = seq
    return seq


def with_meta_columns(data: pa.Table, *, instant_time: str, partition: str, file_name: str,
                      key_fields: Sequence[str] | None = None, keys: pa.Array | None = None,
                      commit_times: Iterable[str] | pa.Array | None = None, seqno_start: int = 0,
                      partition_id: int = 0, seq_prefix: str | None = None,
                      dictionary_constants: bool = False) -> pa.Table:
    """Prepend the meta columns. ``keys`` (else computed from ``key_fields``) are the record
    keys; ``commit_times`` keeps unchanged rows' original commit time; the sequence number is
    ``<seq_prefix><n>`` (default prefix ``<instant>_<partition_id>_``). With
    ``dictionary_constants`` the columns that hold one value (file name, partition, commit time
    of a new file) are :func:`constant_dictionary` arrays, for :func:`write_parquet_chunks`
    only (it stores them as strings)."""
    n = data.num_rows
    data = data.drop_columns([c for c in META_COLUMNS if c in data.column_names])
    if keys is None:
        keys = record_key_array(data, key_fields)
    const = constant_dictionary if dictionary_constants else constant_strings
    if commit_times is None:
        times = const(instant_time, n)
    elif isinstance(commit_times, (pa.Array, pa.ChunkedArray)):
        # a merge's times stay a dictionary (written as given; stored as strings)
        times = commit_times if pa.types.is_dictionary(commit_times.type) else commit_times.cast(pa.string())
    else:
        times = pa.array(list(commit_times), pa.string())
    prefix = f"{instant_time}_{partition_id}_" if seq_prefix is None else seq_prefix
    seq = sequence_numbers(prefix, seqno_start, n)
    meta = [times, seq, keys.cast(pa.string()), const(partition, n), const(file_name, n)]
    return pa.Table.from_arrays(meta + list(data.columns),
                                names=list(META_COLUMNS) + data.column_names)


#: meta columns unique per row: a dictionary page for them is built and then thrown away
#: (half the cost of writing a base file with it); every other column keeps Arrow's default
UNIQUE_META_COLUMNS = ("_hoodie_commit_seqno", "_hoodie_record_key")


#: meta columns no reader filters by, written without min/max statistics: they cost part of
#: a base file's meta-column write (measured on 200 k rows: 4.8 ms for the sequence number,
#: 2.4 ms for each constant dictionary, of 52 ms for the file). Kept: the commit time (an
#: incremental read's pushdown), the record key (tagging's key ranges, :func:`key_range`) and
#: the partition path: Java's ``column_stats`` index always covers those three, read from
#: this footer (by Java when it builds the index from a listing, by us in
#: ``core/table/metadata_stats``), and a chunk without statistics reads there as all nulls,
#: which data skipping on ``_hoodie_partition_path`` would prune.
UNFILTERED_META_COLUMNS = ("_hoodie_commit_seqno", "_hoodie_file_name")


#: rows of a file's first chunk looked at to decide which columns get a dictionary
DICTIONARY_SAMPLE_ROWS = 8192


def _mostly_distinct(column) -> bool:
    """Whether a sample of a flat column is more than half distinct values: parquet's writer
    would build its dictionary page until it outgrows the limit and then start over in plain
    encoding (measured on 2 M rows with three such columns: half the write time)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.slice(0, DICTIONARY_SAMPLE_ROWS).combine_chunks()
    else:
        column = column.slice(0, DICTIONARY_SAMPLE_ROWS)
    t = column.type
    if pa.types.is_dictionary(t) or pa.types.is_nested(t) or len(column) < 64:
        return False
    return pc.count_distinct(column).as_py() * 2 > len(column)


def parquet_write_options(table: pa.Table | pa.Schema, parquet: ParquetConfig | None = None) -> dict:
    """The codec (``parquet``'s, else snappy) and page size (when set); a dictionary for every
    column but those of unique values: the sequence number and record key always, and a user
    column whose first rows are mostly distinct (known only when ``table`` has rows);
    statistics for every column but :data:`UNFILTERED_META_COLUMNS`."""
    if isinstance(table, pa.Schema):
        names, unique = table.names, set(UNIQUE_META_COLUMNS)
    else:
        names = table.column_names
        unique = set(UNIQUE_META_COLUMNS) | {c for c in names if c not in META_COLUMNS
                                             and _mostly_distinct(table.column(c))}
    opts = {"compression": "snappy", "use_dictionary": [c for c in names if c not in unique],
            "write_statistics": [c for c in names if c not in UNFILTERED_META_COLUMNS]}
    if parquet is not None:
        opts["compression"] = parquet.codec
        if parquet.page_size is not None:
            opts["data_page_size"] = parquet.page_size
    return opts


#: rows of a file's first chunk written aside to learn each column's compression, for the block size
BLOCK_SAMPLE_ROWS = 8192


def page_ratios(sample: pa.Table, opts: dict) -> dict[str, float]:
    """Per column, the bytes its data pages take written (encoded, compressed, dictionary
    page left out) per byte of its values in plain encoding: ``sample`` written once aside with
    the file's options ``opts``."""
    buf = io.BytesIO()
    pq.write_table(sample, buf, **{k: v for k, v in opts.items() if k != "store_schema"})
    meta = pq.ParquetFile(io.BytesIO(buf.getvalue())).metadata
    written: dict[str, int] = {}
    for g in range(meta.num_row_groups):
        for j in range(meta.num_columns):
            c = meta.row_group(g).column(j)
            name = c.path_in_schema.split(".")[0]
            pages = c.total_compressed_size
            if c.has_dictionary_page and c.dictionary_page_offset is not None:
                pages -= max(c.data_page_offset - c.dictionary_page_offset, 0)
            written[name] = written.get(name, 0) + pages
    out = {}
    for name in sample.column_names:
        plain = float(plain_sizes(sample.column(name)).sum())
        out[name] = written.get(name, 0) / plain if plain else 0.0
    return out


class _BoundedRowGroups:
    """A parquet writer whose ``write_table`` closes row groups where Java Hudi's parquet-mr
    closes them for ``hoodie.parquet.block.size`` (what :func:`parquet_writer` yields when it is
    set; ``core/format/row_groups``: parquet-mr counts its open pages' plain bytes and its
    closed pages' written bytes against the block, not the bytes a group takes written). The
    compression of closed pages is measured on the file's first rows (:data:`BLOCK_SAMPLE_ROWS`)
    written once aside with the file's options."""

    def __init__(self, writer: pq.ParquetWriter, parquet: ParquetConfig, opts: dict):
        self.writer, self.parquet, self.opts = writer, parquet, opts
        self.groups: ParquetMrRowGroups | None = None
        self.pending: pa.Table | None = None

    def write_table(self, table: pa.Table) -> None:
        """Every row group closed by these rows now, each as one row group; the rows of the
        group still open wait for the next chunk (or :meth:`flush`), so chunk boundaries make
        no row group of their own."""
        if table.num_rows == 0:
            if self.pending is None:
                self.pending = table
            return
        if self.groups is None:
            self.groups = ParquetMrRowGroups(self.parquet.block_size, self.parquet.page_size,
                                             page_ratios(table.slice(0, BLOCK_SAMPLE_ROWS), self.opts))
        if self.pending is not None and self.pending.num_rows:
            table = pa.concat_tables([self.pending, table])
        start = 0
        for rows in self.groups.close_points(table):
            self.writer.write_table(table.slice(start, rows), row_group_size=rows)
            start += rows
        self.pending = table.slice(start)

    def flush(self) -> None:
        if self.pending is not None:
            self.writer.write_table(self.pending, row_group_size=max(self.pending.num_rows, 1))
            self.pending = None


@contextlib.contextmanager
def parquet_writer(sink, schema: pa.Schema, sample: pa.Table | None = None,
                   parquet: ParquetConfig | None = None):
    """A parquet writer with the base-file options (a dictionary per column as ``sample``, the
    file's first rows, suggests; ``parquet``: Hudi's codec, row group and page sizes, None for
    this project's defaults). Meta columns given as one-value dictionaries
    (:func:`constant_dictionary`) are recorded as the strings they stand for."""
    opts = parquet_write_options(schema if sample is None else sample, parquet)
    stored = _stored_schema(schema)
    if stored is not None:
        opts["store_schema"] = False
    with pq.ParquetWriter(sink, schema, **opts) as pw:
        if parquet is not None and parquet.block_size is not None:
            bounded = _BoundedRowGroups(pw, parquet, opts)
            yield bounded
            bounded.flush()
        else:
            yield pw
        if stored is not None:
            pw.add_key_value_metadata({"ARROW:schema": stored})


def write_parquet(storage, relative_path: str, table: pa.Table, parquet: ParquetConfig | None = None) -> int:
    """Write a whole base file, created only if absent; returns its size in bytes. Locally the
    parquet writer streams into the hidden temporary file that is then linked into place."""
    return write_parquet_chunks(storage, relative_path, [table], parquet)


def write_parquet_chunks(storage, relative_path: str, chunks: Iterable[pa.Table],
                         parquet: ParquetConfig | None = None) -> int:
    """:func:`write_parquet` for a file built a chunk at a time (one row group each, or more
    with ``parquet.block_size``): only one chunk of meta columns exists at once, so a writer's
    memory is bounded by the chunk, not by the file group. The first chunk's schema is the
    file's (it may have no rows)."""
    it = iter(chunks)
    first = next(it)
    path = storage.path(relative_path)
    storage.makedirs(posixpath.dirname(path))
    size = [0]

    written = [None]

    def write(f):
        with parquet_writer(f, first.schema, sample=first, parquet=parquet) as pw:
            pw.write_table(first)
            for chunk in it:
                pw.write_table(chunk)
        size[0] = f.tell()
        written[0] = pw.writer if isinstance(pw, _BoundedRowGroups) else pw
    try:
        storage.create_if_absent(path, write)
    except FileExistsError:
        raise FileExistsError(f"base file {relative_path} already exists; a base file is written "
                              "once per (fileId, write token, instant)") from None
    if not storage.is_local:  # a local footer is read back as cheaply
        _remember_footer(path, written[0])
    return size[0]


def _stored_schema(schema: pa.Schema) -> bytes | None:
    """The Arrow schema a file records (``ARROW:schema``, as pyarrow writes it: base64 of the
    IPC schema) when its meta columns (or :func:`with_constant_columns`' columns) are
    dictionaries: the same schema with the plain types there, so every reader (pyarrow,
    hudi-rs) reads what a plain file would give. None when there is no such column (pyarrow
    stores the schema itself)."""
    fields = []
    changed = False
    for f in schema:
        constant = f.metadata is not None and CONSTANT_FIELD in f.metadata
        if (f.name in META_COLUMNS or constant) and pa.types.is_dictionary(f.type):
            f = f.with_type(f.type.value_type)
            if constant:
                f = f.remove_metadata()
            changed = True
        fields.append(f)
    if not changed:
        return None
    plain = pa.schema(fields, metadata=schema.metadata)
    return base64.b64encode(plain.serialize().to_pybytes())


#: meta columns a merge writes anew for every row (it reads only the key and commit time)
REWRITTEN_META_COLUMNS = ("_hoodie_commit_seqno", "_hoodie_partition_path", "_hoodie_file_name")


#: what a merge reads of a base file's meta columns as a dictionary: the commit time, a few
#: distinct values that are written back (measured on 200 k rows: 3 ms less to read, 4.6 ms
#: less to write than as strings)
MERGE_DICTIONARY_COLUMNS = ("_hoodie_commit_time",)


def _undecodable(e: BaseException) -> bool:
    """Is ``e`` the parquet reader finding bytes that are not (valid) parquet, rather than a
    storage failure? pyarrow raises ``ArrowInvalid`` for a bad footer (no magic bytes, an
    empty file) and a plain ``OSError`` without an errno for corrupt pages; a real I/O error
    (missing file, refused access, a full or failing disk) carries an errno or its own type."""
    return isinstance(e, pa.ArrowInvalid) or (type(e) is OSError and e.errno is None)


def names_corrupt_file(fn):
    """Wrap a reader of one table data file ``(storage, relative_path, ...)`` so that bytes
    that are not parquet raise :class:`CorruptDataFileError` naming the file and what to do
    (pyarrow's own message names neither). At the call boundary: the read itself is not
    slowed, only its failure is translated."""
    @functools.wraps(fn)
    def wrapper(storage, relative_path, *args, **kwargs):
        try:
            return fn(storage, relative_path, *args, **kwargs)
        except (pa.ArrowInvalid, OSError) as e:
            if not _undecodable(e):
                raise
            raise CorruptDataFileError(
                f"the data file {relative_path} of the table at {storage.base_uri} is not "
                f"readable parquet ({type(e).__name__}: {e})", path=relative_path,
                base_path=storage.base_uri) from e
    return wrapper


@names_corrupt_file
def read_parquet(storage, relative_path: str, skip: Sequence[str] = (),
                 dictionary: Sequence[str] = ()) -> pa.Table:
    """A whole base file, but the columns in ``skip`` (a merge skips
    :data:`REWRITTEN_META_COLUMNS`: the unique sequence numbers were a fifth of the read of an
    upsert's base files), with the columns in ``dictionary`` read as dictionary arrays (a
    merge: :data:`MERGE_DICTIONARY_COLUMNS`). Locally the parquet reader reads the file itself
    (its column chunks in parallel, no copy of the file in Python's memory first); elsewhere
    the object is fetched once and decoded from memory."""
    path = storage.path(relative_path)
    source = path if storage.is_local else io.BytesIO(storage.read(path))
    f = pq.ParquetFile(source)
    # only columns the file has (a table with virtual keys has no meta columns); the footer
    # already read is handed over, not read again
    wanted = [c for c in dictionary if c in f.schema_arrow.names]
    if wanted:
        f = pq.ParquetFile(source, metadata=f.metadata, read_dictionary=wanted)
    if not skip:
        return f.read()
    return f.read(columns=[c for c in f.schema_arrow.names if c not in skip])


@names_corrupt_file
def read_parquet_columns(storage, relative_path: str, columns: list[str]) -> pa.Table:
    """Some columns of a base file (tagging reads only ``_hoodie_record_key``): locally the
    parquet reader fetches just those column chunks; elsewhere the object is read whole."""
    path = storage.path(relative_path)
    if storage.is_local:
        return pq.read_table(path, columns=columns)
    return pq.read_table(io.BytesIO(storage.read(path)), columns=columns)


#: bytes a footer is read with from a base file's end, in one ranged GET (pyarrow's own first
#: read of a footer is 64 KiB); a footer longer than that is read as pyarrow reads it
FOOTER_TAIL_BYTES = 64 * 1024
#: path -> footer of the base files this process wrote last (see :func:`read_footer`)
_FOOTERS: "collections.OrderedDict[str, pq.FileMetaData]" = collections.OrderedDict()
_FOOTERS_MAX = 256
_FOOTERS_LOCK = threading.Lock()


def _remember_footer(path: str, writer) -> None:
    """Keep the footer a closed parquet writer wrote for ``path`` (pyarrow's writer knows it),
    so that the commit's own reads of it (the metadata table's column stats, the next tagging of
    the file group) do not fetch it back: two requests a commit on an object store."""
    try:
        meta = writer.writer.metadata  # pq.ParquetWriter -> its pyarrow._parquet writer
    except AttributeError:  # another pyarrow: the footer is read back when asked
        return
    with _FOOTERS_LOCK:
        _FOOTERS[path] = meta
        while len(_FOOTERS) > _FOOTERS_MAX:
            _FOOTERS.popitem(last=False)


def read_footer(storage, path: str) -> pq.FileMetaData:
    """The parquet footer of the base file at ``path`` (a full path of ``storage``): the one
    this process wrote there, else read locally by pyarrow, else on an object store with one
    ranged GET of the file's last :data:`FOOTER_TAIL_BYTES` (opening the file as a file would
    first ask its size: a HEAD, then the GET). A base file's name is never reused (its instant
    time and write token are in it), so a footer kept by path stays that file's."""
    with _FOOTERS_LOCK:
        hit = _FOOTERS.get(path)
    if hit is not None:
        return hit
    if storage.is_local:
        return pq.read_metadata(path)
    tail = storage.read_tail(path, FOOTER_TAIL_BYTES)
    # the footer: ... <metadata> <4-byte little-endian length> "PAR1"; the tail is read as a
    # whole file of its own, which is all a footer read needs (offsets in it are not followed)
    if len(tail) >= 8 and tail[-4:] == b"PAR1" and int.from_bytes(tail[-8:-4], "little") + 8 <= len(tail):
        return pq.read_metadata(pa.BufferReader(tail))
    with storage.fs.open(path, "rb") as f:  # a longer footer, or not parquet (pyarrow says why)
        return pq.ParquetFile(f).metadata


#: (path, column) -> (min, max) or None; see :func:`key_range`
_KEY_RANGES: dict[tuple[str, str], tuple | None] = {}
_KEY_RANGES_MAX = 200_000


@names_corrupt_file
def key_range(storage, relative_path: str, column: str) -> tuple | None:
    """The min and max of ``column`` in a base file, from its parquet footer (no data read), or
    None when the footer has no usable statistics.

    Tagging asks this of every file group in a partition to skip the files a batch's keys cannot
    be in (Hudi's bloom index prunes by the key range the same way). Answers are cached for the
    process by path: a base file is created once under a name that carries its instant time and
    write token, and instant times are never reused, so a name never holds other rows."""
    cache_key = (storage.path(relative_path), column)
    if cache_key in _KEY_RANGES:
        return _KEY_RANGES[cache_key]
    meta = read_footer(storage, cache_key[0])
    names = meta.schema.names
    found: tuple | None = None
    if column in names and meta.num_row_groups > 0:
        ci = names.index(column)
        lo = hi = None
        for rg in range(meta.num_row_groups):
            st = meta.row_group(rg).column(ci).statistics
            if st is None or not st.has_min_max:
                lo = hi = None
                break
            lo = st.min if lo is None or st.min < lo else lo
            hi = st.max if hi is None or st.max > hi else hi
        if lo is not None:
            found = (lo, hi)
    if len(_KEY_RANGES) >= _KEY_RANGES_MAX:
        _KEY_RANGES.clear()
    _KEY_RANGES[cache_key] = found
    return found


class KeyProbe:
    """The batch's keys, ready to ask "may a file whose keys span [lo, hi] hold any of them?".

    Hudi's bloom index first prunes files by key range, key by key, not by the batch's overall
    range: a batch of keys 0..9 plus 100123 spans every file of a table that small commits
    grew one fresh key at a time, yet few files hold any of its keys. The keys are sorted once
    (lazily, only if some file's range overlaps the batch's) and each file costs one binary
    search. Only like is compared with like: integers with integers, text with text (UTF-8
    byte order, which parquet's statistics use, is code-point order, which Python's str
    comparison uses)."""

    def __init__(self, values: pa.Array):
        self._values = values
        self._sorted = None
        self.range = None
        if len(values):
            mm = pc.min_max(values)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            self.range = None if lo is None else (lo, hi)

    def may_hold(self, span: tuple) -> bool:
        if self.range is None:
            return True
        kinds = {type(v) for v in (*span, *self.range)}
        if kinds != {int} and kinds != {str}:
            return True
        lo, hi = span
        if hi < self.range[0] or lo > self.range[1]:
            return False
        if self._sorted is None:
            vals = self._values.drop_null()
            self._sorted = (np.sort(vals.to_numpy()) if kinds == {int}
                            else np.array(sorted(vals.to_pylist()), dtype=object))
        i = int(np.searchsorted(self._sorted, lo, side="left"))
        return bool(i < len(self._sorted) and self._sorted[i] <= hi)
