"""Typed configuration, keyed by Hudi's own ``hoodie.*`` names.

Users of this field already know Hudi's keys, so the config objects take a plain
``{"hoodie.write.lock.provider": ..., ...}`` mapping (as Spark options or Airflow connection
extras carry them) and parse it into typed, validated values with Hudi's defaults. Each
:class:`ConfigProperty` knows its key, its default, its aliases and how to parse; an invalid
value is a :class:`ConfigError` that names the key and the allowed values, never a silent
fallback.

Where this project deliberately departs from a Hudi default it says so in ``doc``.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import json
import logging
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Generic, Mapping, TypeVar

from airflow_hudi_occ.core import hudi_options
from airflow_hudi_occ.core.errors import ConfigError

T = TypeVar("T")

log = logging.getLogger(__name__)

#: every key (and alias) a :class:`ConfigProperty` reads, filled as the properties are defined;
#: :func:`check_option_keys` judges the rest by Hudi's key set (core/hudi_options.py)
_KNOWN_KEYS: dict[str, "ConfigProperty"] = {}


@dataclass(frozen=True)
class ConfigProperty(Generic[T]):
    key: str
    default: T
    parse: Callable[[Any], T] = lambda v: v  # noqa: E731
    aliases: tuple[str, ...] = ()
    doc: str = ""

    def __post_init__(self):
        for k in (self.key, *self.aliases):
            _KNOWN_KEYS.setdefault(k, self)

    def given(self, options: Mapping[str, Any]) -> tuple[str, Any] | None:
        """The key (or alias) ``options`` set this property under and its raw value, or None
        when unset (missing, None or empty): then :meth:`get` gives the default."""
        for k in (self.key, *self.aliases):
            if k in options and options[k] is not None and options[k] != "":
                return k, options[k]
        return None

    def is_set(self, options: Mapping[str, Any]) -> bool:
        return self.given(options) is not None

    def get(self, options: Mapping[str, Any]) -> T:
        found = self.given(options)
        if found is None:
            return self.default
        k, raw = found
        try:
            return self.parse(raw)
        except ConfigError:
            raise
        except (TypeError, ValueError) as e:
            raise ConfigError(f"invalid value {raw!r} for {k}: {e}", key=k, value=raw,
                              remedy=f"give {k} a valid value ({self.doc or 'see docs'})") from e


def parse_bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "1", "yes", "on"):
        return True
    if s in ("false", "0", "no", "off"):
        return False
    raise ValueError("expected true or false")


def parse_int(v: Any) -> int:
    if isinstance(v, bool):
        raise ValueError("expected an integer")
    return int(str(v).strip())


def parse_enum(cls: type[enum.Enum]) -> Callable[[Any], enum.Enum]:
    def _p(v: Any):
        if isinstance(v, cls):
            return v
        s = str(v).strip().upper()
        try:
            return cls[s]
        except KeyError:
            allowed = ", ".join(m.name for m in cls)
            raise ValueError(f"allowed values: {allowed}") from None

    return _p


# --- which keys exist ------------------------------------------------------------------------

#: Hudi keys a Hudi user routinely sets that this project reads elsewhere or has no use for,
#: with why: accepted (a copied Hudi config keeps working) but never silently misread. Their
#: "no effect here" status overrides core/hudi_options.py's rules (and covers hoodie.auto.commit,
#: which Hudi 1.2 no longer defines).
ACCEPTED_HUDI_KEYS: dict[str, str] = {
    **{f"hoodie.{op}.shuffle.parallelism": "Spark's own partitioning decides the parallelism"
       for op in ("upsert", "insert", "bulkinsert", "delete")},
    "hoodie.datasource.write.keygenerator.class": "the key generator follows from the key and "
                                                  "partition fields (SIMPLE, COMPLEX or NON_PARTITION)",
    "hoodie.datasource.write.keygenerator.type": "as hoodie.datasource.write.keygenerator.class",
    "hoodie.embed.timeline.server": "no timeline server runs; markers are written directly",
    "hoodie.auto.commit": "a write always commits (or rolls back) itself",
    "hoodie.combine.before.upsert": "duplicates in a batch are always combined by key",
    "hoodie.datasource.write.drop.partition.columns": "a table property, fixed at false",
    "hoodie.database.name": "a table property (hoodie.properties)",
}

OPTIONS_STRICT_KEY = "hoodie.occ.options.strict"
OPTIONS_STRICT = ConfigProperty(OPTIONS_STRICT_KEY, True, parse_bool,
                                doc="this project's key: false lets unknown keys through (warned)")


def _labels(v: Any) -> dict[str, str]:
    # a JSON object of strings (or a mapping, as a caller in Python may pass it); anything else
    # is kept whole as one label, never refused: labels only name the writer in its records
    if isinstance(v, Mapping):
        return {str(k): str(x) for k, x in v.items()}
    try:
        d = json.loads(v)
    except (TypeError, ValueError):
        return {"label": str(v)}
    return {str(k): str(x) for k, x in d.items()} if isinstance(d, dict) else {"label": str(v)}


#: this project's keys that other modules read, defined here so that every key is known as soon
#: as this module is (the check in :meth:`WriteConfig.from_options` needs the whole set)
WRITER_LABELS = ConfigProperty(
    "hoodie.occ.writer.labels", MappingProxyType({}), _labels,
    doc="set by the orchestrator: who the writer is, a JSON object of strings "
        "(dag_id, task_id, run_id, try_number), recorded in the attempt log")
RECOVERY_GRACE_PERIOD_MS = ConfigProperty(
    "hoodie.occ.recovery.grace_period_ms", 600_000, parse_int,
    doc="how long after its writer died a staged instant of a batch is left for the batch's "
        "retry to re-commit before LAZY rollback removes it (0: no grace)")
WRITE_KIND = ConfigProperty(
    "hoodie.occ.write.kind", "ingestion", str,
    doc="what kind of write this is (ingestion, backfill, table_service): declared in the "
        "write's footprint; when several writers wait to be admitted on the same partitions, "
        "ingestion goes first (core/concurrency/admission.py)")
ADMISSION_ON_OVERLAP = ConfigProperty(
    "hoodie.occ.admission.on.overlap", "wait", str,
    doc="what a write operator does before spark-submit when a live writer's declared "
        "footprint shares partitions with its batch: wait (until it ends, bounded by "
        "hoodie.occ.admission.timeout_ms), go (start anyway), fail")
ADMISSION_TIMEOUT_MS = ConfigProperty(
    "hoodie.occ.admission.timeout_ms", 900_000, parse_int,
    doc="the longest a write waits to be admitted; then it starts anyway (OCC keeps the "
        "table correct) and says which writers it waited for")
#: Hudi's key (PreferWriterConflictResolutionStrategy); the alias is this project's earlier name.
CLUSTERING_FAIL_ON_PENDING_INGESTION = ConfigProperty(
    "hoodie.clustering.fail.on.pending.ingestion.during.conflict.resolution", False, parse_bool,
    aliases=("hoodie.clustering.fail.on.pending.ingestion",),
    doc="prefer-writer only, as in Hudi: a clustering commit also yields to any requested "
        "ingestion whose heartbeat is alive, whatever file groups it will touch (they are not "
        "known before it goes inflight); inflight ingestion is judged by its planned file groups")

REJECT_UPDATE_STRATEGY = "org.apache.hudi.client.clustering.update.strategy.SparkRejectUpdateStrategy"
ALLOW_UPDATE_STRATEGY = "org.apache.hudi.client.clustering.update.strategy.SparkAllowUpdateStrategy"


def _updates_strategy(v: Any) -> str:
    value = str(v).strip()
    short = value.rsplit(".", 1)[-1].lower()
    if short in ("sparkrejectupdatestrategy", "reject"):
        return REJECT_UPDATE_STRATEGY
    if short in ("sparkallowupdatestrategy", "allow"):
        return ALLOW_UPDATE_STRATEGY
    raise ConfigError(f"unknown clustering updates strategy {value!r}",
                      key=CLUSTERING_UPDATES_STRATEGY.key, value=value,
                      remedy=f"use {REJECT_UPDATE_STRATEGY} or {ALLOW_UPDATE_STRATEGY}")


CLUSTERING_UPDATES_STRATEGY = ConfigProperty(
    "hoodie.clustering.updates.strategy", "", _updates_strategy,
    doc="how writes treat file groups under a pending clustering plan: "
        "org.apache.hudi.client.clustering.update.strategy.SparkRejectUpdateStrategy (refuse the "
        "write before any data is written) or ...SparkAllowUpdateStrategy (write; the clustering "
        "then loses at commit). Inferred as Hudi does: Allow under the prefer-writer strategy, "
        "Reject otherwise")


#: conflict retries when nothing says otherwise: this project is multi-writer by design, so a
#: write that lost a conflict is tried again on a fresh instant (Hudi's default is 0)
DEFAULT_CONFLICT_RETRIES = 5


def _retries(v: Any) -> int:
    n = parse_int(v)
    if n < 0:
        raise ValueError("expected 0 or more")
    return n


#: Hudi's key (HoodieWriteConfig.NUM_RETRIES_ON_CONFLICT_FAILURES): one budget with the write
#: operator's ``conflict_retries`` and the library's ``RetryPolicy`` (core/commit/retry.py)
NUM_RETRIES_ON_CONFLICT = ConfigProperty(
    "hoodie.write.num.retries.on.conflict.failures", None, _retries,
    doc="how many times a write that lost a conflict is retried, each on a fresh instant: the "
        "write operators' conflict_retries when they are not given it, and the library's "
        "RetryPolicy.from_options; unset: 5 (Hudi: 0)")


def conflict_retries_of(options: Mapping[str, Any] | None) -> int | None:
    """``hoodie.write.num.retries.on.conflict.failures`` of ``options``, None when unset (the
    budget core/commit/retry.py's RetryPolicy and the write operators share)."""
    return NUM_RETRIES_ON_CONFLICT.get(options or {})


def known_keys() -> set[str]:
    """Every ``hoodie.*`` key this project reads or accepts (of the modules imported so far:
    callers that check keys import the modules that define them first). Hudi's own keys that
    no property reads are not here: :func:`check_option_keys` judges them by
    :mod:`~airflow_hudi_occ.core.hudi_options`."""
    return set(_KNOWN_KEYS) | set(ACCEPTED_HUDI_KEYS)


def honored_keys() -> dict[str, "ConfigProperty"]:
    """The keys (and aliases) a :class:`ConfigProperty` reads: Hudi's "honored" status."""
    return dict(_KNOWN_KEYS)


def closest_key(key: str, known: set[str] | None = None) -> str | None:
    """The key ``key`` most likely misspells (``difflib``), of the known keys and Hudi's whole
    set (a typo of a Hudi key this project refuses is still a typo), or None."""
    names = set(known or known_keys()) | set(hudi_options.hudi_keys())
    found = difflib.get_close_matches(key, sorted(names), n=1, cutoff=0.85)
    return found[0] if found else None


def check_option_keys(options: Mapping[str, Any], known: set[str] | None = None, *,
                      warn: Callable[[str], None] | None = None) -> list[str]:
    """Judge every key before anything runs. A key a property reads is fine; a key of Hudi's
    own set (core/hudi_options.json) is never "unknown": it has no effect here (accepted, logged
    once) or it is refused (a :class:`ConfigError` naming the key, the reason and the remedy);
    any other key is refused as unknown, with the closest name: a misspelt
    ``hoodie.write.lock.providr`` must not fall back to the default lock.

    ``hoodie.occ.options.strict=false`` turns both refusals into warnings, for configs shared
    with other tools: the unknown keys are returned (for the caller to warn about), the refused
    ones are warned about here (``warn``, else this module's log) with their reason."""
    known = known if known is not None else known_keys()
    unknown, refused = [], []
    for k in sorted(options):
        if k in known:
            continue
        verdict = hudi_options.judge(k, options[k], options, _KNOWN_KEYS)
        if verdict is None:
            unknown.append(k)
        elif verdict.status == hudi_options.REFUSED:
            refused.append(verdict)
    strict = OPTIONS_STRICT.get(options)
    if unknown and strict:
        key = unknown[0]
        hint = closest_key(key, known)
        more = f" (and {len(unknown) - 1} more: {', '.join(unknown[1:])})" if len(unknown) > 1 else ""
        raise ConfigError(
            f"unknown option {key!r}{more}" + (f": did you mean {hint!r}?" if hint else ""),
            key=key, value=options[key],
            remedy=(f"rename it to {hint}" if hint else "remove it, or use a key from docs/configuration.md")
                   + f" (or set {OPTIONS_STRICT_KEY}=false to only warn about keys nothing reads)")
    for verdict in refused:
        value = options[verdict.key]
        if not strict:
            (warn or log.warning)(f"Hudi option {verdict.key}={value!r} is not implemented here "
                                  f"({OPTIONS_STRICT_KEY}=false: ignored): {verdict.reason}")
            continue
        more = [v.key for v in refused if v is not verdict]
        raise ConfigError(
            f"Hudi option {verdict.key}={value!r} is refused here: {verdict.reason}"
            + (f" (also refused: {', '.join(more)})" if more else ""),
            key=verdict.key, value=value,
            remedy=verdict.remedy + " (docs/configuration.md, \"Hudi's option set\")")
    return unknown


class ConcurrencyMode(enum.Enum):
    SINGLE_WRITER = "SINGLE_WRITER"
    OPTIMISTIC_CONCURRENCY_CONTROL = "OPTIMISTIC_CONCURRENCY_CONTROL"
    #: Hudi 1.x's NBCC: merge-on-read + simple bucket index only (core/concurrency/nbcc.py)
    NON_BLOCKING_CONCURRENCY_CONTROL = "NON_BLOCKING_CONCURRENCY_CONTROL"


class FailedWritesPolicy(enum.Enum):
    EAGER = "EAGER"
    LAZY = "LAZY"
    NEVER = "NEVER"


class MarkerType(enum.Enum):
    DIRECT = "DIRECT"
    # Hudi's TIMELINE_SERVER_BASED markers are batched into MARKERS0..N files by the timeline
    # server; this project writes the same files from the driver/executors itself (no server).
    TIMELINE_SERVER_BASED = "TIMELINE_SERVER_BASED"


# --- lock ---------------------------------------------------------------------------------

LOCK_PROVIDER = ConfigProperty("hoodie.write.lock.provider", "filesystem", str,
                               doc="zookeeper | filesystem | storage | inprocess, a Hudi Java class name, "
                                   "or a dotted Python path; this project defaults to the file "
                                   "system lock (Hudi: none) because it is multi-writer by design")
# Hudi's client defaults (60 s a try, 50 retries, 5 s apart) wait about 55 minutes before a
# writer hears anything; ours give up after about 2 minutes (6 tries of 20 s, 2 s apart), far
# longer than a commit's critical section (well under a second to a few seconds), so only a
# stuck holder or a dead lock service reaches the bound (docs/configuration.md, "Lock").
LOCK_WAIT_TIME_MS = ConfigProperty("hoodie.write.lock.wait_time_ms", 20_000, parse_int,
                                   doc="one attempt's wait; Hudi: 60000 (see the bound above)")
LOCK_CLIENT_NUM_RETRIES = ConfigProperty("hoodie.write.lock.client.num_retries", 5, parse_int,
                                         doc="retries after the first attempt; Hudi: 50")
LOCK_CLIENT_WAIT_BETWEEN_RETRY_MS = ConfigProperty(
    "hoodie.write.lock.client.wait_time_ms_between_retry", 2_000, parse_int, doc="Hudi: 5000")
LOCK_NUM_RETRIES = ConfigProperty("hoodie.write.lock.num_retries", 15, parse_int)
LOCK_WAIT_BETWEEN_RETRY_MS = ConfigProperty(
    "hoodie.write.lock.wait_time_ms_between_retry", 1_000, parse_int,
    doc="storage lock: the longest pause between a waiter's reads of a held lease when it has no "
        "place in the waiting line (Hudi's provider reads every 1 s); a waiter that has waited "
        "longer reads more often. In the line the first two read every 0.2 s at most, the next "
        "two every 0.5 s, the rest only list the line")
LOCK_MAX_WAIT_BETWEEN_RETRY_MS = ConfigProperty("hoodie.write.lock.max_wait_time_ms_between_retry",
                                                16_000, parse_int)
ZK_URL = ConfigProperty("hoodie.write.lock.zookeeper.url", "", str)
ZK_PORT = ConfigProperty("hoodie.write.lock.zookeeper.port", 2181, parse_int)
ZK_BASE_PATH = ConfigProperty("hoodie.write.lock.zookeeper.base_path", "/hudi/locks", str)
ZK_LOCK_KEY = ConfigProperty("hoodie.write.lock.zookeeper.lock_key", "", str,
                             doc="defaults to the table name")
ZK_SESSION_TIMEOUT_MS = ConfigProperty("hoodie.write.lock.zookeeper.session_timeout_ms", 60_000,
                                       parse_int)
ZK_CONNECTION_TIMEOUT_MS = ConfigProperty(
    "hoodie.write.lock.zookeeper.connection_timeout_ms", 10_000, parse_int,
    doc="how long one attempt may take to reach the ensemble; an unreachable ensemble fails "
        "after two attempts (about 2 x this + the pause); Hudi: 15000")
ZK_AUTH = ConfigProperty("hoodie.write.lock.zookeeper.auth", "", str,
                         doc="digest credentials user:password (this project's key)")
FS_LOCK_PATH = ConfigProperty("hoodie.write.lock.filesystem.path", "", str,
                              doc="directory of the lock file; defaults to <base>/.hoodie")
FS_LOCK_EXPIRE_MIN = ConfigProperty("hoodie.write.lock.filesystem.expire", 0, parse_int,
                                    doc="minutes; 0 = never (a lock whose holder is provably dead "
                                        "on this host is taken over at once either way)")
STORAGE_LOCK_VALIDITY_S = ConfigProperty(
    "hoodie.write.lock.storage.validity.timeout.secs", 300, parse_int,
    aliases=("hoodie.write.lock.storage.validity.timeout",),
    doc="seconds a storage-lock lease lasts without renewal (>= 10, >= 10 x the renewal interval)")
STORAGE_LOCK_RENEW_S = ConfigProperty(
    "hoodie.write.lock.storage.renew.interval.secs", 30, parse_int,
    aliases=("hoodie.write.lock.storage.heartbeat.poll.secs", "hoodie.write.lock.storage.heartbeat.poll"),
    doc="seconds between renewals of a held storage-lock lease (>= 1)")


@dataclass(frozen=True)
class LockConfig:
    # each default is its property's (one statement of it; tests/core/test_config.py checks
    # that the dataclass and from_options({}) agree), as in every config class below
    provider: str = LOCK_PROVIDER.default
    wait_time_ms: int = LOCK_WAIT_TIME_MS.default
    client_num_retries: int = LOCK_CLIENT_NUM_RETRIES.default
    client_wait_time_ms_between_retry: int = LOCK_CLIENT_WAIT_BETWEEN_RETRY_MS.default
    num_retries: int = LOCK_NUM_RETRIES.default
    wait_time_ms_between_retry: int = LOCK_WAIT_BETWEEN_RETRY_MS.default
    max_wait_time_ms_between_retry: int = LOCK_MAX_WAIT_BETWEEN_RETRY_MS.default
    zk_url: str = ZK_URL.default
    zk_port: int = ZK_PORT.default
    zk_base_path: str = ZK_BASE_PATH.default
    zk_lock_key: str = ZK_LOCK_KEY.default
    zk_session_timeout_ms: int = ZK_SESSION_TIMEOUT_MS.default
    zk_connection_timeout_ms: int = ZK_CONNECTION_TIMEOUT_MS.default
    zk_auth: str = ZK_AUTH.default
    fs_path: str = FS_LOCK_PATH.default
    fs_expire_minutes: int = FS_LOCK_EXPIRE_MIN.default
    storage_validity_s: int = STORAGE_LOCK_VALIDITY_S.default
    storage_renew_s: int = STORAGE_LOCK_RENEW_S.default

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> "LockConfig":
        return cls(
            provider=LOCK_PROVIDER.get(options),
            wait_time_ms=LOCK_WAIT_TIME_MS.get(options),
            client_num_retries=LOCK_CLIENT_NUM_RETRIES.get(options),
            client_wait_time_ms_between_retry=LOCK_CLIENT_WAIT_BETWEEN_RETRY_MS.get(options),
            num_retries=LOCK_NUM_RETRIES.get(options),
            wait_time_ms_between_retry=LOCK_WAIT_BETWEEN_RETRY_MS.get(options),
            max_wait_time_ms_between_retry=LOCK_MAX_WAIT_BETWEEN_RETRY_MS.get(options),
            zk_url=ZK_URL.get(options),
            zk_port=ZK_PORT.get(options),
            zk_base_path=ZK_BASE_PATH.get(options),
            zk_lock_key=ZK_LOCK_KEY.get(options),
            zk_session_timeout_ms=ZK_SESSION_TIMEOUT_MS.get(options),
            zk_connection_timeout_ms=ZK_CONNECTION_TIMEOUT_MS.get(options),
            zk_auth=ZK_AUTH.get(options),
            fs_path=FS_LOCK_PATH.get(options),
            fs_expire_minutes=FS_LOCK_EXPIRE_MIN.get(options),
            storage_validity_s=STORAGE_LOCK_VALIDITY_S.get(options),
            storage_renew_s=STORAGE_LOCK_RENEW_S.get(options),
        )


# --- heartbeat ----------------------------------------------------------------------------

HEARTBEAT_INTERVAL_MS = ConfigProperty("hoodie.client.heartbeat.interval_in_ms", 60_000, parse_int)
HEARTBEAT_TOLERABLE_MISSES = ConfigProperty("hoodie.client.heartbeat.tolerable.misses", 2,
                                            parse_int)


@dataclass(frozen=True)
class HeartbeatConfig:
    interval_ms: int = HEARTBEAT_INTERVAL_MS.default
    tolerable_misses: int = HEARTBEAT_TOLERABLE_MISSES.default

    @property
    def expiry_ms(self) -> int:
        return self.interval_ms * self.tolerable_misses

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> "HeartbeatConfig":
        return cls(HEARTBEAT_INTERVAL_MS.get(options), HEARTBEAT_TOLERABLE_MISSES.get(options))


# --- early conflict detection and markers --------------------------------------------------

ECD_ENABLE = ConfigProperty("hoodie.write.concurrency.early.conflict.detection.enable", False,
                            parse_bool)
ECD_STRATEGY = ConfigProperty("hoodie.write.concurrency.early.conflict.detection.strategy", "", str,
                              doc="defaults by marker type: direct -> "
                                  "SimpleDirectMarkerBasedDetectionStrategy, batched -> "
                                  "AsyncTimelineServerBasedDetectionStrategy")
ECD_CHECK_COMMIT_CONFLICT = ConfigProperty("hoodie.write.concurrency.early.conflict.check.commit.conflict",
                                           False, parse_bool)
ECD_ASYNC_INITIAL_DELAY_MS = ConfigProperty(
    "hoodie.write.concurrency.async.conflict.detector.initial_delay_ms", 0, parse_int)
ECD_ASYNC_PERIOD_MS = ConfigProperty("hoodie.write.concurrency.async.conflict.detector.period_ms",
                                     30_000, parse_int)
MARKERS_TYPE = ConfigProperty("hoodie.write.markers.type", MarkerType.DIRECT, parse_enum(MarkerType),
                              doc="DIRECT or TIMELINE_SERVER_BASED (batched MARKERS0..N files); "
                                  "Hudi's default on Spark is TIMELINE_SERVER_BASED, this project "
                                  "defaults to DIRECT because it runs no timeline server")
MARKERS_BATCH_NUM_FILES = ConfigProperty("hoodie.markers.timeline_server_based.batch.num_threads", 20,
                                         parse_int, doc="number of MARKERSn files")


@dataclass(frozen=True)
class EarlyConflictConfig:
    enabled: bool = ECD_ENABLE.default
    strategy: str = ECD_STRATEGY.default
    check_commit_conflict: bool = ECD_CHECK_COMMIT_CONFLICT.default
    async_initial_delay_ms: int = ECD_ASYNC_INITIAL_DELAY_MS.default
    async_period_ms: int = ECD_ASYNC_PERIOD_MS.default

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> "EarlyConflictConfig":
        return cls(ECD_ENABLE.get(options), ECD_STRATEGY.get(options),
                   ECD_CHECK_COMMIT_CONFLICT.get(options), ECD_ASYNC_INITIAL_DELAY_MS.get(options),
                   ECD_ASYNC_PERIOD_MS.get(options))


# --- index ----------------------------------------------------------------------------------


def _index_type(v: Any) -> str:
    t = str(v).strip().upper()
    if t not in ("SIMPLE", "BUCKET"):
        raise ConfigError(f"index type {v!r} is not implemented here",
                          key=INDEX_TYPE.key, value=v, remedy="use SIMPLE or BUCKET")
    return t


def _fields(v: Any) -> tuple[str, ...]:
    return tuple(s.strip() for s in str(v).split(",") if s.strip())


INDEX_TYPE = ConfigProperty("hoodie.index.type", "SIMPLE", _index_type,
                            doc="SIMPLE or BUCKET")
BUCKET_NUM = ConfigProperty("hoodie.bucket.index.num.buckets", 4, parse_int)
HASH_FIELD = ConfigProperty("hoodie.bucket.index.hash.field", (), _fields,
                            doc="defaults to the record key fields")
BUCKET_ENGINE = ConfigProperty("hoodie.index.bucket.engine", "SIMPLE", lambda v: str(v).strip().upper(),
                               doc="SIMPLE (a fixed number of buckets; the only engine here) or "
                                   "Hudi's CONSISTENT_HASHING (not written)")
#: Hudi's key and default: a bulk_insert writes its batch as given, duplicate keys included,
#: unless asked to combine them (the batch's copies of a key, by the precombine field).
#: bulk_insert never looks keys up in the table either: its contract is "these keys are new".
#: insert and upsert always combine (stricter than Hudi's insert).
COMBINE_BEFORE_INSERT = ConfigProperty("hoodie.combine.before.insert", False, parse_bool,
                                       doc="bulk_insert only: true combines duplicate keys of a batch")


@dataclass(frozen=True)
class IndexConfig:
    """How a write finds a record's file group: Hudi's simple index (the key looked up in the
    partition's files) or its bucket index (a hash of the key: core/format/bucket_index.py)."""

    type: str = INDEX_TYPE.default
    #: the bucket count the write names; None when it names none, and then the table's
    #: ``hoodie.properties`` (NBCC: core/concurrency/nbcc.py) or the property's default decides
    num_buckets_given: int | None = None
    engine: str = BUCKET_ENGINE.default
    #: the fields the bucket hash reads; empty: the record key fields
    hash_fields: tuple[str, ...] = HASH_FIELD.default

    @property
    def num_buckets(self) -> int:
        return BUCKET_NUM.default if self.num_buckets_given is None else self.num_buckets_given

    @property
    def buckets(self) -> int | None:
        """The number of buckets under the bucket index, None under the simple index."""
        return self.num_buckets if self.type == "BUCKET" else None

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> "IndexConfig":
        cfg = cls(INDEX_TYPE.get(options), BUCKET_NUM.get(options) if BUCKET_NUM.is_set(options) else None,
                  BUCKET_ENGINE.get(options), HASH_FIELD.get(options))
        if cfg.type == "BUCKET" and cfg.num_buckets <= 0:
            raise ConfigError("the bucket index needs a positive number of buckets", key=BUCKET_NUM.key,
                              value=cfg.num_buckets, remedy=f"set {BUCKET_NUM.key} to 1 or more")
        return cfg


# --- write --------------------------------------------------------------------------------

CONCURRENCY_MODE = ConfigProperty("hoodie.write.concurrency.mode",
                                  ConcurrencyMode.OPTIMISTIC_CONCURRENCY_CONTROL,
                                  parse_enum(ConcurrencyMode),
                                  doc="Hudi defaults to SINGLE_WRITER; this project exists for "
                                      "multiple writers and defaults to OCC. "
                                      "NON_BLOCKING_CONCURRENCY_CONTROL: merge-on-read tables with "
                                      "the simple bucket index only (docs/merge-on-read.md, NBCC)")
CONFLICT_RESOLUTION_STRATEGY = ConfigProperty(
    "hoodie.write.lock.conflict.resolution.strategy", "simple", str,
    doc="simple | bucket | prefer-writer, or Hudi's Java class names")
FAILED_WRITES_POLICY = ConfigProperty("hoodie.clean.failed.writes.policy", FailedWritesPolicy.LAZY,
                                      parse_enum(FailedWritesPolicy),
                                      aliases=("hoodie.cleaner.policy.failed.writes",),
                                      doc="LAZY with OCC (Hudi infers LAZY for multi-writer)")
def _table_type(v: Any) -> str:
    # MERGE_ON_READ is a valid choice for the core (MergeOnReadWriter writes it); an engine that
    # cannot write it yet (Spark) refuses it itself, so the error names that engine
    t = str(v).strip().upper()
    if t in ("COPY_ON_WRITE", "MERGE_ON_READ"):
        return t
    raise ValueError("allowed values: COPY_ON_WRITE, MERGE_ON_READ")


TABLE_TYPE_KEY = "hoodie.datasource.write.table.type"
TABLE_TYPE = ConfigProperty(TABLE_TYPE_KEY, "COPY_ON_WRITE", _table_type, aliases=("hoodie.table.type",))
MAX_CLOCK_SKEW_MS = ConfigProperty(
    "hoodie.time.generator.max_expected_clock_skew_ms", 200, parse_int,
    doc="waited after each instant time only with hoodie.time.generator.type=WAIT_TO_ADJUST_SKEW")


class TimeGeneratorType(str, enum.Enum):
    #: this project's default: a time is generated under the table lock and is larger than
    #: every time on the freshly listed timeline, which orders every writer that does the same
    TIMELINE_FLOOR = "TIMELINE_FLOOR"
    #: Hudi's generator: also wait the maximum clock skew, still holding the lock, so that a
    #: writer that does not take the floor (Java Hudi) reads a later clock (docs/instant-times.md)
    WAIT_TO_ADJUST_SKEW = "WAIT_TO_ADJUST_SKEW"


TIME_GENERATOR_TYPE = ConfigProperty(
    "hoodie.time.generator.type", TimeGeneratorType.TIMELINE_FLOOR, parse_enum(TimeGeneratorType),
    doc="TIMELINE_FLOOR (no wait; every writer of the table is this project's) or Hudi's "
        "WAIT_TO_ADJUST_SKEW (set it when Java Hudi writers share the table)")
TABLE_NAME = ConfigProperty("hoodie.table.name", "", str, aliases=("hoodie.datasource.write.table.name",))


def _table_version(v: Any) -> int:
    n = parse_int(v)
    if n not in WRITABLE_TABLE_VERSIONS:
        raise ConfigError(f"table version {n} cannot be written by this project",
                          key=WRITE_TABLE_VERSION.key, value=v,
                          remedy=f"use one of {list(WRITABLE_TABLE_VERSIONS)}")
    return n


class RecordMergeMode(str, enum.Enum):
    """Hudi's ``RecordMergeMode``: how two records of a key merge, within a batch and against
    the stored one (core/commit/merge.py). CUSTOM (a Java merger) is not implemented."""

    #: the larger ordering (precombine) value wins, the later write on a tie
    EVENT_TIME_ORDERING = "EVENT_TIME_ORDERING"
    #: the later write wins, whatever the ordering values
    COMMIT_TIME_ORDERING = "COMMIT_TIME_ORDERING"


class BulkInsertSortMode(str, enum.Enum):
    """Hudi's ``BulkInsertSortMode``: how a bulk_insert lays its rows out in files."""

    #: as read: each input task's rows per partition path, in input order
    NONE = "NONE"
    #: the whole batch sorted by partition path, then record key (as text)
    GLOBAL_SORT = "GLOBAL_SORT"
    #: each input task's rows sorted by partition path, then record key
    PARTITION_SORT = "PARTITION_SORT"
    #: the rows of a partition path brought to one task first (one file per path), unsorted
    PARTITION_PATH_REPARTITION = "PARTITION_PATH_REPARTITION"
    #: as PARTITION_PATH_REPARTITION, then sorted by partition path within the task
    PARTITION_PATH_REPARTITION_AND_SORT = "PARTITION_PATH_REPARTITION_AND_SORT"


_HUDI_MODEL = "org.apache.hudi.common.model."
#: the payload classes whose merge is one of the two modes, as Hudi 1.x infers the mode from them
PAYLOAD_MERGE_MODES = {
    _HUDI_MODEL + "OverwriteWithLatestAvroPayload": RecordMergeMode.COMMIT_TIME_ORDERING,
    _HUDI_MODEL + "DefaultHoodieRecordPayload": RecordMergeMode.EVENT_TIME_ORDERING,
    _HUDI_MODEL + "EventTimeAvroPayload": RecordMergeMode.EVENT_TIME_ORDERING,
}


def _merge_mode(v: Any) -> RecordMergeMode:
    mode = str(v).strip().upper()
    if mode == "CUSTOM":
        raise ConfigError(
            "hoodie.record.merge.mode=CUSTOM (a Java record merger) is not implemented here",
            key="hoodie.record.merge.mode", value=v,
            remedy="use EVENT_TIME_ORDERING or COMMIT_TIME_ORDERING, or run the job on Java Hudi "
                   "with HudiJavaWriteOperator (docs/java-engine.md)")
    return parse_enum(RecordMergeMode)(mode)


def _payload_class(v: Any) -> RecordMergeMode:
    name = str(v).strip()
    full = name if "." in name else _HUDI_MODEL + name
    if full not in PAYLOAD_MERGE_MODES:
        raise ConfigError(
            f"payload class {name!r} carries merge semantics this project does not apply",
            key="hoodie.datasource.write.payload.class", value=v,
            remedy="use OverwriteWithLatestAvroPayload (COMMIT_TIME_ORDERING) or "
                   "DefaultHoodieRecordPayload (EVENT_TIME_ORDERING), or set hoodie.record.merge.mode "
                   "instead; or run the job on Java Hudi with HudiJavaWriteOperator (docs/java-engine.md)")
    return PAYLOAD_MERGE_MODES[full]


#: Hudi's keys: how records merge. A table records its mode in hoodie.properties when it is
#: created (core/table/merge_mode.py); a write whose mode differs from the table's is refused
RECORD_MERGE_MODE = ConfigProperty(
    "hoodie.record.merge.mode", None, _merge_mode, aliases=("hoodie.write.record.merge.mode",),
    doc="EVENT_TIME_ORDERING (the larger ordering value wins) or COMMIT_TIME_ORDERING (the later "
        "write wins); unset: the table's, or for a new table EVENT_TIME_ORDERING with an ordering "
        "field and COMMIT_TIME_ORDERING without")
PAYLOAD_CLASS = ConfigProperty(
    "hoodie.datasource.write.payload.class", None, _payload_class,
    doc="the merge mode by Hudi's payload class: OverwriteWithLatestAvroPayload -> "
        "COMMIT_TIME_ORDERING, DefaultHoodieRecordPayload or EventTimeAvroPayload -> "
        "EVENT_TIME_ORDERING; other payloads refused")


def requested_merge_mode(options: Mapping[str, Any]) -> RecordMergeMode | None:
    """The merge mode a write's options ask for (None: they do not say), refused when the mode
    and the payload class say different things."""
    mode, by_payload = RECORD_MERGE_MODE.get(options), PAYLOAD_CLASS.get(options)
    if mode is not None and by_payload is not None and mode is not by_payload:
        raise ConfigError(
            f"hoodie.record.merge.mode={mode.value} and the payload class "
            f"{options.get(PAYLOAD_CLASS.key)} (which means {by_payload.value}) disagree",
            key=RECORD_MERGE_MODE.key, value=mode.value,
            remedy="drop one of the two, or make them agree")
    return mode or by_payload


#: the table versions this project writes: 8 (Hudi 1.0.x) and 9 (Hudi 1.1 and later)
WRITABLE_TABLE_VERSIONS = (8, 9)
METADATA_ENABLE = ConfigProperty(
    "hoodie.metadata.enable", True, parse_bool,
    doc="Hudi's key: true (Hudi's default) keeps a metadata table a Java writer built, as far as "
        "hoodie.occ.metadata.files.maintain (default true) allows, and refuses what it cannot keep "
        "(a record or secondary index; an action not yet supported on a table with column and "
        "partition stats); false deletes it under the table lock first, as Java Hudi does for a "
        "writer with the metadata table disabled (an index in it only with "
        "hoodie.occ.metadata.delete.unmaintained=true). It never creates one")
#: Hudi 1.2's key (HoodieMetadataConfig.AUTO_DELETE_PARTITIONS); Java with it false never
#: deletes a metadata table or partition, and even with hoodie.metadata.enable=false it keeps
#: writing an existing metadata table (HoodieSparkTable.getMetadataWriter)
METADATA_AUTO_DELETE_PARTITIONS = ConfigProperty(
    "hoodie.metadata.auto.delete.partitions", True, parse_bool,
    doc="Hudi 1.2's key: false forbids deleting the metadata table or any of its partitions; "
        "this writer then refuses a table that has one whatever hoodie.metadata.enable says "
        "(Java with false keeps writing it, which this writer cannot)")
METADATA_MAINTAIN_FILES = ConfigProperty(
    "hoodie.occ.metadata.files.maintain", True, parse_bool,
    doc="this project's key, until it maintains the whole metadata table: true (default) lets every "
        "action of ours (commits and deltacommits of the core writers and the Spark engine, "
        "insert_overwrite, clustering, compaction, clean, rollback) keep a metadata table that "
        "holds only the files partition up to date, writing its deltacommit at the same instant "
        "as Java does (a rollback rolls back the metadata table's deltacommit of the instant; "
        "core/table/metadata_commit.py), and compacts, cleans and archives the metadata table as Java's "
        "writer does (core/commit/metadata_services.py); on one with column_stats and "
        "partition_stats too (Java 1.2's defaults), the core copy-on-write commits, clean and "
        "rollback, which keep the stats (core/table/metadata_stats.py); a record or secondary "
        "index is still refused. false: refused (today's behaviour before it was the default), "
        "or removed with hoodie.metadata.enable=false")
#: Hudi's key (HoodieMetadataConfig.COMPACT_NUM_DELTA_COMMITS): the metadata table is compacted
#: once this many deltacommits completed after its latest compaction (core/table/metadata_compaction.py)
METADATA_COMPACT_MAX_DELTA_COMMITS = ConfigProperty(
    "hoodie.metadata.compact.max.delta.commits", 10, parse_int,
    doc="Hudi's key: with hoodie.occ.metadata.files.maintain=true, our writer compacts the metadata "
        "table (after its commit, under the table lock, as Java's writer does) once this many "
        "deltacommits have completed since its latest compaction")
METADATA_DELETE_UNMAINTAINED = ConfigProperty(
    "hoodie.occ.metadata.delete.unmaintained", False, parse_bool,
    doc="this project's key: with hoodie.metadata.enable=false, true lets this writer delete a "
        "metadata table that holds partitions it does not maintain (record_index, "
        "secondary_index_*, expr_index_*, bloom_filters, column_stats, partition_stats), as a "
        "Java writer with the metadata table disabled does; false (default) refuses such a table")
#: Hudi's keys for the columns its column and partition stats cover (HoodieMetadataConfig);
#: every writer of a table must give them the same values, as Java's writers must
COLUMN_STATS_COLUMN_LIST = ConfigProperty(
    "hoodie.metadata.index.column.stats.column.list", (), _fields,
    doc="Hudi's key: the columns of the metadata table's column_stats and partition_stats "
        "records this writer writes for its files (besides the meta columns, always); unset: the "
        "first hoodie.metadata.index.column.stats.max.columns.to.index columns (core/table/metadata_stats.py)")
COLUMN_STATS_MAX_COLUMNS = ConfigProperty(
    "hoodie.metadata.index.column.stats.max.columns.to.index", 32, parse_int,
    doc="Hudi's key: without a column list, how many of the schema's first columns the stats cover")
WRITE_TABLE_VERSION = ConfigProperty(
    "hoodie.write.table.version", None, _table_version,
    doc="8 or 9. Unset: an existing table keeps its version and a new table is version 8 (Hudi "
        "1.1 defaults to 9); 9 on a version 8 table upgrades it (see hoodie.write.auto.upgrade)")
AUTO_UPGRADE = ConfigProperty(
    "hoodie.write.auto.upgrade", True, parse_bool,
    doc="upgrade a version 8 table to hoodie.write.table.version when that is higher; false "
        "refuses the write instead")


# --- parquet base files ----------------------------------------------------------------------

#: Hudi's codec names (parquet-mr's ``CompressionCodecName``) -> pyarrow's; the ones missing are
#: refused: Java Hudi's readers cannot read what pyarrow writes for them (brotli needs a codec
#: jar Hudi's bundle lacks; pyarrow writes LZ4_RAW where Java writes Hadoop's LZ4; LZO is GPL
#: and absent from pyarrow)
PARQUET_CODECS = {"snappy": "snappy", "gzip": "gzip", "zstd": "zstd", "uncompressed": "none",
                  "none": "none"}


def _parquet_codec(v: Any) -> str:
    codec = str(v).strip().lower()
    if codec not in PARQUET_CODECS:
        raise ConfigError(
            f"parquet compression codec {v!r} is not written here",
            key="hoodie.parquet.compression.codec", value=v,
            remedy="use snappy (this project's default), gzip (Hudi's default), zstd or uncompressed"
                   + ("; lz4, brotli and lzo files written by pyarrow are not ones Java Hudi reads alike"
                      if codec in ("lz4", "lz4_raw", "brotli", "lzo") else ""))
    return PARQUET_CODECS[codec]


def _positive_bytes(v: Any) -> int:
    n = parse_int(v)
    if n <= 0:
        raise ValueError("expected a positive number of bytes")
    return n


#: Hudi's parquet keys (HoodieStorageConfig); unset, a base file is written as it always was
#: (snappy, a row group per chunk the writer builds, pyarrow's 1 MB pages): nothing extra is done
PARQUET_COMPRESSION_CODEC = ConfigProperty(
    "hoodie.parquet.compression.codec", "snappy", _parquet_codec,
    doc="snappy (this project's default; Hudi's is gzip, which writes about a third slower), gzip, "
        "zstd or uncompressed")
PARQUET_BLOCK_SIZE = ConfigProperty(
    "hoodie.parquet.block.size", None, _positive_bytes,
    doc="a row group closes where Java's parquet-mr closes it for this many buffered bytes (open pages "
        "in plain encoding, closed pages written; core/format/row_groups; Hudi: 125829120); unset, a "
        "row group per written chunk")
PARQUET_PAGE_SIZE = ConfigProperty(
    "hoodie.parquet.page.size", None, _positive_bytes,
    doc="bytes of a data page (Hudi's and pyarrow's default: 1048576)")


@dataclass(frozen=True)
class ParquetConfig:
    """How base files are written (Hudi's ``hoodie.parquet.*`` keys): the codec, and the row
    group and page sizes when set (None: the writer's own)."""

    codec: str = "snappy"
    block_size: int | None = None
    page_size: int | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None) -> "ParquetConfig":
        options = options or {}
        return cls(PARQUET_COMPRESSION_CODEC.get(options), PARQUET_BLOCK_SIZE.get(options),
                   PARQUET_PAGE_SIZE.get(options))


@dataclass(frozen=True)
class MetadataTableConfig:
    """What a writer does with the table's Hudi metadata table (core/table/metadata_table.py):
    keep it, delete it or refuse the table, and how it writes and compacts it."""

    enable: bool = METADATA_ENABLE.default
    auto_delete_partitions: bool = METADATA_AUTO_DELETE_PARTITIONS.default
    delete_unmaintained: bool = METADATA_DELETE_UNMAINTAINED.default
    maintain_files: bool = METADATA_MAINTAIN_FILES.default
    compact_max_delta_commits: int = METADATA_COMPACT_MAX_DELTA_COMMITS.default
    #: the columns of the column and partition stats (empty: the first ``column_stats_max_columns``)
    column_stats_columns: tuple[str, ...] = COLUMN_STATS_COLUMN_LIST.default
    column_stats_max_columns: int = COLUMN_STATS_MAX_COLUMNS.default

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> "MetadataTableConfig":
        cfg = cls(METADATA_ENABLE.get(options), METADATA_AUTO_DELETE_PARTITIONS.get(options),
                  METADATA_DELETE_UNMAINTAINED.get(options), METADATA_MAINTAIN_FILES.get(options),
                  METADATA_COMPACT_MAX_DELTA_COMMITS.get(options), COLUMN_STATS_COLUMN_LIST.get(options),
                  COLUMN_STATS_MAX_COLUMNS.get(options))
        if cfg.delete_unmaintained and not cfg.auto_delete_partitions:
            raise ConfigError(
                f"{METADATA_DELETE_UNMAINTAINED.key}=true asks to delete metadata-table partitions "
                f"that {METADATA_AUTO_DELETE_PARTITIONS.key}=false forbids deleting",
                key=METADATA_DELETE_UNMAINTAINED.key, value=options.get(METADATA_DELETE_UNMAINTAINED.key),
                remedy=f"drop one of the two: keep {METADATA_AUTO_DELETE_PARTITIONS.key}=false to "
                       "protect the metadata table (this writer then refuses the table), or remove "
                       "it to let this writer delete the metadata table")
        return cfg


@dataclass(frozen=True)
class ReadConfig:
    """What a reader is told: for now whether it lists files through Hudi's metadata table
    (``hoodie.metadata.enable``, default true, as Java 1.x readers default to it:
    ``HoodieMetadataConfig.DEFAULT_METADATA_ENABLE_FOR_READERS``; core/table/file_listing.py).
    The key is the writers' :data:`METADATA_ENABLE`: a reader given a writer's options reads
    as that writer would list."""

    metadata_enable: bool = METADATA_ENABLE.default

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None) -> "ReadConfig":
        return cls(metadata_enable=METADATA_ENABLE.get(options or {}))


#: Hudi's key: the batch takes the table's schema (missing columns null, narrower numbers
#: widened, new columns added) instead of being refused for lacking a column (core/commit/pipeline.py)
RECONCILE_SCHEMA = ConfigProperty(
    "hoodie.datasource.write.reconcile.schema", False, parse_bool,
    doc="true: a batch lacking some of the table's columns writes them as null, and a narrower "
        "number column (int where the table has long) is widened, as Java Hudi reconciles; "
        "false (Hudi's default): such a batch is refused before anything is written")
BULKINSERT_SORT_MODE = ConfigProperty(
    "hoodie.bulkinsert.sort.mode", BulkInsertSortMode.NONE, parse_enum(BulkInsertSortMode),
    doc="NONE (Hudi's default), GLOBAL_SORT, PARTITION_SORT, PARTITION_PATH_REPARTITION or "
        "PARTITION_PATH_REPARTITION_AND_SORT: the rows in a bulk_insert's files as Java lays them out")


@dataclass(frozen=True)
class WriteConfig:
    """Everything a writer needs besides the table itself, typed: the only way core reads the
    options (tests/core/test_config.py checks that no other core module reads the raw mapping).
    ``options`` carries the mapping it was parsed from, only to pass it on to another process
    or engine (a Spark job, Java Hudi) and to derive a table service's config from it."""

    concurrency_mode: ConcurrencyMode = CONCURRENCY_MODE.default
    #: the strategy named by the options, "" when none is (then :attr:`conflict_strategy`
    #: infers it as Hudi does)
    conflict_resolution_strategy: str = ""
    failed_writes_policy: FailedWritesPolicy = FAILED_WRITES_POLICY.default
    max_clock_skew_ms: int = MAX_CLOCK_SKEW_MS.default
    time_generator_type: TimeGeneratorType = TIME_GENERATOR_TYPE.default
    marker_type: MarkerType = MARKERS_TYPE.default
    markers_batch_num_files: int = MARKERS_BATCH_NUM_FILES.default
    lock: LockConfig = field(default_factory=LockConfig)
    heartbeat: HeartbeatConfig = field(default_factory=HeartbeatConfig)
    early_conflict: EarlyConflictConfig = field(default_factory=EarlyConflictConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    metadata: MetadataTableConfig = field(default_factory=MetadataTableConfig)
    write_table_version: int | None = WRITE_TABLE_VERSION.default
    auto_upgrade: bool = AUTO_UPGRADE.default
    combine_before_insert: bool = COMBINE_BEFORE_INSERT.default
    #: what kind of write this is (footprints and admission: core/concurrency/footprint.py)
    write_kind: str = WRITE_KIND.default
    #: who the writer is (dag_id, task_id, run_id, try_number), for its attempt records
    writer_labels: Mapping[str, str] = field(default_factory=lambda: WRITER_LABELS.default)
    recovery_grace_period_ms: int = RECOVERY_GRACE_PERIOD_MS.default
    clustering_fail_on_pending_ingestion: bool = CLUSTERING_FAIL_ON_PENDING_INGESTION.default
    #: the clustering updates strategy named (its Hudi class name), "" when none is (then
    #: :attr:`rejects_clustering_updates` infers it as Hudi does)
    clustering_updates_strategy: str = CLUSTERING_UPDATES_STRATEGY.default
    #: the catalog sync after each commit (core/catalog/sync.py); its class is defined below
    meta_sync: "MetaSyncConfig" = field(default_factory=lambda: MetaSyncConfig())
    #: how base files are written (``hoodie.parquet.*``)
    parquet: ParquetConfig = field(default_factory=ParquetConfig)
    #: the merge mode the options ask for (None: the table's; core/table/merge_mode.py)
    merge_mode: RecordMergeMode | None = None
    #: ``hoodie.datasource.write.reconcile.schema`` (core/commit/pipeline.py)
    reconcile_schema: bool = RECONCILE_SCHEMA.default
    #: ``hoodie.bulkinsert.sort.mode`` (the bulk_insert planners)
    bulk_insert_sort_mode: BulkInsertSortMode = BULKINSERT_SORT_MODE.default
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None, *,
                     warn: Callable[[str], None] | None = None) -> "WriteConfig":
        """The typed config of ``options``. A key nothing reads is refused here, whatever the
        entry point (library, CLI, DAG, Spark job): a misspelt ``hoodie.write.lock.providr``
        must not mean the default lock (``hoodie.occ.options.strict=false`` only warns)."""
        options = dict(options or {})
        unknown = check_option_keys(options, warn=warn)
        if unknown:
            (warn or log.warning)(f"options nothing reads ({OPTIONS_STRICT_KEY}=false): {unknown}")
        lock = LockConfig.from_options(options)
        skew = MAX_CLOCK_SKEW_MS.get(options)
        if MAX_CLOCK_SKEW_MS.key not in options and lock.provider.lower().replace("_", "") in (
                "inprocess", "org.apache.hudi.client.transaction.lock.inprocesslockprovider"):
            skew = 1  # as Hudi infers for the in-process lock: one process, one clock
        cfg = cls(
            concurrency_mode=CONCURRENCY_MODE.get(options),
            conflict_resolution_strategy=(CONFLICT_RESOLUTION_STRATEGY.get(options).strip()
                                          if CONFLICT_RESOLUTION_STRATEGY.is_set(options) else ""),
            failed_writes_policy=FAILED_WRITES_POLICY.get(options),
            max_clock_skew_ms=skew,
            time_generator_type=TIME_GENERATOR_TYPE.get(options),
            marker_type=MARKERS_TYPE.get(options),
            markers_batch_num_files=MARKERS_BATCH_NUM_FILES.get(options),
            lock=lock,
            heartbeat=HeartbeatConfig.from_options(options),
            early_conflict=EarlyConflictConfig.from_options(options),
            index=IndexConfig.from_options(options),
            metadata=MetadataTableConfig.from_options(options),
            write_table_version=WRITE_TABLE_VERSION.get(options),
            auto_upgrade=AUTO_UPGRADE.get(options),
            combine_before_insert=COMBINE_BEFORE_INSERT.get(options),
            write_kind=WRITE_KIND.get(options),
            writer_labels=WRITER_LABELS.get(options),
            recovery_grace_period_ms=RECOVERY_GRACE_PERIOD_MS.get(options),
            clustering_fail_on_pending_ingestion=CLUSTERING_FAIL_ON_PENDING_INGESTION.get(options),
            clustering_updates_strategy=CLUSTERING_UPDATES_STRATEGY.get(options),
            meta_sync=MetaSyncConfig.from_options(options),
            parquet=ParquetConfig.from_options(options),
            merge_mode=requested_merge_mode(options),
            reconcile_schema=RECONCILE_SCHEMA.get(options),
            bulk_insert_sort_mode=BULKINSERT_SORT_MODE.get(options),
            options=options,
        )
        NUM_RETRIES_ON_CONFLICT.get(options)  # validated here; the retry loops read it (commit/retry.py)
        if cfg.max_clock_skew_ms < 0:
            raise ConfigError("max clock skew must be >= 0", key=MAX_CLOCK_SKEW_MS.key,
                              value=cfg.max_clock_skew_ms)
        if cfg.heartbeat.interval_ms <= 0 or cfg.heartbeat.tolerable_misses <= 0:
            raise ConfigError("heartbeat interval and tolerable misses must be positive",
                              key=HEARTBEAT_INTERVAL_MS.key, value=cfg.heartbeat.interval_ms)
        return cfg

    @property
    def conflict_strategy(self) -> str:
        """The conflict-resolution strategy this writer resolves with: the one named, else as
        Hudi infers it, the bucket strategy under the bucket index (``hoodie.index.type=BUCKET``)
        and the property's default otherwise."""
        if self.conflict_resolution_strategy:
            return self.conflict_resolution_strategy
        return "bucket" if self.index.type == "BUCKET" else CONFLICT_RESOLUTION_STRATEGY.default

    @property
    def rejects_clustering_updates(self) -> bool:
        """Whether a write must refuse file groups under a pending clustering plan (before it
        writes): the updates strategy named, else as Hudi infers it, allowed under the
        prefer-writer conflict strategy and refused under every other."""
        if self.clustering_updates_strategy:
            return self.clustering_updates_strategy == REJECT_UPDATE_STRATEGY
        strategy = self.conflict_strategy.lower()
        return not (strategy in ("prefer-writer", "prefer_writer")
                    or strategy.endswith("preferwriterconflictresolutionstrategy"))

    @property
    def skew_wait_ms(self) -> int:
        """How long the instant-time generator waits under the lock (0 unless Hudi's
        WAIT_TO_ADJUST_SKEW is asked for: docs/instant-times.md)."""
        if self.time_generator_type is TimeGeneratorType.WAIT_TO_ADJUST_SKEW:
            return self.max_clock_skew_ms
        return 0

    def replace(self, **changes) -> "WriteConfig":
        return dataclasses.replace(self, **changes)


# --- Hudi's datasource write keys ---------------------------------------------------------------
# What a batch is and how its files are sized, under the names users of Hudi's Spark datasource
# already pass. Defined here, not in the Spark engine, so that every layer knows the keys.

OPERATIONS = {"upsert": "UPSERT", "insert": "INSERT", "delete": "DELETE",
              "bulk_insert": "BULK_INSERT", "insert_overwrite": "INSERT_OVERWRITE"}


def _csv(v: Any) -> list[str]:
    return [s.strip() for s in str(v).split(",") if s.strip()]


def _operation(v: Any) -> str:
    op = str(v).strip().lower().replace("-", "_")
    if op not in OPERATIONS:
        raise ConfigError(f"unknown write operation {v!r}", key=OPERATION.key, value=v,
                          remedy=f"use one of {sorted(OPERATIONS)}")
    return op


DATASOURCE_TABLE_NAME = ConfigProperty("hoodie.datasource.write.table.name", "", str, aliases=("hoodie.table.name",))
RECORD_KEY = ConfigProperty("hoodie.datasource.write.recordkey.field", [], _csv,
                            aliases=("hoodie.table.recordkey.fields",))
PARTITION_PATH = ConfigProperty("hoodie.datasource.write.partitionpath.field", [], _csv,
                                aliases=("hoodie.table.partition.fields",))
PRECOMBINE = ConfigProperty("hoodie.datasource.write.precombine.field", "", str,
                            aliases=("hoodie.table.precombine.field", "hoodie.table.ordering.fields"))
OPERATION = ConfigProperty("hoodie.datasource.write.operation", "upsert", _operation)
HIVE_STYLE = ConfigProperty("hoodie.datasource.write.hive_style_partitioning", False, parse_bool)
URL_ENCODE = ConfigProperty("hoodie.datasource.write.partitionpath.urlencode", False, parse_bool,
                            doc="a table property, taken when a write creates the table; "
                                "afterwards the table's hoodie.properties decides")
POPULATE_META_FIELDS = ConfigProperty(
    "hoodie.populate.meta.fields", True, parse_bool,
    doc="a table property, taken when a write creates the table: false writes virtual keys (no "
        "meta columns; copy-on-write only); afterwards the table's hoodie.properties decides")
MAX_FILE_SIZE = ConfigProperty("hoodie.parquet.max.file.size", 120 * 1024 * 1024, parse_int)
SMALL_FILE_LIMIT = ConfigProperty("hoodie.parquet.small.file.limit", 100 * 1024 * 1024, parse_int,
                                  doc="0 turns small-file top-up off")
RECORD_SIZE_ESTIMATE = ConfigProperty("hoodie.copyonwrite.record.size.estimate", 1024, parse_int)


#: the datasource keys an engine reads besides the write config's (the Spark engine's
#: SparkWriteOptions): parsed with it by check_write_options, so a bad value fails before
#: anything runs, whichever engine the options are for
DATASOURCE_PROPERTIES = (TABLE_TYPE, OPERATION, HIVE_STYLE, URL_ENCODE, MAX_FILE_SIZE, SMALL_FILE_LIMIT,
                         RECORD_SIZE_ESTIMATE)


def check_datasource_options(options: Mapping[str, Any]) -> None:
    """Parse every :data:`DATASOURCE_PROPERTIES` value of ``options`` (a :class:`ConfigError`
    naming the key for a bad one)."""
    for prop in DATASOURCE_PROPERTIES:
        prop.get(options)



# --- table services: clean and clustering ----------------------------------------------------


class CleanPolicy(enum.Enum):
    KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
    KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"


CLEAN_POLICY = ConfigProperty("hoodie.clean.policy", CleanPolicy.KEEP_LATEST_COMMITS,
                              parse_enum(CleanPolicy), aliases=("hoodie.cleaner.policy",),
                              doc="KEEP_LATEST_COMMITS or KEEP_LATEST_FILE_VERSIONS "
                                  "(KEEP_LATEST_BY_HOURS is not supported)")
CLEAN_COMMITS_RETAINED = ConfigProperty("hoodie.clean.commits.retained", 10, parse_int,
                                        aliases=("hoodie.cleaner.commits.retained",))
CLEAN_FILE_VERSIONS_RETAINED = ConfigProperty("hoodie.clean.fileversions.retained", 3, parse_int,
                                              aliases=("hoodie.cleaner.fileversions.retained",))
CLEAN_AUTOMATIC = ConfigProperty("hoodie.clean.automatic", True, parse_bool,
                                 doc="read by orchestrators deciding whether to clean after a write")
CLEAN_ASYNC = ConfigProperty("hoodie.clean.async.enabled", False, parse_bool,
                             aliases=("hoodie.clean.async",))


@dataclass(frozen=True)
class CleanConfig:
    """What a clean keeps, plus the write config it needs (lock, heartbeat, failed-writes policy)."""

    policy: CleanPolicy = CLEAN_POLICY.default
    commits_retained: int = CLEAN_COMMITS_RETAINED.default
    file_versions_retained: int = CLEAN_FILE_VERSIONS_RETAINED.default
    automatic: bool = CLEAN_AUTOMATIC.default
    async_enabled: bool = CLEAN_ASYNC.default
    write: WriteConfig = field(default_factory=WriteConfig)

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None, *,
                     write: WriteConfig | None = None) -> "CleanConfig":
        """``write``: the write config of the same options, when the caller has it parsed."""
        options = dict(options or {})
        cfg = cls(CLEAN_POLICY.get(options), CLEAN_COMMITS_RETAINED.get(options),
                  CLEAN_FILE_VERSIONS_RETAINED.get(options), CLEAN_AUTOMATIC.get(options),
                  CLEAN_ASYNC.get(options), write or WriteConfig.from_options(options))
        if cfg.commits_retained < 1:
            raise ConfigError("a clean must retain at least one commit", key=CLEAN_COMMITS_RETAINED.key,
                              value=cfg.commits_retained, remedy="set it to 1 or more")
        if cfg.file_versions_retained < 1:
            raise ConfigError("a clean must retain at least one file version",
                              key=CLEAN_FILE_VERSIONS_RETAINED.key, value=cfg.file_versions_retained,
                              remedy="set it to 1 or more")
        return cfg


CLUSTERING_SMALL_FILE_LIMIT = ConfigProperty("hoodie.clustering.plan.strategy.small.file.limit",
                                             314_572_800, parse_int,
                                             doc="bytes; base files smaller than this are clustered")
CLUSTERING_TARGET_FILE_MAX_BYTES = ConfigProperty(
    "hoodie.clustering.plan.strategy.target.file.max.bytes", 1_073_741_824, parse_int)
CLUSTERING_MAX_BYTES_PER_GROUP = ConfigProperty(
    "hoodie.clustering.plan.strategy.max.bytes.per.group", 2_147_483_648, parse_int)
CLUSTERING_MAX_NUM_GROUPS = ConfigProperty("hoodie.clustering.plan.strategy.max.num.groups", 30,
                                           parse_int)
CLUSTERING_SORT_COLUMNS = ConfigProperty("hoodie.clustering.plan.strategy.sort.columns", (), _fields)
CLUSTERING_SINGLE_GROUP = ConfigProperty(
    "hoodie.clustering.plan.strategy.single.group.clustering.enabled", True, parse_bool,
    doc="whether a group of one file slice is worth clustering (only when it is sorted)")
CLUSTERING_PARTITION_SELECTED = ConfigProperty("hoodie.clustering.plan.strategy.partition.selected",
                                               (), _fields, doc="comma-separated partition paths")


@dataclass(frozen=True)
class ClusteringConfig:
    """How clustering chooses its input (small file groups per partition) and sizes its output."""

    small_file_limit: int = CLUSTERING_SMALL_FILE_LIMIT.default
    target_file_max_bytes: int = CLUSTERING_TARGET_FILE_MAX_BYTES.default
    max_bytes_per_group: int = CLUSTERING_MAX_BYTES_PER_GROUP.default
    max_num_groups: int = CLUSTERING_MAX_NUM_GROUPS.default
    sort_columns: tuple[str, ...] = CLUSTERING_SORT_COLUMNS.default
    single_group_clustering: bool = CLUSTERING_SINGLE_GROUP.default
    partitions: tuple[str, ...] = CLUSTERING_PARTITION_SELECTED.default
    write: WriteConfig = field(default_factory=WriteConfig)

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None, *,
                     write: WriteConfig | None = None) -> "ClusteringConfig":
        """``write``: the write config of the same options, when the caller has it parsed (it
        holds the clustering updates strategy, checked there)."""
        options = dict(options or {})
        cfg = cls(CLUSTERING_SMALL_FILE_LIMIT.get(options), CLUSTERING_TARGET_FILE_MAX_BYTES.get(options),
                  CLUSTERING_MAX_BYTES_PER_GROUP.get(options), CLUSTERING_MAX_NUM_GROUPS.get(options),
                  CLUSTERING_SORT_COLUMNS.get(options), CLUSTERING_SINGLE_GROUP.get(options),
                  CLUSTERING_PARTITION_SELECTED.get(options), write or WriteConfig.from_options(options))
        if cfg.target_file_max_bytes <= 0 or cfg.max_num_groups <= 0:
            raise ConfigError("clustering target size and max groups must be positive",
                              key=CLUSTERING_TARGET_FILE_MAX_BYTES.key, value=cfg.target_file_max_bytes)
        return cfg


# --- compaction (merge-on-read) -----------------------------------------------------------


class CompactionTriggerStrategy(enum.Enum):
    """Hudi's ``CompactionTriggerStrategy``: when scheduling finds enough work to plan."""

    NUM_COMMITS = "NUM_COMMITS"
    NUM_COMMITS_AFTER_LAST_REQUEST = "NUM_COMMITS_AFTER_LAST_REQUEST"
    TIME_ELAPSED = "TIME_ELAPSED"
    NUM_AND_TIME = "NUM_AND_TIME"
    NUM_OR_TIME = "NUM_OR_TIME"


#: The compaction strategies (Hudi class names) the planner implements; others are refused.
LOG_FILE_SIZE_STRATEGY = "org.apache.hudi.table.action.compact.strategy.LogFileSizeBasedCompactionStrategy"
LOG_FILE_NUM_STRATEGY = "org.apache.hudi.table.action.compact.strategy.LogFileNumBasedCompactionStrategy"
UNBOUNDED_STRATEGY = "org.apache.hudi.table.action.compact.strategy.UnBoundedCompactionStrategy"
COMPACTION_STRATEGIES = (LOG_FILE_SIZE_STRATEGY, LOG_FILE_NUM_STRATEGY, UNBOUNDED_STRATEGY)

COMPACT_MAX_DELTA_COMMITS = ConfigProperty(
    "hoodie.compact.inline.max.delta.commits", 5, parse_int,
    doc="deltacommits since the last compaction before one is scheduled (NUM_COMMITS)")
COMPACT_MAX_DELTA_SECONDS = ConfigProperty(
    "hoodie.compact.inline.max.delta.seconds", 3600, parse_int,
    doc="seconds since the last compaction before one is scheduled (TIME_ELAPSED)")
COMPACT_TRIGGER_STRATEGY = ConfigProperty(
    "hoodie.compact.inline.trigger.strategy", CompactionTriggerStrategy.NUM_COMMITS,
    parse_enum(CompactionTriggerStrategy),
    doc="NUM_COMMITS, NUM_COMMITS_AFTER_LAST_REQUEST, TIME_ELAPSED, NUM_AND_TIME or NUM_OR_TIME")
COMPACTION_STRATEGY = ConfigProperty(
    "hoodie.compaction.strategy", LOG_FILE_SIZE_STRATEGY, str,
    doc="which file slices a plan takes: LogFileSizeBasedCompactionStrategy (largest logs first, "
        "bounded by hoodie.compaction.target.io), LogFileNumBasedCompactionStrategy or "
        "UnBoundedCompactionStrategy")
COMPACTION_TARGET_IO_MB = ConfigProperty(
    "hoodie.compaction.target.io", 500 * 1024, parse_int,
    doc="MB of I/O (base + logs read, base written) one plan may take, size-based strategy")
COMPACTION_LOGFILE_SIZE_THRESHOLD = ConfigProperty(
    "hoodie.compaction.logfile.size.threshold", 0, parse_int,
    doc="bytes of log files a slice needs to be compacted, size-based strategy")
COMPACTION_LOGFILE_NUM_THRESHOLD = ConfigProperty(
    "hoodie.compaction.logfile.num.threshold", 0, parse_int,
    doc="log files a slice needs to be compacted, number-based strategy")


@dataclass(frozen=True)
class CompactionConfig:
    """When compaction is scheduled and which file slices its plan takes (Hudi's keys and
    defaults)."""

    max_delta_commits: int = COMPACT_MAX_DELTA_COMMITS.default
    max_delta_seconds: int = COMPACT_MAX_DELTA_SECONDS.default
    trigger: CompactionTriggerStrategy = COMPACT_TRIGGER_STRATEGY.default
    strategy: str = COMPACTION_STRATEGY.default
    target_io_mb: int = COMPACTION_TARGET_IO_MB.default
    logfile_size_threshold: int = COMPACTION_LOGFILE_SIZE_THRESHOLD.default
    logfile_num_threshold: int = COMPACTION_LOGFILE_NUM_THRESHOLD.default
    write: WriteConfig = field(default_factory=WriteConfig)

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None, *,
                     write: WriteConfig | None = None) -> "CompactionConfig":
        """``write``: the write config of the same options, when the caller has it parsed."""
        options = dict(options or {})
        raw = COMPACTION_STRATEGY.get(options).strip()
        strategy = next((s for s in COMPACTION_STRATEGIES
                         if raw in (s, s.rsplit(".", 1)[-1])), None)
        if strategy is None:
            raise ConfigError(f"compaction strategy {raw!r} is not implemented here",
                              key=COMPACTION_STRATEGY.key, value=raw,
                              remedy="use one of " + ", ".join(s.rsplit(".", 1)[-1]
                                                                for s in COMPACTION_STRATEGIES))
        cfg = cls(COMPACT_MAX_DELTA_COMMITS.get(options), COMPACT_MAX_DELTA_SECONDS.get(options),
                  COMPACT_TRIGGER_STRATEGY.get(options), strategy,
                  COMPACTION_TARGET_IO_MB.get(options), COMPACTION_LOGFILE_SIZE_THRESHOLD.get(options),
                  COMPACTION_LOGFILE_NUM_THRESHOLD.get(options), write or WriteConfig.from_options(options))
        if cfg.max_delta_commits <= 0 or cfg.target_io_mb <= 0:
            raise ConfigError("compaction delta commits and target I/O must be positive",
                              key=COMPACT_MAX_DELTA_COMMITS.key, value=cfg.max_delta_commits)
        return cfg


# --- archival -------------------------------------------------------------------------------

KEEP_MIN_COMMITS = ConfigProperty("hoodie.keep.min.commits", 20, parse_int,
                                  doc="completed writes archival leaves on the active timeline")
KEEP_MAX_COMMITS = ConfigProperty("hoodie.keep.max.commits", 30, parse_int,
                                  doc="archival starts once more completed writes than this are active")
ARCHIVE_AUTOMATIC = ConfigProperty("hoodie.archive.automatic", True, parse_bool,
                                   doc="archive after each commit when needed, as Hudi does")
ARCHIVE_ASYNC = ConfigProperty("hoodie.archive.async", False, parse_bool,
                               doc="accepted for Hudi configs; archival always runs under the lock")
ARCHIVE_BEYOND_SAVEPOINT = ConfigProperty("hoodie.archive.beyond.savepoint", False, parse_bool)
TIMELINE_COMPACTION_BATCH = ConfigProperty("hoodie.timeline.compaction.batch.size", 10, parse_int,
                                           doc="files of one LSM layer merged into the next")
TIMELINE_COMPACTION_MAX_BYTES = ConfigProperty("hoodie.timeline.compaction.target.file.max.bytes",
                                               1_073_741_824, parse_int)


@dataclass(frozen=True)
class ArchivalConfig:
    """When archival moves completed instants to the LSM history, with Hudi's keys and defaults."""

    min_commits: int = KEEP_MIN_COMMITS.default
    max_commits: int = KEEP_MAX_COMMITS.default
    automatic: bool = ARCHIVE_AUTOMATIC.default
    beyond_savepoint: bool = ARCHIVE_BEYOND_SAVEPOINT.default
    compaction_batch_size: int = TIMELINE_COMPACTION_BATCH.default
    compaction_max_bytes: int = TIMELINE_COMPACTION_MAX_BYTES.default
    write: WriteConfig = field(default_factory=WriteConfig)

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None, *,
                     write: WriteConfig | None = None) -> "ArchivalConfig":
        """``write``: the write config of the same options, when the caller has it parsed."""
        options = dict(options or {})
        cfg = cls(KEEP_MIN_COMMITS.get(options), KEEP_MAX_COMMITS.get(options),
                  ARCHIVE_AUTOMATIC.get(options), ARCHIVE_BEYOND_SAVEPOINT.get(options),
                  TIMELINE_COMPACTION_BATCH.get(options), TIMELINE_COMPACTION_MAX_BYTES.get(options),
                  write or WriteConfig.from_options(options))
        ARCHIVE_ASYNC.get(options)  # validated, no effect
        if cfg.min_commits < 1 or cfg.max_commits <= cfg.min_commits:
            raise ConfigError(
                f"{KEEP_MAX_COMMITS.key}={cfg.max_commits} must be greater than "
                f"{KEEP_MIN_COMMITS.key}={cfg.min_commits}, which must be at least 1",
                key=KEEP_MAX_COMMITS.key, value=cfg.max_commits,
                remedy="keep Hudi's defaults (20 and 30) or raise hoodie.keep.max.commits")
        retained = CLEAN_COMMITS_RETAINED.get(options)
        if cfg.min_commits <= retained:
            # Hudi refuses this too: incremental readers and clean need those commits active
            raise ConfigError(
                f"{KEEP_MIN_COMMITS.key}={cfg.min_commits} must be greater than "
                f"{CLEAN_COMMITS_RETAINED.key}={retained}", key=KEEP_MIN_COMMITS.key,
                value=cfg.min_commits,
                remedy=f"raise {KEEP_MIN_COMMITS.key} (and {KEEP_MAX_COMMITS.key}) above the "
                       "commits clean retains, or retain fewer commits")
        if cfg.compaction_batch_size < 2:
            raise ConfigError("the timeline compaction batch must merge at least 2 files",
                              key=TIMELINE_COMPACTION_BATCH.key, value=cfg.compaction_batch_size,
                              remedy="set it to 2 or more (Hudi's default: 10)")
        return cfg


def service_config(cls, config):
    """A table service's typed config from what its caller has: the typed config itself, a
    :class:`WriteConfig` (the service's keys parsed from the options it carries; the write
    config is that one, as given) or the options as a mapping."""
    if isinstance(config, cls):
        return config
    if isinstance(config, WriteConfig):
        return cls.from_options(config.options, write=config)
    return cls.from_options(config or {})


# --- catalog sync (Hive Metastore; issue 41 item 3) ------------------------------------------------
# Hudi's meta-sync keys, read by core/catalog after each commit and by `hudi-occ sync`
# (docs/catalog-sync.md). Names and defaults are Java's HiveSyncConfig / HoodieSyncConfig.

class SyncMode(str, enum.Enum):
    """``hoodie.datasource.hive_sync.mode``: only the thrift metastore (``hms``) is spoken here."""

    HMS = "hms"
    GLUE = "glue"


class SyncTableStrategy(str, enum.Enum):
    """``hoodie.datasource.hive_sync.table.strategy``: which tables a merge-on-read table gets."""

    ALL = "ALL"
    RO = "RO"
    RT = "RT"


HIVE_SYNC_TOOL = "org.apache.hudi.hive.HiveSyncTool"
GLUE_SYNC_TOOL = "org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool"


def _sync_mode(v: Any) -> SyncMode:
    s = str(v).strip().lower()
    if s in ("hms", "thrift"):
        return SyncMode.HMS
    if s == "glue":
        return SyncMode.GLUE
    raise ConfigError(f"hive sync mode {v!r} is not spoken here", key="hoodie.datasource.hive_sync.mode",
                      value=v, remedy="use hms (the metastore's thrift API, "
                                      "hoodie.datasource.hive_sync.metastore.uris) or glue; jdbc and "
                                      "hiveql need a HiveServer2 this project does not talk to")


def _sync_tools(v: Any) -> list[str]:
    tools = [s.strip() for s in str(v).split(",") if s.strip()]
    for t in tools:
        if t not in (HIVE_SYNC_TOOL, GLUE_SYNC_TOOL):
            raise ConfigError(f"sync tool {t!r} is not implemented here",
                              key="hoodie.meta.sync.client.tool.class", value=v,
                              remedy=f"use {HIVE_SYNC_TOOL} (Hive Metastore) or {GLUE_SYNC_TOOL} (AWS Glue)")
    return tools


def _kv_pairs(v: Any) -> dict[str, str]:
    """Java's ``ConfigUtils.toMap``: ``k1=v1\\nk2=v2`` (newline or comma separated)."""
    out: dict[str, str] = {}
    for part in str(v).replace("\n", ",").split(","):
        if part.strip():
            if "=" not in part:
                raise ValueError(f"{part!r} is not key=value")
            k, val = part.split("=", 1)
            out[k.strip()] = val.strip()
    return out


META_SYNC_ENABLE = ConfigProperty("hoodie.datasource.meta.sync.enable", False, parse_bool,
                                  doc="sync the table to a catalog after each commit")
HIVE_SYNC_ENABLE = ConfigProperty("hoodie.datasource.hive_sync.enable", False, parse_bool,
                                  doc="sync the table to the Hive Metastore after each commit")
META_SYNC_TOOLS = ConfigProperty("hoodie.meta.sync.client.tool.class", [HIVE_SYNC_TOOL], _sync_tools)
HIVE_SYNC_MODE = ConfigProperty("hoodie.datasource.hive_sync.mode", SyncMode.HMS, _sync_mode)
HIVE_SYNC_METASTORE_URIS = ConfigProperty("hoodie.datasource.hive_sync.metastore.uris",
                                          "thrift://localhost:9083", str)
HIVE_SYNC_DATABASE = ConfigProperty("hoodie.datasource.hive_sync.database", "default", str)
#: Java infers it from hoodie.table.name; "" here means the same
HIVE_SYNC_TABLE = ConfigProperty("hoodie.datasource.hive_sync.table", "", str)
HIVE_SYNC_PARTITION_FIELDS = ConfigProperty(
    "hoodie.datasource.hive_sync.partition_fields", None,
    lambda v: [s.strip() for s in str(v).split(",") if s.strip()],
    doc="inferred from the table's partition fields, as Java infers it")
HIVE_SYNC_PARTITION_EXTRACTOR = ConfigProperty(
    "hoodie.datasource.hive_sync.partition_extractor_class", "", str,
    aliases=("hoodie.datasource.partition_extractor_class",),
    doc="inferred as Java infers it; MultiPartKeys, SinglePartPartition, HiveStyle, NonPartitioned")
HIVE_SYNC_AUTO_CREATE_DATABASE = ConfigProperty("hoodie.datasource.hive_sync.auto_create_database", True, parse_bool)
HIVE_SYNC_SKIP_RO_SUFFIX = ConfigProperty("hoodie.datasource.hive_sync.skip_ro_suffix", False, parse_bool)
HIVE_SYNC_TABLE_STRATEGY = ConfigProperty("hoodie.datasource.hive_sync.table.strategy", SyncTableStrategy.ALL,
                                          parse_enum(SyncTableStrategy))
HIVE_SYNC_AS_DATASOURCE = ConfigProperty("hoodie.datasource.hive_sync.sync_as_datasource", True, parse_bool)
HIVE_SYNC_OMIT_METADATA_FIELDS = ConfigProperty("hoodie.datasource.hive_sync.omit_metadata_fields", False, parse_bool)
HIVE_SYNC_SUPPORT_TIMESTAMP = ConfigProperty("hoodie.datasource.hive_sync.support_timestamp", False, parse_bool)
HIVE_SYNC_TABLE_PROPERTIES = ConfigProperty("hoodie.datasource.hive_sync.table_properties", {}, _kv_pairs)
HIVE_SYNC_SERDE_PROPERTIES = ConfigProperty("hoodie.datasource.hive_sync.serde_properties", {}, _kv_pairs)
HIVE_SYNC_MANAGED_TABLE = ConfigProperty("hoodie.datasource.hive_sync.create_managed_table", False, parse_bool)
HIVE_SYNC_IGNORE_EXCEPTIONS = ConfigProperty("hoodie.datasource.hive_sync.ignore_exceptions", False, parse_bool)
HIVE_SYNC_BATCH_NUM = ConfigProperty("hoodie.datasource.hive_sync.batch_num", 1000, parse_int)
HIVE_SYNC_SCHEMA_THRESHOLD = ConfigProperty("hoodie.datasource.hive_sync.schema_string_length_thresh", 4000, parse_int)
META_SYNC_INCREMENTAL = ConfigProperty("hoodie.meta.sync.incremental", True, parse_bool)
META_SYNC_DECODE_PARTITION = ConfigProperty("hoodie.meta.sync.decode_partition", None, parse_bool,
                                            doc="inferred from hoodie.datasource.write.partitionpath.urlencode")
META_SYNC_CONDITIONAL = ConfigProperty("hoodie.datasource.meta_sync.condition.sync", False, parse_bool)
META_SYNC_SNAPSHOT_WITH_TABLE_NAME = ConfigProperty("hoodie.meta.sync.sync_snapshot_with_table_name", True, parse_bool)
META_SYNC_SPARK_VERSION = ConfigProperty("hoodie.meta_sync.spark.version", "", str)
#: this project's key: no Hudi key bounds a metastore call (Java takes HiveConf's
#: hive.metastore.client.socket.timeout, 600 s); every connect and every call waits this long
META_SYNC_TIMEOUT_MS = ConfigProperty("hoodie.occ.meta.sync.timeout.ms", 20_000, parse_int,
                                      doc="this project's key: connect and read timeout of each metastore call")


@dataclass(frozen=True)
class MetaSyncConfig:
    """What a catalog sync reads of a writer's options (docs/catalog-sync.md)."""

    enabled: bool = False
    tools: tuple[str, ...] = (HIVE_SYNC_TOOL,)
    mode: SyncMode = SyncMode.HMS
    metastore_uris: str = "thrift://localhost:9083"
    database: str = "default"
    table: str = ""
    partition_fields: tuple[str, ...] | None = None
    partition_extractor: str = ""
    auto_create_database: bool = True
    skip_ro_suffix: bool = False
    table_strategy: SyncTableStrategy = SyncTableStrategy.ALL
    as_datasource: bool = True
    omit_metadata_fields: bool = False
    support_timestamp: bool = False
    table_properties: Mapping[str, str] = field(default_factory=dict)
    serde_properties: Mapping[str, str] = field(default_factory=dict)
    managed_table: bool = False
    ignore_exceptions: bool = False
    batch_num: int = 1000
    schema_length_threshold: int = 4000
    incremental: bool = True
    decode_partition: bool | None = None
    conditional: bool = False
    snapshot_with_table_name: bool = True
    spark_version: str = ""
    timeout_ms: int = 20_000

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None) -> "MetaSyncConfig":
        options = dict(options or {})
        tools = META_SYNC_TOOLS.get(options)
        mode = HIVE_SYNC_MODE.get(options)
        if GLUE_SYNC_TOOL in tools and HIVE_SYNC_MODE.key not in options:
            mode = SyncMode.GLUE
        cfg = cls(
            enabled=META_SYNC_ENABLE.get(options) or HIVE_SYNC_ENABLE.get(options),
            tools=tuple(tools), mode=mode,
            metastore_uris=HIVE_SYNC_METASTORE_URIS.get(options),
            database=HIVE_SYNC_DATABASE.get(options),
            table=HIVE_SYNC_TABLE.get(options),
            partition_fields=(None if HIVE_SYNC_PARTITION_FIELDS.get(options) is None
                              else tuple(HIVE_SYNC_PARTITION_FIELDS.get(options))),
            partition_extractor=HIVE_SYNC_PARTITION_EXTRACTOR.get(options),
            auto_create_database=HIVE_SYNC_AUTO_CREATE_DATABASE.get(options),
            skip_ro_suffix=HIVE_SYNC_SKIP_RO_SUFFIX.get(options),
            table_strategy=HIVE_SYNC_TABLE_STRATEGY.get(options),
            as_datasource=HIVE_SYNC_AS_DATASOURCE.get(options),
            omit_metadata_fields=HIVE_SYNC_OMIT_METADATA_FIELDS.get(options),
            support_timestamp=HIVE_SYNC_SUPPORT_TIMESTAMP.get(options),
            table_properties=HIVE_SYNC_TABLE_PROPERTIES.get(options),
            serde_properties=HIVE_SYNC_SERDE_PROPERTIES.get(options),
            managed_table=HIVE_SYNC_MANAGED_TABLE.get(options),
            ignore_exceptions=HIVE_SYNC_IGNORE_EXCEPTIONS.get(options),
            batch_num=HIVE_SYNC_BATCH_NUM.get(options),
            schema_length_threshold=HIVE_SYNC_SCHEMA_THRESHOLD.get(options),
            incremental=META_SYNC_INCREMENTAL.get(options),
            decode_partition=META_SYNC_DECODE_PARTITION.get(options),
            conditional=META_SYNC_CONDITIONAL.get(options),
            snapshot_with_table_name=META_SYNC_SNAPSHOT_WITH_TABLE_NAME.get(options),
            spark_version=META_SYNC_SPARK_VERSION.get(options),
            timeout_ms=META_SYNC_TIMEOUT_MS.get(options),
        )
        if cfg.batch_num < 1 or cfg.timeout_ms < 1 or cfg.schema_length_threshold < 1:
            raise ConfigError("the sync's batch size, timeout and schema length threshold must be positive",
                              key=HIVE_SYNC_BATCH_NUM.key, value=cfg.batch_num,
                              remedy="give positive values (defaults: 1000, 20000 ms, 4000)")
        return cfg
