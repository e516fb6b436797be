"""The write operator's admission before spark-submit: the batch's footprint, the policy
(``on_overlap``), the bounded wait on a worker, and the one look the triggerer repeats.

Why before submission: a write whose batch shares partitions with a live writer is likely to
lose to it, and everything a Spark job does before its first check (start, source read,
tagging: 30-45 s in the demo) would be lost with it. Waiting here holds no Spark resources,
and in the deferrable operator no worker slot either (``HudiAdmissionTrigger``). The protocol
itself (requests, order, the race between two admissions) is core's
(``core/concurrency/admission.py``); the rule is in docs/concurrency.md.

Every wait is bounded (``timeout_s``) and says what it waits for; at the timeout the write
goes anyway (OCC keeps the table correct). ``fail`` raises
:class:`AdmissionRefusedError` naming the writers it would have waited for.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.concurrency import admission
from airflow_hudi_occ.core.concurrency.footprint import UNKNOWN_WRITER, Footprint, check_kind
from airflow_hudi_occ.core.config import (ADMISSION_ON_OVERLAP, ADMISSION_TIMEOUT_MS, BUCKET_NUM, HASH_FIELD,
                                          INDEX_TYPE, SMALL_FILE_LIMIT, HeartbeatConfig, WriteConfig)
from airflow_hudi_occ.core.errors import ConfigError, HudiOccError, TableNotFoundError
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.spark.submit.footprint import batch_partitions, batch_reach

#: the options a reach depends on, kept in the request to compute it again (no credentials)
REACH_OPTIONS = (INDEX_TYPE.key, BUCKET_NUM.key, HASH_FIELD.key, SMALL_FILE_LIMIT.key)


class AdmissionRefusedError(HudiOccError):
    """``on_overlap="fail"``: a live writer's footprint shares partitions with this batch."""

    def __init__(self, message: str, *, blockers: list | None = None, remedy: str | None = None):
        self.blockers = list(blockers or [])
        super().__init__(message, remedy=remedy or (
            "wait for the writers named to end (on_overlap='wait', the default), or start "
            "anyway with on_overlap='go' (OCC still decides every commit)"))


@dataclass
class AdmissionSettings:
    """Admission before each attempt (an operator's ``admission=``): ``on_overlap`` ``wait``
    until no live writer's footprint shares partitions with the batch (at most ``timeout_s``,
    then it goes anyway), ``go`` at once, or ``fail``; None: the connection's
    ``hoodie.occ.admission.on.overlap``, else ``wait``. ``timeout_s`` None: the connection's
    ``hoodie.occ.admission.timeout_ms``, else 900 s. ``kind``: ``ingestion`` or ``backfill``;
    among writes waiting on the same partitions ingestion goes first, unless a backfill has
    waited longer than ``starvation_s``. The deferrable operator waits in the triggerer,
    looking every ``poll_s``."""

    on_overlap: str | None = None
    timeout_s: float | None = None
    poll_s: float = 2.0
    starvation_s: float = 600.0
    kind: str = "ingestion"

    def __post_init__(self) -> None:
        if self.on_overlap is not None and self.on_overlap not in admission.POLICIES:
            raise ConfigError(f"on_overlap must be one of {', '.join(admission.POLICIES)}, got "
                              f"{self.on_overlap!r}", key="on_overlap", value=self.on_overlap,
                              remedy=f"use one of {', '.join(admission.POLICIES)}")
        self.kind = check_kind(self.kind)

    def resolved(self, options: dict) -> "AdmissionSettings":
        """These settings with the connection's options filling what they leave open."""
        return replace(self.resolve(self.on_overlap, self.timeout_s, options, poll_s=self.poll_s,
                                    starvation_s=self.starvation_s), kind=self.kind)

    @classmethod
    def resolve(cls, on_overlap: str | None, timeout_s: float | None, options: dict, *,
                poll_s: float = 2.0, starvation_s: float = 600.0) -> "AdmissionSettings":
        """The operator's arguments first, else the connection's options, else the defaults."""
        policy = str(on_overlap or ADMISSION_ON_OVERLAP.get(options)).strip().lower()
        if policy not in admission.POLICIES:
            raise ConfigError(f"unknown on_overlap policy {policy!r}", key=ADMISSION_ON_OVERLAP.key,
                              value=policy, remedy=f"use one of {', '.join(admission.POLICIES)}")
        timeout = timeout_s if timeout_s is not None else ADMISSION_TIMEOUT_MS.get(options) / 1000.0
        return cls(policy, float(timeout), float(poll_s), float(starvation_s))


@dataclass
class WaitResult:
    """What one attempt's admission did, for the log and XCom."""

    seconds: float = 0.0
    waited_for: list[str] = field(default_factory=list)
    timed_out: bool = False
    request_id: str | None = None

    def to_json(self) -> dict:
        return {"seconds": round(self.seconds, 3), "waited_for": self.waited_for,
                "timed_out": self.timed_out}


def open_table(table_path: str, storage_options: dict | None) -> Table | None:
    try:
        return Table.open(table_path, storage_options or None)
    except TableNotFoundError:
        return None


def heartbeat_of(options: dict) -> HeartbeatConfig:
    return WriteConfig.from_options({k: v for k, v in options.items()
                                     if k.startswith("hoodie.client.heartbeat.")}).heartbeat


@dataclass
class BatchFootprint:
    """A batch's footprint and how its reach was computed (to compute it again once stale)."""

    footprint: Footprint
    reach_as_of: str | None = None
    reach_source: dict = field(default_factory=dict)


def reach_source(source: str, source_format: str, operation: str, options: dict) -> dict:
    return {"source": source, "format": source_format, "operation": operation,
            "options": {k: str(options[k]) for k in REACH_OPTIONS if k in options}}


def compute_reach(table: Table, how: dict, storage_options: dict | None) -> tuple[str, dict]:
    """(as of, reach): the last completion time read *before* the files, so a write completing
    meanwhile makes the reach stale rather than wrong."""
    as_of = admission.last_completion(table.timeline())
    reach = batch_reach(table, how["source"], how["format"], operation=how["operation"],
                        options=dict(how.get("options") or {}), storage_options=storage_options)
    return as_of, reach


def batch_footprint(table: Table, source: str, source_format: str, *, owner: str, kind: str,
                    storage_options: dict | None, operation: str | None = None,
                    options: dict | None = None) -> BatchFootprint:
    """The batch's partitions read without Spark (``spark/submit/footprint.py``), unknown
    (None: overlaps everything) when they cannot be read exactly; with ``operation``, in each
    partition the existing file groups it can touch (its reach), where they can be known."""
    cfg = table.config
    parts = batch_partitions(source, source_format, list(cfg.partition_fields),
                             hive_style=cfg.hive_style_partitioning, url_encode=cfg.url_encode_partitions,
                             storage_options=storage_options)
    fp = Footprint.of(parts, owner=owner, kind=check_kind(kind))
    if parts is None or operation is None:
        return BatchFootprint(fp)
    how = reach_source(source, source_format, operation, options or {})
    as_of, reach = compute_reach(table, how, storage_options)
    return BatchFootprint(fp.with_reach({p: g for p, g in reach.items() if p in parts}), as_of, how)


def file_request(table: Table, footprint: Footprint | BatchFootprint,
                 owner_key: dict) -> admission.AdmissionRequest:
    if isinstance(footprint, BatchFootprint):
        return admission.new_request(table, footprint.footprint, owner_key=owner_key,
                                     reach_as_of=footprint.reach_as_of, reach_source=footprint.reach_source)
    return admission.new_request(table, footprint, owner_key=owner_key)


def refresh_reach(table: Table, req: admission.AdmissionRequest, storage_options: dict | None) -> None:
    """A waiting request's reach computed again once a write completed since (keys may have
    moved, new file groups appeared): a stale reach would be judged as its partitions."""
    if req.instant or not req.reach_source or admission.reach_is_current(req, table.timeline()):
        return
    req.reach_as_of, reach = compute_reach(table, req.reach_source, storage_options)
    parts = set(req.partitions or ())
    req.reach = {p: g for p, g in reach.items() if p in parts}
    admission.save(table, req)


def named(table: Table, verdict: admission.Verdict) -> admission.Verdict:
    """The verdict with each live writer that declared no owner named from the table's attempt
    log, where it has a running record (a clustering being executed by a DAG's task: its plan
    says nothing of who runs it)."""
    out = []
    for b in verdict.blockers:
        if b.what == "writer" and b.owner == UNKNOWN_WRITER:
            rec = attempt_log.read_record(table, b.ident)
            labels = rec.labels if rec is not None else {}
            if attempt_log.task_label(labels):
                b = replace(b, owner=attempt_log.task_label(labels))
        out.append(b)
    return admission.Verdict(verdict.admitted, out)


def describe(blockers) -> str:
    return "; ".join(b.describe() for b in blockers)


def wait_on_worker(table: Table, req: admission.AdmissionRequest, heartbeat: HeartbeatConfig,
                   settings: AdmissionSettings, log, *, killed: Callable[[], bool] = lambda: False,
                   sleep: Callable[[float], None] = time.sleep,
                   storage_options: dict | None = None) -> WaitResult:
    """Look until admitted or ``settings.timeout_s`` passed (core's one wait,
    ``admission.wait_admitted``, at a steady ``poll_s``: a worker's look is one task's, not
    one of 32 library writers'). Before each look the request's reach is refreshed; each new
    set of blockers is logged ("waiting for <instant> (<dag>.<task>) on partitions ...").
    ``fail`` raises at the first look that finds a blocker."""
    last: list[tuple] = [()]

    def judge() -> admission.Verdict:
        refresh_reach(table, req, storage_options)
        return named(table, admission.try_admit(table, req, heartbeat, starvation_s=settings.starvation_s))

    def on_blocked(verdict: admission.Verdict, so_far: float) -> None:
        if settings.on_overlap == admission.FAIL:
            admission.withdraw(table, req.request_id)
            raise AdmissionRefusedError(
                f"on_overlap='fail': live writer(s) share partitions with this batch: "
                f"{describe(verdict.blockers)}", blockers=[b.describe() for b in verdict.blockers])
        now_blocking = tuple(sorted(b.describe() for b in verdict.blockers))
        if now_blocking != last[0]:
            log.info("waiting for %s (%.1f s so far; at most %.0f s)", describe(verdict.blockers),
                     so_far, settings.timeout_s)
            last[0] = now_blocking

    wait = admission.AdmissionWait(timeout_s=settings.timeout_s, poll_s=settings.poll_s,
                                   max_poll_s=settings.poll_s, starvation_s=settings.starvation_s)
    out = admission.wait_admitted(table, req, heartbeat, wait, sleep=sleep, judge=judge,
                                  on_blocked=on_blocked, stop=killed)
    res = WaitResult(out.seconds, out.waited_for, out.timed_out, req.request_id)
    if res.timed_out:
        log.warning("still waiting for %s after %.1f s: starting anyway (OCC still decides the "
                    "commit)", "; ".join(last[0]), res.seconds)
    elif res.waited_for:
        log.info("admitted after waiting %.1f s for %s", res.seconds, "; ".join(res.waited_for))
    return res


def look(table_path: str, storage_options: dict | None, request_id: str, heartbeat_options: dict,
         starvation_s: float) -> dict:
    """One look for the triggerer: ``{"admitted": bool, "blockers": [text, ...]}``. A request
    that is gone (expired, or its table removed) is admitted: nothing holds it any more."""
    table = open_table(table_path, storage_options)
    req = admission.load(table, request_id) if table is not None else None
    if req is None:
        return {"admitted": True, "blockers": []}
    refresh_reach(table, req, storage_options)
    verdict = named(table, admission.try_admit(table, req, heartbeat_of(heartbeat_options),
                                               starvation_s=starvation_s))
    return {"admitted": verdict.admitted, "blockers": [b.describe() for b in verdict.blockers]}


def link(table_path: str, storage_options: dict | None, request_id: str | None,
         instant: str | None) -> None:
    """The admitted attempt began ``instant``: its request now lends the instant its reach."""
    if not request_id or not instant:
        return
    table = open_table(table_path, storage_options)
    if table is not None:
        admission.link(table, request_id, instant)


def withdraw(table_path: str, storage_options: dict | None, request_id: str | None) -> None:
    if not request_id:
        return
    table = open_table(table_path, storage_options)
    if table is not None:
        admission.withdraw(table, request_id)
