"""Which file group every record of a write goes to, per operation, and which file groups the
write will touch (its plan, announced at inflight before any executor writes).

The tagging primitives live in :mod:`airflow_hudi_occ.spark.tagging`; this module chooses
among them for an operation: the bucket index hashes keys to buckets; ``upsert`` and
``delete`` look keys up in the latest base files; ``insert`` / ``bulk_insert`` /
``insert_overwrite`` skip the lookup (every record is new) and know their file groups from
the counts alone, the others only once the tagged data is counted.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from airflow_hudi_occ.core.concurrency.clustering_gate import pending_clustering_file_groups
from airflow_hudi_occ.core.table.file_system_view import bucket_id_of
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.spark import tagging
from airflow_hudi_occ.spark.options import SparkWriteOptions


def tag_file_groups(spark, prepared, op, opts: SparkWriteOptions, table: Table, view, slices, bucket,
                    num_buckets, part_counts=None):
    """(tagged DataFrame, the planned file groups, or None when only the data can tell)."""
    FID, PART = tagging.FID, tagging.PART
    if bucket and op != "insert_overwrite":
        have = {}
        for s in slices:
            b = bucket_id_of(s.file_id)
            if b is not None:
                have[(s.partition, int(b))] = s.file_id
        if op == "delete":
            out, _ = tagging.assign_buckets(prepared, have, num_buckets, spark, len(table.config.record_key_fields))
            known = set(have.values())
            return (out.where(F.col(FID).isin(list(known))) if known else out.limit(0)), None
        out, _ = tagging.assign_buckets(prepared, have, num_buckets, spark, len(table.config.record_key_fields))
        return out, None
    if bucket:  # insert_overwrite with buckets: fresh bucket file groups
        out, _ = tagging.assign_buckets(prepared, {}, num_buckets, spark, len(table.config.record_key_fields))
        return out, None
    if op in ("upsert", "delete"):
        tagged = tagging.lookup(spark, prepared, slices, table.storage)
    else:
        tagged = prepared.withColumn(FID, F.lit(None).cast("string"))
    if op == "delete":
        return tagged.where(F.col(FID).isNotNull()), None
    new = tagged.where(F.col(FID).isNull())
    if part_counts is not None and op not in ("upsert", "delete"):
        counts = dict(part_counts)  # no lookup: every record is new
    else:
        counts = {r[0]: r[1] for r in new.groupBy(PART).count().collect()}
    if not counts:
        return tagged, ([] if part_counts is not None else None)
    small: dict[str, list[tuple[str, int]]] = {}
    if op in ("upsert", "insert") and opts.small_file_limit > 0:
        clustering = pending_clustering_file_groups(view.timeline)
        for s in slices:
            if s.file_group in clustering:
                continue
            size = table.storage.size(table.storage.path(s.base_file.relative_path))
            if size < opts.small_file_limit:
                small.setdefault(s.partition, []).append((s.file_id, size))
    assignment = tagging.plan_new_file_groups(
        counts, small, max_file_size=opts.max_file_size,
        record_size=record_size(view, opts))
    if part_counts is not None and op not in ("upsert", "delete"):
        planned = sorted({(b.partition, b.file_id) for b in assignment.buckets if b.weight > 0})
        return tagging.assign_new(spark, new, assignment), planned
    old = tagged.where(F.col(FID).isNotNull())
    return old.unionByName(tagging.assign_new(spark, new, assignment)), None


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
