"""The services entry point as a process: result line and exit codes (clean and scheduling
need no Spark, so these run fast)."""

import subprocess
import sys

import pyarrow as pa

from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.job_protocol import EXIT_USAGE, last_payload


def _run(args):
    p = subprocess.run([sys.executable, "-m", "airflow_hudi_occ.spark.service_job", *args],
                       capture_output=True, text=True, timeout=120)
    return p.returncode, last_payload(p.stdout)


def test_clean_schedule_and_usage(table, fast_options):
    w = ArrowTableWriter(table, WriteConfig.from_options(fast_options))
    for i in range(3):
        w.write(pa.Table.from_pylist([{"id": i, "p": "a", "ts": i, "v": "x"}]), "insert")
    o = [a for k, v in {**fast_options, "hoodie.cleaner.commits.retained": "1"}.items()
         for a in ("--option", f"{k}={v}")]
    code, res = _run(["--table", table.base_uri, "--service", "clean", *o])
    assert code == 0 and res["outcome"] == "ok" and res["clean_instant"] is None  # nothing old
    code, res = _run(["--table", table.base_uri, "--service", "cluster", "--schedule-only", *o])
    assert code == 0 and table.timeline().get(res["scheduled"]) is not None
    code, res = _run(["--table", table.base_uri, "--service", "rollback", "--instant", "1999", *o])
    assert code == 0 and res["rolled_back"][0]["skipped"] == "not on the timeline"
    code, res = _run(["--table", table.base_uri, "--service", "clean", *o,
                      "--option", "hoodie.cleaner.policy=KEEP_EVERYTHING"])
    assert code == 1 and res["error"]["key"] == "hoodie.cleaner.policy"
    code, res = _run(["--table", table.base_uri, "--service", "vacuum"])
    assert code == EXIT_USAGE and res["error"]["error"] == "UsageError"


def test_compact_schedules_by_trigger_then_executes_with_arrow(tmp_path, fast_options):
    from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key
    mor = Table.create(str(tmp_path / "mor"), "mor", record_key_fields=["id"], partition_fields=["p"],
                       precombine_field="ts", table_type="MERGE_ON_READ")
    w = MergeOnReadWriter(mor, WriteConfig.from_options(fast_options))
    w.write(pa.Table.from_pylist([{"id": i, "p": "a", "ts": 0, "v": "x"} for i in range(3)]), "insert")
    w.write(pa.Table.from_pylist([{"id": 1, "p": "a", "ts": 1, "v": "y"}]), "upsert")
    o = [a for k, v in {**fast_options, "hoodie.compact.inline.max.delta.commits": "2"}.items()
         for a in ("--option", f"{k}={v}")]
    code, res = _run(["--table", mor.base_uri, "--service", "compact", "--schedule-only", *o])
    t = res["scheduled"]
    assert code == 0 and mor.timeline().get(t).action.value == "compaction"
    code, res = _run(["--table", mor.base_uri, "--service", "compact", "--executor", "arrow", *o])
    assert code == 0 and res["outcome"] == "committed" and res["instant"] == t and res["scheduled"] is None
    assert res["executor"] == "arrow"
    assert {k: v["v"] for k, v in rows_by_key(hudi_read(mor.base_uri)).items()} == {0: "x", 1: "y", 2: "x"}
    code, res = _run(["--table", mor.base_uri, "--service", "compact", *o])
    assert code == 0 and res["scheduled"] is None and "nothing to compact" in res["message"]

