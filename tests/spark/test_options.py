"""SparkWriteOptions: the Spark engine's refusals, made before a session exists."""

import pytest

from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.spark.options import SparkWriteOptions


@pytest.mark.parametrize("key", ["hoodie.datasource.write.table.type", "hoodie.table.type"])
def test_merge_on_read_is_refused_by_spark_and_the_remedy_names_the_core_writer(key):
    with pytest.raises(ConfigError) as e:
        SparkWriteOptions.from_options({key: "MERGE_ON_READ"})
    assert "Spark engine does not write merge-on-read" in str(e.value)
    assert "MergeOnReadWriter" in e.value.remedy


def test_copy_on_write_is_the_default():
    SparkWriteOptions.from_options({"hoodie.datasource.write.table.type": "COPY_ON_WRITE"})
