"""The ``column_stats`` and ``partition_stats`` part of a commit's metadata-table deltacommit.

Java Hudi 1.2 at its defaults builds both partitions beside ``files`` (``hoodie.metadata.index.
column.stats.enable`` and ``...partition.stats.enable``, true for Spark writers), and its
writer adds to them at every commit (``HoodieTableMetadataUtil.convertMetadataToColumnStatsRecords``
and ``HoodieMetadataWriteUtils.convertMetadataToPartitionStatRecords``). This module does the
same for one copy-on-write commit of ours (:func:`stats_blocks`), for
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
- **column_stats**: one record per (new base file, column), from the file's parquet footer
  (read back from storage: what Java reads for the file);
- **partition_stats**: per partition the commit wrote, one record per column aggregated over
  the partition's latest base files once the commit completes: the new files, and the latest
  file of every other file group visible before it (file groups it rewrote or replaced left
  out), their footers read as Java reads their ``column_stats`` records (the same numbers:
  Java computed those records from the same footers). Tight-bound, as Java writes them when
  ``column_stats`` is there;
- **file groups**: a key goes to ``mapRecordKeyToFileGroupIndex(key, n)`` of the partition's
  ``n`` file groups, found on storage (``col-stats-0000-0``, ... sorted), as Java's writer
  tags records with the metadata table's latest file slices.

A clean's records (:func:`clean_stats_blocks`): a tombstone per column of every file it
deleted. A rollback writes none: it rolls back the metadata table's deltacommit of the failed
instant in every metadata partition (``metadata_commit.rollback_metadata_deltacommit``).
Not covered (the guard keeps refusing them): merge-on-read log files (Java 1.x indexes their column ranges too), replacecommits, and
the few column types Java itself cannot record (UUID, INT96, unsigned: see
:mod:`~airflow_hudi_occ.core.format.column_stats_record`; the commit is abandoned with
:class:`~airflow_hudi_occ.core.errors.UnsupportedColumnStatsTypeError`). Cost: one footer
read per new file and per other latest file of each partition written (Java reads the
latter from ``column_stats`` instead), each file's once per process (:data:`_RANGES`); measured
locally at about 0.6 ms a footer (65 ms for a partition of 100 files, first commit).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections import OrderedDict
from typing import Iterable, Mapping

import pyarrow.parquet as pq

from airflow_hudi_occ.core.config import COLUMN_STATS_COLUMN_LIST, COLUMN_STATS_MAX_COLUMNS
from airflow_hudi_occ.core.errors import MetadataTableEnabledError
from airflow_hudi_occ.core.format.column_stats_record import (COLUMN_STATS_PARTITION, FILE_ID_PREFIXES,
                                                              META_COLUMNS, META_COLUMNS_INDEXED,
                                                              PARTITION_STATS_PARTITION, V1_DECIMAL_PRECISION,
                                                              V1_DECIMAL_SCALE, ColumnRange,
                                                              column_stats_key, column_stats_records,
                                                              deleted_column_stats_record, file_group_index,
                                                              partition_stats_records, ranges_from_parquet)
from airflow_hudi_occ.core.format.log_file import LogFileName
from airflow_hudi_occ.core.format.metadata import CommitMetadata
from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.core.table.metadata_table import METADATA_FOLDER, MetadataTableState

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


def columns_to_index(schema_json: str | None, options: Mapping, *, meta_fields: bool,
                     version: int = 2) -> list[str]:
    """Java's columns for the commit's writer schema (see the module doc), in Java's order,
    under index ``version``."""
    meta = list(META_COLUMNS_INDEXED) if meta_fields else []
    if not schema_json:
        return meta
    fields = json.loads(schema_json).get("fields", [])
    kinds = {f["name"]: _kind(f["type"]) for f in fields}
    listed = COLUMN_STATS_COLUMN_LIST.get(options)
    if listed:
        chosen = [c for c in listed if c not in META_COLUMNS_INDEXED and c in kinds
                  and _supported(kinds[c], version)]
    else:
        chosen = [n for n in kinds if n not in META_COLUMNS and _supported(kinds[n], version)]
        chosen = chosen[:COLUMN_STATS_MAX_COLUMNS.get(options)]
    return meta + chosen


def _supported(kind: str, version: int) -> bool:
    """Whether Java may index a column of this kind (see the module doc on version 1)."""
    return kind not in _NEVER and kind != "union" and not (kind == "wide-decimal" and version < 2)


def index_version(table, mdt_partition: str) -> int:
    """The partition's index version (the module doc): 1 or 2."""
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
    """The metadata partition's file groups on storage (base HFiles and log files), sorted."""
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


def _file_ranges(table, relative: str, columns: list[str]) -> list[ColumnRange]:
    """One base file's ranges of ``columns``, from its footer (cached, see :data:`_RANGES`)."""
    path = table.storage.path(relative)
    key = (path, tuple(columns))
    if key in _RANGES:
        _RANGES.move_to_end(key)
        return _RANGES[key]
    if table.storage.is_local:
        footer = pq.read_metadata(path)
    else:
        with table.storage.fs.open(path, "rb") as f:
            footer = pq.ParquetFile(f).metadata
    found = ranges_from_parquet(footer, posixpath.basename(relative), columns, where=relative)
    _RANGES[key] = found
    while len(_RANGES) > _RANGES_MAX:
        _RANGES.popitem(last=False)
    return found


def _spread(table, mdt_partition: str, records: Mapping[str, dict]) -> dict[tuple[str, str], dict[str, dict]]:
    if not records:
        return {}
    groups = file_group_ids(table, mdt_partition)
    out: dict[tuple[str, str], dict[str, dict]] = {}
    for key, record in records.items():
        out.setdefault((mdt_partition, groups[file_group_index(key, len(groups))]), {})[key] = record
    return out


def stats_blocks(table, state: MetadataTableState, metadata: CommitMetadata, options: Mapping, *,
                 timeline=None) -> dict[tuple[str, str], dict[str, dict]]:
    """``(metadata partition, file id) -> {HFile key: record}`` for the stats partitions the
    metadata table has, for a copy-on-write commit with ``metadata`` (its write stats and its
    writer schema); empty when it has neither. Call under the table lock, before the data
    instant completes (``timeline``: the timeline read under the lock)."""
    wanted = [p for p in STATS_PARTITIONS if p in state.partitions]
    if not wanted:
        return {}
    written = [s for s in metadata.write_stats() if s.path and s.path.endswith(".parquet")]
    versions = {p: index_version(table, p) for p in wanted}
    meta_fields = table.config.populates_meta_fields
    columns = {p: columns_to_index(metadata.schema, options, meta_fields=meta_fields, version=versions[p])
               for p in wanted}
    every = list(dict.fromkeys(c for cols in columns.values() for c in cols))
    new_ranges: dict[str, list[ColumnRange]] = {}
    for s in written:
        new_ranges.setdefault(s.partition_path, []).extend(_file_ranges(table, s.path, every))
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
        rewritten = metadata.mutated_file_groups()
        partitions = sorted({s.partition_path for s in written})
        view = FileSystemView(table, timeline, partitions=partitions)
        records = {}
        for partition in partitions:
            ranges = [r for r in new_ranges.get(partition, []) if r.column in cols]
            for sl in view.latest_file_slices(partition):
                if sl.file_group in rewritten:
                    continue
                ranges.extend(_file_ranges(table, sl.base_file.relative_path, cols))
            # tight-bound, as Java's when column_stats is there (isShouldScanColStatsForTightBound)
            records.update(partition_stats_records(partition, ranges,
                                                   index_version=versions[PARTITION_STATS_PARTITION],
                                                   tight_bound=COLUMN_STATS_PARTITION in state.partitions))
        blocks.update(_spread(table, PARTITION_STATS_PARTITION, records))
    return blocks


def clean_stats_blocks(table, state: MetadataTableState, deleted: Mapping[str, Iterable[str]], options: Mapping,
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
    columns = columns_to_index(schema, options, meta_fields=table.config.populates_meta_fields, version=version)
    records = {column_stats_key(partition, name, column): deleted_column_stats_record(name, column,
                                                                                      index_version=version)
               for partition, names in deleted.items() for name in names for column in columns}
    return _spread(table, COLUMN_STATS_PARTITION, records)


__all__ = ["STATS_PARTITIONS", "columns_to_index", "index_version", "file_group_ids", "stats_blocks",
           "clean_stats_blocks"]
