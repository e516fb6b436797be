"""A Hudi table (copy-on-write or merge-on-read, versions 8 and 9) on storage: ``hoodie.properties`` and the table's folders.

The project writes table versions 8 (Hudi 1.0.x) and 9 (Hudi 1.1+): both use timeline layout
2, Avro metadata and completion times, and differ only in table properties (v9 names the
ordering field ``hoodie.table.ordering.fields`` and moves the payload class aside; see
:mod:`.table_version`). It reads versions 6, 8 and 9 (Java Hudi's fixtures among them). Writing
a v6 table is refused with :class:`UnsupportedTableVersionError`: its JSON commits and older
timeline layout are not written here. A table with Hudi's metadata table is handled by
:mod:`.metadata_table` before anything is written.

``hoodie.properties`` is Java's ``Properties`` text format (``\\:`` escapes, ``#`` comments),
parsed and rendered by :mod:`airflow_hudi_occ.core.format.properties` and written with
create-if-absent, so two processes creating the same table cannot both succeed.
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from airflow_hudi_occ.core.errors import (CorruptMetadataError, TableExistsError,
                                          TableLocationNotADirectoryError,
                                          TableLocationNotEmptyError, TableNotFoundError,
                                          UnsupportedTableVersionError)
from airflow_hudi_occ.core.format.layout import META_FOLDER, PARTITION_METADATA_FILE, PROPERTIES_FILE
from airflow_hudi_occ.core.format.properties import parse_properties, render_properties, table_checksum
from airflow_hudi_occ.core.format.partition_path import URL_ENCODE_KEY
from airflow_hudi_occ.core.format.storage import Storage
from airflow_hudi_occ.core.format.versioned import current_version, read_versioned, supports_versioned_writes
from airflow_hudi_occ.core.config import PAYLOAD_MERGE_MODES, RecordMergeMode
from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.table.metadata_table import METADATA_FOLDER, metadata_table_state
from airflow_hudi_occ.core.table.timeline import PinnedTimeline, Timeline

log = logging.getLogger(__name__)

READABLE_VERSIONS = (6, 8, 9)
#: ``hoodie.table.type`` values; both are written at versions 8 and 9 (docs/merge-on-read.md: a
#: version 9 merge-on-read table differs from version 8 in its properties only)
COPY_ON_WRITE = "COPY_ON_WRITE"
MERGE_ON_READ = "MERGE_ON_READ"
TABLE_TYPES = (COPY_ON_WRITE, MERGE_ON_READ)
WRITABLE_VERSIONS = (8, 9)
#: the version of a new table unless ``hoodie.write.table.version`` says otherwise: the widest
#: audience (Hudi 1.0.x readers do not open version 9)
WRITABLE_VERSION = 8
#: Java's ``HoodieTableConfig`` writes this copy before it replaces ``hoodie.properties`` and
#: reads it when ``hoodie.properties`` is missing
PROPERTIES_BACKUP_FILE = PROPERTIES_FILE + ".backup"


# --- table config ---------------------------------------------------------------------------


#: Hudi 0.14+ generates record keys for an append-only table created without a record key
#: field; this library does not (every writer and service here merges and tags by key), so
#: such a table is refused by every entry point with these words.
NO_RECORD_KEY_MESSAGE = ("a table needs at least one record key field: Hudi's auto-generated "
                         "record keys (a table created without "
                         "hoodie.datasource.write.recordkey.field) are not supported")
NO_RECORD_KEY_REMEDY = ("set hoodie.datasource.write.recordkey.field to the column(s) that "
                        "identify a row; for append-only data without one, add a unique id "
                        "column (e.g. a UUID) and key the table by it")


@dataclass(frozen=True)
class TableConfig:
    """The typed view of ``hoodie.properties`` (unknown keys are kept in ``properties``)."""

    properties: dict[str, str] = field(default_factory=dict)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.properties.get(key, default)

    @property
    def name(self) -> str:
        return self.properties.get("hoodie.table.name", "")

    @property
    def table_type(self) -> str:
        return self.properties.get("hoodie.table.type", "COPY_ON_WRITE")

    @property
    def version(self) -> int:
        try:
            return int(self.properties.get("hoodie.table.version", "0"))
        except ValueError:
            return -1

    @property
    def layout_version(self) -> int:
        raw = self.properties.get("hoodie.timeline.layout.version")
        if raw is None:
            return 2 if self.version >= 8 else 1
        return int(raw)

    @property
    def timeline_folder(self) -> str:
        if self.layout_version >= 2:
            return posixpath.join(META_FOLDER, self.properties.get("hoodie.timeline.path", "timeline"))
        return META_FOLDER

    @property
    def partition_fields(self) -> list[str]:
        raw = self.properties.get("hoodie.table.partition.fields", "")
        return [f.strip() for f in raw.split(",") if f.strip()]

    @property
    def record_key_fields(self) -> list[str]:
        raw = self.properties.get("hoodie.table.recordkey.fields", "")
        return [f.strip() for f in raw.split(",") if f.strip()]

    @property
    def precombine_field(self) -> str | None:
        return (self.properties.get("hoodie.table.precombine.field")
                or self.properties.get("hoodie.table.ordering.fields") or None)

    @property
    def merge_mode(self) -> RecordMergeMode:
        """How the table's records merge: ``hoodie.record.merge.mode`` as the table records it;
        a table without it (created before Hudi 1.0) by its payload class, else by whether it
        has an ordering field, as Hudi infers it. A mode this project does not implement
        (CUSTOM) is refused, naming the table."""
        raw = (self.properties.get("hoodie.record.merge.mode") or "").strip().upper()
        if raw:
            try:
                return RecordMergeMode(raw)
            except ValueError:
                raise ConfigError(
                    f"table {self.name} merges its records with hoodie.record.merge.mode={raw}, "
                    "which this project does not implement", key="hoodie.record.merge.mode", value=raw,
                    remedy="write this table with Java Hudi (HudiJavaWriteOperator, docs/java-engine.md)"
                ) from None
        payload = (self.properties.get("hoodie.compaction.payload.class")
                   or self.properties.get("hoodie.table.legacy.payload.class") or "").strip()
        if payload in PAYLOAD_MERGE_MODES:
            return PAYLOAD_MERGE_MODES[payload]
        return (RecordMergeMode.EVENT_TIME_ORDERING if self.precombine_field
                else RecordMergeMode.COMMIT_TIME_ORDERING)

    @property
    def ordering_field(self) -> str | None:
        """The field merges compare (core/commit/merge.py): the precombine (ordering) field
        under EVENT_TIME_ORDERING; None under COMMIT_TIME_ORDERING, where the later write wins
        whatever the field holds."""
        if self.merge_mode is RecordMergeMode.COMMIT_TIME_ORDERING:
            return None
        return self.precombine_field

    @property
    def populates_meta_fields(self) -> bool:
        """False for a table with *virtual keys* (``hoodie.populate.meta.fields=false``): its
        base files hold the user's columns only, and the record key is computed from the key
        fields on read. Hudi's answer to the cost of the five meta columns, which roughly
        double the bytes a narrow table writes."""
        return self.properties.get("hoodie.populate.meta.fields", "true").strip().lower() != "false"

    @property
    def hive_style_partitioning(self) -> bool:
        return self.properties.get("hoodie.datasource.write.hive_style_partitioning", "false").lower() == "true"

    @property
    def url_encode_partitions(self) -> bool:
        """``hoodie.datasource.write.partitionpath.urlencode``: partition values escaped as
        Hudi's ``escapePathName`` does (``core/format/partition_path``)."""
        return self.properties.get(URL_ENCODE_KEY, "false").lower() == "true"

    @property
    def base_file_format(self) -> str:
        return self.properties.get("hoodie.table.base.file.format", "PARQUET")

    @property
    def bucket_num(self) -> int | None:
        raw = self.properties.get("hoodie.bucket.index.num.buckets")
        return int(raw) if raw else None

    @classmethod
    def for_new_table(cls, table_name: str, *, record_key_fields: Iterable[str],
                      partition_fields: Iterable[str] = (), precombine_field: str | None = None,
                      hive_style_partitioning: bool = False, database: str = "default",
                      create_schema: str | None = None, version: int = WRITABLE_VERSION,
                      extra: Mapping[str, Any] | None = None,
                      table_type: str = COPY_ON_WRITE,
                      url_encode_partitions: bool = False) -> "TableConfig":
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", table_name or ""):
            raise ConfigError(f"invalid table name {table_name!r}", key="hoodie.table.name",
                              value=table_name,
                              remedy="use letters, digits and underscores, starting with a letter")
        if table_type not in TABLE_TYPES:
            raise ConfigError(f"unknown table type {table_type!r}", key="hoodie.table.type",
                              value=table_type, remedy=f"use one of {TABLE_TYPES}")
        if version not in WRITABLE_VERSIONS:
            raise ConfigError(f"tables are created at version {' or '.join(map(str, WRITABLE_VERSIONS))}, "
                              f"not {version}", key="hoodie.table.version", value=str(version),
                              remedy="create the table at version 8 (the default) or 9")
        keys = [k for k in record_key_fields]
        if (table_type == MERGE_ON_READ and str((extra or {}).get("hoodie.populate.meta.fields", "true")).lower()
                == "false"):
            raise ConfigError("merge-on-read tables are written with their meta fields",
                              key="hoodie.populate.meta.fields", value="false",
                              remedy="leave hoodie.populate.meta.fields at true for a merge-on-read "
                                     "table (log records are merged by _hoodie_record_key)")
        if not keys:
            raise ConfigError(NO_RECORD_KEY_MESSAGE, key="hoodie.datasource.write.recordkey.field",
                              remedy=NO_RECORD_KEY_REMEDY)
        parts = list(partition_fields)
        p = {
            "hoodie.table.name": table_name,
            "hoodie.database.name": database,
            "hoodie.table.type": table_type,
            "hoodie.table.version": str(version),
            "hoodie.table.initial.version": str(version),
            "hoodie.timeline.layout.version": "2",
            "hoodie.timeline.path": "timeline",
            "hoodie.timeline.history.path": "history",
            "hoodie.archivelog.folder": "archived",
            "hoodie.table.recordkey.fields": ",".join(keys),
            "hoodie.table.base.file.format": "PARQUET",
            "hoodie.table.keygenerator.type": "COMPLEX" if len(keys) > 1 or len(parts) > 1 else (
                "SIMPLE" if parts else "NON_PARTITION"),
            "hoodie.datasource.write.hive_style_partitioning": str(hive_style_partitioning).lower(),
            URL_ENCODE_KEY: str(url_encode_partitions).lower(),
            "hoodie.datasource.write.drop.partition.columns": "false",
            "hoodie.record.merge.mode": "EVENT_TIME_ORDERING" if precombine_field else "COMMIT_TIME_ORDERING",
            "hoodie.table.checksum": str(table_checksum(table_name, database)),
        }
        if parts:
            p["hoodie.table.partition.fields"] = ",".join(parts)
        if precombine_field:
            # version 9 renamed the table's precombine field to its ordering fields
            p["hoodie.table.ordering.fields" if version >= 9 else "hoodie.table.precombine.field"] = \
                precombine_field
        if version >= 9:
            p["hoodie.table.format"] = "native"
        if create_schema:
            p["hoodie.table.create.schema"] = create_schema
        for k, v in (extra or {}).items():
            p[k] = str(v)
        return cls(p)


# --- the table -----------------------------------------------------------------------------


def properties_problem(data: bytes) -> tuple[dict[str, str], str | None]:
    """The properties in ``data`` (a ``hoodie.properties``), and why they cannot be a table's,
    or None: not text, empty, no table name or version, or a ``hoodie.table.checksum`` that
    does not match the name (Java's reader refuses that one and reads the backup instead; a
    file without a checksum is accepted, as Java accepts it)."""
    if not data.strip():
        return {}, f"it is empty ({len(data)} bytes)"
    try:
        props = parse_properties(data.decode("utf-8"))
    except UnicodeDecodeError:
        return {}, "it is not text"
    if "hoodie.table.name" not in props or "hoodie.table.version" not in props:
        return props, "it lacks hoodie.table.name or hoodie.table.version"
    checksum = props.get("hoodie.table.checksum")
    if checksum is not None:
        expected = table_checksum(props["hoodie.table.name"], props.get("hoodie.database.name"))
        if checksum.strip() != str(expected):
            return props, (f"its hoodie.table.checksum {checksum!r} is not the checksum of its "
                           f"table name ({expected})")
    return props, None


def read_properties(storage: Storage) -> dict[str, str]:
    """``hoodie.properties`` of the table at ``storage``, or its backup when the file is
    missing or unusable (:func:`properties_problem`), as Java's reader (``fetchConfigs``)
    does: a writer that died while replacing the file leaves the backup, and a 0-byte or
    half-written file beside it. Nothing is changed here; a writer restores the file under
    the table lock (:meth:`Table.recover_properties`)."""
    path = storage.path(META_FOLDER, PROPERTIES_FILE)
    backup = storage.path(META_FOLDER, PROPERTIES_BACKUP_FILE)
    problems: dict[str, str] = {}
    for candidate in (path, backup):
        try:
            data = storage.read(candidate)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            continue
        props, problem = properties_problem(data)
        if problem is None:
            if problems:
                log.warning("%s cannot be used (%s): reading its backup %s (a writer stopped "
                            "while replacing it; the next write restores it)", path,
                            problems[path], backup)
            return props
        problems[candidate] = problem
    if not problems:
        raise TableNotFoundError(f"no Hudi table at {storage.base_uri!r}: {path!r} is missing",
                                 base_path=storage.base_uri)
    bad = path if path in problems else backup
    if backup in problems and path in problems:
        also = f"; its backup {backup} cannot be used either ({problems[backup]})"
    elif path in problems:
        also = f"; there is no {PROPERTIES_BACKUP_FILE} beside it"
    else:
        also = f" (the backup of {path}, which is missing)"
    raise CorruptMetadataError(
        f"hoodie.properties at {bad} cannot be read as a table's properties: {problems[bad]}{also}",
        path=bad, base_path=storage.base_uri,
        remedy=f"restore {path} from a copy of the table (a backup of its .hoodie folder, or "
               "the same file of a copy of the table); the table cannot be opened until then. "
               "Nothing was changed")


def check_new_table_location(storage: Storage) -> None:
    """Refuse to create a table in a folder that holds anything but a ``.hoodie`` folder.

    A table created over plain parquet files would list them as part of no file group: Hudi
    readers show them as stray data (or fail), and nothing of ours would ever clean them.
    Raises ``FileExistsError`` when the folder already is a Hudi table (the caller opens it)
    and :class:`TableLocationNotEmptyError` naming the folder and some of its entries.

    The listing comes before the check for ``hoodie.properties``: a concurrent creator
    writes that file before any data, so data seen in the listing implies the table exists
    by the time of the check, and two writers racing to create one table both succeed.
    """
    entries = sorted(n for n in storage.list_names(storage.path()) if n != META_FOLDER)
    if storage.exists(storage.path(META_FOLDER, PROPERTIES_FILE)):
        raise FileExistsError(storage.path(META_FOLDER, PROPERTIES_FILE))
    if entries:
        shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
        raise TableLocationNotEmptyError(
            f"{storage.base_uri!r} is not a Hudi table and not empty ({len(entries)} entr"
            f"{'y' if len(entries) == 1 else 'ies'}: {shown}); a table created there would "
            "show those files to every Hudi reader as stray data", base_path=storage.base_uri,
            entries=entries[:20],
            remedy="write the table to a new or empty path; to make existing parquet files a "
                   "Hudi table, write them through the operator or the Spark engine as the "
                   "source of a bulk_insert into a new path")


class Table:
    """A table at a base path. Cheap to construct; the timeline is loaded on demand."""

    def __init__(self, storage: Storage, config: TableConfig):
        self.storage = storage
        self.config = config
        #: what identifies the hoodie.properties last read by reload_config (None: unknown)
        self._properties_key = None
        #: the timeline kept for a critical section (timeline_pinned), else None
        self._pinned: PinnedTimeline | None = None
        #: values derived from hoodie.properties, for the properties version in [0] (derived)
        self._derived: tuple[Any, dict[str, Any]] = (None, {})

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def open(cls, base_uri: str, storage_options: dict | None = None, **storage_kw) -> "Table":
        storage = Storage(base_uri, storage_options, **storage_kw)
        config = TableConfig(read_properties(storage))
        if config.version not in READABLE_VERSIONS:
            raise UnsupportedTableVersionError(
                f"table {config.name} at {storage.base_uri} has version "
                f"{config.get('hoodie.table.version')}; readable versions are {READABLE_VERSIONS}",
                base_path=storage.base_uri, version=config.version,
                remedy="upgrade or downgrade the table with Hudi's upgrade tool to version 8 or 9")
        if config.table_type not in TABLE_TYPES:
            raise UnsupportedTableVersionError(
                f"table {config.name} has type {config.table_type}; known types are {TABLE_TYPES}",
                base_path=storage.base_uri, version=config.version,
                remedy="check hoodie.table.type in hoodie.properties")
        return cls(storage, config)

    @classmethod
    def create(cls, base_uri: str, table_name: str, *, record_key_fields: Iterable[str],
               partition_fields: Iterable[str] = (), precombine_field: str | None = None,
               hive_style_partitioning: bool = False, storage_options: dict | None = None,
               extra_properties: Mapping[str, Any] | None = None, exist_ok: bool = False,
               version: int | None = None, table_type: str = COPY_ON_WRITE,
               url_encode_partitions: bool = False, **storage_kw) -> "Table":
        """A new table. ``url_encode_partitions`` is Hudi's
        ``hoodie.datasource.write.partitionpath.urlencode`` (a table property: every writer
        of the table must spell its partition paths alike, so it is fixed at creation)."""
        config = TableConfig.for_new_table(
            table_name, record_key_fields=record_key_fields, partition_fields=partition_fields,
            precombine_field=precombine_field, hive_style_partitioning=hive_style_partitioning,
            version=version or WRITABLE_VERSION, extra=extra_properties, table_type=table_type,
            url_encode_partitions=url_encode_partitions)
        storage = Storage(base_uri, storage_options, **storage_kw)
        path = storage.path(META_FOLDER, PROPERTIES_FILE)
        if storage.exists(storage.path()) and not storage.isdir(storage.path()):
            raise TableLocationNotADirectoryError(
                f"cannot create a table at {storage.base_uri}: it is a file, not a folder",
                base_path=storage.base_uri)
        try:
            check_new_table_location(storage)
            storage.create_if_absent(path, render_properties(config.properties).encode("utf-8"))
        except FileExistsError:
            if exist_ok:
                table = cls.open(base_uri, storage_options, **storage_kw)
                want = (list(record_key_fields), list(partition_fields))
                have = (table.config.record_key_fields, table.config.partition_fields)
                if want != have:
                    raise TableExistsError(
                        f"table at {storage.base_uri!r} exists with record keys {have[0]} and "
                        f"partition fields {have[1]}, not {want[0]} and {want[1]}",
                        base_path=storage.base_uri) from None
                return table
            raise TableExistsError(f"a Hudi table already exists at {storage.base_uri!r}",
                                   base_path=storage.base_uri) from None
        for folder in (config.timeline_folder, posixpath.join(config.timeline_folder, "history"),
                       posixpath.join(META_FOLDER, ".temp"), posixpath.join(META_FOLDER, ".heartbeat")):
            storage.makedirs(storage.path(folder))
        return cls(storage, config)

    # -- facts -------------------------------------------------------------------------------

    @property
    def base_uri(self) -> str:
        return self.storage.base_uri

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def version(self) -> int:
        return self.config.version

    def require_meta_fields(self, what: str) -> None:
        """Refuse a writer or service that would write meta columns into a table with virtual
        keys: one file group would mix files with and without them."""
        if not self.config.populates_meta_fields:
            raise ConfigError(
                f"table {self.name} has virtual keys (hoodie.populate.meta.fields=false); {what} "
                "writes Hudi's meta columns and would mix them into its files",
                key="hoodie.populate.meta.fields", value="false",
                remedy="write this table with the core ArrowTableWriter, which keeps virtual keys, "
                       "or use a table with hoodie.populate.meta.fields=true")

    def require_writable(self) -> None:
        if self.config.version not in WRITABLE_VERSIONS:
            raise UnsupportedTableVersionError(
                f"table {self.name} has version {self.config.version}; this writer writes "
                f"versions {' and '.join(map(str, WRITABLE_VERSIONS))}",
                base_path=self.base_uri, version=self.config.version,
                remedy="read it, or upgrade it to version 8 or 9 with Hudi's upgrade tool first")

    def reload_config(self) -> TableConfig:
        """Re-read ``hoodie.properties`` (another writer may have upgraded the table or given it
        a metadata table since this object was opened); the table object then uses it.
        Locally an unchanged file (same inode, size and mtime: every change replaces it by a
        rename) is not parsed again; on S3 the file is read with its ETag (one GET). Either
        is remembered, so :meth:`properties_unchanged` can confirm later, under the table
        lock, that the file is still the one read here."""
        path = self.storage.path(META_FOLDER, PROPERTIES_FILE)
        key = None
        if self.storage.is_local:
            try:
                st = os.stat(path)
                key = (st.st_ino, st.st_size, st.st_mtime_ns)
            except OSError:
                key = None
            if key is not None and key == self._properties_key:
                return self.config
            props = read_properties(self.storage)
        elif supports_versioned_writes(self.storage):
            try:
                data, key = self.storage.run(path, read_versioned)
                props, problem = properties_problem(data)
            except FileNotFoundError:
                problem = "it is missing"
            if problem is not None:  # the backup, as Java's reader falls back to it
                key, props = None, read_properties(self.storage)
        else:
            props = read_properties(self.storage)
        if key is not None and self.storage.is_local:
            # the file read may have been the backup (the main one unusable): no key then
            key = key if properties_problem(self.storage.read(path))[1] is None else None
        self.config = TableConfig(props)
        self._properties_key = key
        return self.config

    @property
    def properties_version(self):
        """What identifies the ``hoodie.properties`` :meth:`reload_config` last read; None when
        unknown (not read yet, read from the backup, or a store that cannot tell)."""
        return self._properties_key

    def properties_unchanged(self) -> bool:
        """Whether ``hoodie.properties`` is still the file :meth:`reload_config` last read (not
        its backup): locally one ``stat``, on S3 one HEAD (its ETag). False when the storage
        cannot tell, or when the last read fell back to the backup. How a writer confirms under
        the table lock what it judged before taking it (:mod:`.write_guard`)."""
        if self._properties_key is None:
            return False
        path = self.storage.path(META_FOLDER, PROPERTIES_FILE)
        if self.storage.is_local:
            try:
                st = os.stat(path)
            except OSError:
                return False
            return (st.st_ino, st.st_size, st.st_mtime_ns) == self._properties_key
        return self.storage.run(path, current_version) == self._properties_key

    def recover_properties(self) -> None:
        """Finish a properties change a dead writer left (as Java's ``recoverIfNeeded``): with
        a usable file there the replacement happened and the backup goes; with the file
        missing or unusable (:func:`properties_problem`: a 0-byte or half-written file) the
        backup is copied over it first. A backup that is unusable too is left as it is and
        the table refused (:class:`CorruptMetadataError` naming both). The caller holds the
        table lock."""
        backup = self.storage.path(META_FOLDER, PROPERTIES_BACKUP_FILE)
        if not self.storage.exists(backup):
            return
        main = self.storage.path(META_FOLDER, PROPERTIES_FILE)
        try:
            problem = properties_problem(self.storage.read(main))[1]
        except FileNotFoundError:
            problem = "it is missing"
        if problem is not None:
            data = self.storage.read(backup)
            if properties_problem(data)[1] is not None:
                read_properties(self.storage)  # raises, naming both files and the remedy
            log.warning("restoring %s from its backup %s (%s)", main, backup, problem)
            self._drop_hadoop_checksum(PROPERTIES_FILE)
            self.storage.write(main, data)
        self.storage.delete(backup)
        self._drop_hadoop_checksum(PROPERTIES_BACKUP_FILE)

    def _drop_hadoop_checksum(self, name: str) -> None:
        """Delete ``.hoodie/.<name>.crc``, the checksum Hadoop's local file system keeps beside
        each file Java Hudi writes on a local disk. Java verifies it on every read, so a file
        we replace under a checksum of the old bytes is unreadable to Java (``ChecksumException``:
        "Could not load Hoodie properties", the table unreadable). Without a ``.crc`` Java reads
        unchecked, as it reads every file we write. Object stores have no such files."""
        if self.storage.is_local:
            self.storage.delete(self.storage.path(META_FOLDER, f".{name}.crc"))

    def update_properties(self, updates: Mapping[str, str], removals: Iterable[str] = ()) -> TableConfig:
        """Change ``hoodie.properties``; the caller holds the table lock.

        The order is Java's (``HoodieTableConfig.modify``): a backup copy first, then the file
        replaced whole, then the backup removed, so a reader finds a complete file at every
        moment: the old one, the backup (which Java and :func:`read_properties` fall back
        to), or the new one. The checksum covers name and database only, which never change.
        """
        current = read_properties(self.storage)
        new = {k: v for k, v in current.items() if k not in set(removals)}
        new.update({k: str(v) for k, v in updates.items()})
        backup = self.storage.path(META_FOLDER, PROPERTIES_BACKUP_FILE)
        # Before the backup exists: until the new file is in place Java reads the old one or
        # the backup, and neither may be judged by a checksum of other bytes.
        self._drop_hadoop_checksum(PROPERTIES_BACKUP_FILE)
        self._drop_hadoop_checksum(PROPERTIES_FILE)
        self.storage.write(backup, render_properties(current).encode("utf-8"))
        self.storage.write(self.storage.path(META_FOLDER, PROPERTIES_FILE),
                           render_properties(new).encode("utf-8"))
        self.storage.delete(backup)
        self.config = TableConfig(new)
        self._properties_key = None  # changed here: what was read before is no longer the file
        self._derived = (None, {})
        return self.config

    # -- paths -------------------------------------------------------------------------------

    def path(self, *parts: str) -> str:
        return self.storage.path(*parts)

    @property
    def timeline_dir(self) -> str:
        return self.storage.path(self.config.timeline_folder)

    @property
    def temp_dir(self) -> str:
        return self.storage.path(META_FOLDER, ".temp")

    @property
    def heartbeat_dir(self) -> str:
        return self.storage.path(META_FOLDER, ".heartbeat")

    @property
    def meta_dir(self) -> str:
        return self.storage.path(META_FOLDER)

    def timeline(self):
        """A freshly loaded timeline (see :mod:`.timeline`), or inside :meth:`timeline_pinned`
        the one listed when the section began with this process's own changes since."""
        if self._pinned is not None:
            return self._pinned.snapshot()
        return Timeline.load(self)

    @contextmanager
    def timeline_pinned(self):
        """List the timeline once for a critical section: inside it :meth:`timeline` answers
        without a request. Only for a timeline no other process changes during the section:
        the metadata table's, under the data table's lock (:class:`~.timeline.PinnedTimeline`
        says why). Nested sections share the outer one's listing."""
        if self._pinned is not None:
            yield self
            return
        self._pinned = PinnedTimeline(self)
        try:
            yield self
        finally:
            self._pinned = None

    def note_timeline_file(self, name: str, present: bool) -> None:
        """This process wrote (``present``) or deleted a file of the timeline folder: a pinned
        timeline takes it in (the writers of :mod:`.timeline` call this)."""
        if self._pinned is not None:
            self._pinned.note(name, present)

    def metadata_table(self) -> "Table | None":
        """The metadata table (``.hoodie/metadata``) as a table of its own, None when it has no
        ``hoodie.properties`` (a removal's leftover folder: no reader uses it). Opened once per
        version of this table's ``hoodie.properties`` as :meth:`reload_config` read it (the
        metadata table is created, removed or upgraded only with a change of that file: the
        partitions and the version are listed there), so a commit that keeps it reads its
        properties once, not at every step; opened afresh when that version is unknown."""
        def build():
            root = posixpath.join(METADATA_FOLDER, ".hoodie", PROPERTIES_FILE)
            if not self.storage.exists(self.storage.path(root)):
                return None
            return Table.open(posixpath.join(self.base_uri, METADATA_FOLDER), self.storage.storage_options)
        return self.derived("metadata_table", build)

    def kept(self, name: str) -> Any:
        """What :meth:`derived` keeps under ``name`` for the version of ``hoodie.properties``
        read last, None when nothing is (never built, or that version is unknown). Reads
        nothing: for a request to start before the properties are read again (a listing of
        the kept metadata table's timeline, taken by path by whichever object loads it next)."""
        key = self._properties_key
        if key is None or self._derived[0] != key:
            return None
        return self._derived[1].get(name)

    def derived(self, name: str, build: Callable[[], Any]) -> Any:
        """``build()``, kept under ``name`` while ``hoodie.properties`` is the version
        :meth:`reload_config` last read: for what changes only with that file (the metadata
        table, its partitions' file groups, the index definitions: Java creates, removes,
        rebuilds and upgrades them together with a change of the properties, under the lock).
        A writer confirms that version under the lock at every commit (:mod:`.write_guard`),
        so what is kept here is read once, outside the lock. Built every time while the
        version is unknown."""
        key = self._properties_key
        if key is None:
            return build()
        if self._derived[0] != key:
            self._derived = (key, {})
        kept = self._derived[1]
        if name not in kept:
            kept[name] = build()
        return kept[name]

    def write_partition_metadata(self, partition: str, instant_time: str) -> None:
        """``<partition>/.hoodie_partition_metadata``, which Hudi uses to find partitions."""
        if not partition:
            path = self.storage.path(PARTITION_METADATA_FILE)
            depth = 0
        else:
            path = self.storage.path(partition, PARTITION_METADATA_FILE)
            depth = partition.count("/") + 1
        if self.storage.exists(path):
            return
        text = render_properties({"commitTime": instant_time, "partitionDepth": str(depth)},
                                 comment="partition metadata")
        try:
            self.storage.create_if_absent(path, text.encode())
        except FileExistsError:
            pass

    def describe(self) -> dict:
        c = self.config
        return {"base_path": self.base_uri, "name": c.name, "version": c.version,
                "type": c.table_type, "record_key_fields": c.record_key_fields,
                "partition_fields": c.partition_fields, "precombine_field": c.precombine_field,
                "hive_style_partitioning": c.hive_style_partitioning,
                "metadata_table": metadata_table_state(self).to_json()}

