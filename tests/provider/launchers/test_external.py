"""The external launcher without Spark: the "platform operator" here runs the core writer in
the task's process with the job's own arguments (writer id, batch key, options), so what the
write operator decides comes from the table and its attempt log exactly as it does for a real
job elsewhere (a real ``SparkSubmitOperator`` and ``BashOperator`` in ``airflow standalone``:
tests/provider/test_external_launcher_e2e.py)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.commit.retry import RetryPolicy
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import ConfigError, HudiOccError
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider.launchers.external import ExternalJob, ExternalLauncher, exit_code_in
from airflow_hudi_occ.provider.operators.write import HudiWriteOperator
from airflow_hudi_occ.provider.task_keys import XCOM_ATTEMPTS, XCOM_JOB
from airflow_hudi_occ.provider.version_compat import AirflowException, BaseOperator
from tests.provider.test_write_operator_recovery import StubTI

KEYS = {"hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts", "hoodie.metadata.enable": "false"}


def _options(args: list[str]) -> dict:
    return dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--option")


def _arg(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


class CoreJobOperator(BaseOperator):
    """Runs "the job" with the core writer: its rows, the job's writer id, batch key and
    options; ``rival`` commits the same keys before its first attempt's commit (a conflict)."""

    template_fields = ("command",)

    def __init__(self, *, job: ExternalJob, rows: list[dict], rival=None, **kw):
        super().__init__(**kw)
        self.job, self.rows, self.rival = job, rows, rival
        self.command = "run {{ hudi_occ_job.command }}"

    def execute(self, context):
        args = self.job.args
        table = Table.open(_arg(args, "--table"))
        writer = ArrowTableWriter(table, WriteConfig.from_options(_options(args)), writer_id=self.job.writer_id)
        rival = self.rival if self.job.attempt == 1 else None
        try:
            writer.write(pa.Table.from_pylist(self.rows), _arg(args, "--operation"), batch_key=_arg(args, "--batch-key"),
                         attempt=self.job.attempt, before_commit=rival)
        except HudiOccError as e:
            raise AirflowException(f"Bash command failed. The command returned a non-zero exit code 75. {e}")
        return "done"


@pytest.fixture
def table(tmp_path):
    t = Table.create(str(tmp_path / "orders"), "orders", record_key_fields=["id"], partition_fields=["p"],
                     precombine_field="ts")
    ArrowTableWriter(t, WriteConfig.from_options(KEYS)).write(
        pa.Table.from_pylist([{"id": i, "p": "a", "ts": 1, "v": "seed"} for i in range(4)]), "insert")
    return t


def _operator(table, factory, **kw):
    return HudiWriteOperator(task_id="upsert", source="/landing/b.parquet", table_path=table.base_uri,
                             hudi_conn_id=None, options=KEYS, write_windows=None,
                             launcher=ExternalLauncher(factory, poll_interval=0.05),
                             conflict_retries=RetryPolicy(max_conflict_retries=2, base_delay_s=0.0, max_delay_s=0.0),
                             **kw)


def test_the_job_reaches_the_operator_as_arguments_xcom_and_a_template_and_the_table_decides(table):
    built = []

    def factory(job):
        built.append(CoreJobOperator(task_id="platform", job=job, rows=[{"id": 1, "p": "a", "ts": 2, "v": "new"}]))
        return built[-1]

    ti = StubTI()
    out = _operator(table, factory).execute({"ti": ti})
    assert out["outcome"] == "committed" and [a["outcome"] for a in out["attempts"]] == ["committed"]
    [op] = built
    job = ti.xcom[XCOM_JOB]
    assert op.job.writer_id == job["writer_id"] == "airflow:ingest.upsert.-1:manual__1:try2:attempt1"
    assert job["args"][-2:] == ["--writer-id", job["writer_id"]] and "--batch-checked" in job["args"]
    assert op.command == "run " + job["command"]  # rendered with the attempt's job in the context
    rec = attempt_log.read_record(table, out["instant"])
    assert rec.writer_id == job["writer_id"] and rec.labels["task_id"] == "upsert"


def test_a_lost_conflict_is_launched_again_through_a_fresh_operator(table):
    built = []

    def rival(tx):  # another writer commits the same file group during attempt 1
        ArrowTableWriter(Table.open(table.base_uri), WriteConfig.from_options(KEYS), writer_id="rival").write(
            pa.Table.from_pylist([{"id": 1, "p": "a", "ts": 5, "v": "rival"}]), "upsert")

    def factory(job):
        built.append(CoreJobOperator(task_id="platform", job=job, rows=[{"id": 1, "p": "a", "ts": 9, "v": "ours"}],
                                     rival=rival))
        return built[-1]

    ti = StubTI()
    out = _operator(table, factory).execute({"ti": ti})
    assert [a["outcome"] for a in ti.xcom[XCOM_ATTEMPTS]] == ["conflict", "committed"]
    assert [o.job.attempt for o in built] == [1, 2] and built[0] is not built[1]
    lost = ti.xcom[XCOM_ATTEMPTS][0]
    assert lost["other_instant"] and lost["exit_code"] == 75
    assert attempt_log.read_record(table, lost["instant"]).outcome == attempt_log.CONFLICT
    assert out["instant"] != lost["instant"]


def test_an_operator_that_fails_before_any_instant_fails_the_task_with_its_message(table):
    class Broken(BaseOperator):
        def execute(self, context):
            raise AirflowException("Cannot execute: spark-submit ... Error code is: 1.")

    with pytest.raises(Exception, match="Error code is: 1") as e:
        _operator(table, lambda job: Broken(task_id="platform")).execute({"ti": StubTI()})
    assert "BatchNotFound" not in str(e.value)


def test_a_deferring_operator_and_a_non_operator_are_refused_naming_the_fix(table):
    from airflow.sdk.exceptions import TaskDeferred

    class Defers(BaseOperator):
        def execute(self, context):
            raise TaskDeferred(trigger=None, method_name="x")

    with pytest.raises(ConfigError, match="deferrable=False"):
        _operator(table, lambda job: Defers(task_id="platform")).execute({"ti": StubTI()})
    with pytest.raises(ConfigError, match="not an Airflow operator"):
        _operator(table, lambda job: "spark-submit job.py").execute({"ti": StubTI()})
    with pytest.raises(ConfigError, match="callable"):
        ExternalLauncher("spark-submit job.py")


def test_credentials_never_reach_the_arguments(table):
    seen = []
    opts = {**KEYS, "hoodie.write.lock.zookeeper.auth": "user:s3cret"}

    def factory(job):
        seen.append(job)
        return CoreJobOperator(task_id="platform", job=job, rows=[{"id": 2, "p": "a", "ts": 2, "v": "x"}])

    op = _operator(table, factory)
    op.options = opts
    op.execute({"ti": StubTI()})
    assert "s3cret" not in seen[0].command and "hoodie.write.lock.zookeeper.auth" in " ".join(seen[0].withheld)


def test_the_exit_status_is_read_from_the_platform_operators_messages():
    assert exit_code_in(AirflowException("Cannot execute: spark-submit x. Error code is: 75.")) == 75
    assert exit_code_in(AirflowException("Bash command failed. The command returned a non-zero exit code 2.")) == 2
    assert exit_code_in(RuntimeError("EMR job run failed")) == 1
    job = ExternalJob(application="/a b/job.py", args=["--table", "/t", "--option", 'k={"a": 1}'],
                      writer_id="w", attempt=1)
    assert job.command == "'/a b/job.py' --table /t --option 'k={\"a\": 1}'"
