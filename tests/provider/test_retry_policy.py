"""``HudiRetryPolicy`` (AIP-105): Airflow's retries decided by the package's error types. The
decisions here are unit-level (Airflow's worker calls ``evaluate`` with the task's exception);
``tests/provider/test_retry_policy_e2e.py`` runs them through a real ``airflow dags test``."""

from datetime import timedelta

import pytest
from airflow.sdk import DAG, ExceptionRetryPolicy, RetryAction, RetryRule

from airflow_hudi_occ.core.commit.retry import RetriesExhaustedError
from airflow_hudi_occ.core.errors import (CatalogSyncError, CatalogUnavailableError, ConfigError, EarlyConflictError,
                                          HudiOccError, InvalidPartitionPathError, LockAcquireTimeoutError,
                                          LockServiceUnreachableError, SourceNotFoundError, StorageUnavailableError,
                                          TableNotFoundError, from_dict)
from airflow_hudi_occ.provider.operators.table_service import HudiTableServiceOperator
from airflow_hudi_occ.provider.operators.write import HudiWriteOperator
from airflow_hudi_occ.provider.retry_policy import HudiRetryPolicy, package_error, raise_task_failure
from airflow_hudi_occ.provider.version_compat import AirflowException, AirflowFailException

KEYS = {"hoodie.datasource.write.recordkey.field": "id"}


def _decide(exc: BaseException, policy=None):
    return (policy or HudiRetryPolicy()).evaluate(exc, try_number=1, max_tries=3)


@pytest.mark.parametrize("exc", [
    EarlyConflictError("lost early", instant="1", other_instant="2", file_groups=["p/fg"]),
    RetriesExhaustedError("gave up after 6 attempts", attempts=[]),
    LockAcquireTimeoutError("no lock in 120 s"),
    StorageUnavailableError("the s3 store did not answer", endpoint="http://127.0.0.1:1"),
    # the metastore was down after the commit: the next try finds the batch committed and syncs
    CatalogUnavailableError("no metastore answered", catalog="thrift://127.0.0.1:1", committed_instant="1"),
])
def test_what_a_fresh_instant_may_get_past_is_retried(exc):
    d = _decide(exc)
    assert d.action is RetryAction.RETRY and d.retry_delay is None, d
    assert d.reason.startswith(type(exc).__name__ + " is retryable")


@pytest.mark.parametrize("exc", [
    ConfigError("unknown lock provider 'zookeepr'", key="hoodie.write.lock.provider", value="zookeepr"),
    SourceNotFoundError("the source '/x' does not exist", remedy="check the path"),
    InvalidPartitionPathError("partition value '../x'", column="day", value="../x"),
    TableNotFoundError("no table at /t"),
    LockServiceUnreachableError("ZooKeeper at 127.0.0.1:1 unreachable", endpoint="127.0.0.1:1"),
    # the catalog answered and refused (a partition-key mismatch): another try would too
    CatalogSyncError("db.t is partitioned by ['x'] in the catalog", catalog="thrift://m:9083"),
])
def test_what_another_try_cannot_fix_fails_at_once_with_its_remedy(exc):
    d = _decide(exc)
    assert d.action is RetryAction.FAIL, d
    assert d.reason.startswith(type(exc).__name__ + " is not retryable") and exc.remedy in d.reason


def test_the_cause_chain_is_read_and_foreign_errors_are_left_to_the_task_retries():
    try:
        try:
            raise ConfigError("bad value", key="k")
        except ConfigError as e:
            raise AirflowException("wrapped") from e
    except AirflowException as wrapped:
        assert isinstance(package_error(wrapped), ConfigError)
        assert _decide(wrapped).action is RetryAction.FAIL
    assert _decide(AirflowException("the Spark job was killed by signal 9")).action is RetryAction.DEFAULT
    assert _decide(RuntimeError("JVM crashed")).action is RetryAction.DEFAULT


def test_a_job_error_decoded_from_its_result_line_keeps_its_class_for_the_policy():
    doc = StorageUnavailableError("no answer", endpoint="http://s3:9000").to_dict()
    err = from_dict(doc)
    assert type(err) is StorageUnavailableError and _decide(err).action is RetryAction.RETRY
    assert _decide(from_dict(SourceNotFoundError("gone", source="/x").to_dict())).action is RetryAction.FAIL


def test_a_delay_and_serialisation():
    p = HudiRetryPolicy(retry_delay=timedelta(seconds=30))
    assert _decide(LockAcquireTimeoutError("t"), p).retry_delay == timedelta(seconds=30)
    assert HudiRetryPolicy.deserialize(p.serialize()).retry_delay == timedelta(seconds=30)


def test_both_operators_use_it_by_default_and_the_user_overrides_it(tmp_path):
    table = str(tmp_path / "t")
    w = HudiWriteOperator(task_id="w", source="/src", table_path=table, options=KEYS)
    s = HudiTableServiceOperator(task_id="s", service="clean", table_path=table)
    assert isinstance(w.retry_policy, HudiRetryPolicy) and isinstance(s.retry_policy, HudiRetryPolicy)
    mine = ExceptionRetryPolicy(rules=[RetryRule(exception=ConfigError, action=RetryAction.RETRY)])
    assert HudiWriteOperator(task_id="w2", source="/src", table_path=table, options=KEYS,
                             retry_policy=mine).retry_policy is mine
    assert HudiWriteOperator(task_id="w3", source="/src", table_path=table, options=KEYS,
                             retry_policy=None).retry_policy is None
    with DAG("d", schedule=None, default_args={"retry_policy": mine}):
        from_dag = HudiWriteOperator(task_id="w4", source="/src", table_path=table, options=KEYS)
        service = HudiTableServiceOperator(task_id="s4", service="clean", table_path=table)
    assert from_dag.retry_policy is mine and service.retry_policy is mine


class _Op:
    def __init__(self, retry_policy):
        self.retry_policy = retry_policy


def test_the_task_fails_with_the_error_itself_under_a_policy_and_as_before_without():
    err = ConfigError("bad value", key="k")
    with pytest.raises(ConfigError):
        raise_task_failure(_Op(HudiRetryPolicy()), err)
    with pytest.raises(AirflowFailException, match="bad value") as e:
        raise_task_failure(_Op(None), err)
    assert e.value.__cause__ is err
    with pytest.raises(AirflowException) as e:
        raise_task_failure(_Op(None), LockAcquireTimeoutError("no lock"))
    assert not isinstance(e.value, AirflowFailException)
    assert isinstance(e.value.__cause__, HudiOccError)
