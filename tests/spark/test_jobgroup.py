"""spark/jobgroup.py without a cluster: Spark's time settings as the Connect route reads them
(the cancel itself runs on real servers: test_writer_connect.py, test_executor.py)."""

import pytest

from airflow_hudi_occ.spark.jobgroup import spark_seconds


@pytest.mark.parametrize("text, seconds", [("2s", 2.0), ("500ms", 0.5), ("3", 3.0), ("1min", 60.0),
                                           (" 1.5s ", 1.5), ("2h", 7200.0)])
def test_spark_time_settings_in_seconds(text, seconds):
    assert spark_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "s", "2 parsecs", "-1s", "two"])
def test_a_setting_that_is_not_a_time_is_refused(text):
    with pytest.raises(ValueError, match="not a Spark time setting"):
        spark_seconds(text)
