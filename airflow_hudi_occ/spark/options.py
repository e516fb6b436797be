"""Moved to :mod:`airflow_hudi_occ.spark.submit.options` (the submit side, no pyspark); this
path stays importable with every name it had."""

from airflow_hudi_occ.spark.submit.options import (BUCKET_NUM, COMBINE_BEFORE_INSERT, HIVE_STYLE,  # noqa: F401
                                                   INDEX_TYPE, MAX_FILE_SIZE, MOR_OPERATIONS,
                                                   OPERATION, OPERATIONS, PARTITION_PATH, PRECOMBINE,
                                                   RECORD_KEY, RECORD_SIZE_ESTIMATE, SMALL_FILE_LIMIT,
                                                   TABLE_NAME, TABLE_TYPE, URL_ENCODE, SparkWriteOptions,
                                                   WriteConfig, check_merge_on_read)
