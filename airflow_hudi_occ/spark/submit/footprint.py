"""A batch's footprint as the submitter computes it, before any Spark session: the partition
paths its rows fall in, read from the source's partition columns with pyarrow, and in each of
them the existing file groups its rows can touch (its *reach*, :func:`batch_reach`).

Why here: admission (core/concurrency/admission.py) asks the table which live writers share
partitions with a batch *before* spark-submit, where waiting costs no Spark resources. The
submitter must stay pyspark-free (the provider imports only ``spark/submit/``), so this reads
the source as the engine's object-store reader does (parquet: only the partition columns;
csv with a header; json lines) and spells each partition with core's rule
(``format/partition_path``), as ``tagging.check_batch`` does in the job.

The reach is what the job's tagging would find, computed the cheap way: under the bucket index
the batch's bucket ids (``core/format/bucket_index``: Java's hash, as the writer's); otherwise
the batch's keys, partition by partition, against the committed file groups' key ranges from
their parquet footers (key by key, as tagging prunes: ``base_file.KeyProbe``), then the
record keys of the files left (as the simple index's lookup) while they stay under
``max_stored_keys``. Keys found nowhere are inserts: new file groups, or, with small-file
top-up on (``hoodie.parquet.small.file.limit`` > 0), any small file group of the partition
too; and their slots (``footprint.new_key_slot``), since two writers inserting one new key at
once would each make a file group for it and the key would end up twice. A partition is left
out of the reach (any of its file groups) whenever the job could touch more: an overwrite, a
merge-on-read table (keys may live in log files the footers do not show) without the bucket
index, virtual keys, a key column whose string form Spark and Arrow might spell differently,
a batch over ``max_rows``.

Unknown (None) whenever the answer could differ from the job's: a SQL source, a Hadoop
scheme (``s3a://``: Spark's connector holds the credentials), a partition column of a type
whose string form differs between Spark and Arrow (only strings and integers are trusted),
a missing column, or more than ``max_files`` files. Unknown is the conservative answer for a
wait: it overlaps every writer.
"""

from __future__ import annotations

import io
import logging

import pyarrow as pa
import pyarrow.compute as pc

from airflow_hudi_occ.core.concurrency.footprint import (EVERY_NEW_KEY, bucket_reach, new_key_slot,
                                                        partition_index)
from airflow_hudi_occ.core.config import SMALL_FILE_LIMIT, IndexConfig
from airflow_hudi_occ.core.format.base_file import KeyProbe, key_range, read_parquet_columns, record_key_array
from airflow_hudi_occ.core.format.bucket_index import hash_fields
from airflow_hudi_occ.core.format.storage import open_fs
from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.core.table.table import MERGE_ON_READ, Table
from airflow_hudi_occ.spark.submit.source import HADOOP_SCHEMES, list_files, local_path, scheme_of

log = logging.getLogger(__name__)

#: a source of more files than this is not read before submission (unknown footprint)
MAX_FILES = 2000


def _trusted(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)


def _read_columns(url: str, fmt: str, columns: list[str], storage_options: dict | None) -> pa.Table:
    fs, path = open_fs(url, storage_options)
    if fmt == "parquet":
        import pyarrow.parquet as pq
        with fs.open(path, "rb") as f:
            return pq.read_table(f, columns=columns)
    data = io.BytesIO(fs.cat_file(path))
    if fmt == "csv":
        import pyarrow.csv as pcsv
        return pcsv.read_csv(data, convert_options=pcsv.ConvertOptions(include_columns=columns))
    import pyarrow.json as pjson
    return pjson.read_json(data).select(columns)


def _read_batch(source: str, fmt: str, columns: list[str], storage_options: dict | None,
                max_files: int) -> pa.Table | None:
    """The batch's ``columns`` (all files), or None when it is not read before submission."""
    if fmt not in ("parquet", "csv", "json"):
        return None
    if local_path(source) is None and scheme_of(source) in HADOOP_SCHEMES:
        return None
    files = list_files(source, storage_options)
    if not files or len(files) > max_files:
        return None
    tables = [_read_columns(url, fmt, columns, storage_options) for url in files]
    if any(not _trusted(t.schema.field(f).type) and not pa.types.is_null(t.schema.field(f).type)
           for t in tables for f in columns):
        return None
    return pa.concat_tables([t.select(columns) for t in tables], promote_options="permissive")


def batch_partitions(source: str, fmt: str, partition_fields: list[str], *, hive_style: bool,
                     url_encode: bool, storage_options: dict | None = None,
                     max_files: int = MAX_FILES) -> list[str] | None:
    """The sorted partition paths of the batch in ``source``, or None when unknown."""
    if fmt not in ("parquet", "csv", "json"):
        return None
    if not partition_fields:
        return [""]
    try:
        batch = _read_batch(source, fmt, list(partition_fields), storage_options, max_files)
        if batch is None:
            return None
        return sorted(partition_index(batch, list(partition_fields), hive_style=hive_style,
                                url_encode=url_encode)[0])
    except Exception as e:  # noqa: BLE001 - unknown is a safe answer; the job reads it properly
        log.info("the partitions of %s are unknown before submission (%s: %s)", source,
                 type(e).__name__, e)
        return None


#: operations whose file groups the reach can predict (an overwrite replaces whole partitions)
REACH_OPERATIONS = ("upsert", "insert", "bulk_insert", "delete")
#: a batch of more rows than this gets no reach (its partitions only)
MAX_ROWS = 2_000_000
#: at most this many stored record keys are read to look the batch's keys up
MAX_STORED_KEYS = 5_000_000
#: a partition with more new keys than this reaches every new key (``new:*``)
MAX_NEW_KEYS = 100_000


def batch_reach(table: Table, source: str, fmt: str, *, operation: str, options: dict,
                storage_options: dict | None = None, max_files: int = MAX_FILES,
                max_rows: int = MAX_ROWS, max_stored_keys: int = MAX_STORED_KEYS) -> dict[str, list[str]]:
    """Partition -> the existing file groups the batch can touch there (fileIds, or
    ``bucket:<8 digits>`` under the bucket index); a partition left out may touch any."""
    op = str(operation or "upsert").lower()
    cfg = table.config
    if op not in REACH_OPERATIONS or not cfg.record_key_fields:
        return {}
    try:
        index_config = IndexConfig.from_options(options)
        buckets = index_config.buckets
        hashed = hash_fields(index_config, cfg.record_key_fields) if buckets else []
        if buckets is None and (cfg.table_type == MERGE_ON_READ or not cfg.populates_meta_fields):
            return {}
        columns = list(dict.fromkeys([*cfg.partition_fields, *cfg.record_key_fields, *hashed]))
        batch = _read_batch(source, fmt, columns, storage_options, max_files)
        if batch is None or batch.num_rows > max_rows:
            return {}
        paths, index = partition_index(batch, list(cfg.partition_fields), hive_style=cfg.hive_style_partitioning,
                                 url_encode=cfg.url_encode_partitions)
        if buckets is not None:
            return bucket_reach(batch, paths, index, hashed, buckets)
        keys = record_key_array(batch, cfg.record_key_fields)
        return _lookup_reach(table, paths, index, keys, op, SMALL_FILE_LIMIT.get(options), max_stored_keys)
    except Exception as e:  # noqa: BLE001 - no reach is the safe answer (partitions decide)
        log.info("the file groups %s can touch are unknown before submission (%s: %s)", source,
                 type(e).__name__, e)
        return {}


def _lookup_reach(table: Table, paths: list[str], index: pa.Array, keys: pa.Array, op: str,
                  small_file_limit: int, max_stored_keys: int) -> dict[str, list[str]]:
    view = FileSystemView(table, partitions=paths)
    storage = table.storage
    budget = max_stored_keys
    out: dict[str, list[str]] = {}
    for i, part in enumerate(paths):
        mine = pc.unique(keys.filter(pc.equal(index, i)))
        probe = KeyProbe(mine)
        reach: set[str] = set()
        inserts = op != "delete"
        found = pa.array([False] * len(mine))
        slices = view.latest_file_slices(part)
        for s in slices:
            rel = s.base_file.relative_path
            span = key_range(storage, rel, "_hoodie_record_key")
            if span is not None and not probe.may_hold(span):
                continue  # no key of the batch can be in it: not read, as tagging prunes
            stored = None
            if budget > 0:
                stored = read_parquet_columns(storage, rel, ["_hoodie_record_key"]).column(0).combine_chunks()
                budget -= len(stored)
            if stored is None:  # over the budget: the range says it may hold some
                reach.add(s.file_id)
                found = None
                continue
            hits = pc.is_in(mine, value_set=stored.cast(mine.type))
            if pc.any(hits).as_py():
                reach.add(s.file_id)
                if found is not None:
                    found = pc.or_(found, hits)
        new = None if found is None else mine.filter(pc.invert(found))
        if inserts and (new is None or len(new)):
            if new is None or len(new) > MAX_NEW_KEYS:
                reach.add(EVERY_NEW_KEY)
            else:
                reach.update(new_key_slot(k) for k in new.to_pylist())
            if small_file_limit > 0:  # new keys top small file groups up first (UpsertPartitioner)
                reach.update(s.file_id for s in slices
                             if storage.size(storage.path(s.base_file.relative_path)) < small_file_limit)
        out[part] = sorted(reach)
    return out
