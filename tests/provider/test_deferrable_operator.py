"""``HudiWriteOperator.execute_complete``: what each trigger outcome becomes (no Spark: the
detached submission is replaced by a job that has already ended)."""

from types import SimpleNamespace

import pytest

from airflow.sdk import RetryAction

from airflow_hudi_occ.core.commit.retry import RetriesExhaustedError, RetryPolicy
from airflow_hudi_occ.core.errors import SourceNotFoundError
from airflow_hudi_occ.provider import deferred_job
from airflow_hudi_occ.provider.admission import AdmissionSettings
from airflow_hudi_occ.provider.launchers.spark_submit import SparkSubmitLauncher
from airflow_hudi_occ.provider.operators.write import HudiWriteOperator
from airflow_hudi_occ.provider.version_compat import AirflowException, AirflowFailException


class _TI(SimpleNamespace):
    def xcom_push(self, key, value):
        self.xcom[key] = value


def _context():
    ti = _TI(dag_id="d", task_id="t", run_id="r", try_number=1, map_index=-1, xcom={})
    return {"ti": ti}


def _operator(tmp_path, conflict_retries=5, **kw):
    return HudiWriteOperator(task_id="t", source=str(tmp_path / "src.parquet"),
                             table_path=str(tmp_path / "table"), hudi_conn_id=None,
                             options={"hoodie.datasource.write.recordkey.field": "id"}, deferrable=True,
                             conflict_retries=RetryPolicy(max_conflict_retries=conflict_retries,
                                                          base_delay_s=0.0, max_delay_s=0.0),
                             launcher=SparkSubmitLauncher(instant_wait_s=0.0), write_windows=None, **kw)


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
    from airflow.sdk.exceptions import TaskDeferred
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


def test_an_overlapping_live_writer_defers_the_write_to_admission_in_the_triggerer(tmp_path, submitted):
    """A live writer declared partition a; the batch writes a: the deferrable write defers to
    HudiAdmissionTrigger without submitting anything; the trigger (run here) sees the writer,
    then its end, and yields admitted; execute_admitted submits attempt 1 and records the
    wait (seconds, whom for) in XCom."""
    import asyncio

    import pyarrow as pa
    import pyarrow.parquet as pq
    from airflow.sdk.exceptions import TaskDeferred

    from airflow_hudi_occ.core.commit.transaction import WriteTransaction
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.table.table import Table

    table = Table.create(str(tmp_path / "table"), "table", record_key_fields=["id"], partition_fields=["p"])
    pq.write_table(pa.table({"id": [1, 2], "p": ["a", "b"]}), tmp_path / "src.parquet")
    tx = WriteTransaction(table, WriteConfig(), footprint=["a"])
    tx.begin()
    op, ctx = _operator(tmp_path, admission=AdmissionSettings(poll_s=0.1)), _context()
    try:
        with pytest.raises(TaskDeferred) as d:
            op.execute(ctx)
        assert d.value.method_name == "execute_admitted" and submitted == []
        trigger = d.value.trigger
        assert type(trigger).__name__ == "HudiAdmissionTrigger"

        async def scenario():
            gen = trigger.run()
            first = asyncio.ensure_future(gen.__anext__())
            await asyncio.sleep(0.5)
            assert not first.done()  # still waiting for the live writer
            await asyncio.to_thread(tx.abort)
            return (await asyncio.wait_for(first, 30)).payload
        event = asyncio.run(scenario())
    finally:
        tx.abort()
    assert event["status"] == "admitted" and event["waited_s"] >= 0.5
    # the writer is named by its writer id (no Airflow labels: a writer outside Airflow)
    assert event["waited_for"] == [f"{tx.instant_time} ({tx.writer_id}) on partitions a"], event
    with pytest.raises(TaskDeferred) as d2:
        op.execute_admitted(ctx, event, attempt=1, attempts=[], waits=[])
    assert d2.value.method_name == "execute_complete"
    assert submitted == ["airflow:d.t.-1:r:try1:attempt1"]
    [wait] = ctx["ti"].xcom["hudi_occ_waits"]
    assert wait["attempt"] == 1 and wait["seconds"] >= 0.5 and wait["waited_for"] == event["waited_for"]


def test_on_overlap_fail_fails_at_once_naming_the_writer(tmp_path, submitted):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from airflow_hudi_occ.core.commit.transaction import WriteTransaction
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.provider.admission import AdmissionRefusedError
    from airflow_hudi_occ.provider.retry_policy import is_retryable

    table = Table.create(str(tmp_path / "table"), "table", record_key_fields=["id"], partition_fields=["p"])
    pq.write_table(pa.table({"id": [1], "p": ["a"]}), tmp_path / "src.parquet")
    tx = WriteTransaction(table, WriteConfig(), footprint=["a"])
    tx.begin()
    op, ctx = _operator(tmp_path, admission=AdmissionSettings(on_overlap="fail")), _context()
    try:
        # raised as itself: the retry policy fails it at once (not retryable), naming the writer
        with pytest.raises(AdmissionRefusedError, match=tx.instant_time) as refused:
            op.execute(ctx)
        assert op.retry_policy is not None and not is_retryable(refused.value)
    finally:
        tx.abort()
    assert submitted == []


def test_the_first_writes_of_a_new_table_are_admitted_one_at_a_time(tmp_path, submitted):
    """No table yet: the first write makes it (as its job would) and files its request there,
    so the second first write finds it and waits in the triggerer instead of racing (two
    real first writes through ``airflow dags test``: tests/provider/test_admission_e2e.py)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from airflow.sdk.exceptions import TaskDeferred

    from airflow_hudi_occ.core.concurrency import admission
    from airflow_hudi_occ.core.table.table import Table

    pq.write_table(pa.table({"id": [1, 2], "p": ["a", "b"]}), tmp_path / "src.parquet")
    path = tmp_path / "new" / "orders"

    def first_writer(task_id):
        return HudiWriteOperator(task_id=task_id, source=str(tmp_path / "src.parquet"), table_path=str(path),
                                 hudi_conn_id=None, deferrable=True, write_windows=None,
                                 launcher=SparkSubmitLauncher(instant_wait_s=0.0),
                                 options={"hoodie.datasource.write.recordkey.field": "id",
                                          "hoodie.datasource.write.partitionpath.field": "p"})

    def context(task_id):
        return {"ti": _TI(dag_id="d", task_id=task_id, run_id="r", try_number=1, map_index=-1, xcom={})}

    one, two = first_writer("one"), first_writer("two")
    with pytest.raises(TaskDeferred) as d1:
        one.execute(context("one"))
    assert d1.value.method_name == "execute_complete" and submitted == ["airflow:d.one.-1:r:try1:attempt1"]
    table = Table.open(str(path))  # made as the job makes it: the options' keys, the folder's name
    assert (table.name, table.config.record_key_fields, table.config.partition_fields) == ("orders", ["id"], ["p"])
    assert list(table.timeline().completed()) == [] and not table.timeline().pending()
    with pytest.raises(TaskDeferred) as d2:
        two.execute(context("two"))
    assert d2.value.method_name == "execute_admitted" and len(submitted) == 1  # waits, nothing submitted
    waiting = {r.owner: r.state for r in admission.requests(table)}
    assert waiting == {"d.one": "admitted", "d.two": "waiting"}, waiting


RETRIES_KEY = "hoodie.write.num.retries.on.conflict.failures"


def _operator_with_key(tmp_path, value: str, **kw):
    return HudiWriteOperator(task_id="t", source=str(tmp_path / "src.parquet"),
                             table_path=str(tmp_path / "table"), hudi_conn_id=None,
                             options={"hoodie.datasource.write.recordkey.field": "id", RETRIES_KEY: value},
                             deferrable=True, launcher=SparkSubmitLauncher(instant_wait_s=0.0),
                             write_windows=None, **kw)


def test_hudis_retry_key_is_the_operators_conflict_budget(tmp_path, submitted):
    """Without conflict_retries, Hudi's key sets the budget: 1 retry, so a second lost conflict
    fails the task and a first one defers a fresh attempt."""
    from airflow.sdk.exceptions import TaskDeferred
    with pytest.raises(RetriesExhaustedError):
        _operator_with_key(tmp_path, "1").execute_complete(
            _context(), CONFLICT, attempt=2, attempts=[{"outcome": "conflict"}])
    with pytest.raises(TaskDeferred):
        _operator_with_key(tmp_path, "1").execute_complete(_context(), CONFLICT, attempt=1, attempts=[])
    # 0 (Hudi's default): the first lost conflict fails the task
    with pytest.raises(RetriesExhaustedError):
        _operator_with_key(tmp_path, "0").execute_complete(_context(), CONFLICT, attempt=1, attempts=[])
    assert len(submitted) == 1


def test_the_key_and_a_different_conflict_retries_are_refused_before_any_attempt(tmp_path, submitted):
    from airflow_hudi_occ.core.errors import ConfigError
    with pytest.raises(ConfigError, match="both set the conflict retries") as e:
        _operator_with_key(tmp_path, "1", conflict_retries=3).execute_complete(
            _context(), CONFLICT, attempt=1, attempts=[])
    assert e.value.key == RETRIES_KEY and submitted == []
