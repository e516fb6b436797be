"""``HudiWriteOperator.execute_complete``: what each trigger outcome becomes (no Spark: the
detached submission is replaced by a job that has already ended)."""

from types import SimpleNamespace

import pytest

from airflow.sdk import RetryAction

from airflow_hudi_occ.core.commit.retry import RetriesExhaustedError
from airflow_hudi_occ.core.errors import SourceNotFoundError
from airflow_hudi_occ.provider import deferred_job
from airflow_hudi_occ.provider.operators.hudi_occ import HudiWriteOperator
from airflow_hudi_occ.provider.version_compat import AirflowException, AirflowFailException


class _TI(SimpleNamespace):
    def xcom_push(self, key, value):
        self.xcom[key] = value


def _context():
    ti = _TI(dag_id="d", task_id="t", run_id="r", try_number=1, map_index=-1, xcom={})
    return {"ti": ti}


def _operator(tmp_path, **kw):
    return HudiWriteOperator(task_id="t", source=str(tmp_path / "src.parquet"),
                             table_path=str(tmp_path / "table"), hudi_conn_id=None,
                             options={"hoodie.datasource.write.recordkey.field": "id"},
                             deferrable=True, backoff_base_s=0.0, backoff_max_s=0.0,
                             instant_wait_s=0.0, yield_to_windows=False, **kw)


@pytest.fixture
def submitted(monkeypatch, tmp_path):
    started = []

    def fake_start(hook, application, *, writer_id, directory=None):
        started.append(writer_id)
        return deferred_job.DetachedJob(pid=0, create_time=0.0, host="elsewhere",
                                        log_path=str(tmp_path / "l"), exit_path=str(tmp_path / "e"),
                                        writer_id=writer_id, started_at=0.0)
    monkeypatch.setattr(deferred_job, "start_detached", fake_start)
    return started


CONFLICT = {"status": "conflict", "instant": "20260101000000000", "other_instant": "20260101000000001",
            "file_groups": ["a/fg-1"], "error": "WriteConflictError", "message": "lost"}


def test_a_conflict_defers_a_fresh_attempt(tmp_path, submitted):
    from airflow.exceptions import TaskDeferred
    op, ctx = _operator(tmp_path, conflict_retries=2), _context()
    with pytest.raises(TaskDeferred) as d:
        op.execute_complete(ctx, CONFLICT, attempt=1, attempts=[], submitted_at=None)
    assert d.value.kwargs["attempt"] == 2 and d.value.method_name == "execute_complete"
    assert [a["outcome"] for a in d.value.kwargs["attempts"]] == ["conflict"]
    assert submitted == ["airflow:d.t.-1:r:try1:attempt2"]
    assert type(d.value.trigger).__name__ == "HudiWriteJobTrigger"
    assert "hudi-occ" in ctx["ti"].xcom["_link_HudiTimelineLink"]


def test_conflict_retries_exhausted(tmp_path, submitted):
    # the task fails with a retryable error: the retry policy lets Airflow try again later
    op = _operator(tmp_path, conflict_retries=1)
    with pytest.raises(RetriesExhaustedError, match="all lost a conflict") as e:
        op.execute_complete(_context(), CONFLICT, attempt=2, attempts=[{"outcome": "conflict"}])
    assert op.retry_policy.evaluate(e.value, 1, 3).action is RetryAction.RETRY
    assert submitted == []
    op = _operator(tmp_path, conflict_retries=1, retry_policy=None)
    with pytest.raises(AirflowException, match="all lost a conflict") as e:
        op.execute_complete(_context(), CONFLICT, attempt=2, attempts=[{"outcome": "conflict"}])
    assert not isinstance(e.value, AirflowFailException)


def test_a_failed_job_fails_the_task_with_its_error(tmp_path, submitted):
    # the job's own error class, decoded from the event: the retry policy fails it at once
    op = _operator(tmp_path)
    event = {"status": "failed", "instant": None, "exit_code": 1, "error": "SourceNotFoundError",
             "message": "no such source: /x/missing.parquet"}
    with pytest.raises(SourceNotFoundError, match="missing.parquet") as e:
        op.execute_complete(_context(), event, attempt=1, attempts=[])
    assert op.retry_policy.evaluate(e.value, 1, 3).action is RetryAction.FAIL
    with pytest.raises(AirflowFailException, match="missing.parquet"):
        _operator(tmp_path, retry_policy=None).execute_complete(_context(), event, attempt=1, attempts=[])


def test_deferrable_defaults_to_the_config(tmp_path, monkeypatch):
    assert _operator(tmp_path).deferrable is True
    op = HudiWriteOperator(task_id="t2", source="s.parquet", table_path="/t", hudi_conn_id=None)
    assert op.deferrable is False  # [operators] default_deferrable is off here


def test_merge_on_read_options_are_accepted_when_the_dag_is_parsed():
    from airflow_hudi_occ.core.errors import ConfigError
    opts = {"hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    HudiWriteOperator(task_id="mor", source="s.parquet", table_path="/t", hudi_conn_id=None, options=opts)
    with pytest.raises(ConfigError, match="merge-on-read"):
        HudiWriteOperator(task_id="mor_bucket", source="s.parquet", table_path="/t", hudi_conn_id=None,
                          options={**opts, "hoodie.index.type": "BUCKET"})
