"""The attempt log records why each attempt ended, for the UI and the CLI."""

import pytest

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.errors import WriteConflictError
from airflow_hudi_occ.core.commit.transaction import WriteTransaction
from airflow_hudi_occ.core.config import WriteConfig


def _cfg(table, fast_options, **extra):
    return WriteConfig.from_options({**fast_options, **extra})


def test_commit_and_conflict_are_recorded_with_labels(table, fast_options):
    labels = '{"dag_id": "ingest", "task_id": "upsert"}'
    cfg = _cfg(table, fast_options, **{attempt_log.LABELS_OPTION: labels})
    a = WriteTransaction(table, cfg, writer_id="A", batch_key="b1")
    b = WriteTransaction(table, cfg, writer_id="B", attempt=2)
    a.begin(); b.begin()
    from airflow_hudi_occ.core.format.metadata import WriteStat
    stat = lambda t: WriteStat(file_id="fg1", path=f"p/fg1_0-0-0_{t}.parquet", partition_path="p",
                               num_writes=1, num_inserts=1)
    a.commit([stat(a.instant_time)])
    with pytest.raises(WriteConflictError) as ei:
        b.commit([stat(b.instant_time)])
    b.abort(error=ei.value)
    recs = {r.instant: r for r in attempt_log.read_records(table)}
    ra, rb = recs[a.instant_time], recs[b.instant_time]
    assert ra.outcome == "committed" and ra.completion_time and ra.batch_key == "b1"
    assert ra.labels == {"dag_id": "ingest", "task_id": "upsert"}
    assert rb.outcome == "conflict" and rb.other_instant == a.instant_time
    assert rb.file_groups == ["p/fg1"] and rb.attempt == 2 and rb.writer_id == "B"
    assert rb.error == "WriteConflictError" and rb.seconds_discarded >= 0


def test_unreadable_record_is_skipped(table):
    table.storage.write(table.storage.path(".hoodie", ".aux", "occ", "attempts", "1.json"), b"{garbage")
    assert list(attempt_log.read_records(table)) == []


def test_a_running_attempt_is_named_before_it_ends(table, fast_options):
    cfg = _cfg(table, fast_options, **{attempt_log.LABELS_OPTION: '{"dag_id": "backfill"}'})
    tx = WriteTransaction(table, cfg, writer_id="W")
    tx.begin()
    (rec,) = [r for r in attempt_log.read_records(table) if r.instant == tx.instant_time]
    assert rec.outcome == "running" and rec.ended_at_ms == 0 and rec.labels == {"dag_id": "backfill"}
    tx.abort()
    (rec,) = [r for r in attempt_log.read_records(table) if r.instant == tx.instant_time]
    assert rec.outcome == "aborted" and rec.ended_at_ms >= rec.started_at_ms
