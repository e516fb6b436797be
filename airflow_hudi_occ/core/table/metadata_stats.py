"""The ``column_stats`` and ``partition_stats`` part of a commit's metadata-table deltacommit.

Java Hudi 1.2 at its defaults builds both partitions beside ``files`` (``hoodie.metadata.index.
column.stats.enable`` and ``...partition.stats.enable``, true for Spark writers), and its
writer adds to them at every commit (``HoodieTableMetadataUtil.convertMetadataToColumnStatsRecords``
and ``HoodieMetadataWriteUtils.convertMetadataToPartitionStatRecords``). This module does the
same for every action of ours (:func:`stats_blocks`: a copy-on-write commit, a merge-on-read
deltacommit, a replacecommit of insert_overwrite or clustering, a compaction), for
:func:`~airflow_hudi_occ.core.table.metadata_commit.write_metadata_deltacommit`:

- **which columns** (:func:`columns_to_index`, Java's ``getColumnsToIndex``): with meta fields
  populated, ``_hoodie_commit_time``, ``_hoodie_partition_path``, ``_hoodie_record_key``
  always, then ``hoodie.metadata.index.column.stats.column.list`` if set, else the first
  ``hoodie.metadata.index.column.stats.max.columns.to.index`` (32) top-level columns of the
  commit's writer schema whose type Java indexes (no records, arrays, maps, enums). Under
  index version 1 Java also skips a decimal wider than ``DecimalWrapper``'s decimal(30, 15)
  (precision + 15 - scale > 30, or scale > 15), and, unless its writer's record type is Avro,
  bytes, fixed and decimals (``isColumnTypeSupportedV1``): Java's Spark datasource at its
  defaults writes with the Avro record type and indexes them (its ``.index_defs`` lists them),
  so they are counted here;
- **the index version** (:func:`index_version`): what ``.hoodie/.index_defs/index.json`` says
  for the partition (or for its sibling), else 1 below table version 9 and 2 from it;
- **column_stats**: one record per (new file, column): a base file's from its parquet footer
  (read back from storage: what Java reads for the file); a log file's over the records of its
  data blocks (:func:`log_file_ranges`), as Java's append handle records them;
- **partition_stats**: per partition the action wrote, one record per column aggregated over
  the partition's latest merged file slices once it completes (:func:`_latest_files`, Java's
  ``getFilesToFetchColumnStats``): the new files, the base file and committed logs of every
  other file group (a group given a new base file here keeps only the logs completed at or
  after this instant); base files' footers and logs' records read as Java reads their
  ``column_stats`` records (the same numbers). Tight-bound, as Java writes them when
  ``column_stats`` is there. The file groups a replacecommit replaces are left out (Java's
  writer keeps them until its next action on the partition: a wider bound);
- **file groups**: a key goes to ``mapRecordKeyToFileGroupIndex(key, n)`` of the partition's
  ``n`` file groups, found on storage (``col-stats-0000-0``, ... sorted), as Java's writer
  tags records with the metadata table's latest file slices.

A clean's records (:func:`clean_stats_blocks`): a tombstone per column of every file it
deleted. A rollback writes none: it rolls back the metadata table's deltacommit of the failed
instant in every metadata partition (``metadata_commit.rollback_metadata_deltacommit``).
Log files: every type Java's Spark writer or ours puts in a log block (dates, timestamps UTC
and local, decimals in ``bytes`` or ``fixed``, binary and the primitives) is recorded with
the value type and raw value a footer of the same column gives (:func:`log_file_ranges`).
Not covered: the few column types Java itself cannot record from a footer (UUID, INT96,
unsigned: see :mod:`~airflow_hudi_occ.core.format.column_stats_record`), and in a log block
the Avro types neither writer produces (``time-*``, ``uuid``, ``timestamp-nanos``, a plain
``fixed``): the commit is abandoned with
:class:`~airflow_hudi_occ.core.errors.UnsupportedColumnStatsTypeError`. Strings: one log
file's min and max by code point (Avro's compare), every merge (a partition's files) by
UTF-16 units, as Java (``column_stats_record.java_order``). Cost: one footer
(or log file) read per new file and per other latest file of each partition written (Java reads the
latter from ``column_stats`` instead), each file's once per process (:data:`_RANGES`); measured
locally at about 0.6 ms a footer (65 ms for a partition of 100 files, first commit).
"""

from __future__ import annotations

import json
import posixpath
import re
import threading
from collections import OrderedDict
from typing import Iterable, Mapping

from airflow_hudi_occ.core.config import MetadataTableConfig
from airflow_hudi_occ.core.errors import MetadataTableEnabledError, UnsupportedColumnStatsTypeError
from airflow_hudi_occ.core.format.base_file import read_footer
from airflow_hudi_occ.core.format.column_stats_record import (COLUMN_STATS_PARTITION, FILE_ID_PREFIXES,
                                                              META_COLUMNS, META_COLUMNS_INDEXED,
                                                              PARTITION_STATS_PARTITION, V1_DECIMAL_PRECISION,
                                                              V1_DECIMAL_SCALE, ColumnRange, avro_value_type,
                                                              column_stats_key, column_stats_records,
                                                              deleted_column_stats_record, file_group_index,
                                                              log_record_order, native_from_avro,
                                                              partition_stats_records, ranges_from_parquet)
from airflow_hudi_occ.core.format.log_file import (BlockType, LogFileName, decode_blocks, is_log_file_name,
                                                   read_avro_records, read_parquet_block)
from airflow_hudi_occ.core.format.metadata import CommitMetadata
from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.core.table.metadata_table import METADATA_FOLDER, MetadataTableState
from airflow_hudi_occ.core.table.mor_reader import merge_file_slices

STATS_PARTITIONS = (COLUMN_STATS_PARTITION, PARTITION_STATS_PARTITION)
INDEX_DEFS_KEY = "hoodie.table.index.defs.path"
_BASE_RE = re.compile(r"^(?P<file_id>[^_.][^_]*)_[^_]+_\d+\.hfile$")
#: Avro types Java never indexes
_NEVER = {"record", "array", "map", "enum"}


def _non_null(avro):
    if isinstance(avro, list):
        rest = [t for t in avro if t != "null"]
        return rest[0] if len(rest) == 1 else avro
    return avro


def _kind(avro) -> str:
    """An Avro field type reduced to what Java's type check looks at."""
    avro = _non_null(avro)
    if isinstance(avro, list):
        return "union"
    if isinstance(avro, dict):
        if avro.get("logicalType") == "decimal":
            wide = avro.get("precision", 0) + V1_DECIMAL_SCALE - avro.get("scale", 0) > V1_DECIMAL_PRECISION
            return "wide-decimal" if wide or avro.get("scale", 0) > V1_DECIMAL_SCALE else "decimal"
        return _kind(avro["type"]) if isinstance(avro["type"], (dict, list)) else avro["type"]
    return avro


def columns_to_index(schema_json: str | None, config: MetadataTableConfig, *, meta_fields: bool,
                     version: int = 2) -> list[str]:
    """Java's columns for the commit's writer schema (see the module doc), in Java's order,
    under index ``version``; ``config``: the writer's column list and cap."""
    meta = list(META_COLUMNS_INDEXED) if meta_fields else []
    if not schema_json:
        return meta
    fields = json.loads(schema_json).get("fields", [])
    kinds = {f["name"]: _kind(f["type"]) for f in fields}
    listed = config.column_stats_columns
    if listed:
        chosen = [c for c in listed if c not in META_COLUMNS_INDEXED and c in kinds
                  and _supported(kinds[c], version)]
    else:
        chosen = [n for n in kinds if n not in META_COLUMNS and _supported(kinds[n], version)]
        chosen = chosen[:config.column_stats_max_columns]
    return meta + chosen


def _supported(kind: str, version: int) -> bool:
    """Whether Java may index a column of this kind (see the module doc on version 1)."""
    return kind not in _NEVER and kind != "union" and not (kind == "wide-decimal" and version < 2)


def index_version(table, mdt_partition: str) -> int:
    """The partition's index version (the module doc): 1 or 2; read once per version of the
    table's properties (``Table.derived``: Java changes the index definitions with them)."""
    return table.derived(f"index_version:{mdt_partition}", lambda: _index_version(table, mdt_partition))


def _index_version(table, mdt_partition: str) -> int:
    rel = table.config.properties.get(INDEX_DEFS_KEY)
    if rel:
        try:
            defs = json.loads(table.storage.read(table.storage.path(rel))).get("indexDefinitions", {})
        except FileNotFoundError:
            defs = {}
        for name in (mdt_partition, *[p for p in STATS_PARTITIONS if p != mdt_partition]):
            version = (defs.get(name) or {}).get("version")
            if version:
                return int(str(version).lstrip("Vv"))
    return 1 if table.version < 9 else 2


def file_group_ids(table, mdt_partition: str) -> list[str]:
    """The metadata partition's file groups on storage (base HFiles and log files), sorted;
    listed once per version of the table's properties (``Table.derived``: a partition gets
    its file groups when it is initialised, which Java records in the properties)."""
    return table.derived(f"file_group_ids:{mdt_partition}", lambda: _file_group_ids(table, mdt_partition))


def _file_group_ids(table, mdt_partition: str) -> list[str]:
    folder = table.storage.path(METADATA_FOLDER, mdt_partition)
    prefix = FILE_ID_PREFIXES[mdt_partition]
    ids = set()
    for name in table.storage.list_names(folder):
        parsed = LogFileName.parse(name)
        fid = parsed.file_id if parsed else (m["file_id"] if (m := _BASE_RE.match(name)) else None)
        if fid and fid.startswith(prefix):
            ids.add(fid)
    if not ids:
        raise MetadataTableEnabledError(
            f"the metadata table of {table.base_uri} lists {mdt_partition} but has no file group in "
            f"{folder}; this writer cannot tell where its records go", base_path=table.base_uri,
            partitions=(mdt_partition,),
            remedy="let a Java writer rebuild the metadata table (or its stats partitions), or write "
                   "this table with hoodie.metadata.enable=false")
    return sorted(ids)


#: file ranges by (full path, columns): a base file's name carries its instant and write token
#: and is never rewritten, so its footer's stats hold for the process (bounded, oldest out)
_RANGES: OrderedDict[tuple[str, tuple[str, ...]], list[ColumnRange]] = OrderedDict()
_RANGES_MAX = 100_000
#: the commit reads ahead in a thread while it waits for the lock (transaction.py)
_RANGES_LOCK = threading.Lock()


def _file_ranges(table, relative: str, columns: list[str]) -> list[ColumnRange]:
    """One base file's ranges of ``columns``, from its footer (cached, see :data:`_RANGES`)."""
    path = table.storage.path(relative)
    key = (path, tuple(columns))
    hit = _cached_ranges(key)
    if hit is not None:
        return hit
    footer = read_footer(table.storage, path)
    found = ranges_from_parquet(footer, posixpath.basename(relative), columns, where=relative)
    _keep_ranges(key, found)
    return found


def _cached_ranges(key) -> list[ColumnRange] | None:
    with _RANGES_LOCK:
        hit = _RANGES.get(key)
        if hit is not None:
            _RANGES.move_to_end(key)
        return hit


def _keep_ranges(key, found: list[ColumnRange]) -> None:
    with _RANGES_LOCK:
        _RANGES[key] = found
        while len(_RANGES) > _RANGES_MAX:
            _RANGES.popitem(last=False)


def _spread(table, mdt_partition: str, records: Mapping[str, dict]) -> dict[tuple[str, str], dict[str, dict]]:
    if not records:
        return {}
    groups = file_group_ids(table, mdt_partition)
    out: dict[tuple[str, str], dict[str, dict]] = {}
    for key, record in records.items():
        out.setdefault((mdt_partition, groups[file_group_index(key, len(groups))]), {})[key] = record
    return out


def _log_value_type(avro, column: str, where: str) -> tuple[str, tuple[int, int] | None]:
    found = avro_value_type(avro)
    if found is None:
        raise UnsupportedColumnStatsTypeError(
            f"column {column!r} of {where} is {json.dumps(_non_null(avro))}, a type neither Java's Spark "
            "writer nor this package's writers put in a log file (time, uuid, timestamp-nanos, a plain "
            "fixed, a union of several types): this writer has no log-file column statistics for it "
            "that it has compared with Java's", column=column,
            remedy="leave the column out of Java's column stats (hoodie.metadata.index.column.stats."
                   "column.list, the same in every writer) or disable column stats in Java, or write "
                   "this table with hoodie.metadata.enable=false")
    return found


def log_file_ranges(table, relative: str, columns: list[str]) -> list[ColumnRange]:
    """One log file's ranges of ``columns`` as Java's append handle records them
    (``HoodieTableMetadataUtil.collectColumnRangeMetadata`` over the records of its data
    blocks): min and max of the values in Avro's order (strings by code point, binary signed:
    ``log_record_order``), ``valueCount`` the records, ``nullCount`` the nulls, sizes 0 (not
    comparable with parquet's); the value type from the block's Avro schema and the value as
    a footer gives it (``avro_value_type``, ``native_from_avro``: a date as its day, a
    timestamp as its raw long, a decimal with its precision and scale); a column the blocks'
    schema lacks left out; a log file of deletes only: an empty range per column
    (``createEmpty``: no type, counts 0). Read back from storage (a log file is never
    rewritten: cached as footers are)."""
    path = table.storage.path(relative)
    key = (path, tuple(columns))
    hit = _cached_ranges(key)
    if hit is not None:
        return hit
    name = posixpath.basename(relative)
    records: list[dict] = []
    types: dict[str, tuple[str, tuple[int, int] | None]] = {}
    for block in decode_blocks(table.storage.read(path), allow_truncated_tail=True):
        if block.block_type is BlockType.AVRO_DATA:
            rows = read_avro_records(block)
        elif block.block_type is BlockType.PARQUET_DATA:
            rows = read_parquet_block(block).to_pylist()
        else:
            continue
        fields = {f["name"]: f["type"] for f in json.loads(block.schema or "{}").get("fields", [])}
        for c in columns:
            if c in fields and c not in types:
                types[c] = _log_value_type(fields[c], c, relative)
        records.extend(rows)
    if not records:
        found = [ColumnRange(name, c, "NULL") for c in columns]
    else:
        found = []
        for c in columns:
            if c not in types:
                continue
            vtype, decimal = types[c]
            values = [native_from_avro(vtype, r.get(c)) for r in records]
            present = [v for v in values if v is not None]
            # one file's values in Avro's order (strings by code point), not java_order's
            low = min(present, key=log_record_order) if present else None
            high = max(present, key=log_record_order) if present else None
            found.append(ColumnRange(name, c, vtype, low, high, len(values) - len(present), len(values), 0, 0,
                                     decimal))
    _keep_ranges(key, found)
    return found


def _ranges(table, relative: str, columns: list[str]) -> list[ColumnRange]:
    """A data file's ranges: a base file's from its footer, a log file's from its records."""
    if is_log_file_name(posixpath.basename(relative)):
        return log_file_ranges(table, relative, columns)
    return _file_ranges(table, relative, columns)


def _indexed(stat) -> bool:
    name = posixpath.basename(stat.path or "")
    return name.endswith(".parquet") or is_log_file_name(name)


def _latest_files(table, timeline, partition: str, written, instant_time: str,
                  replaced: frozenset = frozenset()) -> list[str]:
    """The files of ``partition``'s latest merged file slices once this action completes,
    other than the ones it wrote (``written``), as Java's ``getFilesToFetchColumnStats``:
    the base file and committed log files of every visible file group; a group that gets a
    new base file here (a copy-on-write rewrite, a compaction) keeps only its logs completed
    at or after this instant (they join the new slice, ``mor_reader``'s rule). The file groups
    this action replaces (``replaced``: insert_overwrite, clustering) are left out: the
    partition's files once it completes, what Java's metadata validator aggregates (Java's
    writer keeps them, its view not knowing them replaced while the replacecommit is inflight:
    a wider bound, never a narrower one; docs/java-interop.md)."""
    new_base = {s.file_id for s in written if (s.path or "").endswith(".parquet")}
    own = {s.path for s in written}
    view = FileSystemView(table, timeline, partitions=[partition])
    out: list[str] = []
    for sl in merge_file_slices(table, view):
        if sl.partition != partition or (sl.partition, sl.file_group.file_id) in replaced:
            continue
        fresh = sl.file_group.file_id in new_base
        if sl.base is not None and not fresh and sl.base.base_file.relative_path not in own:
            out.append(sl.base.base_file.relative_path)
        for rel, lf in zip(sl.log_paths(), sl.log_files):
            if rel in own:
                continue
            if fresh:
                inst = timeline.get(lf.instant_time)
                if inst is None or (inst.completion_time or "") < instant_time:
                    continue
            out.append(rel)
    return out


def stats_blocks(table, state: MetadataTableState, metadata: CommitMetadata, config: MetadataTableConfig, *,
                 timeline=None, instant_time: str = "") -> dict[tuple[str, str], dict[str, dict]]:
    """``(metadata partition, file id) -> {HFile key: record}`` for the stats partitions the
    metadata table has, for an action with ``metadata`` (its write stats and its writer
    schema): a copy-on-write commit, a merge-on-read deltacommit (its log files indexed by
    their records, its new base files by their footers), a replacecommit (insert_overwrite,
    clustering: its new files) or a compaction (its new base files); empty when it has
    neither. Call under the table lock, before the data instant ``instant_time`` completes
    (``timeline``: the timeline read under the lock)."""
    wanted = [p for p in STATS_PARTITIONS if p in state.partitions]
    if not wanted:
        return {}
    timeline = timeline if timeline is not None else table.timeline()
    written = [s for s in metadata.write_stats() if s.path and _indexed(s)]
    versions = {p: index_version(table, p) for p in wanted}
    meta_fields = table.config.populates_meta_fields
    columns = {p: columns_to_index(metadata.schema, config, meta_fields=meta_fields, version=versions[p])
               for p in wanted}
    every = list(dict.fromkeys(c for cols in columns.values() for c in cols))
    new_ranges: dict[str, list[ColumnRange]] = {}
    for s in written:
        new_ranges.setdefault(s.partition_path, []).extend(_ranges(table, s.path, every))
    blocks: dict[tuple[str, str], dict[str, dict]] = {}
    if COLUMN_STATS_PARTITION in wanted:
        cols = set(columns[COLUMN_STATS_PARTITION])
        records: dict[str, dict] = {}
        for partition, ranges in new_ranges.items():
            records.update(column_stats_records(partition, [r for r in ranges if r.column in cols],
                                                index_version=versions[COLUMN_STATS_PARTITION]))
        blocks.update(_spread(table, COLUMN_STATS_PARTITION, records))
    if PARTITION_STATS_PARTITION in wanted:
        cols = columns[PARTITION_STATS_PARTITION]
        partitions = sorted({s.partition_path for s in written})
        replaced = frozenset(metadata.replaced_file_groups())
        records = {}
        for partition in partitions:
            mine = [s for s in written if s.partition_path == partition]
            ranges = [r for r in new_ranges.get(partition, []) if r.column in cols]
            for rel in _latest_files(table, timeline, partition, mine, instant_time, replaced):
                ranges.extend(_ranges(table, rel, cols))
            # a delete-only log file's empty ranges carry no type and add nothing
            typed = [r for r in ranges if r.value_type != "NULL"]
            # tight-bound, as Java's when column_stats is there (isShouldScanColStatsForTightBound)
            records.update(partition_stats_records(partition, typed,
                                                   index_version=versions[PARTITION_STATS_PARTITION],
                                                   tight_bound=COLUMN_STATS_PARTITION in state.partitions))
        blocks.update(_spread(table, PARTITION_STATS_PARTITION, records))
    return blocks


def clean_stats_blocks(table, state: MetadataTableState, deleted: Mapping[str, Iterable[str]],
                       config: MetadataTableConfig,
                       *, timeline=None) -> dict[tuple[str, str], dict[str, dict]]:
    """A clean's ``column_stats`` records: a tombstone (``isDeleted``) for every indexed column
    of every file it deleted, the columns those of the table's latest schema, as Java's
    ``convertMetadataToColumnStatsRecords(HoodieCleanMetadata)``; ``partition_stats`` are not
    touched by a clean (Java's are recomputed over the latest files at each commit)."""
    if COLUMN_STATS_PARTITION not in state.partitions:
        return {}
    timeline = timeline if timeline is not None else table.timeline()
    last = timeline.last_completed_write()
    schema = timeline.commit_metadata(last).schema if last is not None else None
    version = index_version(table, COLUMN_STATS_PARTITION)
    columns = columns_to_index(schema, config, meta_fields=table.config.populates_meta_fields, version=version)
    records = {column_stats_key(partition, name, column): deleted_column_stats_record(name, column,
                                                                                      index_version=version)
               for partition, names in deleted.items() for name in names for column in columns}
    return _spread(table, COLUMN_STATS_PARTITION, records)


__all__ = ["STATS_PARTITIONS", "columns_to_index", "index_version", "file_group_ids", "log_file_ranges", "stats_blocks",
           "clean_stats_blocks"]
