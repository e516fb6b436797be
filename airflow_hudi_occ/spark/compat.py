"""What the engine needs of PySpark that 3.5 spells differently from 4.x.

Why: the same-Spark benchmark (bench/same_spark.py, issue 31) runs our engine next to Java
Hudi and Delta Lake in one Spark 3.5 session, the Spark that Java Hudi's bundle is built for
(this Maven Central serves no Spark 4 bundle); the engine's supported PySpark stays 4.2
(pyproject's ``spark`` extra). Three differences, found by running the engine on 3.5.5:

- :func:`to_arrow_schema`: 4.x takes the session's ``timezone``; 3.5 always gives UTC
  timestamps, which is what the engine asks 4.x for.
- :func:`to_arrow`: 3.5 has no ``DataFrame.toArrow``.
- :func:`apply_in_arrow`, one Python call per group of rows in Arrow: the engine writes one
  file group per call (executor.py, mor_executor.py, clustering.py) through PySpark 4's
  ``GroupedData.applyInArrow``, which 3.5 lacks. On 3.5 the same contract is built from what
  3.5 has: the rows shuffled by the keys (``repartition``, as ``groupBy`` shuffles them),
  sorted by them within each Spark partition, and handed to ``mapInArrow``, which calls
  ``fn(key, batches)`` once per run of equal keys. The difference: there a group's batches
  are buffered before ``fn`` gets them (one file group's rows, a base file's worth), where
  PySpark 4 streams them.

And what a Spark Connect session lacks (it has no SparkContext, hence no RDDs, and no JVM in
the client): :func:`is_connect` tells the two kinds of session apart, :func:`default_parallelism`
asks a Connect server for what a SparkContext knows, and :func:`task_per_item` runs one Python
task per item with DataFrame APIs only (``mapInArrow`` over a range), the same way on every
line and on both kinds of session.
"""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

import pyarrow as pa


def to_arrow_schema(schema, timezone: str = "UTC") -> pa.Schema:
    """Spark's ``StructType`` as Arrow, timestamps in ``timezone`` (3.5: always UTC)."""
    from pyspark.sql.pandas.types import to_arrow_schema as convert
    try:
        return convert(schema, timezone=timezone)
    except TypeError:  # PySpark 3.5: no timezone argument, timestamps in UTC
        if timezone != "UTC":
            raise
        return convert(schema)


def to_arrow(df) -> pa.Table:
    """``df.toArrow()`` (PySpark 4); on 3.5, which lacks it, through pandas (only small frames
    are collected this way: the tagging probe's first rows)."""
    if hasattr(df, "toArrow"):
        return df.toArrow()
    return pa.Table.from_pandas(df.toPandas(), preserve_index=False)


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session (a client: no SparkContext, no JVM here)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


#: a Connect session's parallelism, by session id (asked of the server once)
_PARALLELISM: dict[str, int] = {}


def default_parallelism(spark) -> int:
    """The session's default parallelism (how many tasks a small job of ours gets): the
    SparkContext's own; on Spark Connect, which has none here, the number of tasks the server
    gives a range without a partition count (Spark's ``leafNodeDefaultParallelism``, which
    defaults to the context's parallelism), asked once per session with one tiny job."""
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    sid = spark.session_id
    if sid not in _PARALLELISM:
        def one_row(batches):  # one row per task, however many rows it read
            import pyarrow as pa
            for _ in batches:
                pass
            yield pa.RecordBatch.from_pydict({"n": [1]}, schema=pa.schema([("n", pa.int64())]))
        _PARALLELISM[sid] = max(1, spark.range(0, 1 << 16).mapInArrow(one_row, "n long").count())
    return _PARALLELISM[sid]


def task_per_item(spark, items: Sequence, fn: Callable) -> Callable[[], list]:
    """The action (run it under ``jobgroup.run_watched``) that calls ``fn(item)`` in one Spark
    task per item and returns the results in the items' order: what
    ``sc.parallelize(items, len(items)).map(fn).collect()`` did, without an RDD. ``items``
    and ``fn`` travel in the task's closure; each result comes back pickled."""
    items = list(items)
    n = max(1, len(items))

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pickle
        for b in batches:
            for i in b.column(0).to_pylist():
                yield pa.RecordBatch.from_pydict({"i": [i], "out": [pickle.dumps(fn(items[i]))]},
                                                 schema=pa.schema([("i", pa.int64()), ("out", pa.binary())]))

    df = spark.range(0, len(items), 1, n).mapInArrow(run, "i long, out binary")

    def action() -> list:
        import pickle
        return [pickle.loads(r.out) for r in sorted(df.collect(), key=lambda r: r.i)]
    return action


def bounds_arrow_batch_bytes(spark) -> bool:
    """Whether the session's Spark also bounds an Arrow batch's bytes
    (``spark.sql.execution.arrow.maxBytesPerBatch``, Spark 4.0+); 3.5 bounds it by its row
    count only. The server's version on Spark Connect, the JVM's otherwise."""
    return int(str(spark.version).split(".")[0]) >= 4


def has_apply_in_arrow() -> bool:
    """PySpark's ``applyInArrow`` with the iterator-of-batches form the engine uses (4.1+; 4.0's
    takes a whole ``pa.Table``, so 4.0 takes the 3.5 route)."""
    import pyspark
    from pyspark.sql.group import GroupedData
    major, minor = (int(x) for x in pyspark.__version__.split(".")[:2])
    return hasattr(GroupedData, "applyInArrow") and (major, minor) >= (4, 1)


def apply_in_arrow(df, keys: Sequence[str], fn: Callable, schema: str):
    """``df.groupBy(*keys).applyInArrow(fn, schema)``: ``fn(key, batches)`` with ``key`` a
    tuple of ``pa.Scalar`` and ``batches`` an iterator of ``pa.RecordBatch`` (every column,
    the keys included), yielding batches of ``schema``."""
    if has_apply_in_arrow():
        return df.groupBy(*keys).applyInArrow(fn, schema)
    keys = list(keys)
    return df.repartition(*keys).sortWithinPartitions(*keys).mapInArrow(by_runs_of_keys(fn, keys), schema)


def by_runs_of_keys(fn: Callable, keys: list[str]):
    """The ``mapInArrow`` function for Spark 3.5: the task's rows arrive sorted by ``keys``;
    each run of equal keys is one group, given to ``fn`` whole."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        current, pending = None, []
        for batch in batches:
            start = 0
            for end, key in boundaries(batch, keys):
                if key != current and pending:
                    yield from fn(tuple(pa.scalar(v) for v in current), iter(pending))
                    pending = []
                current = key
                pending.append(batch.slice(start, end - start))
                start = end
        if pending:
            yield from fn(tuple(pa.scalar(v) for v in current), iter(pending))
    return run


def boundaries(batch: pa.RecordBatch, keys: list[str]) -> list[tuple[int, tuple]]:
    """``(end, key)`` of each run of equal keys in ``batch``, in order (vectorised: a row
    starts a run where any key column differs from the row before; nulls equal nulls)."""
    import pyarrow.compute as pc
    n = batch.num_rows
    if n == 0:
        return []
    changed = None
    for k in keys:
        col = batch.column(k)
        a, b = col.slice(1), col.slice(0, n - 1)
        diff = pc.fill_null(pc.not_equal(a, b), True)
        both_null = pc.and_(pc.is_null(a), pc.is_null(b))
        diff = pc.and_(diff, pc.invert(both_null))
        changed = diff if changed is None else pc.or_(changed, diff)
    ends = [i + 1 for i in pc.indices_nonzero(changed).to_pylist()] + [n]
    return [(end, tuple(batch.column(k)[end - 1].as_py() for k in keys)) for end in ends]
