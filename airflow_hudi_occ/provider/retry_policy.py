"""Airflow's own retries, told apart by the package's error types (AIP-105, Airflow 3.3).

A task's ``retries`` are spent by Airflow on any failure, unless a ``retry_policy`` looks at
the exception first. Without one, an operator can only fail a configuration error at once by
raising ``AirflowFailException``, which no policy can overrule. With one, the operators raise
the package's own error (its class, its structured fields, its ``remedy``) and the policy
decides from the type, in the worker, where the exception object still exists:

- a :class:`~airflow_hudi_occ.core.errors.RetryableError` (a lost write conflict, an early
  conflict, conflict retries exhausted, a lock not had in time, a lost lock, an expired
  heartbeat), and an object store that did not answer
  (:class:`~airflow_hudi_occ.core.errors.StorageUnavailableError`: the store or the network is
  down, nothing was changed): **retry**. The next try begins a fresh instant on the table as it
  is then. Also a catalog that did not answer after the commit
  (:class:`~airflow_hudi_occ.core.errors.CatalogUnavailableError`: the data is committed; the
  next try finds its batch committed and syncs again, docs/catalog-sync.md).
- any other error of the hierarchy (a bad ``hoodie.*`` value, a missing source, a refused
  partition path, a table of the wrong version, a ZooKeeper that did not answer, which
  ``core/errors.py`` judges a matter of fixing the ensemble or its address): **fail** at once;
  another try would fail the same way. A user policy may decide otherwise (below).
- an exception that is not ours (Spark killed by a signal, a JVM crash, a worker problem):
  **default**: the task's own ``retries`` and ``retry_delay`` apply.

Both operators use :class:`HudiRetryPolicy` unless given ``retry_policy=`` (their own
argument or the DAG's ``default_args``); ``retry_policy=None`` brings back the behaviour
without a policy (``AirflowFailException`` for the non-retryable errors). A user policy sees
the same exceptions, so it can be an ``ExceptionRetryPolicy`` over the package's classes, or a
``ChainRetryPolicy`` with this one as its floor.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, NoReturn

from airflow_hudi_occ.core.errors import (CatalogUnavailableError, HudiOccError, RetryableError,
                                          StorageUnavailableError)
from airflow_hudi_occ.provider.version_compat import (AirflowException, AirflowFailException, RetryDecision,
                                                     RetryPolicy)

#: errors that are not a :class:`RetryableError` (a retry in the same process would not help),
#: yet a later task try may get past: the store was down, not wrong
TRANSIENT_ERRORS: tuple[type[HudiOccError], ...] = (StorageUnavailableError, CatalogUnavailableError)

#: how deep :func:`package_error` follows ``__cause__`` / ``__context__``
_MAX_CHAIN = 16


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT_RETRY_POLICY"


#: an operator's ``retry_policy`` default: "the package's policy" (``None`` means none)
DEFAULT_RETRY_POLICY: Any = _Default()


def package_error(exc: BaseException | None) -> HudiOccError | None:
    """The first error of the package's hierarchy in ``exc``'s chain (``exc`` itself, then
    what it was raised from or during), or None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen and len(seen) < _MAX_CHAIN:
        if isinstance(exc, HudiOccError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def is_retryable(err: HudiOccError) -> bool:
    """Would another task try (a fresh instant) possibly succeed?"""
    return isinstance(err, (RetryableError, *TRANSIENT_ERRORS))


class HudiRetryPolicy(RetryPolicy):
    """Retry what a fresh instant may get past, fail at once what it cannot (module docstring).

    :param retry_delay: delay before a retry this policy decides; None: the task's
        ``retry_delay`` (and its exponential backoff, if set)
    """

    def __init__(self, retry_delay: timedelta | None = None) -> None:
        self.retry_delay = retry_delay

    def evaluate(self, exception: BaseException, try_number: int, max_tries: int,
                 context=None) -> RetryDecision:
        err = package_error(exception)
        if err is None:
            return RetryDecision.default()
        name = type(err).__name__
        if is_retryable(err):
            return RetryDecision.retry(
                self.retry_delay, reason=f"{name} is retryable: the next try begins a fresh instant")
        return RetryDecision.fail(
            reason=f"{name} is not retryable, another try would fail the same way"
                   + (f"; what to do: {err.remedy}" if err.remedy else ""))

    def serialize(self) -> dict[str, Any]:
        return {"__type": "HudiRetryPolicy",
                "retry_delay": None if self.retry_delay is None else self.retry_delay.total_seconds()}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> "HudiRetryPolicy":
        delay = data.get("retry_delay")
        return cls(None if delay is None else timedelta(seconds=delay))

    def __repr__(self) -> str:
        return f"HudiRetryPolicy(retry_delay={self.retry_delay!r})"


def resolve_retry_policy(value: Any) -> RetryPolicy | None:
    """An operator's ``retry_policy`` argument: the package's policy unless given one (or None)."""
    return HudiRetryPolicy() if value is DEFAULT_RETRY_POLICY else value


def raise_task_failure(operator, err: HudiOccError) -> NoReturn:
    """End the task with ``err``: raised as it is when the task has a retry policy (which
    decides); without one, ``AirflowFailException`` for an error another try cannot fix (no
    retry is spent on it) and ``AirflowException`` for one it may."""
    if getattr(operator, "retry_policy", None) is not None:
        raise err
    if is_retryable(err):
        raise AirflowException(str(err)) from err
    raise AirflowFailException(str(err)) from err
