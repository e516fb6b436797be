"""The batch's partitions read before submission (spark/submit/footprint.py): as the job spells
them (core's partition-path rule, hive style, url-encoding), from parquet, csv and json, and
unknown (None) wherever the answer could differ from the job's."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_hudi_occ.spark.submit.footprint import batch_partitions


def test_parquet_folder_partitions_as_the_job_spells_them(tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    pq.write_table(pa.table({"id": [1, 2], "p": ["a", "b/c"], "n": [1, 1]}), d / "part-0.parquet")
    pq.write_table(pa.table({"id": [3], "p": ["a"], "n": [7]}), d / "part-1.parquet")
    (d / "_SUCCESS").write_text("")
    assert batch_partitions(str(d), "parquet", ["p"], hive_style=False, url_encode=False) == ["a", "b/c"]
    assert batch_partitions(str(d), "parquet", ["p"], hive_style=False, url_encode=True) == ["a", "b%2Fc"]
    assert batch_partitions(str(d), "parquet", ["p", "n"], hive_style=True, url_encode=False) == \
        ["p=a/n=1", "p=a/n=7", "p=b/c/n=1"]
    assert batch_partitions(str(d), "parquet", [], hive_style=False, url_encode=False) == [""]


def test_csv_and_json_sources(tmp_path):
    csv = tmp_path / "b.csv"
    csv.write_text("id,p,v\n1,x,a\n2,y,b\n")
    assert batch_partitions(str(csv), "csv", ["p"], hive_style=False, url_encode=False) == ["x", "y"]
    js = tmp_path / "b.json"
    js.write_text("\n".join(json.dumps({"id": i, "p": i % 2}) for i in range(4)) + "\n")
    assert batch_partitions(str(js), "json", ["p"], hive_style=False, url_encode=False) == ["0", "1"]


def test_unknown_where_the_job_could_answer_otherwise(tmp_path):
    f = tmp_path / "f.parquet"
    pq.write_table(pa.table({"id": [1], "p": [1.5], "d": pa.array([0], pa.date32())}), f)
    for fields in (["p"], ["d"], ["missing"]):  # a double, a date, no such column
        assert batch_partitions(str(f), "parquet", fields, hive_style=False, url_encode=False) is None
    assert batch_partitions("select 1", "sql", ["p"], hive_style=False, url_encode=False) is None
    assert batch_partitions("s3a://bucket/x", "parquet", ["p"], hive_style=False, url_encode=False) is None
    assert batch_partitions(str(tmp_path / "nothing"), "parquet", ["p"], hive_style=False,
                            url_encode=False) is None
    assert batch_partitions(str(f), "parquet", ["id"], hive_style=False, url_encode=False,
                            max_files=0) is None
