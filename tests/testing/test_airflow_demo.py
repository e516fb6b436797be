"""The demo's summary (``testing/airflow_demo.contention_lines``) from attempt records that real
writes left: a write that really waited for admission behind a live backfill (the write
operator's own admission, ``provider/admission.py``, in this process), and a write that really
lost a conflict and committed on its retry (``run_with_conflict_retries``). Each line is
checked against the records, never against a number or instant written here.

The same summary after the real Airflow demo, with the page in Chromium:
``tests/testing/test_airflow_demo_ui.py`` (slow)."""

from __future__ import annotations

import json
import logging
import threading

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.commit.retry import RetryPolicy, run_with_conflict_retries
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.concurrency import admission as core_admission
from airflow_hudi_occ.core.config import HeartbeatConfig, WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider import admission
from airflow_hudi_occ.testing.airflow_demo import contention_lines
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS

OPTS = {**FAST_WRITE_OPTIONS, "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts"}
HB = HeartbeatConfig(interval_ms=1000, tolerable_misses=2)


def _writer(table, dag_id, task_id, run_id, **extra) -> ArrowTableWriter:
    labels = dict(dag_id=dag_id, task_id=task_id, run_id=run_id, try_number="1", **extra)
    return ArrowTableWriter(table, WriteConfig.from_options({**OPTS, attempt_log.LABELS_OPTION: json.dumps(labels)}),
                            writer_id=f"{dag_id}-{run_id}")


def _rows(ids, v):
    return pa.Table.from_pylist([{"id": i, "p": f"p{i % 2}", "ts": 1, "v": v} for i in ids])


def _contended_table(tmp_path):
    """Seed; a backfill live while an ingestion run waits for admission behind it; two
    ingestion runs colliding, the loser retried."""
    table = Table.create(str(tmp_path / "orders"), "orders", record_key_fields=["id"],
                         partition_fields=["p"], precombine_field="ts")
    _writer(table, "seed", "load", "r0").write(_rows(range(8), "seed"))

    # the backfill holds its instant live (inflight, file groups planned) until released
    began, release, out = threading.Event(), threading.Event(), {}

    def hold(tx):
        out["backfill"] = tx.instant_time
        began.set()
        release.wait(60)
    backfill = threading.Thread(target=lambda: _writer(table, "hudi_occ_backfill", "rewrite", "bf").write(
        _rows(range(8), "backfill"), before_commit=hold))
    backfill.start()
    assert began.wait(60)
    src = tmp_path / "ingest.parquet"
    pq.write_table(_rows([0, 2], "ingest"), src)  # partition p0 only
    fp = admission.batch_footprint(table, str(src), "parquet", owner="hudi_occ_ingestion.upsert",
                                   kind="ingestion", storage_options=None, operation="upsert", options=OPTS)
    req = admission.file_request(table, fp, {"dag_id": "hudi_occ_ingestion", "run_id": "i1", "task_id": "upsert"})
    threading.Timer(1.0, release.set).start()
    res = admission.wait_on_worker(table, req, HB, admission.AdmissionSettings("wait", 60.0, poll_s=0.1),
                                   logging.getLogger("test"))
    backfill.join(60)
    assert res.waited_for and not res.timed_out, res
    admission.withdraw(table.base_uri, None, req.request_id)
    out["waiter"] = _writer(table, "hudi_occ_ingestion", "upsert", "i1",
                            **core_admission.wait_labels(res.seconds, res.waited_for)
                            ).write(pq.read_table(src)).instant.requested_time

    def collide(tx):  # another run commits the same file group in the middle of attempt 1
        out["loser"] = tx.instant_time
        out["winner"] = _writer(table, "hudi_occ_ingestion", "upsert", "i3").write(
            _rows([1], "i3")).instant.requested_time

    def attempt(n):
        return _writer(table, "hudi_occ_ingestion", "upsert", "i2").write(
            _rows([1, 3], f"i2-{n}"), batch_key="i2", attempt=n,
            before_commit=collide if n == 1 else None).instant.requested_time
    out["retry"] = run_with_conflict_retries(attempt, RetryPolicy(max_conflict_retries=2, sleep=lambda s: None))
    return table, out


def test_the_summary_names_each_admission_wait_and_each_conflict_with_its_retry(tmp_path):
    table, got = _contended_table(tmp_path)
    records = {r.instant: r for r in attempt_log.read_records(table)}
    lines = contention_lines(table)
    text = "\n".join(lines)

    # the wait: who waited, for which instant of whose task, on what, how long
    wait = core_admission.wait_from_labels(records[got["waiter"]].labels)
    assert wait["seconds"] >= 0.9 and wait["waited_for"], wait
    [wait_line] = [ln for ln in lines if " waited " in ln]
    assert wait_line.startswith("  hudi_occ_ingestion.upsert run i1 waited "), wait_line
    assert f"waited {wait['seconds']:.1f} s for {got['backfill']} (hudi_occ_backfill.rewrite) on partitions p0" \
        in wait_line, wait_line
    assert wait_line.endswith(f"then began {got['waiter']}")

    # the conflict: the loser, whom it lost to, on which file groups, and its retry
    loser = records[got["loser"]]
    assert loser.outcome == attempt_log.CONFLICT and loser.other_instant == got["winner"] and loser.file_groups
    [conflict_line] = [ln for ln in lines if " lost to " in ln]
    assert conflict_line.startswith(f"  {got['loser']} hudi_occ_ingestion.upsert run i2 attempt 1 lost to "
                                    f"{got['winner']} (hudi_occ_ingestion.upsert run i3) on "
                                    f"{len(loser.file_groups)} file group(s) {', '.join(loser.file_groups)}: "), conflict_line
    assert conflict_line.endswith(f"retried as {got['retry']} (committed)"), conflict_line
    assert records[got["retry"]].outcome == attempt_log.COMMITTED and records[got["retry"]].attempt == 2

    commits = sum(r.outcome == attempt_log.COMMITTED for r in records.values())
    assert (f"commits {commits}, conflicts 1, retried attempts 1, admission waits 1 "
            f"({wait['seconds']:.1f} s)") in text, text


def test_a_quiet_table_says_none_waited_and_none_lost(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    _writer(table, "seed", "load", "r0").write(_rows(range(4), "seed"))
    lines = contention_lines(table)
    for head in ("admission waits", "conflicts and retries"):
        i = next(i for i, ln in enumerate(lines) if ln.startswith(head))
        assert lines[i + 1] == "  none", lines
    assert lines[-1] == "commits 1, conflicts 0, retried attempts 0, admission waits 0 (0.0 s)"
