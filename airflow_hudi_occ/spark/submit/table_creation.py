"""The table a first write creates: its ``hoodie.properties`` from the write's options (name,
keys, partition fields, type, version, bucket index, virtual keys).

Why in ``submit``: two places create a table and must create the same one. The write job
does, when its table does not exist yet; and the write operator does before its first
spark-submit, so that a table's first writers have a table to file admission requests in
(docs/concurrency.md, "A table's first write"). Creation is create-if-absent on
``hoodie.properties`` (``exist_ok``): of writers racing to create one table, one creates it
and the others open it; whichever comes first, the properties are these. pyspark-free, as
everything the provider imports from ``spark``.
"""

from __future__ import annotations

import posixpath
import re

from airflow_hudi_occ.core.errors import TableNotFoundError
from airflow_hudi_occ.core.table.merge_mode import creation_properties
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.spark.submit.options import SparkWriteOptions


def default_table_name(base_path: str) -> str:
    """The table name when the options give none: the folder's name, made an identifier."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", posixpath.basename(base_path.rstrip("/")) or "hudi_table")
    return name if re.match(r"[A-Za-z_]", name) else f"t_{name}"


def open_or_create_table(base_path: str, opts: SparkWriteOptions, storage_options=None) -> Table:
    """The table at ``base_path``; created from ``opts`` when there is none (a location that
    holds anything but a ``.hoodie`` folder is refused by ``Table.create``)."""
    try:
        return Table.open(base_path, storage_options)
    except TableNotFoundError:
        pass
    extra = {}
    if opts.index_type == "BUCKET":
        extra = {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": opts.bucket_num}
    if not opts.populate_meta_fields:
        extra["hoodie.populate.meta.fields"] = "false"
    extra.update(creation_properties(opts.write_config.merge_mode))
    return Table.create(base_path, opts.table_name or default_table_name(base_path),
                        record_key_fields=opts.record_key_fields,
                        partition_fields=opts.partition_fields,
                        precombine_field=opts.precombine_field,
                        hive_style_partitioning=opts.hive_style_partitioning,
                        url_encode_partitions=opts.url_encode_partitions,
                        storage_options=storage_options, extra_properties=extra, exist_ok=True,
                        version=opts.write_config.write_table_version,
                        table_type=opts.table_type)


__all__ = ["default_table_name", "open_or_create_table"]
