"""Index tagging on Spark: which file group each incoming record goes to.

Runs on the driver as Spark SQL (joins and hashes, no Python per row):

1. ``prepare``: add ``_hoodie_record_key`` and ``_hoodie_partition_path`` exactly as core's
   ``record_key_array`` / ``partition_path_of`` spell them (so the keys written by executors, by the
   Arrow reference writer and by Java Hudi agree), then keep one record per key in the batch
   (the largest precombine value, the later record on a tie: ``core.commit.merge.dedupe``).
2. ``lookup`` (simple index): join the incoming keys with the ``_hoodie_record_key`` column of
   the latest base file of every file group in the touched partitions, as of the
   transaction's snapshot. A matched record goes to its file group.
3. ``assign_new``: records with new keys fill small file groups first (below
   ``hoodie.parquet.small.file.limit``), then new file groups of about
   ``hoodie.parquet.max.file.size``, by a hash of the key weighted like Hudi's
   UpsertPartitioner. With the bucket index, the bucket is a hash of the key and the fileId is
   prefixed with its 8-digit number.

Errors: :class:`ConfigError` for missing key/partition columns or a key type whose string
form Spark and Python would spell differently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping


from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

import pyarrow as pa

from airflow_hudi_occ.core.format import partition_path
from airflow_hudi_occ.core.format.base_file import invalid_key_error, new_file_id, null_ordering_error
from airflow_hudi_occ.core.format.storage import Storage
from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.table.file_system_view import FileSlice
from airflow_hudi_occ.spark import object_store
from airflow_hudi_occ.spark.compat import to_arrow
from airflow_hudi_occ.spark.session import task_ids_as_run

KEY = "_hoodie_record_key"
PART = "_hoodie_partition_path"
FID = "__hudi_file_id"
SEQ = "__hudi_seq"
TASK = "__hudi_task"
HIVE_DEFAULT = partition_path.DEFAULT_PARTITION

# Types whose Spark string cast equals core's key text (``base_file.key_part_array``). Not
# floats: core spells them as Java 19+ does (shortest digits), Spark's cast as its JVM does,
# and Java 17 spells a few values with more digits (1.0E23 as 9.999999999999999E22).
_SAFE_KEY_TYPES = (T.StringType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DateType)


def _string_of(df: DataFrame, name: str, role: str, key: str):
    if name not in df.columns:
        raise ConfigError(f"the data lacks the {role} column {name!r}", key=key, value=name,
                          remedy=f"add the column or change {key}")
    dt = df.schema[name].dataType
    if not isinstance(dt, _SAFE_KEY_TYPES):
        raise ConfigError(f"{role} column {name!r} has type {dt.simpleString()}, which the Spark "
                          "engine does not use as a key (its string form differs between engines)",
                          key=key, value=name, remedy="cast it to string, int, bigint or date")
    return F.col(name).cast("string")


def record_key_expr(df: DataFrame, fields: list[str]):
    key = "hoodie.datasource.write.recordkey.field"
    if not fields:
        raise ConfigError("no record key field", key=key, remedy=f"set {key}")
    if len(fields) == 1:
        return F.coalesce(_string_of(df, fields[0], "record key", key), F.lit(""))
    return F.concat_ws(",", *[F.concat(F.lit(f + ":"), F.coalesce(_string_of(df, f, "record key", key),
                                                                  F.lit(""))) for f in fields])


def partition_path_expr(df: DataFrame, fields: list[str], hive_style: bool,
                        labels: Mapping[str, Mapping[str, str]] | None = None):
    """Each record's partition path as Spark SQL. Spelled by ``core/format/partition_path``:
    a null or empty value is the Hive default; ``labels`` (from :func:`check_batch`, which
    ran the core rule on every distinct value on the driver) give the values whose spelling
    is not the value itself (url-encoded ones), so Spark never spells a path of its own."""
    key = "hoodie.datasource.write.partitionpath.field"
    if not fields:
        return F.lit("")
    parts = []
    for f in fields:
        raw = _string_of(df, f, "partition", key)
        v = F.when(raw.isNull() | (raw == ""), F.lit(HIVE_DEFAULT)).otherwise(raw)
        text = F.concat(F.lit(f + "="), v) if hive_style else v
        spelled = (labels or {}).get(f)
        if spelled:
            # guarded by isin: a map lookup of a missing key raises under ANSI SQL
            table = F.create_map(*[F.lit(x) for kv in sorted(spelled.items()) for x in kv])
            text = F.when(raw.isin(list(spelled)), F.element_at(table, raw)).otherwise(text)
        parts.append(text)
    return F.concat_ws("/", *parts)


def _no_key(df: DataFrame, fields: list[str]):
    """Per record: has it no record key (Hudi's HoodieKeyException rule, as core's
    ``check_record_keys``: the single key field null or empty, or every field of a composite
    key)?"""
    key = "hoodie.datasource.write.recordkey.field"
    missing = [(lambda c: c.isNull() | (c == ""))(_string_of(df, f, "record key", key)) for f in fields]
    out = missing[0]
    for m in missing[1:]:
        out = out & m
    return out


def check_batch(df: DataFrame, key_fields: list[str], partition_fields: list[str], hive_style: bool,
                url_encode: bool, counts: dict | None = None,
                ordering: str | None = None) -> dict[str, dict[str, str]]:
    """On the driver, before the write's instant exists, one Spark job over the batch: every
    distinct partition value goes through core's rule (``partition_path.field_text``: a
    hostile one is refused naming its column), and rows without a record key are counted
    (refused as core refuses them). Returns the ``labels`` for :func:`partition_path_expr`:
    per field, the values whose path text differs from the value (url-encoded ones).
    ``counts``, if given, receives ``rows`` and ``partitions`` (distinct partition values),
    counted by the same job (the job's progress line), and ``paths``, the partition paths.
    ``ordering``, if given (a write that compares ordering values,
    ``base_file.compares_ordering_values``): rows whose value in that column is null are
    counted by the same job and refused as core refuses them.
    (A copy-on-write bulk_insert without a combine runs none of this: its write tasks check
    their own rows by the same rule, spark/pair_write.py.)"""
    key = "hoodie.datasource.write.partitionpath.field"
    cols = [_string_of(df, f, "partition", key).alias(f"__p{i}") for i, f in enumerate(partition_fields)]
    bad = F.sum(_no_key(df, key_fields).cast("long")).alias("__bad") if key_fields else F.lit(0).alias("__bad")
    n = F.count(F.lit(1)).alias("__n")
    ordering = ordering if ordering and ordering in df.columns else None
    aggs = [bad, n] + ([F.sum(F.col(ordering).isNull().cast("long")).alias("__unordered")] if ordering else [])
    rows = (df.groupBy(*cols).agg(*aggs) if cols else df.agg(*aggs)).collect()

    def path_of(r) -> str:
        return partition_path.partition_path(
            partition_fields, [r[f"__p{i}"] for i in range(len(partition_fields))],
            hive_style=hive_style, url_encode=url_encode) if cols else ""
    if counts is not None:
        counts["rows"] = sum(int(r["__n"] or 0) for r in rows)
        counts["partitions"] = len({tuple(r[f"__p{i}"] for i in range(len(cols))) for r in rows}) if cols \
            else int(counts["rows"] > 0)
        # the write's footprint, declared at begin (core/concurrency/footprint.py)
        counts["paths"] = sorted({path_of(r) for r in rows}) if cols else [""]
    no_key = sum(int(r["__bad"] or 0) for r in rows)
    if no_key:
        raise invalid_key_error(key_fields, no_key)
    unordered = sum(int(r["__unordered"] or 0) for r in rows) if ordering else 0
    if unordered:
        raise null_ordering_error(ordering, unordered)
    labels: dict[str, dict[str, str]] = {}
    for i, f in enumerate(partition_fields):
        for value in sorted({r[f"__p{i}"] for r in rows}, key=lambda v: (v is None, v or "")):
            text = partition_path.field_text(f, value, hive_style=hive_style, url_encode=url_encode)
            if value and text != (f"{f}={value}" if hive_style else value):
                labels.setdefault(f, {})[value] = text
    return labels


def prepare(df: DataFrame, key_fields: list[str], partition_fields: list[str], hive_style: bool,
            precombine: str | None, labels: Mapping[str, Mapping[str, str]] | None = None) -> DataFrame:
    """Key and partition columns, then one record per (partition, key)."""
    return dedupe(keyed(df, key_fields, partition_fields, hive_style, labels), precombine)


def keyed(df: DataFrame, key_fields: list[str], partition_fields: list[str], hive_style: bool,
          labels: Mapping[str, Mapping[str, str]] | None = None) -> DataFrame:
    """Key and partition columns, and each record's place in the batch (for :func:`dedupe`)."""
    df = df.withColumn(SEQ, F.monotonically_increasing_id())
    return df.withColumn(KEY, record_key_expr(df, key_fields)) \
             .withColumn(PART, partition_path_expr(df, partition_fields, hive_style, labels))


def dedupe(df: DataFrame, precombine: str | None, within: tuple[str, ...] = ()) -> DataFrame:
    """One record per (partition, key) of a :func:`keyed` frame. ``within``: columns that every
    record of a key shares (the file group), listed so that a frame already partitioned by
    (partition, *within) is deduplicated in place: the window then needs no shuffle of its
    own, only a sort within each Spark partition."""
    if precombine and precombine in df.columns:
        p = F.col(precombine)
        # core.commit.merge.dedupe: the largest non-null value wins, the later one on a tie; a null never
        # displaces a record already chosen, so with only nulls the first one stays.
        order = [p.isNull().asc(), p.desc(), F.when(p.isNull(), F.col(SEQ)).otherwise(-F.col(SEQ)).asc()]
    else:
        order = [F.col(SEQ).desc()]
    w = Window.partitionBy(PART, *within, KEY).orderBy(*order)
    return df.withColumn("__rn", F.row_number().over(w)).where("__rn = 1").drop("__rn")


#: batches up to this many records are looked up without a shuffle (see :func:`lookup`)
BROADCAST_LOOKUP_ROWS = 1_000_000


def lookup(spark: SparkSession, df: DataFrame, slices: list[FileSlice], storage: Storage,
           batch_rows: int | None = None) -> DataFrame:
    """Add FID: the file group holding each key (null for keys not on the table).

    A batch of at most :data:`BROADCAST_LOOKUP_ROWS` records (``batch_rows``, when the caller
    counted them) is looked up without shuffling the table's keys: its keys are broadcast to
    the tasks that read the stored keys, which keep only the stored keys the batch has (a
    left semi join: each at most once), and those few are broadcast back to the batch. A
    larger batch joins both sides by shuffle (profile, 200 k into 2 M: the shuffle join was
    most of the planning time)."""
    if not slices:
        return df.withColumn(FID, F.lit(None).cast("string"))
    names = spark.createDataFrame([(s.base_file.name, s.partition, s.file_id) for s in slices],
                                  "__fname string, __epart string, __efid string")
    existing = _existing_keys(spark, storage, [s.base_file.relative_path for s in slices])
    existing = existing.join(F.broadcast(names), "__fname").select("__ekey", "__epart", "__efid")
    if batch_rows is not None and batch_rows <= BROADCAST_LOOKUP_ROWS:
        # by key alone: a probe of one string per stored key, not a (key, partition) row; a key
        # the batch has in another partition only widens the broadcast, the join below is exact
        wanted = df.select(F.col(KEY).alias("__wkey"))
        existing = existing.join(F.broadcast(wanted), existing["__ekey"] == wanted["__wkey"], "left_semi")
        existing = F.broadcast(existing)
    joined = df.join(existing, (df[KEY] == existing["__ekey"]) & (df[PART] == existing["__epart"]),
                     "left")
    return joined.withColumn(FID, F.col("__efid")).drop("__ekey", "__epart", "__efid")


def _existing_keys(spark: SparkSession, storage: Storage, rels: list[str]) -> DataFrame:
    """(``__ekey``, ``__fname``) of every record in the base files ``rels``: read by Spark
    where it can open the store, else by executor tasks through fsspec (object_store.py)."""
    urls = [storage.uri(r) for r in rels]
    if object_store.spark_reads(spark, storage.base_uri):
        return spark.read.parquet(*[object_store.spark_url(u) for u in urls]).select(
            F.col(KEY).alias("__ekey"), F.col("_metadata.file_name").alias("__fname"))
    return object_store.read_files(
        spark, urls, "parquet", storage.storage_options, schema=pa.schema([(KEY, pa.string())]),
        columns=[KEY], file_column="__fname").withColumnRenamed(KEY, "__ekey")


@dataclass
class Bucket:
    partition: str
    file_id: str
    weight: int  # records assigned to it
    existing: bool  # a small file group topped up


@dataclass
class Assignment:
    buckets: list[Bucket] = field(default_factory=list)

    def to_rows(self) -> list[tuple[str, str, int, int]]:
        """(partition, fileId, lo, hi): a key whose hash modulo the partition total falls in
        [lo, hi) goes to that file group."""
        out, totals = [], {}
        for b in self.buckets:
            lo = totals.get(b.partition, 0)
            out.append((b.partition, b.file_id, lo, lo + b.weight))
            totals[b.partition] = lo + b.weight
        return out

    def totals(self) -> dict[str, int]:
        t: dict[str, int] = {}
        for b in self.buckets:
            t[b.partition] = t.get(b.partition, 0) + b.weight
        return t


def plan_new_file_groups(new_counts: dict[str, int], small_files: dict[str, list[tuple[str, int]]],
                         *, max_file_size: int, record_size: int) -> Assignment:
    """Hudi's UpsertPartitioner: fill small files up to the max size, then new file groups."""
    per_file = max(1, max_file_size // max(1, record_size))
    out = Assignment()
    for part in sorted(new_counts):
        remaining = new_counts[part]
        for file_id, size in sorted(small_files.get(part, []), key=lambda x: x[1]):
            if remaining <= 0:
                break
            cap = (max_file_size - size) // max(1, record_size)
            take = min(cap, remaining)
            if take > 0:
                out.buckets.append(Bucket(part, file_id, take, True))
                remaining -= take
        if remaining > 0:
            n = math.ceil(remaining / per_file)
            share = remaining // n
            for i in range(n):
                w = share + (1 if i < remaining - share * n else 0)
                out.buckets.append(Bucket(part, new_file_id(), w, False))
    return out


def assign_new(spark: SparkSession, df: DataFrame, assignment: Assignment) -> DataFrame:
    """Give FID to every row of ``df`` (all new keys) by the weighted hash ranges."""
    rows = assignment.to_rows()
    totals = assignment.totals()
    ranges = spark.createDataFrame(rows, "__rpart string, __rfid string, __lo long, __hi long")
    tot = spark.createDataFrame(list(totals.items()), "__tpart string, __total long")
    df = df.join(F.broadcast(tot), df[PART] == tot["__tpart"]).drop("__tpart")
    df = df.withColumn("__h", F.pmod(F.xxhash64(F.col(KEY)), F.col("__total")))
    cond = (df[PART] == ranges["__rpart"]) & (df["__h"] >= ranges["__lo"]) & (df["__h"] < ranges["__hi"])
    return df.join(F.broadcast(ranges), cond).withColumn(FID, F.col("__rfid")) \
             .drop("__rpart", "__rfid", "__lo", "__hi", "__h", "__total")


def count_by_task(df: DataFrame) -> list[tuple[str, int, int, int]]:
    """(partition, input task, records, copies of its most repeated key) for every pair of a
    partition and a Spark partition of ``df`` (the task that reads it) holding records. One
    job that shuffles only a 64-bit hash of each key: copies of a key share it, so a batch
    whose hashes are unique has no duplicate key (a collision only looks like a duplicate,
    which sends the batch the safe way, through the dedupe)."""
    per_key = df.select(PART, F.xxhash64(KEY).alias("__kh"), F.spark_partition_id().alias(TASK)).groupBy(PART, "__kh").agg(
        F.count(F.lit(1)).alias("__n"), F.min(TASK).alias(TASK))
    rows = per_key.groupBy(PART, TASK).agg(F.sum("__n").alias("__rows"), F.max("__n").alias("__dup"))
    with task_ids_as_run(df.sparkSession):  # the tasks the write job will have
        return [(r[0], int(r[1]), int(r[2]), int(r[3])) for r in rows.collect()]


def assign_new_by_task(spark: SparkSession, df: DataFrame,
                       ranges: list[tuple[str, int, str, int, int, int]]) -> DataFrame:
    """FID for every row by its (partition, input task) and a hash range of its key:
    ``ranges`` rows are (partition, task, fileId, lo, hi, total of the pair). No shuffle: the
    rows stay in the task that reads them. A row of a pair the plan lacks (the input changed
    between the counting job and this one) fails the job rather than be dropped. The write
    job runs under ``session.task_ids_as_run``, as the count did."""
    r = spark.createDataFrame(ranges, "__rpart string, __rtask int, __rfid string, __lo long, "
                                      "__hi long, __total long")
    df = df.withColumn(TASK, F.spark_partition_id())
    h = F.pmod(F.xxhash64(F.col(KEY)), F.col("__total"))
    cond = (df[PART] == r["__rpart"]) & (df[TASK] == r["__rtask"]) & (h >= r["__lo"]) & (h < r["__hi"])
    out = df.join(F.broadcast(r), cond, "left")
    fid = F.when(F.col("__rfid").isNull(), F.raise_error(F.lit(
        "a record of an input partition the write did not plan for: the input changed while "
        "it was written; make it deterministic (e.g. cache it) and retry"))).otherwise(F.col("__rfid"))
    return out.withColumn(FID, fid).drop("__rpart", "__rtask", "__rfid", "__lo", "__hi", "__total", TASK)


def bucket_of_expr(num_buckets: int, num_key_fields: int = 1):
    """The bucket of each record, by Java Hudi's bucket hash (core.bucket_index), so that the
    Spark writer, the Arrow writer and Java Hudi agree on every key's bucket. The record key
    column holds the value (one field) or ``f1:v1,f2:v2`` (several): the hash takes the values."""
    from airflow_hudi_occ.core.format.bucket_index import bucket_id

    def _bucket(key):
        if key is None:
            return bucket_id([None], num_buckets)
        if num_key_fields == 1:
            return bucket_id([key], num_buckets)
        return bucket_id([part.split(":", 1)[1] if ":" in part else part
                          for part in key.split(",")], num_buckets)

    return F.udf(_bucket, "long", useArrow=True)(F.col(KEY))


def assign_buckets(df: DataFrame, existing: dict[tuple[str, int], str], num_buckets: int,
                   spark: SparkSession, num_key_fields: int = 1) -> tuple[DataFrame, dict[tuple[str, int], str]]:
    """Bucket index: FID = the file group of (partition, bucket), a new one if absent."""
    df = df.withColumn("__bucket", bucket_of_expr(num_buckets, num_key_fields))
    needed = [(r[0], int(r[1])) for r in df.select(PART, "__bucket").distinct().collect()]
    mapping = dict(existing)
    for part, b in needed:
        if (part, b) not in mapping:
            mapping[(part, b)] = new_file_id(bucket=b)
    m = spark.createDataFrame([(p, b, f) for (p, b), f in mapping.items()],
                              "__bpart string, __bnum long, __bfid string")
    out = df.join(F.broadcast(m), (df[PART] == m["__bpart"]) & (df["__bucket"] == m["__bnum"])) \
            .withColumn(FID, F.col("__bfid")).drop("__bpart", "__bnum", "__bfid", "__bucket")
    return out, mapping


#: the driver-side probe of :func:`first_held_hit` reads the held base files' keys itself only
#: up to this many bytes of base files (beyond, the Spark join alone answers)
PROBE_MAX_BYTES = 256 * 1024 * 1024
#: how many of the batch's first records the probe compares
PROBE_ROWS = 10_000


def first_held_hit(spark: SparkSession, df: DataFrame, key_fields: list[str], partition_fields: list[str],
                   hive_style: bool, slices: list[FileSlice], storage: Storage,
                   labels: Mapping[str, Mapping[str, str]] | None = None) -> str | None:
    """The file group (fileId) of the first batch record whose key lives in one of ``slices``
    (the file groups other writers are writing), or None. A simple index puts such a record in
    exactly that file group, so a hit is a certain conflict, found before tagging.

    First a probe that costs well under a second: the batch's first records (a limited
    collect, which Spark answers from the first input partition) against the held base files'
    key column read on the driver. A doomed batch (one rewriting those file groups) nearly
    always hits there. Only a batch the probe clears pays the full answer: one Spark job
    joining all its keys with those files' keys."""
    keyed = df.select(partition_path_expr(df, partition_fields, hive_style, labels).alias(PART),
                      record_key_expr(df, key_fields).alias(KEY))
    hit = _probe_held(keyed, slices, storage)
    if hit is not None:
        return hit
    hit = lookup(spark, keyed, slices, storage).where(F.col(FID).isNotNull()).select(FID).limit(1).collect()
    return hit[0][0] if hit else None


def _probe_held(keyed: DataFrame, slices: list[FileSlice], storage: Storage) -> str | None:
    import pyarrow.compute as pc
    from airflow_hudi_occ.core.format.base_file import read_parquet_columns

    try:
        total = sum(storage.size(storage.path(s.base_file.relative_path)) for s in slices)
    except (OSError, FileNotFoundError):
        return None
    if total > PROBE_MAX_BYTES:
        return None
    first = to_arrow(keyed.limit(PROBE_ROWS))
    if first.num_rows == 0:
        return None
    for s in slices:
        mine = first.filter(pc.equal(first.column(PART), s.partition)).column(KEY)
        if len(mine) == 0:
            continue
        keys = read_parquet_columns(storage, s.base_file.relative_path, [KEY]).column(KEY)
        if pc.any(pc.is_in(mine, value_set=keys.combine_chunks().cast(pa.string()))).as_py():
            return s.file_id
    return None
