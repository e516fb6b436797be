"""The library's error hierarchy.

Every error a user can meet derives from :class:`HudiOccError` and carries structured fields
(the instant, the file groups, the other writer) plus a ``remedy`` that says what to do. The
orchestrator decides what to do from the *type*: a :class:`RetryableError` (a write conflict,
an early conflict, a lock that could not be had in time) is worth retrying with a fresh
instant time; anything else is not.

At the storage boundary the built-ins are used, as fsspec does (``FileNotFoundError``,
``FileExistsError``); they are translated into these types where the meaning is
table-level (a missing table, a corrupt commit file).
"""

from __future__ import annotations

from typing import Iterable, Sequence


class HudiOccError(Exception):
    """Base of every error raised by airflow_hudi_occ."""

    remedy: str = ""

    def __init__(self, message: str, *, remedy: str | None = None):
        if remedy is not None:
            self.remedy = remedy
        self.message = message
        full = message if not self.remedy else f"{message} (what to do: {self.remedy})"
        super().__init__(full)

    def to_dict(self) -> dict:
        """A JSON-friendly form, for the CLI, the spark-submit job's last line and XCom."""
        out = {"error": type(self).__name__, "message": self.message, "remedy": self.remedy}
        for key, value in vars(self).items():
            if key in ("message", "remedy") or key.startswith("_"):
                continue
            if isinstance(value, (str, int, float, bool)) or value is None:
                out[key] = value
            elif isinstance(value, (list, tuple, set, frozenset)):
                out[key] = sorted(str(v) for v in value) if isinstance(value, (set, frozenset)) else [
                    str(v) for v in value
                ]
        return out


class RetryableError(HudiOccError):
    """A failure that a retry with a fresh instant time may get past."""


# --- configuration and input -------------------------------------------------------------


class ConfigError(HudiOccError):
    """A configuration key has a value that is invalid, or names something unknown."""

    def __init__(self, message: str, *, key: str | None = None, value: object = None,
                 remedy: str | None = None):
        self.key = key
        self.value = None if value is None else str(value)
        super().__init__(message, remedy=remedy)


class UnknownStrategyError(ConfigError):
    """A conflict-resolution or early-detection strategy name that does not exist."""


class UnknownLockProviderError(ConfigError):
    """A lock provider name or class path that does not exist."""


class InvalidTableUriError(ConfigError, ValueError):
    """A ``hudi://`` table URI (an Airflow asset) that does not name a table: a user info, a
    query, an empty path, a ``..`` above its root. Also a ``ValueError``, which is what Airflow
    expects of an asset URI handler, so a DAG naming such an asset fails to import with this
    message."""

    def __init__(self, message: str, *, uri: str | None = None, remedy: str | None = None):
        self.uri = uri
        super().__init__(message, key="uri", value=uri, remedy=remedy)


class InvalidPartitionPathError(ConfigError):
    """A row's partition value would make a path that is not a folder inside the table
    (traversal, an absolute path, an empty segment, a control character, a name too long:
    ``core/format/partition_path``). Raised before the write's instant exists: nothing on
    the table has changed."""

    def __init__(self, message: str, *, column: str | None = None, value: str | None = None,
                 path: str | None = None, remedy: str | None = None):
        self.column = column
        self.path = path
        super().__init__(message, key="hoodie.datasource.write.partitionpath.field",
                         value=value, remedy=remedy)


class InvalidRecordKeyError(ConfigError):
    """Rows whose record key is null or empty (Java Hudi's ``HoodieKeyException``): such a
    row could never be updated or deleted by key. Raised before the write's instant exists."""

    remedy = ("drop or fix the rows with a null or empty key upstream (e.g. filter "
              "`key IS NOT NULL AND key != ''`), or key the table by columns that always have a value")

    def __init__(self, message: str, *, column: str | None = None, rows: int = 0,
                 remedy: str | None = None):
        self.column = column
        self.rows = rows
        super().__init__(message, key="hoodie.datasource.write.recordkey.field", value=column,
                         remedy=remedy)


class InvalidOrderingValueError(ConfigError):
    """Rows whose ordering (precombine) value is null in a write that compares ordering values
    (an upsert; an insert with ``hoodie.combine.before.insert``). Hudi 0.x refused them when
    it made the records ("The value of <field> can not be null"); Hudi 1.x readers fail on them
    (a NullPointerException merging) and hudi-rs reads them as 0. Raised before the write's
    instant exists."""

    remedy = ("fill the ordering value (e.g. `coalesce(ts, 0)`) or filter the rows "
              "(`ts IS NOT NULL`) upstream")

    def __init__(self, message: str, *, column: str | None = None, rows: int = 0,
                 remedy: str | None = None):
        self.column = column
        self.rows = rows
        super().__init__(message, key="hoodie.datasource.write.precombine.field", value=column,
                         remedy=remedy)


class SourceNotFoundError(HudiOccError):
    """A write's input path does not exist (found before a Spark session is started)."""

    def __init__(self, message: str, *, source: str | None = None, remedy: str | None = None):
        self.source = source
        super().__init__(message, remedy=remedy)


# --- the table on storage -----------------------------------------------------------------


class TableError(HudiOccError):
    """Something about the table on storage."""

    def __init__(self, message: str, *, base_path: str | None = None, remedy: str | None = None):
        self.base_path = base_path
        super().__init__(message, remedy=remedy)


class TableNotFoundError(TableError):
    remedy = "check the base path, or create the table first (hudi-occ / Table.create)"


class TableExistsError(TableError):
    remedy = "open the existing table instead of creating it, or choose another base path"


class TableLocationNotEmptyError(TableError):
    """The base path of a new table holds files that are not a Hudi table's: adopting them
    would show them to every Hudi reader as stray data, so the table is not created."""

    def __init__(self, message: str, *, base_path: str | None = None,
                 entries: list[str] | None = None, remedy: str | None = None):
        self.entries = list(entries or [])
        super().__init__(message, base_path=base_path, remedy=remedy)


class UnsupportedTableVersionError(TableError):
    def __init__(self, message: str, *, base_path: str | None = None, version: int | None = None,
                 remedy: str | None = None):
        self.version = version
        super().__init__(message, base_path=base_path, remedy=remedy)


class MetadataTableEnabledError(TableError):
    """The table has a Hudi metadata table, which this writer cannot keep up to date.

    Committing anyway would leave the metadata table's file listing stale: Java Hudi and
    hudi-rs list files through it, so they would miss the new files (silent data loss for
    every such reader). Nothing on the table has changed when this is raised."""

    def __init__(self, message: str, *, base_path: str | None = None,
                 partitions: tuple[str, ...] = (), remedy: str | None = None):
        self.partitions = tuple(partitions)
        super().__init__(message, base_path=base_path, remedy=remedy)


class UnmaintainedMetadataPartitionsError(MetadataTableEnabledError):
    """The metadata table holds partitions this writer does not maintain (a record-level index,
    secondary or expression indexes, bloom filters, column or partition stats).

    Writing would leave them stale, and deleting the metadata table (``hoodie.metadata.enable=
    false``) would destroy indexes a team built and Java rebuilds only at a cost, or only when a
    writer enables them again. So the write is refused unless deleting them was asked for
    explicitly. ``partitions`` lists every metadata partition, ``unmaintained`` the ones at stake.
    Nothing on the table has changed when this is raised."""

    def __init__(self, message: str, *, base_path: str | None = None,
                 partitions: tuple[str, ...] = (), unmaintained: tuple[str, ...] = (),
                 remedy: str | None = None):
        self.unmaintained = tuple(unmaintained)
        super().__init__(message, base_path=base_path, partitions=partitions, remedy=remedy)


class UnsupportedColumnStatsTypeError(MetadataTableEnabledError):
    """A column the metadata table's ``column_stats`` index covers has a type whose statistics
    Java Hudi cannot record either (UUID, INT96, unsigned, an annotated int8 / int16 under index
    version 2, ...: core/format/column_stats_record.py lists every type and how it is written),
    or, in a merge-on-read log block, an Avro type neither Java's Spark writer nor ours writes
    there (``time-*``, ``uuid``, ``timestamp-nanos``, a plain ``fixed``), whose log-file record
    this package does not render.

    Raised while the commit's metadata-table records are built, before the metadata table or
    the data instant changes: the write is abandoned (rolled back) rather than leave a stat
    Java's data skipping would read wrongly. ``column`` names the column."""

    def __init__(self, message: str, *, base_path: str | None = None, column: str | None = None,
                 remedy: str | None = None):
        self.column = column
        super().__init__(message, base_path=base_path, partitions=("column_stats",), remedy=remedy)


class CorruptMetadataError(TableError):
    """A metadata file (hoodie.properties, a commit, a marker, a plan) cannot be parsed."""

    def __init__(self, message: str, *, path: str | None = None, base_path: str | None = None,
                 remedy: str | None = None):
        self.path = path
        super().__init__(message, base_path=base_path, remedy=remedy)


class ForeignMetadataTableError(CorruptMetadataError):
    """The table's metadata table (``.hoodie/metadata``) holds records of instants the table's
    timeline never had: it was copied from another table, or restored from a backup that does
    not match. ``path`` is the metadata table, ``instants`` those instants. Raised to a writer
    that would append to it, before any instant exists (readers list the storage instead)."""

    def __init__(self, message: str, *, path: str | None = None, base_path: str | None = None,
                 instants: Sequence[str] = (), remedy: str | None = None):
        self.instants = tuple(instants)
        super().__init__(message, path=path, base_path=base_path, remedy=remedy)


class InvalidTablePathError(TableError):
    """A base path with a character no one sees: leading or trailing whitespace, or a control
    character anywhere (``'t '``, ``'t\\n'``). Such a path makes a folder that the same path
    typed again, without the character, does not find; refused before anything is created or
    read, with the path shown by ``repr()`` so the character is visible."""

    remedy = ("remove the character from the path (in a DAG or a connection, look for a trailing "
              "space or newline); a table that already sits at such a path can be moved to a "
              "clean one with the file system's own tools (nothing in it names its base path)")


class TableLocationNotADirectoryError(TableError):
    """The base path of a new table is an existing file, not a folder."""

    remedy = "choose a base path that is a folder (or does not exist yet); the file was left as it is"


class UnsafePathError(CorruptMetadataError):
    """A path that would leave the table: read from one of its files (a commit, a plan, a
    marker: ``source`` says which) or handed to :meth:`Storage.path`. Nothing was read,
    written or deleted there. A :class:`CorruptMetadataError`, so every reader that already
    tells a corrupt instant file apart does the same with this one."""

    remedy = ("the table's timeline holds a file naming a path outside the table (edited or "
              "corrupt): inspect it with `hudi-occ show`, and remove or restore that instant file "
              "from a backup before running table services again")

    def __init__(self, message: str, *, path: str | None = None, source: str | None = None,
                 base_path: str | None = None, remedy: str | None = None):
        self.source = source
        super().__init__(message, path=path, base_path=base_path, remedy=remedy)


class CorruptDataFileError(TableError):
    """A data file of the table (a parquet base file) cannot be read: truncated, overwritten,
    or not parquet at all."""

    remedy = ("restore the file from a backup; if its instant is still pending, roll it back "
              "(`hudi-occ rollback`); if it is committed, restore the table to an earlier "
              "instant with Java Hudi's restore, which brings the previous file slice back")

    def __init__(self, message: str, *, path: str | None = None, base_path: str | None = None,
                 remedy: str | None = None):
        self.path = path
        super().__init__(message, base_path=base_path, remedy=remedy)


class StorageError(HudiOccError):
    """The storage backend cannot do what the protocol needs (e.g. atomic create-if-absent)."""

    def __init__(self, message: str, *, protocol: str | None = None, remedy: str | None = None):
        self.protocol = protocol
        super().__init__(message, remedy=remedy)


class StorageUnavailableError(StorageError, ConnectionError):
    """The object store did not answer: the connection was refused, or it accepted and then
    said nothing within the read timeout (or answered what the HTTP client could not read), on
    every one of the bounded retries.

    Not a bug and not a credential problem: the endpoint, the network or the store is down.
    Nothing was changed by the call that failed (a write that failed this way is rolled back
    like any failed write). Also a ``ConnectionError`` (an ``OSError``), so code that already
    treats a storage ``OSError`` as "cannot tell now, try later" (a lock's validity check, a
    best-effort delete) keeps doing so."""

    def __init__(self, message: str, *, endpoint: str | None = None, protocol: str | None = None,
                 cause: str | None = None, remedy: str | None = None):
        self.endpoint = endpoint
        self.cause = cause
        super().__init__(message, protocol=protocol, remedy=remedy or (
            f"check that the store at {endpoint} is up and reachable from this host (the "
            "endpoint_url storage option, proxies, firewalls); the timeouts are the storage "
            "options config_kwargs.connect_timeout / read_timeout / retries (docs/configuration.md)"))


class StorageFullError(StorageError):
    """A write failed because the storage is full (ENOSPC) or over quota (EDQUOT).

    Nothing committed is lost: the write that failed is not completed and is rolled back (now,
    or lazily once space returns)."""

    remedy = "free space (or raise the quota) on the table's storage, then retry the write"

    def __init__(self, message: str, *, path: str | None = None, protocol: str | None = None,
                 remedy: str | None = None):
        self.path = path
        super().__init__(message, protocol=protocol, remedy=remedy)


# --- timeline and transactions ------------------------------------------------------------


class InstantStateError(HudiOccError):
    """An instant is not in the state an operation needs (e.g. completing a completed one)."""

    def __init__(self, message: str, *, instant: str | None = None, remedy: str | None = None):
        self.instant = instant
        super().__init__(message, remedy=remedy)


class InstantRolledBackError(InstantStateError, RetryableError):
    """This write's instant was rolled back (or completed) by another process meanwhile."""

    remedy = "this write was presumed dead; retry the batch with a fresh instant time"


class HeartbeatExpiredError(RetryableError):
    """This writer's own heartbeat expired: others may already treat it as dead."""

    remedy = ("the write was too slow to beat or was paused; it has been abandoned and will be "
              "rolled back; retry with a new instant, or raise hoodie.client.heartbeat.interval_in_ms")

    def __init__(self, message: str, *, instant: str | None = None, remedy: str | None = None):
        self.instant = instant
        super().__init__(message, remedy=remedy)


def _fmt_groups(file_groups: Iterable[tuple[str, str]] | Iterable[str]) -> list[str]:
    out = []
    for fg in file_groups:
        if isinstance(fg, tuple):
            out.append(f"{fg[0]}/{fg[1]}" if fg[0] else fg[1])
        else:
            out.append(str(fg))
    return sorted(out)


class WriteConflictError(RetryableError):
    """Commit-time conflict resolution decided that this instant must abort."""

    remedy = ("another writer committed to the same file groups first; retry the batch with a "
              "fresh instant time (the data it read is stale)")

    def __init__(self, message: str | None = None, *, instant: str, other_instant: str,
                 file_groups: Sequence[tuple[str, str]] | Sequence[str] = (),
                 other_action: str | None = None, strategy: str | None = None,
                 remedy: str | None = None):
        self.instant = instant
        self.other_instant = other_instant
        self.other_action = other_action
        self.strategy = strategy
        self.file_groups = _fmt_groups(file_groups)
        if message is None:
            shown = ", ".join(self.file_groups[:5]) + (" ..." if len(self.file_groups) > 5 else "")
            message = (f"write conflict: instant {instant} overlaps {other_action or 'instant'} "
                       f"{other_instant} on file groups [{shown}]")
        super().__init__(message, remedy=remedy)


class EarlyConflictError(WriteConflictError):
    """Early conflict detection found, before a data file was written, that this write is doomed."""

    remedy = ("an earlier, still running writer holds markers on the same file group; this write "
              "was stopped before wasting more work: retry with a fresh instant time")


class PendingClusteringConflictError(WriteConflictError):
    """Records target file groups that a pending clustering plan will replace."""

    remedy = ("wait until the clustering instant completes (or roll it back) and retry; writing "
              "into a file group under clustering would be lost when clustering replaces it")


class WriteAbortedError(RetryableError):
    """An abort signal was raised for this instant (by a sensor, or by another process)."""

    def __init__(self, message: str, *, instant: str | None = None, reason: str | None = None,
                 remedy: str | None = None):
        self.instant = instant
        self.reason = reason
        super().__init__(message, remedy=remedy)


class BatchAlreadyCommittedError(HudiOccError):
    """This batch (its batch key) is already in the table: the attempt completed nothing.

    Not a conflict and not a failure of the data: a retry, a re-run or a zombie twin of the
    batch got there first. The writer rolls its own attempt back; engines and the Spark job
    report it as success with nothing new (outcome ``already_committed``)."""

    def __init__(self, message: str | None = None, *, instant: str | None, committed_instant: str,
                 batch_key: str, committed_completion_time: str | None = None,
                 remedy: str | None = None):
        self.instant = instant
        self.committed_instant = committed_instant
        self.committed_completion_time = committed_completion_time
        self.batch_key = batch_key
        if message is None:
            message = (f"batch {batch_key!r} is already committed as instant {committed_instant}"
                       + (f"; attempt {instant} was rolled back" if instant else ""))
        super().__init__(message, remedy=remedy or (
            f"nothing to do: the batch's rows are in the table as instant {committed_instant}; "
            "to write the data again on purpose, use a new batch key"))


class StagedCommitError(HudiOccError):
    """A staged commit cannot be re-committed (a data file it names is missing or has another
    size, or the staged record is unreadable); the staged instant is rolled back instead."""

    remedy = "nothing to do: the batch is rewritten with a fresh instant"

    def __init__(self, message: str, *, instant: str | None = None, path: str | None = None,
                 remedy: str | None = None):
        self.instant = instant
        self.path = path
        super().__init__(message, remedy=remedy)


# --- locks ----------------------------------------------------------------------------------


class LockError(HudiOccError):
    def __init__(self, message: str, *, lock: str | None = None, owner: str | None = None,
                 remedy: str | None = None):
        self.lock = lock
        self.owner = owner
        super().__init__(message, remedy=remedy)


class LockAcquireTimeoutError(LockError, RetryableError):
    remedy = ("another writer held the table lock for too long; retry later or raise "
              "hoodie.write.lock.wait_time_ms / hoodie.write.lock.client.num_retries")


class LockServiceUnreachableError(LockError):
    """The lock service itself did not answer (ZooKeeper refused the connection or never
    replied): nobody holds the lock as far as we know, and waiting for another writer would not
    help. Not retryable with a fresh instant: the ensemble (or its address) must be fixed."""

    def __init__(self, message: str, *, lock: str | None = None, endpoint: str | None = None,
                 cause: str | None = None, remedy: str | None = None):
        self.endpoint = endpoint
        self.cause = cause
        super().__init__(message, lock=lock, remedy=remedy or (
            f"check that ZooKeeper runs at {endpoint} and that this host may reach it "
            "(hoodie.write.lock.zookeeper.url / .port); how long a connection may take is "
            "hoodie.write.lock.zookeeper.connection_timeout_ms"))


class LockLostError(LockError, RetryableError):
    """The lock was lost while held (e.g. the ZooKeeper session expired): nothing may complete.

    Retryable: the attempt is rolled back and a fresh attempt may well get the lock again (the
    ZooKeeper server came back, the session was re-established)."""

    remedy = "the commit was not completed; retry the write with a fresh instant time"


class LockNotHeldError(LockError):
    """Release or a guarded action was attempted without holding the lock."""


class LockReentryError(LockError):
    """The same lock object was acquired twice: Hudi's locks are not re-entrant."""

    remedy = "release the lock before acquiring it again; nested transactions are not supported"


class CatalogSyncError(HudiOccError):
    """A catalog sync (Hive Metastore, Glue) after a commit, or by ``hudi-occ sync``, failed.

    The data is committed: the sync runs after the instant completed and never undoes it. The
    catalog is behind the table until a later sync catches up from the table's
    ``last_commit_time_sync`` (every sync does; nothing is lost). ``committed_instant``: the
    instant that completed before this sync (None for a sync on its own); ``catalog``: the
    metastore URI or ``glue``; ``cause``: what the catalog said."""

    def __init__(self, message: str, *, table: str | None = None, catalog: str | None = None,
                 committed_instant: str | None = None, cause: str | None = None,
                 remedy: str | None = None):
        self.table = table
        self.catalog = catalog
        self.committed_instant = committed_instant
        self.cause = cause
        done = (f"the commit {committed_instant} is in the table (nothing to rewrite); "
                if committed_instant else "")
        super().__init__(message, remedy=remedy or (
            f"{done}bring the catalog at {catalog} back (or fix the cause), then run "
            f"`hudi-occ sync <table path> --option ...` or the table-service operator's sync action "
            "(or just the next commit): the sync catches up from last_commit_time_sync; how long a "
            "metastore call may take is hoodie.occ.meta.sync.timeout.ms"))


class CatalogUnavailableError(CatalogSyncError, ConnectionError):
    """The catalog did not answer: the connection was refused or timed out. Also a
    ``ConnectionError``: nothing was decided by the call that failed."""


class CatalogClientMissingError(ConfigError):
    """Sync is asked for but the client library of its catalog is not installed."""

    def __init__(self, message: str, *, extra: str, key: str | None = None):
        self.extra = extra
        super().__init__(message, key=key, value="true",
                         remedy=f"pip install 'airflow-hudi-occ[{extra}]' on every host that writes "
                                "the table (workers and the Spark driver), or turn the sync off")


class CleanedInstantError(HudiOccError):
    """Time travel to an instant whose file versions a clean has already deleted."""

    def __init__(self, message: str, *, as_of: str, clean_instant: str | None = None,
                 earliest_retained: str | None = None, remedy: str | None = None):
        self.as_of = as_of
        self.clean_instant = clean_instant
        self.earliest_retained = earliest_retained
        super().__init__(message, remedy=remedy)


class ArchivedInstantError(HudiOccError):
    """A time travel or incremental read reaches instants archival moved off the active timeline.

    ``earliest_active`` is the oldest instant still active (the earliest readable as-of time);
    ``start`` / ``as_of`` is what was asked."""

    def __init__(self, message: str, *, earliest_active: str | None, as_of: str | None = None,
                 start: str | None = None, remedy: str | None = None):
        self.earliest_active = earliest_active
        self.as_of = as_of
        self.start = start
        super().__init__(message, remedy=remedy)


# --- decoding -----------------------------------------------------------------------------------


def _all_error_classes() -> dict[str, type[HudiOccError]]:
    out: dict[str, type[HudiOccError]] = {}
    todo = [HudiOccError]
    while todo:
        cls = todo.pop()
        out.setdefault(cls.__name__, cls)
        todo.extend(cls.__subclasses__())
    return out


def from_dict(d: dict) -> HudiOccError | None:
    """The error a :meth:`HudiOccError.to_dict` document describes (another process wrote it:
    an executor's abort signal, a job's result line), as an instance of its own class, with
    its structured fields; None when ``d`` names no error of this hierarchy.

    Built without calling the class's ``__init__`` (each has its own signature); ``message``,
    ``remedy`` and the scalar/list fields are restored as they were sent."""
    if not isinstance(d, dict):
        return None
    cls = _all_error_classes().get(str(d.get("error") or ""))
    if cls is None:
        return None
    err = cls.__new__(cls)
    message = str(d.get("message") or cls.__name__)
    remedy = d.get("remedy")
    err.message = message
    if remedy:
        err.remedy = str(remedy)
    for key, value in d.items():
        if key not in ("error", "message", "remedy"):
            setattr(err, key, value)
    Exception.__init__(err, message if not err.remedy else f"{message} (what to do: {err.remedy})")
    return err
