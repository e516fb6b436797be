"""Write options of the Spark engine, keyed by Hudi's ``hoodie.datasource.write.*`` names.

Users of Hudi's Spark datasource already pass these keys (defined in core.config, so that every
layer, the CLI included, knows them); every other ``hoodie.*`` key goes to
core's :class:`~airflow_hudi_occ.core.config.WriteConfig` (locks, heartbeats, early conflict
detection, markers) unchanged. An invalid value, or a key nothing reads, is a
:class:`ConfigError` naming the key (and the closest known key), raised by
:meth:`SparkWriteOptions.from_options` before a Spark session exists: the job, the operator
and the DAG file all call it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from airflow_hudi_occ.core.commit.write_options import check_write_options
from airflow_hudi_occ.core.config import (HIVE_STYLE, INDEX_TYPE, URL_ENCODE, MAX_FILE_SIZE,
                                          POPULATE_META_FIELDS,
                                          OPERATION, OPERATIONS, PARTITION_PATH, PRECOMBINE,
                                          RECORD_KEY, RECORD_SIZE_ESTIMATE, SMALL_FILE_LIMIT,
                                          TABLE_TYPE, DATASOURCE_TABLE_NAME as TABLE_NAME, WriteConfig)
from airflow_hudi_occ.core.errors import ConfigError

#: the operations the Spark engine writes as deltacommits (core's MergeOnReadWriter's)
MOR_OPERATIONS = ("upsert", "insert", "delete", "bulk_insert")


def check_merge_on_read(table_type: str, operation: str, index_type: str,
                        key: str = TABLE_TYPE.key) -> None:
    """A merge-on-read write is a deltacommit (spark/mor_executor.py) with the simple index and
    the operations core's ``MergeOnReadWriter`` writes; anything else is refused up front, so
    the Spark and core engines never disagree on what a MOR table may hold."""
    if table_type != "MERGE_ON_READ":
        return
    if operation not in MOR_OPERATIONS:
        raise ConfigError(f"operation {operation!r} is not written to merge-on-read tables yet",
                          key=OPERATION.key, value=operation,
                          remedy=f"use one of {', '.join(MOR_OPERATIONS)}, or a COPY_ON_WRITE table")
    if index_type == "BUCKET":
        raise ConfigError("the bucket index is not written to merge-on-read tables yet", key=INDEX_TYPE.key,
                          value=index_type, remedy="use the simple index (the default) on a MERGE_ON_READ "
                          f"table ({key}), or a COPY_ON_WRITE table")


@dataclass(frozen=True)
class SparkWriteOptions:
    table_name: str
    record_key_fields: list[str]
    partition_fields: list[str]
    precombine_field: str | None
    operation: str
    table_type: str
    hive_style_partitioning: bool
    url_encode_partitions: bool
    max_file_size: int
    small_file_limit: int
    record_size_estimate: int
    index_type: str
    bucket_num: int
    write_config: WriteConfig
    options: Mapping[str, str]
    #: bulk_insert combines a batch's duplicate keys only when asked (Hudi's default: no)
    combine_before_insert: bool = False
    #: false: a table this write creates gets virtual keys (``hoodie.populate.meta.fields``)
    populate_meta_fields: bool = True

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
            table_type=TABLE_TYPE.get(opts),
            hive_style_partitioning=HIVE_STYLE.get(opts),
            url_encode_partitions=URL_ENCODE.get(opts),
            max_file_size=MAX_FILE_SIZE.get(opts),
            small_file_limit=SMALL_FILE_LIMIT.get(opts),
            record_size_estimate=RECORD_SIZE_ESTIMATE.get(opts),
            index_type=write_config.index.type,  # the index keys, parsed (and checked) once there
            bucket_num=write_config.index.num_buckets,
            write_config=write_config,
            options=opts,
            combine_before_insert=write_config.combine_before_insert,
            populate_meta_fields=POPULATE_META_FIELDS.get(opts),
        )
        if o.max_file_size <= 0 or o.record_size_estimate <= 0:
            raise ConfigError("file and record sizes must be positive", key=MAX_FILE_SIZE.key,
                              value=o.max_file_size)
        return o

    def with_operation(self, operation: str | None) -> "SparkWriteOptions":
        """The same options for another operation (``SparkHudiWriter.write(df, "delete")``):
        only the operation is checked, the rest was checked once when these were parsed."""
        if not operation or operation == self.operation:
            return self
        op = OPERATION.get({OPERATION.key: operation})
        options = {**self.options, OPERATION.key: op}
        return replace(self, operation=op, options=options,
                       write_config=replace(self.write_config, options={**self.write_config.options,
                                                                        OPERATION.key: op}))

    def check_writable(self) -> "SparkWriteOptions":
        """What the Spark engine cannot *write* (checked by the write job, the writer and
        HudiWriteOperator; not by the table services, which act on any table): MOR with an
        operation or index deltacommits do not write yet, and NBCC."""
        check_merge_on_read(self.table_type, self.operation, self.index_type)
        mode = self.write_config.concurrency_mode.value
        if mode == "NON_BLOCKING_CONCURRENCY_CONTROL":
            raise ConfigError("the Spark engine does not write with non-blocking concurrency control",
                              key="hoodie.write.concurrency.mode", value=mode,
                              remedy="write NBCC tables with the core engine (MergeOnReadWriter), or "
                                     "use OPTIMISTIC_CONCURRENCY_CONTROL with Spark")
        return self
