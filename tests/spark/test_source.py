"""check_source: a file-system input is judged before a Spark session exists."""

import pytest

from airflow_hudi_occ.core.errors import SourceNotFoundError
from airflow_hudi_occ.spark.submit.source import check_source, local_path


def test_missing_empty_and_skipped_only_sources_are_refused(tmp_path):
    with pytest.raises(SourceNotFoundError, match="does not exist") as e:
        check_source(str(tmp_path / "landing" / "2024-01-01"), "parquet")
    assert e.value.source.endswith("2024-01-01") and "sensor" in e.value.remedy
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    with pytest.raises(SourceNotFoundError, match="holds no data files"):
        check_source(str(tmp_path / "empty"), "parquet")
    (tmp_path / "skipped" / "_temporary").mkdir(parents=True)
    (tmp_path / "skipped" / "_temporary" / "part-0.parquet").write_bytes(b"x")
    (tmp_path / "skipped" / "_SUCCESS").write_bytes(b"")
    (tmp_path / "skipped" / ".part-0.crc").write_bytes(b"")
    with pytest.raises(SourceNotFoundError, match="holds no data files"):
        check_source(str(tmp_path / "skipped"), "parquet")
    with pytest.raises(SourceNotFoundError, match="does not exist"):
        check_source(str(tmp_path / "nothing-*.json"), "json")
    with pytest.raises(SourceNotFoundError, match="no source path"):
        check_source("  ", "csv")
    with pytest.raises(SourceNotFoundError, match="SQL source is empty"):
        check_source("", "sql")


def test_present_sources_and_other_schemes_pass(tmp_path):
    (tmp_path / "in" / "day=1").mkdir(parents=True)
    (tmp_path / "in" / "day=1" / "part-0.parquet").write_bytes(b"x")
    for src in (str(tmp_path / "in"), f"file://{tmp_path}/in", str(tmp_path / "in" / "day=*"),
                str(tmp_path / "in" / "day=1" / "part-0.parquet")):
        check_source(src, "parquet")
    check_source("s3a://bucket/landing/", "parquet")  # Spark holds the credentials: its check
    check_source("SELECT 1 AS id", "sql")
    assert local_path("s3://b/k") is None and local_path("file:/x") == "/x"
