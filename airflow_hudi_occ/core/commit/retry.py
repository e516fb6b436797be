"""Bounded conflict retries with exponential backoff and full jitter.

A write that lost a conflict is retried as a *new* transaction (a fresh instant time, a fresh
read of the table); only :class:`RetryableError` is retried, anything else fails at once. The
number of conflict retries is its own budget, separate from an orchestrator's task retries,
and every attempt is recorded so that the orchestrator (and the UI) can show it. ``sleep`` and
``random`` are injectable, as in kazoo's ``KazooRetry``, so tests never sleep.
"""

from __future__ import annotations

import random as _random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from airflow_hudi_occ.core.concurrency import admission
from airflow_hudi_occ.core.concurrency.footprint import Footprint
from airflow_hudi_occ.core.config import (DEFAULT_CONFLICT_RETRIES, NUM_RETRIES_ON_CONFLICT, HeartbeatConfig,
                                          conflict_retries_of)
from airflow_hudi_occ.core.errors import ConfigError, HudiOccError, RetryableError


@dataclass
class Attempt:
    number: int
    started_at: float
    ended_at: float = 0.0
    outcome: str = "running"  # committed | conflict | error
    error: dict | None = None
    result: Any = None

    def to_json(self) -> dict:
        out = {"attempt": self.number, "outcome": self.outcome,
               "seconds": round(self.ended_at - self.started_at, 3)}
        if self.error:
            out["error"] = self.error
        return out


@dataclass
class RetryPolicy:
    max_conflict_retries: int = DEFAULT_CONFLICT_RETRIES
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    multiplier: float = 2.0
    sleep: Callable[[float], None] = time.sleep
    random: Callable[[], float] = _random.random

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None, **kw) -> "RetryPolicy":
        """The policy a Hudi options dict asks for: ``hoodie.write.num.retries.on.conflict.failures``
        (unset: :data:`~airflow_hudi_occ.core.config.DEFAULT_CONFLICT_RETRIES`); ``kw`` the rest."""
        n = conflict_retries_of(options)
        return cls(max_conflict_retries=DEFAULT_CONFLICT_RETRIES if n is None else n, **kw)

    @staticmethod
    def budget(argument: int | None, options: Mapping[str, Any] | None, *, name: str = "conflict_retries") -> int:
        """One budget from the two places a user may give it: an orchestrator's own argument
        (``name``; None: not given) and Hudi's key in the options. Both given and different is
        refused (which one meant it?), before anything runs."""
        key = conflict_retries_of(options)
        if argument is not None and key is not None and argument != key:
            raise ConfigError(
                f"{name}={argument} and {NUM_RETRIES_ON_CONFLICT.key}={key} both set the conflict "
                "retries, to different numbers", key=NUM_RETRIES_ON_CONFLICT.key, value=key,
                remedy=f"keep one of the two (they are the same budget), or give both {argument}")
        if argument is not None:
            return argument
        return DEFAULT_CONFLICT_RETRIES if key is None else key

    def delay(self, retry_number: int) -> float:
        """Full jitter: uniform in [0, min(max, base * multiplier**n)] (AWS architecture blog)."""
        cap = min(self.max_delay_s, self.base_delay_s * (self.multiplier ** max(0, retry_number - 1)))
        return cap * self.random()


class RetriesExhaustedError(RetryableError):
    def __init__(self, message: str, *, attempts: list[Attempt], remedy: str | None = None):
        self.attempts = attempts
        self.attempt_count = len(attempts)
        super().__init__(message, remedy=remedy or "contention is high: widen the write window, "
                         "raise max_conflict_retries, or schedule the writers apart")


@dataclass
class RetryRun:
    attempts: list[Attempt] = field(default_factory=list)

    def to_json(self) -> list[dict]:
        return [a.to_json() for a in self.attempts]


def run_with_conflict_retries(fn: Callable[[int], Any], policy: RetryPolicy | None = None,
                              run: RetryRun | None = None) -> Any:
    """Call ``fn(attempt_number)`` until it returns, retrying RetryableError with backoff."""
    policy = policy or RetryPolicy()
    run = run if run is not None else RetryRun()
    for n in range(1, policy.max_conflict_retries + 2):
        att = Attempt(n, time.time())
        run.attempts.append(att)
        try:
            att.result = fn(n)
            att.outcome = "committed"
            att.ended_at = time.time()
            return att.result
        except RetryableError as e:
            att.outcome, att.error, att.ended_at = "conflict", e.to_dict(), time.time()
            if n > policy.max_conflict_retries:
                raise RetriesExhaustedError(
                    f"gave up after {n} attempts; last: {e.message}", attempts=run.attempts) from e
            policy.sleep(policy.delay(n))
        except HudiOccError as e:
            att.outcome, att.error, att.ended_at = "error", e.to_dict(), time.time()
            raise
    raise AssertionError("unreachable")  # pragma: no cover


def run_admitted(table, footprint: Footprint, fn: Callable[[int, str], Any],
                 policy: RetryPolicy | None = None, *, heartbeat: HeartbeatConfig | None = None,
                 wait: "admission.AdmissionWait | None" = None, run: RetryRun | None = None) -> Any:
    """A library writer's batch with admission before each attempt: ``fn(attempt_number,
    request_id)`` runs once nothing live may touch a file group ``footprint`` reaches
    (``core/concurrency/admission``; the operator's admission, for writers without Airflow),
    with conflict retries as :func:`run_with_conflict_retries`.

    Why (issue 43, item 4): with dozens of overlapping writers, plain retries starve. Every
    retry is a fresh instant, so a loser starts its next round as the youngest writer and
    meets the newcomers again: 32 writers of the library demo gave up 45 batches of 160 after
    8 retries each. Here the batch files one request before its first look and keeps it
    across its attempts; a lost attempt's request waits again with its age
    (:func:`admission.requeue`), and waiting requests that meet are admitted oldest first,
    so the loser's claim ages until it is the oldest, and the oldest is never overtaken.

    ``fn`` must write with the request named in its options (``attempt_log.LABELS_OPTION``
    holding ``{footprint.REQUEST_LABEL: request_id}``): the instant then declares it, and the
    others judge it by the request's reach (its buckets under the bucket index) until its own
    inflight file names its file groups. The request is withdrawn however the batch ends."""
    policy = policy or RetryPolicy()
    heartbeat = heartbeat or HeartbeatConfig()
    wait = wait or admission.AdmissionWait()
    req = admission.new_request(table, footprint, with_first_look=True)

    def attempt(n: int) -> Any:
        if n > 1:
            admission.requeue(table, req)
        admission.wait_admitted(table, req, heartbeat, wait, sleep=policy.sleep)
        return fn(n, req.request_id)

    try:
        return run_with_conflict_retries(attempt, policy, run)
    finally:
        admission.withdraw(table, req.request_id)
