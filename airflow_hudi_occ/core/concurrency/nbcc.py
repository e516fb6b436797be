"""Non-blocking concurrency control (NBCC): Hudi 1.x's multi-writer mode in which concurrent
writers to the same file group all commit.

``hoodie.write.concurrency.mode=NON_BLOCKING_CONCURRENCY_CONTROL``, as Hudi 1.x has it:

- only for merge-on-read tables with the *simple* bucket index (``hoodie.index.type=BUCKET``,
  ``hoodie.index.bucket.engine=SIMPLE``, ``hoodie.bucket.index.num.buckets``): a key's file
  group is a function of the key, and a bucket's fileId is the same for every writer
  (``<bucket>-0000-0000-0000-000000000000-0``), so two writers creating the same new bucket
  name one file group, not two (Java's ``HoodieWriteConfig`` validation and
  ``BucketIdentifier.newBucketFileIdForNBCC``);
- every write of a record goes to a log file of its own deltacommit (never a base file: Java's
  "always write into log file instead of base file if using NB-CC"), so writers never touch
  each other's files;
- no conflict resolution between writers (``HoodieWriteConfig.needResolveWriteConflict`` is
  false for every operation but BULK_INSERT, which may create base files and still resolves);
  readers and compaction merge the log records by the ordering field, ties going to the later
  *completion* time (completion-time file slicing puts every log into the right slice);
- early conflict detection is refused (Hudi: "set hoodie.write.concurrency.mode=
  OPTIMISTIC_CONCURRENCY_CONTROL"), and so is the EAGER failed-writes policy, which would roll
  back the other writers' live deltacommits.

Table services keep their rules: a compaction plans only logs completed before it and its
commit runs no resolution against deltacommits (as without NBCC); clustering is refused on
bucket-index tables (``services/clustering.py``).

Errors: :class:`ConfigError` naming the key to set, raised before anything is written.
"""

from __future__ import annotations

from airflow_hudi_occ.core.config import (BUCKET_ENGINE, BUCKET_NUM, INDEX_TYPE, ConcurrencyMode, FailedWritesPolicy,
                                          WriteConfig)
from airflow_hudi_occ.core.errors import ConfigError

MODE_KEY = "hoodie.write.concurrency.mode"
NBCC = ConcurrencyMode.NON_BLOCKING_CONCURRENCY_CONTROL.value


def is_nbcc(config: WriteConfig) -> bool:
    return config.concurrency_mode is ConcurrencyMode.NON_BLOCKING_CONCURRENCY_CONTROL


def num_buckets(table, config: WriteConfig) -> int:
    """The table's bucket count: the write option, else ``hoodie.properties``, else Hudi's
    default 4. Writers that disagree would put one key in two buckets: refused."""
    stored = table.config.bucket_num
    given = config.index.num_buckets_given
    if given is not None and stored is not None and given != stored:
        raise ConfigError(f"table {table.name} has {stored} buckets, the write asks for {given}",
                          key=BUCKET_NUM.key, value=given,
                          remedy=f"set {BUCKET_NUM.key}={stored} (the bucket count is fixed "
                                 "with the simple bucket engine)")
    n = given if given is not None else (stored if stored is not None else config.index.num_buckets)
    if n <= 0:
        raise ConfigError("the bucket index needs a positive number of buckets",
                          key=BUCKET_NUM.key, value=n, remedy=f"set {BUCKET_NUM.key} to 1 or more")
    return n


def check_config(table, config: WriteConfig) -> None:
    """Refuse NBCC where Hudi refuses it, saying what to set. No-op for the other modes."""
    if not is_nbcc(config):
        return
    if table.config.table_type != "MERGE_ON_READ":
        raise ConfigError(
            f"non-blocking concurrency control needs a MERGE_ON_READ table; {table.name} is "
            f"{table.config.table_type}", key="hoodie.table.type", value=table.config.table_type,
            remedy=f"create the table with table_type='MERGE_ON_READ', or set {MODE_KEY}="
                   "OPTIMISTIC_CONCURRENCY_CONTROL")
    if config.index.type != "BUCKET":
        raise ConfigError(
            "non-blocking concurrency control needs the simple bucket index",
            key=INDEX_TYPE.key, value=config.index.type,
            remedy=f"set {INDEX_TYPE.key}=BUCKET and {BUCKET_NUM.key}=<n>, or set {MODE_KEY}="
                   "OPTIMISTIC_CONCURRENCY_CONTROL")
    if config.index.engine != "SIMPLE":
        raise ConfigError(
            "non-blocking concurrency control needs the SIMPLE bucket engine",
            key=BUCKET_ENGINE.key, value=config.index.engine,
            remedy=f"set {BUCKET_ENGINE.key}=SIMPLE")
    if config.early_conflict.enabled:
        raise ConfigError(
            "early conflict detection does not apply to non-blocking concurrency control "
            "(writers do not conflict)",
            key="hoodie.write.concurrency.early.conflict.detection.enable", value="true",
            remedy=f"set it to false, or set {MODE_KEY}=OPTIMISTIC_CONCURRENCY_CONTROL")
    if config.failed_writes_policy is not FailedWritesPolicy.LAZY:
        raise ConfigError(
            "non-blocking concurrency control has several live writers: EAGER rollback would "
            "delete the others' deltacommits", key="hoodie.clean.failed.writes.policy",
            value=config.failed_writes_policy.value, remedy="set hoodie.clean.failed.writes.policy=LAZY")
    num_buckets(table, config)


def resolves_conflicts(config: WriteConfig, operation_type: str, *, is_table_service: bool) -> bool:
    """Whether a commit runs conflict resolution (Hudi's ``needResolveWriteConflict``): always
    outside NBCC; under NBCC only BULK_INSERT (it may create base files) and table services
    (whose own rules are unchanged)."""
    if not is_nbcc(config) or is_table_service:
        return True
    return str(operation_type).upper() == "BULK_INSERT"


__all__ = ["MODE_KEY", "NBCC", "check_config", "is_nbcc", "num_buckets", "resolves_conflicts"]
