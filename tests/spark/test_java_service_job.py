"""spark/java_service_job: the Java side's service application. Its services run for real
(Java Hudi 1.2.0) in tests/provider/operators/test_java_table_service.py; here what it does
before any Spark: the usage it refuses (exit 2, as the engine's jobs), and that it stays
importable without this package's dependencies (it runs under the Java side's Python)."""

import ast
from pathlib import Path

from airflow_hudi_occ.spark import java_service_job


def test_a_wrong_service_or_no_table_is_a_usage_error_before_spark(capsys):
    assert java_service_job.main([]) == 2
    assert java_service_job.main(["/t", "rollback"]) == 2
    assert "usage: java_service_job.py <table> <clean|archive|cluster|compact>" in capsys.readouterr().err


def test_it_imports_the_standard_library_and_pyspark_only():
    tree = ast.parse(Path(java_service_job.__file__).read_text())
    roots = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    roots |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert roots <= {"__future__", "sys", "pyspark"}, roots
