"""Catalog sync: the table in the Hive Metastore as Java's HiveSyncTool registers it, after
each commit of every engine and on demand (``hudi-occ sync``, the table-service operator).

What a sync does (docs/catalog-sync.md), for each catalog table of the Hudi table (copy-on-write:
``<t>``; merge-on-read: ``<t>_ro`` read-optimised, ``<t>_rt`` snapshot and, as Java 1.2 does,
``<t>`` as a snapshot too; ``skip_ro_suffix`` / ``table.strategy`` as Java reads them):

- creates it if absent: external table at the base path, Hudi's input format (realtime for the
  snapshot tables), parquet serde with ``path`` and ``hoodie.query.as.ro.table``, the columns
  of the latest commit's schema (Hudi's meta columns first) with the partition columns as
  partition keys, and the Spark data-source properties (``spark.sql.sources.provider=hudi``,
  the schema JSON in parts, the partition columns) that make Spark SQL read it through Hudi;
- evolves its columns and properties when the schema changed;
- adds the partitions written since ``last_commit_time_sync`` and drops those emptied since
  (``core/catalog/changes``: commit metadata of the instants after it, no listing per commit);
- moves ``last_commit_time_sync`` / ``last_commit_completion_time_sync`` forward.

Concurrency. A metastore's ``alter_table`` replaces the whole table (last writer wins), so two
writers syncing at once could move ``last_commit_time_sync`` back or drop a partition the other
just wrote. Each sync therefore holds the table's *sync lock* (the writers' lock provider under
its own key, so a slow metastore never holds a commit back), reads the timeline under it, and
writes only forward (each sync time the maximum of the catalog's and its own). Syncs of one
table are thus serialized, each on a timeline at least as new as the one before; a commit that
completes during a sync is in the next sync's window (requested after, or completed after, the
times written).

Failure. The sync runs after the commit completed: a metastore that is down raises
:class:`~airflow_hudi_occ.core.errors.CatalogSyncError` (the instant named, the data committed)
within the bounded timeouts, unless ``hoodie.datasource.hive_sync.ignore_exceptions``; the
catalog is untouched past what was applied, and the next sync starts again from
``last_commit_time_sync`` (partitions are added idempotently).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from urllib.parse import urlparse

from airflow_hudi_occ.core.catalog.changes import (SyncPoint, changes_since, live_partitions,
                                                   partition_values)
from airflow_hudi_occ.core.catalog.hive import HiveMetastore, thrift_api
from airflow_hudi_occ.core.catalog.schema import Column, spark_schema_json, table_columns
from airflow_hudi_occ.core.catalog.table_def import TableDef
from airflow_hudi_occ.core.concurrency.locks import table_lock_manager
from airflow_hudi_occ.core.config import MetaSyncConfig, SyncMode, SyncTableStrategy, WriteConfig
from airflow_hudi_occ.core.errors import CatalogSyncError, ConfigError, HudiOccError
from airflow_hudi_occ.core.table.table import MERGE_ON_READ

log = logging.getLogger(__name__)

#: the sync lock's key: beside the table's commit lock, never the same
SYNC_LOCK_KEY = "meta_sync"

INPUT_FORMAT = "org.apache.hudi.hadoop.HoodieParquetInputFormat"
REALTIME_INPUT_FORMAT = "org.apache.hudi.hadoop.realtime.HoodieParquetRealtimeInputFormat"
OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
SPARK_PROVIDER = "spark.sql.sources.provider"
RO_SUFFIX, RT_SUFFIX = "_ro", "_rt"
#: what Java's sync records as ``hudi_writer_version`` (its HoodieVersion): the Hudi release
#: whose table format and sync this project follows
HUDI_WRITER_VERSION = "1.2.0"
HUDI_WRITER_VERSION_KEY = "hudi_writer_version"


def same_path(a: str | None, b: str | None) -> bool:
    """Two locations naming one path, whatever their schemes and authorities (Java's
    ``FSUtils.comparePathsWithoutScheme``)."""
    strip = lambda p: urlparse(p or "").path.rstrip("/") if "://" in (p or "") or (p or "").startswith("file:") else (p or "").rstrip("/")  # noqa: E731
    return strip(a) == strip(b)


@dataclass(frozen=True)
class CatalogTable:
    """One catalog table of a Hudi table."""

    name: str
    #: the snapshot (realtime) input format: merge-on-read's ``_rt`` and its plain name
    realtime: bool
    #: Spark reads it read-optimised (``hoodie.query.as.ro.table``)
    read_optimized: bool


def catalog_tables(table_type: str, name: str, cfg: MetaSyncConfig) -> list[CatalogTable]:
    """The catalog tables Java's HiveSyncTool keeps for a table of ``table_type``."""
    if table_type != MERGE_ON_READ:
        return [CatalogTable(name, False, False)]
    if cfg.table_strategy is SyncTableStrategy.RO:
        return [CatalogTable(name, False, True)]
    if cfg.table_strategy is SyncTableStrategy.RT:
        return [CatalogTable(name, True, False)]
    out = [CatalogTable(name if cfg.skip_ro_suffix else name + RO_SUFFIX, False, True),
           CatalogTable(name + RT_SUFFIX, True, False)]
    if cfg.snapshot_with_table_name and not cfg.skip_ro_suffix:
        out.append(CatalogTable(name, True, False))
    return out


@dataclass
class SyncReport:
    """What one sync did, per catalog table; ``calls``: metastore calls made."""

    database: str
    tables: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    schema_changed: list[str] = field(default_factory=list)
    added: dict[str, list[str]] = field(default_factory=dict)
    dropped: dict[str, list[str]] = field(default_factory=dict)
    last_commit_time_sync: str | None = None
    last_commit_completion_time_sync: str | None = None
    full_listing: bool = False
    instants_read: int = 0
    calls: int = 0
    seconds: float = 0.0
    error: HudiOccError | None = None

    def to_json(self) -> dict:
        out = {k: v for k, v in vars(self).items() if k != "error"}
        if self.error is not None:
            out["error"] = self.error.to_dict()
        return out


# -- the table definition Java writes -------------------------------------------------------

def _partition_fields(table, cfg: MetaSyncConfig) -> list[str]:
    if cfg.partition_fields is not None:
        return list(cfg.partition_fields)
    return list(table.config.partition_fields)


def _extractor(table, cfg: MetaSyncConfig, fields: list[str]) -> str:
    """Java's inference (HoodieSyncConfig): none -> NonPartitioned; one field, hive-style ->
    HiveStyle; one field -> SinglePart; more -> MultiPartKeys."""
    if cfg.partition_extractor:
        return cfg.partition_extractor
    if not fields:
        return "org.apache.hudi.hive.NonPartitionedExtractor"
    if len(fields) == 1:
        return ("org.apache.hudi.hive.HiveStylePartitionValueExtractor" if table.config.hive_style_partitioning
                else "org.apache.hudi.hive.SinglePartPartitionValueExtractor")
    return "org.apache.hudi.hive.MultiPartKeysValueExtractor"


def _decode(table, cfg: MetaSyncConfig) -> bool:
    if cfg.decode_partition is not None:
        return cfg.decode_partition
    return str(table.config.get("hoodie.datasource.write.partitionpath.urlencode") or "").lower() == "true"


def _latest_schema(timeline) -> str | None:
    """The schema of the newest completed write that recorded one (TableSchemaResolver)."""
    for inst in reversed(timeline.completed_writes()):
        schema = timeline.commit_metadata(inst).schema
        if schema:
            return schema
    return None


def spark_table_properties(columns: list[Column], partition_fields: list[str],
                           cfg: MetaSyncConfig) -> dict[str, str]:
    """Java's ``SparkDataSourceTableUtils.getSparkTableProperties``: the data columns then the
    partition columns, as Spark's schema JSON cut into parts of at most the threshold."""
    data = [c for c in columns if c.name not in partition_fields]
    parts = [next(c for c in columns if c.name == p) for p in partition_fields if any(c.name == p for c in columns)]
    schema = spark_schema_json(data + parts)
    n = cfg.schema_length_threshold
    chunks = [schema[i:i + n] for i in range(0, len(schema), n)]
    props = {SPARK_PROVIDER: "hudi"}
    if cfg.spark_version:
        props["spark.sql.create.version"] = cfg.spark_version
    props["spark.sql.sources.schema.numParts"] = str(len(chunks))
    for i, chunk in enumerate(chunks):
        props[f"spark.sql.sources.schema.part.{i}"] = chunk
    if partition_fields:
        props["spark.sql.sources.schema.numPartCols"] = str(len(partition_fields))
        for i, p in enumerate(partition_fields):
            props[f"spark.sql.sources.schema.partCol.{i}"] = p
    return props


class CatalogSync:
    """One sync of one Hudi table to one catalog (``client``: :class:`HiveMetastore` or
    ``core/catalog/glue.GlueCatalog``, which speak :class:`TableDef`)."""

    def __init__(self, table, config: WriteConfig, cfg: MetaSyncConfig, client, *, lock_manager=None):
        self.table = table
        self.config = config
        self.cfg = cfg
        self.lock_manager = lock_manager
        self.client = client
        self.db = cfg.database
        self.name = cfg.table or table.name
        self.fields = _partition_fields(table, cfg)
        self.extractor = _extractor(table, cfg, self.fields)
        self.decode = _decode(table, cfg)
        self.location = table.base_uri.rstrip("/")

    # -- definitions ------------------------------------------------------------------------

    def _columns(self, columns: list[Column]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        data = [(c.name.lower(), c.hive_type) for c in columns if c.name not in self.fields]
        by_name = {c.name: c for c in columns}
        keys = [(p.lower(), by_name[p].hive_type if p in by_name else "string") for p in self.fields]
        return data, keys

    def _serde_params(self, ct: CatalogTable) -> dict[str, str]:
        params = {"serialization.format": "1", **self.cfg.serde_properties}
        if self.cfg.as_datasource:
            params.update({"hoodie.query.as.ro.table": str(ct.read_optimized).lower(), "path": self.location})
        return params

    def _table_params(self, columns: list[Column]) -> dict[str, str]:
        params = dict(self.cfg.table_properties)
        if self.cfg.as_datasource:
            params.update(spark_table_properties(columns, self.fields, self.cfg))
        return params

    def _new_table(self, ct: CatalogTable, columns: list[Column]) -> TableDef:
        data, keys = self._columns(columns)
        params = self._table_params(columns)
        if not self.cfg.managed_table:
            params["EXTERNAL"] = "TRUE"
        return TableDef(ct.name, data, keys, self.location,
                        REALTIME_INPUT_FORMAT if ct.realtime else INPUT_FORMAT, OUTPUT_FORMAT, SERDE,
                        self._serde_params(ct), params,
                        "MANAGED_TABLE" if self.cfg.managed_table else "EXTERNAL_TABLE")

    def _partition_location(self, path: str) -> str:
        return f"{self.location}/{path}" if path else self.location

    # -- the sync ----------------------------------------------------------------------------

    def run(self) -> SyncReport:
        t0 = time.monotonic()
        report = SyncReport(self.db)
        lm = self.lock_manager or table_lock_manager(self.table, self.config, lock_key=SYNC_LOCK_KEY)
        try:
            calls0 = self.client.calls
            if self.cfg.auto_create_database:
                self.client.ensure_database(self.db)
            with lm.locked():
                self._sync_locked(report)
            report.calls = self.client.calls - calls0
        finally:
            if self.lock_manager is None:
                lm.close()
        report.seconds = round(time.monotonic() - t0, 3)
        return report

    def _sync_locked(self, report: SyncReport) -> None:
        timeline = self.table.timeline()
        schema_json = _latest_schema(timeline)
        if schema_json is None:
            log.info("catalog sync of %s: no completed write yet, nothing to register", self.table.base_uri)
            return
        columns = table_columns(schema_json, with_meta_fields=not self.cfg.omit_metadata_fields,
                                support_timestamp=self.cfg.support_timestamp)
        for ct in catalog_tables(self.table.config.table_type, self.name, self.cfg):
            self._sync_one(ct, timeline, columns, report)

    def _sync_one(self, ct: CatalogTable, timeline, columns: list[Column], report: SyncReport) -> None:
        client, db = self.client, self.db
        report.tables.append(ct.name)
        existing = client.get_table(db, ct.name)
        if existing is None:
            if client.create_table(db, self._new_table(ct, columns)):
                report.created.append(ct.name)
            # else a sync not under our lock (Java's) made it meanwhile
            existing = client.get_table(db, ct.name)
        since = SyncPoint.of(existing.params)
        changes = changes_since(self.table, timeline, since, incremental=self.cfg.incremental)
        report.full_listing = report.full_listing or changes.full
        report.instants_read += changes.instants_read
        added, dropped = self._sync_partitions(existing, changes, timeline)
        if added:
            report.added[ct.name] = added
        if dropped:
            report.dropped[ct.name] = dropped
        # The table itself last, on a fresh read: an update replaces the whole table.
        current = client.get_table(db, ct.name)
        stored = SyncPoint.of(current.params)
        reached = changes.reached.later(stored)
        changed = self._evolve(current, ct, columns, newer=changes.reached.key() >= stored.key())
        if changed:
            report.schema_changed.append(ct.name)
        if self.cfg.conditional and not (changed or added or dropped or ct.name in report.created):
            return
        current.params = {**current.params, **reached.params(), HUDI_WRITER_VERSION_KEY: HUDI_WRITER_VERSION}
        client.alter_table(db, current, cascade=changed and bool(self.fields))
        report.last_commit_time_sync = reached.commit_time
        report.last_commit_completion_time_sync = reached.completion_time

    def _evolve(self, current: TableDef, ct: CatalogTable, columns: list[Column], *, newer: bool) -> bool:
        """Bring the table's columns, formats and properties to this sync's; only when this
        sync's timeline is at least as new as the one the catalog was last synced from (an
        older schema never replaces a newer one)."""
        if not newer:
            return False
        data, keys = self._columns(columns)
        if current.partition_keys != keys:
            raise CatalogSyncError(
                f"{self.db}.{ct.name} is partitioned by {[k for k, _ in current.partition_keys]} "
                f"in the catalog but the table by {self.fields}", table=self.table.base_uri,
                catalog=self.cfg.metastore_uris if self.cfg.mode is SyncMode.HMS else "glue",
                remedy=f"drop {self.db}.{ct.name} from the catalog (its data stays) and sync again, or "
                       "set hoodie.datasource.hive_sync.partition_fields to the catalog's")
        want_input = REALTIME_INPUT_FORMAT if ct.realtime else INPUT_FORMAT
        want_params = {k: v for k, v in current.params.items() if not k.startswith("spark.sql.sources.schema.")}
        want_params.update(self._table_params(columns))
        # the metastore qualifies a location (file:/...): the same path without its scheme is the same
        location = current.location if same_path(current.location, self.location) else self.location
        want = (data, want_input, location, {**current.serde_params, **self._serde_params(ct)}, want_params)
        have = (current.columns, current.input_format, current.location, current.serde_params, current.params)
        if want == have:
            return False
        (current.columns, current.input_format, current.location, current.serde_params,
         current.params) = want
        return True

    def _sync_partitions(self, tdef: TableDef, changes, timeline) -> tuple[list[str], list[str]]:
        if not self.fields:
            return [], []
        client, db = self.client, self.db
        empty = changes.drop_candidates - live_partitions(self.table, timeline, changes.drop_candidates)
        values = lambda p: tuple(partition_values(p, self.fields, self.extractor, self.decode))  # noqa: E731
        if changes.full:
            # First sync, or the last one is older than the active timeline: compare with
            # everything the catalog holds (Java's syncAllPartitions).
            have = set(client.partition_values(db, tdef.name))
            on_storage = {values(p): p for p in changes.written if p not in empty}
            to_add = sorted(p for v, p in on_storage.items() if v not in have)
            to_drop = [v for v in sorted(have) if v not in on_storage]
        else:
            to_add = sorted(p for p in changes.written if p not in empty)
            to_drop = [values(p) for p in sorted(empty)]
        for i in range(0, len(to_add), self.cfg.batch_num):
            client.add_partitions(db, tdef, [(list(values(p)), self._partition_location(p))
                                             for p in to_add[i:i + self.cfg.batch_num]])
        dropped = client.drop_partitions(db, tdef.name, [list(v) for v in to_drop])
        return to_add, ["/".join(v) for v in dropped]


# -- entry points ----------------------------------------------------------------------------

def sync_table(table, config: WriteConfig | None = None, *, options=None, lock_manager=None,
               committed_instant: str | None = None, force: bool = False) -> SyncReport | None:
    """Sync ``table`` to the catalog its options name; None when sync is off (and not
    ``force``d, as ``hudi-occ sync`` does). Raises :class:`CatalogSyncError` (naming
    ``committed_instant``) unless ``hoodie.datasource.hive_sync.ignore_exceptions``, when the
    report carries the error instead."""
    config = config or WriteConfig.from_options(options or {})
    cfg = config.meta_sync
    if not (cfg.enabled or force):
        return None
    where = "glue" if cfg.mode is SyncMode.GLUE else cfg.metastore_uris
    try:
        with _client(cfg) as client:
            report = CatalogSync(table, config, cfg, client, lock_manager=lock_manager).run()
    except ConfigError:
        raise
    except CatalogSyncError as e:
        done = (f"the commit {committed_instant} is in the table (nothing to rewrite); "
                if committed_instant and not e.committed_instant else "")
        err = type(e)(e.message, table=e.table or table.base_uri, catalog=e.catalog or where,
                      committed_instant=committed_instant or e.committed_instant, cause=e.cause,
                      remedy=done + e.remedy)
        err.__cause__ = e
        return _failed(cfg, err, where)
    except Exception as e:  # noqa: BLE001 - the metastore's own exceptions (MetaException, ...)
        err = CatalogSyncError(f"catalog sync of {table.base_uri} to {where} failed: {type(e).__name__}: {e}",
                               table=table.base_uri, catalog=where, committed_instant=committed_instant,
                               cause=f"{type(e).__name__}: {e}")
        err.__cause__ = e
        return _failed(cfg, err, where)
    log.info("catalog sync of %s to %s: %s", table.base_uri, where, report.to_json())
    return report


def _client(cfg: MetaSyncConfig):
    if cfg.mode is SyncMode.GLUE:
        from airflow_hudi_occ.core.catalog.glue import GlueCatalog
        return GlueCatalog(cfg)
    return HiveMetastore(cfg.metastore_uris, timeout_ms=cfg.timeout_ms)


def _failed(cfg: MetaSyncConfig, err: CatalogSyncError, where: str) -> SyncReport:
    if cfg.ignore_exceptions:
        log.error("catalog sync failed (hoodie.datasource.hive_sync.ignore_exceptions=true): %s", err)
        return SyncReport(cfg.database, error=err)
    raise err


def check_sync_client(config: WriteConfig) -> None:
    """Before an instant exists: a sync asked for whose client library is missing is refused
    (:class:`~airflow_hudi_occ.core.errors.CatalogClientMissingError` naming the extra), not
    found after the commit."""
    cfg = config.meta_sync
    if cfg.enabled and cfg.mode is SyncMode.HMS:
        thrift_api()
    elif cfg.enabled:
        from airflow_hudi_occ.core.catalog.glue import GlueCatalog
        GlueCatalog.check_client()


def sync_after_commit(table, config: WriteConfig, instant: str | None) -> SyncReport | None:
    """What every engine runs after a commit completed (``core/commit/pipeline``,
    ``core/services/scheduled``, clean): the sync when the options ask for one."""
    return sync_table(table, config, committed_instant=instant)


__all__ = ["sync_table", "sync_after_commit", "check_sync_client", "SyncReport", "CatalogSync", "CatalogTable", "catalog_tables",
           "spark_table_properties", "SYNC_LOCK_KEY"]
