"""Which file group every record of a write goes to, per operation, and which file groups the
write will touch (its plan, announced at inflight before any executor writes).

The tagging primitives live in :mod:`airflow_hudi_occ.spark.tagging`; this module chooses
among them for an operation: the bucket index hashes keys to buckets; ``upsert`` and
``delete`` look keys up in the latest base files; ``insert`` / ``bulk_insert`` /
``insert_overwrite`` skip the lookup (every record is new) and know their file groups from
the counts alone, the others only once the tagged data is counted.

Without buckets (:func:`plan_file_groups`) the plan costs one pass over the batch: the counts
per partition (insert, bulk_insert, insert_overwrite), or the partitions the batch touches
then the index lookup, cached once and counted per file group (upsert, delete). Duplicate
keys are dropped later, in the write job (``tagging.dedupe`` after the shuffle by file group,
which every copy of a key shares), so the counts that size new file groups include them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import functions as F

from airflow_hudi_occ.core.concurrency.clustering_gate import pending_clustering_file_groups
from airflow_hudi_occ.core.format.layout import bucket_id_of
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.spark import pair_write, tagging
from airflow_hudi_occ.spark.submit.options import SparkWriteOptions
from airflow_hudi_occ.core.table.file_system_view import FileSystemView


@dataclass
class FilePlan:
    """Where the batch goes: the tagged records, and the snapshot they were tagged against."""

    tagged: Any
    partitions: list[str]
    view: FileSystemView
    slices: list
    planned: list = field(default_factory=list)
    #: whether ``tagged`` holds one record per key already (else the write job dedupes)
    deduped: bool = True
    #: whether the write job shuffles the records by file group (else each input task writes
    #: file groups of its own, see :func:`_plan_by_task`)
    shuffle: bool = True
    #: a bulk_insert checked and written by its input tasks without a combine
    #: (:func:`plan_in_tasks`): each task names its own files
    in_tasks: "pair_write.TaskPlan | None" = None

    @property
    def existing(self) -> dict:
        return {(s.partition, s.file_id): s for s in self.slices}


def plan_file_groups(spark, keyed, op, opts: SparkWriteOptions, table: Table, persisted: list,
                     by_task: bool = False) -> FilePlan:
    """The plan of a write without buckets, from a ``tagging.keyed`` frame (not deduplicated).
    Frames it caches are appended to ``persisted`` (the caller unpersists them). ``by_task``:
    new file groups only, and a writer that needs no shuffle (native_write.py): try
    :func:`plan_by_task` first."""
    FID, PART = tagging.FID, tagging.PART
    if op in ("insert", "bulk_insert", "insert_overwrite"):
        by_pair = tagging.count_by_task(keyed) if by_task else None
        if by_pair is not None:
            counts: dict = {}
            for part, _, n, _ in by_pair:
                counts[part] = counts.get(part, 0) + n
        else:
            counts = {r[0]: r[1] for r in keyed.groupBy(PART).count().collect()}
        partitions = sorted(counts)
        view = FileSystemView(table)  # the snapshot this write reads (after begin)
        slices = [s for p in partitions for s in view.latest_file_slices(p)]
        if by_pair is not None:
            plan = plan_by_task(spark, keyed, opts.max_file_size, record_size(view, opts), by_pair, counts)
            if plan is not None:
                tagged, planned = plan
                return FilePlan(tagged, partitions, view, slices, planned, deduped=True, shuffle=False)
        assignment = _assignment(op, opts, table, view, slices, counts)
        new = keyed.withColumn(FID, F.lit(None).cast("string"))
        tagged = tagging.assign_new(spark, new, assignment) if counts else new
        return FilePlan(tagged, partitions, view, slices, _planned_new(assignment), deduped=False)
    per_partition = {r[0]: r[1] for r in keyed.groupBy(PART).count().collect()}
    partitions = sorted(per_partition)
    view = FileSystemView(table)
    slices = [s for p in partitions for s in view.latest_file_slices(p)]
    looked = tagging.lookup(spark, keyed, slices, table.storage,
                            batch_rows=sum(per_partition.values())).persist()
    persisted.append(looked)
    by_group = looked.groupBy(PART, FID).count().collect()
    old_groups = sorted((r[0], r[1]) for r in by_group if r[1] is not None)
    old = looked.where(F.col(FID).isNotNull())
    if op == "delete":
        return FilePlan(old, partitions, view, slices, old_groups, deduped=False)
    counts = {r[0]: r[2] for r in by_group if r[1] is None}
    if not counts:
        return FilePlan(old, partitions, view, slices, old_groups, deduped=False)
    assignment = _assignment(op, opts, table, view, slices, counts)
    new = tagging.assign_new(spark, looked.where(F.col(FID).isNull()), assignment)
    planned = sorted(set(old_groups) | set(_planned_new(assignment)))
    return FilePlan(old.unionByName(new), partitions, view, slices, planned, deduped=False)


def _assignment(op, opts: SparkWriteOptions, table: Table, view, slices, counts: dict):
    """New records per partition to file groups: small ones topped up (upsert, insert), then
    new ones of about the max file size."""
    small: dict[str, list[tuple[str, int]]] = {}
    if op in ("upsert", "insert") and opts.small_file_limit > 0:
        clustering = pending_clustering_file_groups(view.timeline)
        for s in slices:
            if s.file_group in clustering:
                continue
            size = table.storage.size(table.storage.path(s.base_file.relative_path))
            if size < opts.small_file_limit:
                small.setdefault(s.partition, []).append((s.file_id, size))
    return tagging.plan_new_file_groups(counts, small, max_file_size=opts.max_file_size,
                                        record_size=record_size(view, opts))


def plan_in_tasks(records, opts: SparkWriteOptions, table: Table) -> FilePlan:
    """A copy-on-write bulk_insert that does not combine duplicate keys (Hudi's default),
    planned as Hudi writes it without a sort mode: every input task checks the records it reads
    and writes them into new file groups of its own, one per partition path it sees, a new one
    each time one holds the max file size in bytes (spark/pair_write.py). Nothing is
    counted before the write job: its file groups are known from its tasks' reports, so the
    plan declares none (the inflight instant has no file group; the markers come before the
    files are published)."""
    view = FileSystemView(table, partitions=[])  # new file groups only: nothing is read
    cfg = table.config
    plan = pair_write.TaskPlan(tuple(cfg.record_key_fields), tuple(cfg.partition_fields),
                               cfg.hive_style_partitioning, cfg.url_encode_partitions,
                               opts.max_file_size, max(1, record_size(view, opts)),
                               opts.write_config.parquet)
    return FilePlan(records, [], view, [], [], deduped=True, shuffle=False, in_tasks=plan)


def plan_by_task(spark, keyed, max_file_size: int, rec_size: int, by_pair, counts):
    """New file groups per (partition, input task), as Hudi's bulk_insert without a sort mode
    writes them: no shuffle at all. Only when the batch has no duplicate key (there would be
    nothing to combine) and it makes at most a quarter more file groups than sizing each
    partition as a whole would (each still within the max file size; many small input tasks
    take the shuffle instead). (tagged, planned) or None."""
    if any(dup > 1 for _, _, _, dup in by_pair):
        return None
    per_file = max(1, max_file_size // max(1, rec_size))
    sized = sum(math.ceil(n / per_file) for n in counts.values())
    if sum(math.ceil(n / per_file) for _, _, n, _ in by_pair) > sized + sized // 4:
        return None
    ranges, planned = [], []
    for part, task, n, _ in sorted(by_pair):
        for b in tagging.plan_new_file_groups({part: n}, {}, max_file_size=max_file_size,
                                              record_size=rec_size).to_rows():
            ranges.append((part, task, b[1], b[2], b[3], n))
            planned.append((part, b[1]))
    return tagging.assign_new_by_task(spark, keyed, ranges), sorted(planned)


def _planned_new(assignment) -> list:
    return sorted({(b.partition, b.file_id) for b in assignment.buckets if b.weight > 0})


def tag_buckets(spark, prepared, op, table: Table, slices, num_buckets):
    """Bucket index: the tagged DataFrame (its file groups are known once it is counted)."""
    FID = tagging.FID
    nkeys = len(table.config.record_key_fields)
    if op == "insert_overwrite":  # fresh bucket file groups
        out, _ = tagging.assign_buckets(prepared, {}, num_buckets, spark, nkeys)
        return out
    have = {}
    for s in slices:
        b = bucket_id_of(s.file_id)
        if b is not None:
            have[(s.partition, int(b))] = s.file_id
    out, _ = tagging.assign_buckets(prepared, have, num_buckets, spark, nkeys)
    if op == "delete":
        known = set(have.values())
        return out.where(F.col(FID).isin(list(known))) if known else out.limit(0)
    return out


def record_size(view, opts: SparkWriteOptions) -> int:
    """Average bytes per record from the last commit that wrote rows (Hudi's estimate)."""
    tl = view.timeline
    for inst in reversed(tl.completed_by_completion_time()):
        if not inst.is_write:
            continue
        stats = tl.commit_metadata(inst).write_stats()
        rows = sum(s.num_writes for s in stats)
        size = sum(s.file_size_in_bytes for s in stats)
        if rows > 0 and size > 0:
            return max(1, size // rows)
    return opts.record_size_estimate
