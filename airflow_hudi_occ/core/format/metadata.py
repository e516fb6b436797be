"""Instant metadata: commit / replacecommit metadata, clustering plans, rollback plans.

Table version 8 stores these as Avro object container files with one record (the schemas in
``schemas/`` are Hudi's, as Java Hudi writes them); version 6 stored commits as JSON. Readers
here accept both, chosen by the file's magic bytes, so a table is read the same whoever wrote
it. Anything that does not parse is a :class:`CorruptMetadataError` naming the file: a
truncated commit must never be mistaken for an empty one.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Iterable

import fastavro

from airflow_hudi_occ.core.errors import CorruptMetadataError
from airflow_hudi_occ.core.format.partition_path import check_partition_path, check_relative_path
from airflow_hudi_occ.core.format.layout import FileGroupId

AVRO_MAGIC = b"Obj\x01"

#: This project's own keys in ``extraMetadata``.
EXTRA_WRITER_ID = "airflow_hudi_occ.writer_id"
EXTRA_CHECKPOINT = "airflow_hudi_occ.checkpoint"
EXTRA_ATTEMPT = "airflow_hudi_occ.attempt"
EXTRA_BATCH_KEY = "airflow_hudi_occ.batch_key"
EXTRA_SCHEMA = "schema"



@lru_cache(maxsize=None)
def load_schema(name: str) -> Any:
    text = resources.files(__package__).joinpath("schemas", f"{name}.avsc").read_text()
    return fastavro.parse_schema(json.loads(text))


def avro_encode(schema_name: str, record: dict) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, load_schema(schema_name), [record], codec="null")
    return buf.getvalue()


def decode_record(data: bytes, path: str | None = None) -> dict | None:
    """The single record of an Avro or JSON metadata file; None for an empty file."""
    if not data:
        return None
    try:
        if data[:4] == AVRO_MAGIC:
            records = list(fastavro.reader(io.BytesIO(data)))
            if len(records) != 1:
                raise ValueError(f"expected one record, found {len(records)}")
            rec = records[0]
        else:
            rec = json.loads(data.decode("utf-8"))
        if not isinstance(rec, dict):
            raise ValueError("metadata is not a record")
        return rec
    except CorruptMetadataError:
        raise
    except Exception as e:  # fastavro raises a zoo of types on truncated input
        raise CorruptMetadataError(
            f"cannot parse instant metadata {path or ''}: {type(e).__name__}: {e}", path=path,
            remedy="the file is truncated or not Hudi metadata; if it is a completed instant, "
                   "restore it from a backup; a pending one can be rolled back") from e


# --- write stats and commit metadata ------------------------------------------------------

_STAT_LONGS = ("numWrites", "numDeletes", "numUpdateWrites", "numInserts", "totalWriteBytes",
               "totalWriteErrors", "fileSizeInBytes", "totalLogRecords",
               "totalUpdatedRecordsCompacted", "totalLogBlocks", "totalCorruptLogBlock",
               "totalRollbackBlocks", "totalLogFilesCompacted", "totalLogReadTimeMs",
               "totalLogSizeCompacted", "numUpdates")
_LOG_COUNTS = ("totalLogRecords", "totalUpdatedRecordsCompacted", "totalLogBlocks",
               "totalCorruptLogBlock", "totalRollbackBlocks", "totalLogFilesCompacted",
               "totalLogReadTimeMs", "totalLogSizeCompacted")


@dataclass
class WriteStat:
    """One base file written by an instant (Hudi's HoodieWriteStat)."""

    file_id: str
    path: str  # relative to the base path: <partition>/<file>.parquet
    partition_path: str
    prev_commit: str = "null"
    num_writes: int = 0
    num_deletes: int = 0
    num_update_writes: int = 0
    num_inserts: int = 0
    file_size_in_bytes: int = 0
    total_write_bytes: int = 0
    total_write_errors: int = 0
    prev_base_file: str | None = None
    create_time_ms: int = 0
    upsert_time_ms: int = 0
    #: a deltacommit's log write (HoodieDeltaWriteStat): the slice's base file name ("" for
    #: none), the log files this write produced, the version and offset of the written log
    base_file: str | None = None
    log_files: list[str] | None = None
    log_version: int | None = None
    log_offset: int | None = None
    #: a compaction's counters over the logs it merged (Hudi's names: totalLogRecords,
    #: totalLogFilesCompacted, totalLogSizeCompacted, totalLogBlocks, ...); 0 when absent
    log_counts: dict[str, int] = field(default_factory=dict)

    @property
    def file_group(self) -> FileGroupId:
        return (self.partition_path, self.file_id)

    def to_avro(self) -> dict:
        rec: dict[str, Any] = {k: 0 for k in _STAT_LONGS}
        rec.update({
            "fileId": self.file_id, "path": self.path, "prevCommit": self.prev_commit,
            "numWrites": self.num_writes, "numDeletes": self.num_deletes,
            "numUpdateWrites": self.num_update_writes, "numInserts": self.num_inserts,
            "totalWriteBytes": self.total_write_bytes or self.file_size_in_bytes,
            "totalWriteErrors": self.total_write_errors, "partitionPath": self.partition_path,
            "fileSizeInBytes": self.file_size_in_bytes, "prevBaseFile": self.prev_base_file,
            "totalLogFiles": None, "logVersion": self.log_version, "logOffset": self.log_offset,
            "baseFile": self.base_file,
            "logFiles": list(self.log_files) if self.log_files is not None else None,
            "cdcStats": None, "minEventTime": None, "maxEventTime": None,
            "tempPath": None,
            "runtimeStats": {"totalScanTime": 0, "totalCreateTime": self.create_time_ms,
                             "totalUpsertTime": self.upsert_time_ms},
        })
        rec.update({k: int(v) for k, v in self.log_counts.items() if k in _STAT_LONGS})
        return rec

    @classmethod
    def from_record(cls, rec: dict, partition: str) -> "WriteStat":
        rt = rec.get("runtimeStats") or {}
        return cls(
            file_id=rec.get("fileId") or "",
            path=rec.get("path") or "",
            partition_path=rec.get("partitionPath") if rec.get("partitionPath") is not None else partition,
            prev_commit=rec.get("prevCommit") or "null",
            num_writes=rec.get("numWrites") or 0,
            num_deletes=rec.get("numDeletes") or 0,
            num_update_writes=rec.get("numUpdateWrites") or 0,
            num_inserts=rec.get("numInserts") or 0,
            file_size_in_bytes=rec.get("fileSizeInBytes") or 0,
            total_write_bytes=rec.get("totalWriteBytes") or 0,
            total_write_errors=rec.get("totalWriteErrors") or 0,
            prev_base_file=rec.get("prevBaseFile"),
            create_time_ms=(rt.get("totalCreateTime") or 0) if isinstance(rt, dict) else 0,
            upsert_time_ms=(rt.get("totalUpsertTime") or 0) if isinstance(rt, dict) else 0,
            base_file=rec.get("baseFile"),
            log_files=list(rec["logFiles"]) if rec.get("logFiles") is not None else None,
            log_version=rec.get("logVersion"), log_offset=rec.get("logOffset"),
            log_counts={k: rec[k] for k in _LOG_COUNTS if rec.get(k)},
        )

    def to_json(self) -> dict:
        return {"fileId": self.file_id, "path": self.path, "partitionPath": self.partition_path,
                "prevCommit": self.prev_commit, "numWrites": self.num_writes,
                "numDeletes": self.num_deletes, "numUpdateWrites": self.num_update_writes,
                "numInserts": self.num_inserts, "fileSizeInBytes": self.file_size_in_bytes}


@dataclass
class CommitMetadata:
    """A commit's or replacecommit's metadata (HoodieCommitMetadata / HoodieReplaceCommitMetadata)."""

    partition_to_write_stats: dict[str, list[WriteStat]] = field(default_factory=dict)
    extra_metadata: dict[str, str] = field(default_factory=dict)
    operation_type: str = "UNKNOWN"
    partition_to_replace_file_ids: dict[str, list[str]] | None = None
    compacted: bool = False

    @classmethod
    def from_stats(cls, stats: Iterable[WriteStat], *, operation_type: str,
                   extra_metadata: dict[str, str] | None = None,
                   replaced: dict[str, list[str]] | None = None) -> "CommitMetadata":
        by_part: dict[str, list[WriteStat]] = {}
        for s in stats:
            by_part.setdefault(s.partition_path, []).append(s)
        return cls(by_part, dict(extra_metadata or {}), operation_type, replaced)

    @property
    def is_replace(self) -> bool:
        return self.partition_to_replace_file_ids is not None

    def write_stats(self) -> list[WriteStat]:
        return [s for stats in self.partition_to_write_stats.values() for s in stats]

    def written_file_groups(self) -> set[FileGroupId]:
        return {(s.partition_path, s.file_id) for s in self.write_stats() if s.file_id}

    def replaced_file_groups(self) -> set[FileGroupId]:
        out: set[FileGroupId] = set()
        for part, ids in (self.partition_to_replace_file_ids or {}).items():
            out.update((part, fid) for fid in ids)
        return out

    def mutated_file_groups(self) -> set[FileGroupId]:
        """What conflict resolution compares: written plus replaced file groups."""
        return self.written_file_groups() | self.replaced_file_groups()

    @property
    def schema(self) -> str | None:
        return self.extra_metadata.get(EXTRA_SCHEMA)

    def encode(self) -> bytes:
        rec = {
            "partitionToWriteStats": {p: [s.to_avro() for s in stats]
                                      for p, stats in self.partition_to_write_stats.items()},
            "compacted": self.compacted,
            "extraMetadata": dict(self.extra_metadata),
            "version": 1,
            "operationType": self.operation_type,
        }
        if self.partition_to_replace_file_ids is not None:
            rec["partitionToReplaceFileIds"] = {p: list(v) for p, v in
                                                self.partition_to_replace_file_ids.items()}
            return avro_encode("HoodieReplaceCommitMetadata", rec)
        return avro_encode("HoodieCommitMetadata", rec)

    @classmethod
    def decode(cls, data: bytes, path: str | None = None) -> "CommitMetadata":
        rec = decode_record(data, path)
        if rec is None:
            return cls()
        try:
            stats = {}
            source = f"commit metadata {path or ''}"
            for part, items in (rec.get("partitionToWriteStats") or {}).items():
                stats[check_partition_path(part, source=source)] = [
                    _contained(WriteStat.from_record(it, part), source) for it in (items or [])]
            replaced = rec.get("partitionToReplaceFileIds")
            for part in replaced or {}:
                check_partition_path(part, source=source)
            return cls(
                partition_to_write_stats=stats,
                extra_metadata={str(k): str(v) for k, v in (rec.get("extraMetadata") or {}).items()},
                operation_type=rec.get("operationType") or "UNKNOWN",
                partition_to_replace_file_ids=None if replaced is None else
                {p: list(v or []) for p, v in replaced.items()},
                compacted=bool(rec.get("compacted") or False),
            )
        except (AttributeError, TypeError, ValueError) as e:
            raise CorruptMetadataError(f"commit metadata {path or ''} has an unexpected shape: {e}",
                                       path=path) from e

    def to_json(self) -> dict:
        out = {"operationType": self.operation_type,
               "partitionToWriteStats": {p: [s.to_json() for s in v]
                                         for p, v in self.partition_to_write_stats.items()},
               "extraMetadata": {k: v for k, v in self.extra_metadata.items() if k != EXTRA_SCHEMA}}
        if self.partition_to_replace_file_ids is not None:
            out["partitionToReplaceFileIds"] = self.partition_to_replace_file_ids
        return out


# --- requested replacecommit (clustering plan / insert_overwrite) ----------------------------


@dataclass
class ClusteringGroup:
    """One group of a clustering plan: its slices, and the log files the plan names for each.

    ``delta_file_paths`` maps a slice's ``(partition, fileId)`` to its log files' paths as the
    plan records them (full paths, latest first: Java's ``ClusteringPlanStrategy.getFileSliceInfo``
    over ``FileSlice.getLogFiles()``). Java's clustering executor reads exactly the base file
    and these logs, so a merge-on-read slice planned without them would lose the logs' updates
    and deletes when Java runs the plan."""

    slices: list[tuple[str, str, str | None]]  # (partition, fileId, data file path)
    num_output_file_groups: int = 1
    delta_file_paths: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    def log_file_names(self, partition: str, file_id: str) -> list[str]:
        """The names of the log files the plan names for one slice (they live in its partition)."""
        return [d.rsplit("/", 1)[-1] for d in self.delta_file_paths.get((partition, file_id), [])]


@dataclass
class RequestedReplaceMetadata:
    operation_type: str  # "CLUSTER" or "INSERT_OVERWRITE" ...
    input_groups: list[ClusteringGroup] = field(default_factory=list)
    strategy_params: dict[str, str] = field(default_factory=dict)
    extra_metadata: dict[str, str] = field(default_factory=dict)

    @property
    def has_plan(self) -> bool:
        return bool(self.input_groups)

    def input_file_groups(self) -> set[FileGroupId]:
        return {(p, f) for g in self.input_groups for (p, f, _path) in g.slices}

    def encode(self) -> bytes:
        plan = None
        if self.input_groups:
            plan = {
                "inputGroups": [{
                    "slices": [{"dataFilePath": path or "",
                                "deltaFilePaths": list(g.delta_file_paths.get((part, fid), [])),
                                "fileId": fid, "partitionPath": part, "bootstrapFilePath": "",
                                "version": 1}
                               for (part, fid, path) in g.slices],
                    "metrics": {}, "numOutputFileGroups": g.num_output_file_groups,
                    "extraMetadata": None, "version": 1} for g in self.input_groups],
                "strategy": {"strategyClassName": "airflow_hudi_occ.spark.clustering",
                             "strategyParams": dict(self.strategy_params), "version": 1},
                "extraMetadata": {}, "version": 1, "preserveHoodieMetadata": True,
                "missingSchedulePartitions": None,
            }
        rec = {"operationType": self.operation_type, "clusteringPlan": plan,
               "extraMetadata": dict(self.extra_metadata), "version": 1}
        return avro_encode("HoodieRequestedReplaceMetadata", rec)

    @classmethod
    def decode(cls, data: bytes, path: str | None = None) -> "RequestedReplaceMetadata":
        rec = decode_record(data, path)
        if rec is None:
            return cls(operation_type="UNKNOWN")
        try:
            plan = rec.get("clusteringPlan") or {}
            groups = []
            source = f"clustering plan {path or ''}"
            for g in plan.get("inputGroups") or []:
                slices, logs = [], {}
                for s in g.get("slices") or []:
                    part = check_partition_path(s.get("partitionPath") or "", source=source)
                    fid = s.get("fileId") or ""
                    slices.append((part, fid, s.get("dataFilePath") or None))
                    deltas = list(s.get("deltaFilePaths") or [])
                    for d in deltas:  # a log file of the slice lives in its partition
                        check_relative_path(f"{part}/{d.rsplit('/', 1)[-1]}" if part else d.rsplit("/", 1)[-1],
                                            source=source)
                    if deltas:
                        logs[(part, fid)] = deltas
                groups.append(ClusteringGroup(slices, g.get("numOutputFileGroups") or 1, logs))
            strategy = plan.get("strategy") or {}
            return cls(rec.get("operationType") or ("CLUSTER" if groups else "UNKNOWN"), groups,
                       dict(strategy.get("strategyParams") or {}),
                       dict(rec.get("extraMetadata") or {}))
        except (AttributeError, TypeError, ValueError) as e:
            raise CorruptMetadataError(f"replace plan {path or ''} has an unexpected shape: {e}",
                                       path=path) from e


def _contained(stat: "WriteStat", source: str) -> "WriteStat":
    """A decoded write stat whose partition and file path stay inside the table (a service
    deletes, rewrites or re-reads what a commit names)."""
    check_partition_path(stat.partition_path or "", source=source)
    if stat.path:
        check_relative_path(stat.path, source=source)
    return stat


# --- compaction plan (merge-on-read) -------------------------------------------------------


@dataclass
class CompactionOperation:
    """One file slice a compaction merges: its base file and the log files the plan fixed."""

    partition_path: str
    file_id: str
    base_instant_time: str
    data_file_name: str | None  # the base file's name in its partition (None: log-only slice)
    delta_file_names: list[str] = field(default_factory=list)  # log file names, read order
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def file_group(self) -> FileGroupId:
        return (self.partition_path, self.file_id)


@dataclass
class CompactionPlan:
    """Hudi's HoodieCompactionPlan, in the shape Java 1.x writes to ``<t>.compaction.requested``
    (plan version 2; file paths are names relative to the partition, as Java records them)."""

    operations: list[CompactionOperation] = field(default_factory=list)
    extra_metadata: dict[str, str] = field(default_factory=dict)
    strategy_params: dict[str, str] | None = None

    def file_groups(self) -> set[FileGroupId]:
        return {op.file_group for op in self.operations}

    def encode(self) -> bytes:
        return avro_encode("HoodieCompactionPlan", {
            "operations": [{
                "baseInstantTime": op.base_instant_time,
                "deltaFilePaths": list(op.delta_file_names),
                "dataFilePath": op.data_file_name,
                "fileId": op.file_id,
                "partitionPath": op.partition_path,
                "metrics": {k: float(v) for k, v in op.metrics.items()},
                "bootstrapFilePath": None} for op in self.operations],
            "extraMetadata": dict(self.extra_metadata),
            "version": 2,
            "strategy": None if self.strategy_params is None else {
                "compactorClassName": None, "strategyParams": dict(self.strategy_params),
                "version": 1},
            "preserveHoodieMetadata": False,
            "missingSchedulePartitions": [],
        })

    @classmethod
    def decode(cls, data: bytes, path: str | None = None) -> "CompactionPlan":
        rec = decode_record(data, path)
        if rec is None:
            return cls()
        try:
            ops = []
            source = f"compaction plan {path or ''}"
            for op in rec.get("operations") or []:
                data_file = op.get("dataFilePath")
                part = check_partition_path(op.get("partitionPath") or "", source=source)
                for f in ([data_file] if data_file else []) + list(op.get("deltaFilePaths") or []):
                    check_relative_path(f"{part}/{f.rsplit('/', 1)[-1]}", source=source)
                ops.append(CompactionOperation(
                    op.get("partitionPath") or "", op.get("fileId") or "",
                    op.get("baseInstantTime") or "",
                    data_file.rsplit("/", 1)[-1] if data_file else None,
                    [d.rsplit("/", 1)[-1] for d in op.get("deltaFilePaths") or []],
                    {str(k): float(v) for k, v in (op.get("metrics") or {}).items()}))
            strategy = rec.get("strategy")
            return cls(ops, {str(k): str(v) for k, v in (rec.get("extraMetadata") or {}).items()},
                       dict(strategy.get("strategyParams") or {}) if strategy else None)
        except (AttributeError, TypeError, ValueError) as e:
            raise CorruptMetadataError(f"compaction plan {path or ''} has an unexpected shape: {e}",
                                       path=path) from e


# --- rollback -----------------------------------------------------------------------------


@dataclass
class RollbackPlan:
    """A ``<r>.rollback.requested`` (HoodieRollbackPlan): the files a rollback deletes.

    ``files_by_partition`` holds paths relative to the base path; the Avro form carries full
    paths (``base_uri`` given), as Java writes them: Java re-executing a pending rollback of
    ours takes each file's partition from its path under the base path, and copies each
    request's ``logBlocksToBeDeleted`` map (so it is an empty map, never null)."""

    instant_time: str
    action: str
    files_by_partition: dict[str, list[str]]  # partition -> file paths (relative)

    def encode(self, base_uri: str | None = None) -> bytes:
        base = base_uri.rstrip("/") + "/" if base_uri else ""
        return avro_encode("HoodieRollbackPlan", {
            "instantToRollback": {"commitTime": self.instant_time, "action": self.action},
            "RollbackRequests": [{"partitionPath": p, "fileId": None, "latestBaseInstant": None,
                                  "filesToBeDeleted": [base + f for f in files],
                                  "logBlocksToBeDeleted": {}}
                                 for p, files in sorted(self.files_by_partition.items())],
            "version": 1})

    @classmethod
    def decode(cls, data: bytes, path: str | None = None, base_uri: str | None = None) -> "RollbackPlan":
        """``base_uri`` given: the files relative to it (a full path under another spelling of
        the base, or a relative one from before plans carried full paths, as partition/name);
        without it, as written (for a caller that only wants the instant)."""
        rec = decode_record(data, path)
        if rec is None:
            raise CorruptMetadataError(f"empty rollback plan {path or ''}", path=path)
        source = f"rollback plan {path or ''}"
        base = base_uri.rstrip("/") + "/" if base_uri else None
        try:
            inst = rec.get("instantToRollback") or {}
            files: dict[str, list[str]] = {}
            for r in rec.get("RollbackRequests") or []:
                part = check_partition_path(r["partitionPath"], source=source)
                for fp in r.get("filesToBeDeleted") or []:
                    if base is not None:
                        rel = (fp[len(base):] if fp.startswith(base)
                               else "/".join(x for x in (part, fp.rsplit("/", 1)[-1]) if x))
                        fp = check_relative_path(rel, source=source)
                    files.setdefault(part, []).append(fp)
            return cls(inst.get("commitTime") or "", inst.get("action") or "", files)
        except (AttributeError, TypeError, KeyError, ValueError) as e:
            raise CorruptMetadataError(f"rollback plan {path or ''} has an unexpected shape: {e}",
                                       path=path) from e


@dataclass
class RollbackMetadata:
    start_rollback_time: str
    rolled_back: list[tuple[str, str]]  # (instant time, action)
    deleted_by_partition: dict[str, list[str]]
    failed_by_partition: dict[str, list[str]] = field(default_factory=dict)
    time_taken_ms: int = 0

    def encode(self) -> bytes:
        parts = set(self.deleted_by_partition) | set(self.failed_by_partition)
        return avro_encode("HoodieRollbackMetadata", {
            "startRollbackTime": self.start_rollback_time,
            "timeTakenInMillis": int(self.time_taken_ms),
            "totalFilesDeleted": sum(len(v) for v in self.deleted_by_partition.values()),
            "commitsRollback": [t for t, _a in self.rolled_back],
            "partitionMetadata": {p: {"partitionPath": p,
                                      "successDeleteFiles": list(self.deleted_by_partition.get(p, [])),
                                      "failedDeleteFiles": list(self.failed_by_partition.get(p, [])),
                                      "rollbackLogFiles": None, "writtenLogFiles": None}
                                  for p in sorted(parts)},
            "version": 1,
            "instantsRollback": [{"commitTime": t, "action": a} for t, a in self.rolled_back],
        })

    @classmethod
    def decode(cls, data: bytes, path: str | None = None) -> "RollbackMetadata":
        rec = decode_record(data, path)
        if rec is None:
            raise CorruptMetadataError(f"empty rollback metadata {path or ''}", path=path)
        try:
            rolled = [(i["commitTime"], i["action"]) for i in rec.get("instantsRollback") or []]
            if not rolled:
                rolled = [(t, "") for t in rec.get("commitsRollback") or []]
            deleted = {p: list(m.get("successDeleteFiles") or [])
                       for p, m in (rec.get("partitionMetadata") or {}).items()}
            failed = {p: list(m.get("failedDeleteFiles") or [])
                      for p, m in (rec.get("partitionMetadata") or {}).items()}
            return cls(rec.get("startRollbackTime") or "", rolled, deleted, failed,
                       rec.get("timeTakenInMillis") or 0)
        except (AttributeError, TypeError, KeyError, ValueError) as e:
            raise CorruptMetadataError(f"rollback metadata {path or ''} has an unexpected shape: {e}",
                                       path=path) from e


# --- clean ----------------------------------------------------------------------------------

#: Hudi 1.x writes clean plans and clean metadata as version 2 (file names, not full paths, in
#: the metadata's per-partition lists).
CLEAN_VERSION = 2


@dataclass
class CleanerPlan:
    """A ``<t>.clean.requested`` (HoodieCleanerPlan): what a clean will delete, decided under the lock.

    ``files_by_partition`` holds paths relative to the base path; the Avro form carries full
    paths in ``filePathsToBeDeletedPerPartition`` as Java Hudi writes them.
    """

    policy: str
    earliest_instant_to_retain: tuple[str, str] | None  # (requested time, action)
    last_completed_commit: str
    files_by_partition: dict[str, list[str]]
    extra_metadata: dict[str, str] = field(default_factory=dict)

    def encode(self, base_uri: str) -> bytes:
        base = base_uri.rstrip("/")
        earliest = None
        if self.earliest_instant_to_retain:
            t, a = self.earliest_instant_to_retain
            earliest = {"timestamp": t, "action": a, "state": "COMPLETED"}
        return avro_encode("HoodieCleanerPlan", {
            "earliestInstantToRetain": earliest,
            "lastCompletedCommitTimestamp": self.last_completed_commit,
            "policy": self.policy,
            "filesToBeDeletedPerPartition": {},
            "version": CLEAN_VERSION,
            "filePathsToBeDeletedPerPartition": {
                p: [{"filePath": f"{base}/{rel}", "isBootstrapBaseFile": False} for rel in rels]
                for p, rels in sorted(self.files_by_partition.items())},
            "partitionsToBeDeleted": [],
            "extraMetadata": dict(self.extra_metadata) or None,
        })

    @classmethod
    def decode(cls, data: bytes, base_uri: str, path: str | None = None) -> "CleanerPlan":
        rec = decode_record(data, path)
        if rec is None:
            raise CorruptMetadataError(f"empty clean plan {path or ''}", path=path)
        base = base_uri.rstrip("/") + "/"
        try:
            files: dict[str, list[str]] = {}
            source = f"clean plan {path or ''}"
            for p, infos in (rec.get("filePathsToBeDeletedPerPartition") or {}).items():
                check_partition_path(p, source=source)
                for info in infos or []:
                    fp = info.get("filePath") or ""
                    if fp.startswith(base):
                        rel = fp[len(base):]
                    else:  # another scheme spelling of the same base: keep partition/name
                        rel = "/".join(x for x in (p, fp.rsplit("/", 1)[-1]) if x)
                    files.setdefault(p, []).append(check_relative_path(rel, source=source))
            for p, names in (rec.get("filesToBeDeletedPerPartition") or {}).items():  # version 1
                check_partition_path(p, source=source)
                files.setdefault(p, []).extend(check_relative_path("/".join(x for x in (p, n) if x), source=source)
                                               for n in names or [])
            e = rec.get("earliestInstantToRetain")
            return cls(rec.get("policy") or "", (e["timestamp"], e["action"]) if e else None,
                       rec.get("lastCompletedCommitTimestamp") or "", files,
                       dict(rec.get("extraMetadata") or {}))
        except (AttributeError, TypeError, KeyError) as e:
            raise CorruptMetadataError(f"clean plan {path or ''} has an unexpected shape: {e}",
                                       path=path) from e


@dataclass
class CleanMetadata:
    """A completed ``<t>_<c>.clean`` (HoodieCleanMetadata)."""

    start_clean_time: str
    policy: str
    earliest_commit_to_retain: str
    last_completed_commit: str
    deleted_by_partition: dict[str, list[str]]  # partition -> relative paths
    failed_by_partition: dict[str, list[str]] = field(default_factory=dict)
    time_taken_ms: int = 0

    def deleted_files(self) -> set[str]:
        return {f for v in self.deleted_by_partition.values() for f in v}

    def encode(self) -> bytes:
        parts = sorted(set(self.deleted_by_partition) | set(self.failed_by_partition))
        name = lambda rel: rel.rsplit("/", 1)[-1]  # noqa: E731
        return avro_encode("HoodieCleanMetadata", {
            "startCleanTime": self.start_clean_time,
            "timeTakenInMillis": int(self.time_taken_ms),
            "totalFilesDeleted": sum(len(v) for v in self.deleted_by_partition.values()),
            "earliestCommitToRetain": self.earliest_commit_to_retain,
            "lastCompletedCommitTimestamp": self.last_completed_commit,
            "partitionMetadata": {p: {
                "partitionPath": p, "policy": self.policy,
                "deletePathPatterns": [name(f) for f in self.deleted_by_partition.get(p, []) +
                                       self.failed_by_partition.get(p, [])],
                "successDeleteFiles": [name(f) for f in self.deleted_by_partition.get(p, [])],
                "failedDeleteFiles": [name(f) for f in self.failed_by_partition.get(p, [])],
                "isPartitionDeleted": False} for p in parts},
            "version": CLEAN_VERSION,
            "bootstrapPartitionMetadata": {},
            "extraMetadata": None,
        })

    @classmethod
    def decode(cls, data: bytes, path: str | None = None) -> "CleanMetadata":
        rec = decode_record(data, path)
        if rec is None:
            raise CorruptMetadataError(f"empty clean metadata {path or ''}", path=path)
        try:
            join = lambda p, n: "/".join(x for x in (p, n.rsplit("/", 1)[-1]) if x)  # noqa: E731
            pm = rec.get("partitionMetadata") or {}
            policy = rec.get("policy") or next((m.get("policy") for m in pm.values()), "") or ""
            return cls(rec.get("startCleanTime") or "", policy,
                       rec.get("earliestCommitToRetain") or "",
                       rec.get("lastCompletedCommitTimestamp") or "",
                       {p: [join(p, n) for n in m.get("successDeleteFiles") or []] for p, m in pm.items()},
                       {p: [join(p, n) for n in m.get("failedDeleteFiles") or []] for p, m in pm.items()},
                       rec.get("timeTakenInMillis") or 0)
        except (AttributeError, TypeError, KeyError) as e:
            raise CorruptMetadataError(f"clean metadata {path or ''} has an unexpected shape: {e}",
                                       path=path) from e
