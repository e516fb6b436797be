"""Write options of the Spark engine, keyed by Hudi's ``hoodie.datasource.write.*`` names.

Users of Hudi's Spark datasource already pass these keys; every other ``hoodie.*`` key goes to
core's :class:`~airflow_hudi_occ.core.config.WriteConfig` (locks, heartbeats, early conflict
detection, markers) unchanged. An invalid value, or a key nothing reads, is a
:class:`ConfigError` naming the key (and the closest known key), raised by
:meth:`SparkWriteOptions.from_options` before a Spark session exists: the job, the operator
and the DAG file all call it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from airflow_hudi_occ.core.commit.write_options import check_write_options
from airflow_hudi_occ.core.config import ConfigProperty, WriteConfig, parse_bool, parse_int
from airflow_hudi_occ.core.errors import ConfigError

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


def _index_type(v: Any) -> str:
    t = str(v).strip().upper()
    if t not in ("SIMPLE", "BUCKET"):
        raise ConfigError(f"index type {v!r} is not supported by the Spark engine",
                          key=INDEX_TYPE.key, value=v, remedy="use SIMPLE or BUCKET")
    return t


TABLE_NAME = ConfigProperty("hoodie.datasource.write.table.name", "", str, aliases=("hoodie.table.name",))
RECORD_KEY = ConfigProperty("hoodie.datasource.write.recordkey.field", [], _csv,
                            aliases=("hoodie.table.recordkey.fields",))
PARTITION_PATH = ConfigProperty("hoodie.datasource.write.partitionpath.field", [], _csv,
                                aliases=("hoodie.table.partition.fields",))
PRECOMBINE = ConfigProperty("hoodie.datasource.write.precombine.field", "", str,
                            aliases=("hoodie.table.precombine.field", "hoodie.table.ordering.fields"))
OPERATION = ConfigProperty("hoodie.datasource.write.operation", "upsert", _operation)
HIVE_STYLE = ConfigProperty("hoodie.datasource.write.hive_style_partitioning", False, parse_bool)
MAX_FILE_SIZE = ConfigProperty("hoodie.parquet.max.file.size", 120 * 1024 * 1024, parse_int)
SMALL_FILE_LIMIT = ConfigProperty("hoodie.parquet.small.file.limit", 100 * 1024 * 1024, parse_int,
                                  doc="0 turns small-file top-up off")
RECORD_SIZE_ESTIMATE = ConfigProperty("hoodie.copyonwrite.record.size.estimate", 1024, parse_int)
INDEX_TYPE = ConfigProperty("hoodie.index.type", "SIMPLE", _index_type)
BUCKET_NUM = ConfigProperty("hoodie.bucket.index.num.buckets", 4, parse_int)


@dataclass(frozen=True)
class SparkWriteOptions:
    table_name: str
    record_key_fields: list[str]
    partition_fields: list[str]
    precombine_field: str | None
    operation: str
    hive_style_partitioning: bool
    max_file_size: int
    small_file_limit: int
    record_size_estimate: int
    index_type: str
    bucket_num: int
    write_config: WriteConfig
    options: Mapping[str, str]

    @property
    def operation_type(self) -> str:
        return OPERATIONS[self.operation]

    @classmethod
    def from_options(cls, options: Mapping[str, Any], *, warn=None,
                     partial: bool = False) -> "SparkWriteOptions":
        """Parsed and checked options; ``partial`` as in
        :func:`~airflow_hudi_occ.core.commit.write_options.check_write_options`."""
        opts = {str(k): str(v) for k, v in (options or {}).items() if v is not None}
        write_config = check_write_options(opts, warn=warn, partial=partial)
        o = cls(
            table_name=TABLE_NAME.get(opts),
            record_key_fields=RECORD_KEY.get(opts),
            partition_fields=PARTITION_PATH.get(opts),
            precombine_field=PRECOMBINE.get(opts) or None,
            operation=OPERATION.get(opts),
            hive_style_partitioning=HIVE_STYLE.get(opts),
            max_file_size=MAX_FILE_SIZE.get(opts),
            small_file_limit=SMALL_FILE_LIMIT.get(opts),
            record_size_estimate=RECORD_SIZE_ESTIMATE.get(opts),
            index_type=INDEX_TYPE.get(opts),
            bucket_num=BUCKET_NUM.get(opts),
            write_config=write_config,
            options=opts,
        )
        if o.max_file_size <= 0 or o.record_size_estimate <= 0:
            raise ConfigError("file and record sizes must be positive", key=MAX_FILE_SIZE.key,
                              value=o.max_file_size)
        if o.index_type == "BUCKET" and o.bucket_num <= 0:
            raise ConfigError("the bucket index needs a positive number of buckets",
                              key=BUCKET_NUM.key, value=o.bucket_num)
        return o
