"""The staged-commit store: a write's complete commit, recorded before the table lock is taken.

A staged commit (``.hoodie/.aux/occ/staged/<t>.commit``) lets another process complete the
instant of a writer that died between staging and completing (recovery), and tells the LAZY
rollback to leave such an instant alone for a grace period. It sits below both rollback and
recovery: both ask it, neither is asked by it.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from dataclasses import asdict, dataclass, field

from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import CorruptMetadataError, StagedCommitError
from airflow_hudi_occ.core.concurrency.heartbeat import last_beat
from airflow_hudi_occ.core.format.metadata import CommitMetadata

log = logging.getLogger(__name__)

STAGED_DIR = (".hoodie", ".aux", "occ", "staged")
SUFFIX = ".commit"
FORMAT_VERSION = 1

#: extra metadata key naming the writer that re-committed a staged instant
EXTRA_RECOVERED_BY = "airflow_hudi_occ.recovered_by"

def staged_path(table, instant: str) -> str:
    return table.storage.path(*STAGED_DIR, f"{instant}{SUFFIX}")


@dataclass
class StagedCommit:
    """Everything needed to complete an instant without its writer."""

    instant: str
    action: str
    operation_type: str
    batch_key: str | None
    checkpoint: str | None
    writer_id: str
    attempt: int
    is_table_service: bool
    last_completed: str | None
    pending_at_start: list[str]
    files: list[dict]            # {"path": relative path, "size": bytes}
    metadata_b64: str            # the commit metadata exactly as it would be completed
    staged_at_ms: int = 0
    version: int = FORMAT_VERSION
    labels: dict = field(default_factory=dict)

    def commit_metadata(self) -> CommitMetadata:
        return CommitMetadata.decode(base64.b64decode(self.metadata_b64), f"staged {self.instant}")

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes, path: str | None = None) -> "StagedCommit":
        try:
            d = json.loads(data)
            known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
            out = cls(**known)
            base64.b64decode(out.metadata_b64, validate=True)
            return out
        except (ValueError, TypeError, KeyError) as e:
            raise CorruptMetadataError(f"staged commit {path or ''} is unreadable: {e}", path=path,
                                       remedy="delete it; the instant is then rolled back lazily "
                                              "and its batch rewritten") from e


# -- pre-commit ----------------------------------------------------------------------------------

def stage_commit(table, tx, metadata: CommitMetadata) -> StagedCommit:
    """Record ``tx``'s complete commit before the lock is taken (the pre-commit)."""
    files = []
    for s in metadata.write_stats():
        if s.path:
            files.append({"path": s.path, "size": int(s.file_size_in_bytes)})
    snap = tx.snapshot
    staged = StagedCommit(
        instant=tx.instant_time, action=tx.action.value, operation_type=tx.operation_type,
        batch_key=tx.batch_key, checkpoint=tx.checkpoint, writer_id=tx.writer_id,
        attempt=tx.attempt, is_table_service=tx.is_table_service,
        last_completed=snap.last_completed.requested_time if snap.last_completed else None,
        pending_at_start=sorted(snap.pending_at_start), files=files,
        metadata_b64=base64.b64encode(metadata.encode()).decode("ascii"),
        staged_at_ms=int(time.time() * 1000))
    table.storage.create_if_absent(staged_path(table, staged.instant), staged.encode())
    return staged


def read_staged(table, instant: str) -> StagedCommit | None:
    path = staged_path(table, instant)
    try:
        return StagedCommit.decode(table.storage.read(path), path)
    except FileNotFoundError:
        return None


def delete_staged(table, instant: str) -> None:
    table.storage.delete(staged_path(table, instant))


def staged_instants(table) -> list[str]:
    try:
        names = table.storage.list_names(table.storage.path(*STAGED_DIR))
    except FileNotFoundError:
        return []
    return sorted(n[: -len(SUFFIX)] for n in names if n.endswith(SUFFIX) and n[: -len(SUFFIX)].isdigit())


# -- finding what to recover ------------------------------------------------------------------------

def _last_sign_of_life(table, staged: StagedCommit) -> float:
    beat = last_beat(table, staged.instant)
    return max(beat or 0.0, staged.staged_at_ms / 1000.0)


def in_grace(table, instant: str, config: WriteConfig, *, now: float | None = None) -> bool:
    """True while a dead staged instant of a batch must be left for its retry to recover."""
    grace_ms = config.recovery_grace_period_ms
    if grace_ms <= 0:
        return False
    try:
        staged = read_staged(table, instant)
    except CorruptMetadataError:
        return False
    if staged is None or not staged.batch_key:
        return False
    now = time.time() if now is None else now
    dead_for_ms = (now - _last_sign_of_life(table, staged)) * 1000 - config.heartbeat.expiry_ms
    return dead_for_ms < grace_ms


def verify_files(table, staged: StagedCommit) -> None:
    """Every staged data file exists with the size the writer recorded."""
    for f in staged.files:
        path = table.storage.path(f["path"])
        try:
            size = table.storage.size(path)
        except FileNotFoundError:
            raise StagedCommitError(f"staged instant {staged.instant} names {f['path']}, which is "
                                    "missing", instant=staged.instant, path=f["path"]) from None
        if size != int(f["size"]):
            raise StagedCommitError(f"staged instant {staged.instant}: {f['path']} has {size} bytes, "
                                    f"the commit recorded {f['size']}", instant=staged.instant,
                                    path=f["path"])


def prune_staged(table) -> list[str]:
    """Delete staged commits of instants that are no longer pending (completed, rolled back).

    The folder is listed *before* the timeline is loaded: an instant is on the timeline before
    its commit is staged, so a staged file seen first whose instant is absent from the later
    timeline was rolled back (or archived), never "not yet requested"."""
    names = staged_instants(table)
    if not names:
        return []
    tl = table.timeline()
    gone = []
    for t in names:
        inst = tl.get(t)
        if inst is None or inst.is_completed:
            delete_staged(table, t)
            gone.append(t)
    return gone


__all__ = ["StagedCommit", "stage_commit", "read_staged", "delete_staged", "staged_instants",
           "verify_files", "prune_staged", "in_grace", "EXTRA_RECOVERED_BY",
           "staged_path", "STAGED_DIR"]
