"""``RetryPolicy``'s budget from Hudi's ``hoodie.write.num.retries.on.conflict.failures``: the
library's conflict retries read the same key the write operators read (one budget)."""

import pytest

from airflow_hudi_occ.core.commit.retry import RetriesExhaustedError, RetryPolicy, run_with_conflict_retries
from airflow_hudi_occ.core.config import DEFAULT_CONFLICT_RETRIES, WriteConfig
from airflow_hudi_occ.core.errors import ConfigError, WriteConflictError

KEY = "hoodie.write.num.retries.on.conflict.failures"


def _losing(calls):
    def fn(n):
        calls.append(n)
        raise WriteConflictError("lost", instant="1", other_instant="2")
    return fn


@pytest.mark.parametrize("value, attempts", [("0", 1), ("2", 3)])
def test_the_key_bounds_the_librarys_attempts(value, attempts):
    calls = []
    policy = RetryPolicy.from_options({KEY: value}, sleep=lambda s: None)
    with pytest.raises(RetriesExhaustedError):
        run_with_conflict_retries(_losing(calls), policy)
    assert calls == list(range(1, attempts + 1))


def test_unset_keeps_this_projects_default():
    assert RetryPolicy.from_options({}).max_conflict_retries == DEFAULT_CONFLICT_RETRIES == 5
    assert RetryPolicy.budget(None, {}) == 5 and RetryPolicy.budget(2, {}) == 2
    assert RetryPolicy.budget(None, {KEY: "3"}) == 3 and RetryPolicy.budget(3, {KEY: "3"}) == 3


def test_two_different_budgets_are_refused():
    with pytest.raises(ConfigError) as e:
        RetryPolicy.budget(1, {KEY: "4"})
    assert e.value.key == KEY and "same budget" in e.value.remedy


@pytest.mark.parametrize("bad", ["-1", "many"])
def test_a_bad_value_is_refused_by_the_options_check(bad):
    with pytest.raises(ConfigError) as e:
        WriteConfig.from_options({KEY: bad})
    assert e.value.key == KEY
