"""A batch's footprint as the submitter computes it, before any Spark session: the partition
paths its rows fall in, read from the source's partition columns with pyarrow.

Why here: admission (core/concurrency/admission.py) asks the table which live writers share
partitions with a batch *before* spark-submit, where waiting costs no Spark resources. The
submitter must stay pyspark-free (the provider imports only ``spark/submit/``), so this reads
the source as the engine's object-store reader does (parquet: only the partition columns;
csv with a header; json lines) and spells each partition with core's rule
(``format/partition_path``), as ``tagging.check_batch`` does in the job.

Unknown (None) whenever the answer could differ from the job's: a SQL source, a Hadoop
scheme (``s3a://``: Spark's connector holds the credentials), a partition column of a type
whose string form differs between Spark and Arrow (only strings and integers are trusted),
a missing column, or more than ``max_files`` files. Unknown is the conservative answer for a
wait: it overlaps every writer.
"""

from __future__ import annotations

import io
import logging

import pyarrow as pa
import pyarrow.compute as pc

from airflow_hudi_occ.core.format import partition_path as pp
from airflow_hudi_occ.core.format.storage import open_fs
from airflow_hudi_occ.spark.submit.source import HADOOP_SCHEMES, list_files, local_path, scheme_of

log = logging.getLogger(__name__)

#: a source of more files than this is not read before submission (unknown footprint)
MAX_FILES = 2000


def _trusted(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)


def _read_columns(url: str, fmt: str, columns: list[str], storage_options: dict | None) -> pa.Table:
    fs, path = open_fs(url, storage_options)
    if fmt == "parquet":
        import pyarrow.parquet as pq
        with fs.open(path, "rb") as f:
            return pq.read_table(f, columns=columns)
    data = io.BytesIO(fs.cat_file(path))
    if fmt == "csv":
        import pyarrow.csv as pcsv
        return pcsv.read_csv(data, convert_options=pcsv.ConvertOptions(include_columns=columns))
    import pyarrow.json as pjson
    return pjson.read_json(data).select(columns)


def batch_partitions(source: str, fmt: str, partition_fields: list[str], *, hive_style: bool,
                     url_encode: bool, storage_options: dict | None = None,
                     max_files: int = MAX_FILES) -> list[str] | None:
    """The sorted partition paths of the batch in ``source``, or None when unknown."""
    if fmt not in ("parquet", "csv", "json"):
        return None
    if not partition_fields:
        return [""]
    if local_path(source) is None and scheme_of(source) in HADOOP_SCHEMES:
        return None
    try:
        files = list_files(source, storage_options)
        if not files or len(files) > max_files:
            return None
        values: set[tuple] = set()
        for url in files:
            t = _read_columns(url, fmt, list(partition_fields), storage_options)
            if any(not _trusted(t.schema.field(f).type) and not pa.types.is_null(t.schema.field(f).type)
                   for f in partition_fields):
                return None
            cols = [pc.cast(t.column(f), pa.string()).to_pylist() for f in partition_fields]
            values.update(zip(*cols))
        return sorted({pp.partition_path(partition_fields, v, hive_style=hive_style, url_encode=url_encode)
                       for v in values})
    except Exception as e:  # noqa: BLE001 - unknown is a safe answer; the job reads it properly
        log.info("the partitions of %s are unknown before submission (%s: %s)", source,
                 type(e).__name__, e)
        return None
