"""Spark's log level for the project's jobs (spark/submit/conf.py), without pyspark."""

from airflow_hudi_occ.core.job_protocol import emit_progress, progress_stages
from airflow_hudi_occ.spark.submit.conf import (DEFAULT_CONF, LOG_LEVEL_KEY, QUIET_LOG4J2,
                                                default_conf, log_conf)


def test_warn_by_default_with_the_quiet_log4j2_file_for_a_driver_here(monkeypatch):
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    assert DEFAULT_CONF[LOG_LEVEL_KEY] == "WARN" and default_conf("spark://h:7077")[LOG_LEVEL_KEY] == "WARN"
    assert QUIET_LOG4J2.is_file() and "rootLogger.level = warn" in QUIET_LOG4J2.read_text()
    out = log_conf(default_conf("local[2]"), driver_local=True)
    assert out == {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{QUIET_LOG4J2}"}
    # the submitter's own Java options are kept, ours appended
    out = log_conf({"spark.driver.extraJavaOptions": "-Xss4m"}, driver_local=True)
    assert out["spark.driver.extraJavaOptions"].startswith("-Xss4m -Dlog4j2.configurationFile=")


def test_nothing_added_when_info_is_asked_for_or_logging_is_configured_elsewhere(monkeypatch, tmp_path):
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    assert log_conf({LOG_LEVEL_KEY: "info"}, driver_local=True) == {}
    assert log_conf({LOG_LEVEL_KEY: "DEBUG"}, driver_local=True) == {}
    assert log_conf({}, driver_local=False) == {}  # a driver on the cluster has no such file
    assert log_conf({"spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=x"},
                    driver_local=True) == {}
    (tmp_path / "log4j2.properties").write_text("rootLogger.level = info\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert log_conf({}, driver_local=True) == {}


def test_progress_lines_read_back_in_order(capsys):
    emit_progress("planning", "upsert of 3 input rows in 1 partition(s)")
    emit_progress("writing", "1 of 2 write task(s) done")
    emit_progress("writing", "done: 1 file(s), 3 rows written")
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "hudi-occ planning: upsert of 3 input rows in 1 partition(s)"
    assert progress_stages(out + "hudi-occ is not a stage line\nHUDI_OCC_RESULT {}\n") == \
        ["planning", "writing", "writing"]
