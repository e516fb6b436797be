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
    # the loser's own rollback is named in its record: the timeline forgets it once archived
    [rollback] = [i for i in table.timeline() if i.action.value == "rollback"]
    assert rb.rolled_back_by == rollback.requested_time and ra.rolled_back_by is None


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


def test_a_later_rollback_is_named_in_an_ended_record(table, fast_options):
    """A loser left to LAZY rollback is closed by the rollback a clean runs later: its record
    keeps its outcome and gains the rollback's instant."""
    tx = WriteTransaction(table, _cfg(table, fast_options), writer_id="W")
    tx.begin()
    tx.abort(rollback=False, error=WriteConflictError("lost", instant=tx.instant_time, other_instant="1",
                                                        file_groups=["p/f"]))
    attempt_log.mark_rolled_back(table, tx.instant_time, "20990101000000000")
    rec = attempt_log.read_record(table, tx.instant_time)
    assert (rec.outcome, rec.rolled_back_by) == ("conflict", "20990101000000000")
    assert attempt_log.read_record(table, "20000101000000000") is None


def test_retention_covers_the_longest_trends_window():
    from airflow_hudi_occ.core.inspection import trends
    longest = max(trends.parse_window(w).ms for w in trends.WINDOWS)
    assert attempt_log.RETAINED_MS >= longest + trends.LOOKBACK_MS
    now_ms = 1_800_000_000_000
    young = attempt_log.AttemptRecord(instant="x", started_at_ms=now_ms - longest - trends.LOOKBACK_MS + 1)
    old = attempt_log.AttemptRecord(instant="y", started_at_ms=now_ms - attempt_log.RETAINED_MS - 1)
    assert not attempt_log.prunable(young, now_ms) and attempt_log.prunable(old, now_ms)


def test_a_rollback_by_someone_else_is_not_erased_by_the_writers_own_abort(table, fast_options):
    """A clean rolled the instant back first (its writer looked dead); the writer's abort then
    skips its own rollback, and its record must still name the clean's."""
    from airflow_hudi_occ.core.commit.rollback import rollback_instant
    tx = WriteTransaction(table, _cfg(table, fast_options), writer_id="W")
    tx.begin()
    by_clean = rollback_instant(table, tx.instant_time, tx.config).rollback_instant
    assert by_clean is not None
    tx.abort(error=WriteConflictError("lost", instant=tx.instant_time, other_instant="1"))
    rec = attempt_log.read_record(table, tx.instant_time)
    assert (rec.outcome, rec.rolled_back_by) == ("conflict", by_clean)
