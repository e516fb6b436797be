"""The timeline as a Gantt chart's data: one JSON document per table, for the UI and the CLI.

Why a read model of its own: the facts a person debugging contention needs are spread over
five places that no single Hudi structure joins. The timeline says which instants exist and
when they were requested and completed; a loser of OCC is *gone* from it, and only the
rollback that removed it still names it; the attempt log (``.hoodie/.aux/occ/attempts``) says
why each attempt ended, which instant won, on which file groups and how much work was thrown
away, and which Airflow task made it; heartbeats say which pending writers are alive; markers
say which partitions a live writer holds. :func:`build_timeline_view` joins them once, so the
page (and any other client) only draws.

Pure Python over core: no Airflow import, so the CLI and tests use it as is. Times are epoch
milliseconds (instant times are UTC in this project, see ``instant_time``), so a browser can
draw them without parsing Hudi's format.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.format.layout import file_group_names
from airflow_hudi_occ.core.format.instant import Action, Instant, State
from airflow_hudi_occ.core.format.instant_time import parse_ms
from airflow_hudi_occ.core.format.metadata import RollbackMetadata, RollbackPlan
from airflow_hudi_occ.core.format.metadata import EXTRA_ATTEMPT, EXTRA_BATCH_KEY, EXTRA_CHECKPOINT, EXTRA_WRITER_ID
from airflow_hudi_occ.core.concurrency import admission
from airflow_hudi_occ.core.concurrency.operation import UNKNOWN, ConcurrentOperation
from airflow_hudi_occ.core.concurrency.heartbeat import heartbeat_age_s, is_expired
from airflow_hudi_occ.core.concurrency.markers.write_markers import markers_for
from airflow_hudi_occ.core.table.table import MERGE_ON_READ

#: Outcomes a bar can have; the page maps each to a colour class ``outcome-<name>``.
OUTCOMES = ("committed", "conflict", "aborted", "error", "running", "stale", "rolled_back",
            "service")

DEFAULT_LIMIT = 500

#: Attempt-log outcomes of an attempt that is over (a record may also be written when an
#: attempt begins, with any other outcome, e.g. "running", to name its writer early).
_ENDED = (attempt_log.CONFLICT, attempt_log.ABORTED, attempt_log.ERROR)


def _ms(t: str | None) -> int | None:
    if not t:
        return None
    try:
        return parse_ms(t)
    except ValueError:
        return None


def _task_of(labels: dict) -> str | None:
    if labels.get("dag_id") or labels.get("task_id"):
        return f"{labels.get('dag_id', '?')}.{labels.get('task_id', '?')}"
    return None


def _writer(rec: "attempt_log.AttemptRecord | None", writer_id: str | None = None,
            batch_key: str | None = None, attempt: Any = None) -> dict[str, Any]:
    # the admission wait is shown as the row's ``wait`` (its owners filtered for the reader)
    labels = {k: v for k, v in (rec.labels if rec is not None else {}).items()
              if k not in (admission.WAIT_SECONDS_LABEL, admission.WAITED_FOR_LABEL)}
    wid = (rec.writer_id if rec is not None else None) or writer_id or None
    return {
        "writer_id": wid,
        "dag_id": labels.get("dag_id"), "task_id": labels.get("task_id"),
        "run_id": labels.get("run_id"), "try_number": labels.get("try_number"),
        "attempt": rec.attempt if rec is not None else attempt,
        "batch_key": (rec.batch_key if rec is not None else None) or batch_key,
        "labels": labels,
    }


def _lane(writer: dict[str, Any], action: str) -> str:
    """The Gantt row an instant is drawn on: the Airflow task when known, else the writer."""
    if writer.get("dag_id") or writer.get("task_id"):
        return f"{writer.get('dag_id') or '?'} \u203a {writer.get('task_id') or '?'}"
    if writer.get("writer_id"):
        return f"writer {writer['writer_id']}"
    if action in ("clean", "rollback", "clustering", "compaction"):
        return f"table service: {action}"
    return "unlabelled writers"


def _group_key(writer: dict[str, Any]) -> str | None:
    """Attempts of one batch: same Airflow task run (a mapped task's index included), else
    same batch key, else same writer."""
    run = attempt_log.task_run_of(writer.get("labels"))
    if run is not None:
        return run
    if writer.get("batch_key"):
        return f"batch {writer['batch_key']}"
    if writer.get("writer_id"):
        return f"writer {writer['writer_id']}"
    return None


# --- instants as rows: shared with the CLI ---------------------------------------------------


def ms_between(start: str | None, end: str | None) -> int | None:
    if not start or not end:
        return None
    try:
        return parse_ms(end) - parse_ms(start)
    except ValueError:
        return None


def rollback_targets(tl, inst: Instant) -> list[str]:
    """Instants a rollback removed (completed) or is removing (pending: from its plan)."""
    storage = tl.table.storage
    if inst.is_completed:
        path = tl.file_path(inst)
        return [t for t, _a in RollbackMetadata.decode(storage.read(path), path).rolled_back]
    path = tl.file_path(Instant(inst.requested_time, Action.ROLLBACK, State.REQUESTED))
    try:
        data = storage.read(path)
    except FileNotFoundError:
        return []
    return [RollbackPlan.decode(data, path).instant_time] if data else []


def rollbacks_by_target(tl) -> dict[str, str]:
    """Failed instant -> the rollback that removed (or is removing) it. A rolled-back instant
    is gone from the timeline; only its rollback still names it, and that is the answer a user
    asking about it needs."""
    out: dict[str, str] = {}
    for inst in tl:
        if inst.action is Action.ROLLBACK:
            for target in rollback_targets(tl, inst):
                out.setdefault(target, inst.requested_time)
    return out


def describe_instant(tl, inst: Instant) -> dict[str, Any]:
    """One timeline row. Writer id, attempt and checkpoint live only in a completed commit's
    extraMetadata, the one trace of who wrote it and from where, so they are shown beside it."""
    out: dict[str, Any] = {
        "requested_time": inst.requested_time, "action": inst.action.value,
        "state": inst.state.value, "completion_time": inst.completion_time,
        "duration_ms": ms_between(inst.requested_time, inst.completion_time),
        "operation_type": None, "writer_id": None, "attempt": None, "checkpoint": None,
        "batch_key": None, "file_groups": None, "rolled_back": None,
    }
    if inst.is_write:
        if inst.is_completed and inst.action in (Action.COMMIT, Action.DELTA_COMMIT,
                                                 Action.REPLACE_COMMIT):
            meta = tl.commit_metadata(inst)
            extra = meta.extra_metadata
            attempt = extra.get(EXTRA_ATTEMPT)
            out.update(operation_type=meta.operation_type, writer_id=extra.get(EXTRA_WRITER_ID),
                       attempt=int(attempt) if attempt and attempt.isdigit() else attempt,
                       checkpoint=extra.get(EXTRA_CHECKPOINT), batch_key=extra.get(EXTRA_BATCH_KEY),
                       file_groups=file_group_names(meta.mutated_file_groups()))
        else:
            op = ConcurrentOperation.from_timeline(tl, inst)
            out["operation_type"] = None if op.operation_type == UNKNOWN else op.operation_type
            out["file_groups"] = file_group_names(op.mutated_file_groups) or None
    elif inst.action is Action.ROLLBACK:
        out["rolled_back"] = rollback_targets(tl, inst)
    return out



def build_timeline_view(table, *, config: WriteConfig | None = None, now: float | None = None,
                        limit: int | None = DEFAULT_LIMIT, name: str | None = None,
                        may_read: Callable[[str | None], bool] | None = None) -> dict[str, Any]:
    """Everything the timeline page draws for ``table`` (a core ``Table``), as plain JSON.

    ``config`` supplies the heartbeat expiry the writers use (alive vs stale); ``limit`` keeps
    the newest instants (by requested time) so a long timeline stays drawable. ``may_read``
    (a predicate over ``dag_id``, ``None`` for writers no DAG labelled) leaves out what a
    reader of only some DAGs may not see; table services stay, being no DAG's work.
    """

    config = config or WriteConfig()
    now = time.time() if now is None else now
    now_ms = int(now * 1000)
    tl = table.timeline()
    records = {r.instant: r for r in attempt_log.read_records(table)}
    rolled_back_by = rollbacks_by_target(tl)

    # Keep the newest ``limit`` instants (on the timeline or only in the attempt log) before
    # reading any metadata, so the cost follows what is drawn, not the timeline's length.
    # Pending instants are always kept: they are the live writers.
    times = sorted({i.requested_time for i in tl} | set(records))
    truncated = limit is not None and len(times) > limit
    kept = set(times[-limit:] if truncated else times) | {i.requested_time for i in tl.pending()}

    rows: dict[str, dict[str, Any]] = {}
    live: list[dict[str, Any]] = []
    for inst in tl:
        if inst.requested_time in kept:
            rows[inst.requested_time] = _row_for_instant(tl, inst, records.get(inst.requested_time),
                                                         rolled_back_by, now_ms)
    for t, rec in records.items():
        if t not in rows and t in kept:
            # the record names its rollback too, after archival took it off the timeline
            rows[t] = _row_for_gone_attempt(rec, rolled_back_by.get(t) or rec.rolled_back_by, tl)

    # Live writers: pending writes, with heartbeat age and the partitions their markers hold.
    for inst in tl.pending():
        if not (inst.is_write or inst.is_table_service):
            continue
        row = rows[inst.requested_time]
        if (row.get("compaction") or {}).get("state") == "requested":
            continue
        age = heartbeat_age_s(table, inst.requested_time, now=now)
        expired = is_expired(table, inst.requested_time, config.heartbeat, now=now)
        try:
            groups = markers_for(table, inst.requested_time).file_groups()
        except Exception:  # an unreadable marker folder must not take the page down
            groups = set()
        status = "missing" if age is None else ("expired" if expired else "alive")
        row["outcome"] = "running" if status == "alive" else "stale"
        row["heartbeat_age_s"] = None if age is None else round(age, 3)
        if status == "alive":
            live.append({
                "instant": inst.requested_time, "action": inst.action.value,
                "state": inst.state.value, "heartbeat_age_s": row["heartbeat_age_s"],
                "status": status,
                "partitions": sorted({p for p, _f in groups}),
                "file_groups": file_group_names(groups)
                or row.get("file_groups") or [],
                "writer": row["writer"], "lane": row["lane"],
            })

    hidden: set[str] = set()
    if may_read is not None:
        asked: dict[str | None, bool] = {}  # one auth-manager question per DAG, not per row
        read = lambda dag: asked[dag] if dag in asked else asked.setdefault(dag, bool(may_read(dag)))  # noqa: E731
        hidden = {t for t, r in rows.items() if not _visible(r, read)}
        rows = {t: r for t, r in rows.items() if t not in hidden}
        live = [w for w in live if w["instant"] not in hidden]
        for r in rows.values():
            if r.get("wait"):
                r["wait"] = {**r["wait"], "waited_for": [_readable_wait(w, read) for w in r["wait"]["waited_for"]]}
    ordered = sorted(rows.values(), key=lambda r: r["instant"])
    retries = _retries(ordered)
    conflicts = _conflicts(ordered, rows, retries, hidden)
    compactions = _compactions(ordered)
    for r in ordered:
        r["class"] = f"outcome-{r['outcome']}"
    starts = [r["start_ms"] for r in ordered if r["start_ms"] is not None]
    ends = [r["end_ms"] for r in ordered if r["end_ms"] is not None]
    return {
        "table": {"name": name or table.name, "base_path": table.base_uri,
                  "version": table.version},
        "now_ms": now_ms,
        "heartbeat": {"interval_ms": config.heartbeat.interval_ms,
                      "expiry_ms": config.heartbeat.expiry_ms},
        "range": {"start_ms": min(starts) if starts else None,
                  "end_ms": max(ends + ([now_ms] if live else [])) if ends else None},
        "truncated": truncated,
        "filtered": bool(hidden),
        "instants": ordered,
        "lanes": _lanes(ordered),
        "conflicts": conflicts,
        "retries": retries,
        "live_writers": live,
        "compactions": compactions,
        "summary": {o: sum(1 for r in ordered if r["outcome"] == o) for o in OUTCOMES},
    }


def compaction_of(tl, inst: Instant) -> dict[str, Any] | None:
    """The compaction an instant is, if it is one: a pending ``compaction`` (requested: a plan
    waiting for an executor; inflight: being executed), or the ``commit`` it completes as on a
    merge-on-read table (operation COMPACT). Its file groups and log files come from the plan,
    which stays in ``<t>.compaction.requested`` after completion."""
    if inst.action is Action.COMPACTION:
        state = "requested" if inst.state is State.REQUESTED else "inflight"
    elif (inst.action is Action.COMMIT and inst.is_completed
          and tl.table.config.table_type == MERGE_ON_READ
          and tl.commit_metadata(inst).operation_type == "COMPACT"):
        state = "completed"
    else:
        return None
    plan = tl.compaction_plan(inst)
    ops = plan.operations if plan is not None else []
    return {"state": state,
            "file_groups": file_group_names({(op.partition_path, op.file_id) for op in ops}),
            "log_files": sum(len(op.delta_file_names) for op in ops),
            "appended": [], "conflicted": []}


def _row_for_instant(tl, inst: Instant, rec, rolled_back_by, now_ms) -> dict[str, Any]:
    d = describe_instant(tl, inst)
    writer = _writer(rec, d.get("writer_id"), d.get("batch_key"), d.get("attempt"))
    start = _ms(inst.requested_time)
    if inst.is_completed:
        end, end_kind = _ms(inst.completion_time), "completed"
    else:
        end, end_kind = now_ms, "now"
    if inst.action in (Action.CLEAN, Action.ROLLBACK) or (
            inst.is_table_service and not inst.is_write):
        outcome = "service"
    elif inst.is_completed:
        outcome = "committed"
    else:
        outcome = "running"  # refined with the heartbeat by the caller
    compaction = compaction_of(tl, inst)
    if compaction is not None and compaction["state"] == "requested":
        # scheduled: no executor has started it, so it is neither running nor stale, and a
        # bar to now would squash the chart while it waits (hours, with an async executor)
        outcome, end, end_kind = "service", start, "scheduled"
    row = _base_row(inst.requested_time, inst.action.value, inst.state.value, start, end, end_kind,
                    outcome, writer, on_timeline=True)
    if compaction is not None:
        row["compaction"] = compaction
        if not (writer.get("dag_id") or writer.get("task_id")):
            row["lane"] = "table service: compaction"
    row.update(operation=d.get("operation_type") or (rec.operation if rec else None) or None,
               completion_time=inst.completion_time,
               file_groups=list(d.get("file_groups") or []),
               rolled_back=d.get("rolled_back") or [],
               rolled_back_by=rolled_back_by.get(inst.requested_time))
    if rec is not None and rec.outcome in _ENDED and not inst.is_completed:
        # the attempt already gave up; its rollback has not run yet
        row.update(outcome=rec.outcome, end_ms=rec.ended_at_ms or end, end_kind="attempt_end")
    _add_attempt_facts(row, rec)
    return row


def _row_for_gone_attempt(rec, rolled_back_by: str | None, tl) -> dict[str, Any]:
    """An attempt whose instant is no longer on the active timeline: archived after it
    committed (its record says so and no rollback names it), or rolled back."""
    writer = _writer(rec)
    start = _ms(rec.instant) or rec.started_at_ms or None
    if rec.ended_at_ms:
        end, end_kind = rec.ended_at_ms, "attempt_end"
    elif rolled_back_by:
        end, end_kind = _ms(rolled_back_by), "rolled_back"
    else:
        end, end_kind = start, "unknown"
    # Committed and archived: committed still (a 90-day backfill drew most of its commits as
    # rolled back before this). Committed and since rolled back (a restore), or never finished
    # (its writer died and only a begin record is left): the instant is gone.
    state, outcome = "gone", rec.outcome if rec.outcome in _ENDED else "rolled_back"
    if rec.outcome == attempt_log.COMMITTED and not rolled_back_by:
        state, outcome = "archived", "committed"
    row = _base_row(rec.instant, rec.action, state, start, end, end_kind, outcome, writer,
                    on_timeline=False)
    row.update(operation=rec.operation or None, completion_time=rec.completion_time,
               file_groups=list(rec.file_groups), rolled_back=[], rolled_back_by=rolled_back_by)
    _add_attempt_facts(row, rec)
    return row


def _base_row(t, action, state, start, end, end_kind, outcome, writer, *, on_timeline) -> dict[str, Any]:
    return {"instant": t, "action": action, "state": state, "start_ms": start, "end_ms": end,
            "end_kind": end_kind, "outcome": outcome, "writer": writer,
            "lane": _lane(writer, action), "on_timeline": on_timeline,
            "other_instant": None, "seconds_discarded": 0.0, "files_discarded": 0,
            "error": None, "message": None, "heartbeat_age_s": None,
            "retry_of": None, "retried_by": None, "wait": None}


def _add_attempt_facts(row: dict[str, Any], rec) -> None:
    if rec is None:
        return
    row.update(other_instant=rec.other_instant, seconds_discarded=rec.seconds_discarded,
               files_discarded=rec.files_discarded, error=rec.error, message=rec.message,
               wait=admission.wait_from_labels(rec.labels))
    if rec.outcome != attempt_log.COMMITTED and rec.file_groups:
        row["file_groups"] = list(rec.file_groups)


def _readable_wait(text: str, may_read: Callable[[str | None], bool]) -> str:
    """One "<instant> (<dag>.<task>) on partitions ..." of a wait, its owner hidden unless the
    reader may read that DAG. dag and task ids may both hold dots, so every split is tried;
    an owner without one (a writer id) is no DAG's and stays."""
    ident, sep, rest = text.partition(" (")
    owner, sep2, tail = rest.partition(")")
    if not sep or not sep2:
        return text
    parts = owner.split(".")
    if len(parts) < 2 or any(may_read(".".join(parts[:i])) for i in range(1, len(parts))):
        return text
    return f"{ident} (a DAG you may not read){tail}"


def _retries(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Attempts grouped by batch (Airflow task run, batch key or writer), oldest first; only
    groups with more than one attempt, or one attempt numbered above 1, are retries."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r["outcome"] == "service":
            continue
        key = _group_key(r["writer"])
        if key is not None:
            groups.setdefault(key, []).append(r)
    out = []
    for key, members in groups.items():
        members.sort(key=lambda r: (r["instant"]))
        if len(members) < 2 and not (members[0]["writer"].get("attempt") or 1) > 1:
            continue
        for a, b in zip(members, members[1:]):
            a["retried_by"] = b["instant"]
            b["retry_of"] = a["instant"]
        first = members[0]["writer"]
        out.append({
            "key": key, "dag_id": first.get("dag_id"), "task_id": first.get("task_id"),
            "run_id": first.get("run_id"), "lane": members[0]["lane"],
            "attempts": [{"instant": m["instant"], "attempt": m["writer"].get("attempt"),
                          "try_number": m["writer"].get("try_number"), "outcome": m["outcome"],
                          "other_instant": m["other_instant"], "file_groups": m["file_groups"],
                          "seconds_discarded": m["seconds_discarded"], "wait": m["wait"]}
                         for m in members],
            "final_outcome": members[-1]["outcome"],
            "seconds_discarded": round(sum(m["seconds_discarded"] or 0 for m in members), 3),
        })
    return out


def _visible(row: dict[str, Any], may_read: Callable[[str | None], bool]) -> bool:
    if row["outcome"] == "service" and not row["writer"].get("dag_id"):
        return True
    return bool(may_read(row["writer"].get("dag_id") or None))


def _conflicts(rows, by_instant, retries, hidden=frozenset()) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        if r["outcome"] != "conflict":
            continue
        winner = by_instant.get(r["other_instant"]) if r["other_instant"] else None
        out.append({
            "instant": r["instant"], "lane": r["lane"], "writer": r["writer"],
            "other_instant": r["other_instant"], "other_hidden": r["other_instant"] in hidden,
            "other_lane": winner["lane"] if winner else None,
            "other_outcome": winner["outcome"] if winner else None,
            "file_groups": r["file_groups"], "seconds_discarded": r["seconds_discarded"],
            "files_discarded": r["files_discarded"], "message": r["message"],
            "retried_by": r["retried_by"], "rolled_back_by": r["rolled_back_by"],
        })
    return out


def _compactions(rows) -> list[dict[str, Any]]:
    """Every compaction drawn, with the writers it met: ``appended`` are deltacommits that ran
    while it was pending on one of its file groups (completed after it was requested, requested
    before it completed): their logs belong to the slice it starts, so they neither wait for it
    nor conflict; ``conflicted`` are attempts that lost to it (under prefer-writer, a deltacommit
    that overlaps a compaction completed during its run aborts, as in Hudi)."""
    out = []
    for r in rows:
        c = r.get("compaction")
        if c is None:
            continue
        groups = set(c["file_groups"])
        done = r.get("completion_time")
        c["appended"] = [o["instant"] for o in rows
                         if o["action"] == "deltacommit" and o["outcome"] == "committed"
                         and (o.get("completion_time") or "") > r["instant"]
                         and (done is None or o["instant"] < done)
                         and groups & set(o.get("file_groups") or [])]
        c["conflicted"] = [o["instant"] for o in rows
                           if o["outcome"] == "conflict" and o["other_instant"] == r["instant"]]
        by = {o["instant"]: o for o in rows}
        out.append({"instant": r["instant"], "state": c["state"], "outcome": r["outcome"],
                    "lane": r["lane"], "writer": r["writer"], "completion_time": done,
                    "file_groups": c["file_groups"], "log_files": c["log_files"],
                    "heartbeat_age_s": r["heartbeat_age_s"],
                    "appended": [{"instant": t, "lane": by[t]["lane"]} for t in c["appended"]],
                    "conflicted": [{"instant": t, "lane": by[t]["lane"],
                                    "retried_by": by[t]["retried_by"]} for t in c["conflicted"]]})
    return out


def _lanes(rows) -> list[dict[str, Any]]:
    """The Gantt's rows: one lane per task (or writer), split into as many sub-rows as it had
    attempts running at once. Two runs of one task (a backfill of yesterday beside today's
    run) overlap in time; drawn on one row, the later bar covers the earlier and a conflict
    between them cannot be seen. Each row gets ``lane_row`` (0 = the lane's first sub-row),
    packed greedily in start order so a retry after its loser stays on the loser's row."""
    lanes: dict[str, dict[str, Any]] = {}
    ends: dict[str, list[int]] = {}  # per lane, the end of the last bar of each sub-row
    for r in sorted(rows, key=lambda r: (r["start_ms"] is None, r["start_ms"] or 0, r["instant"])):
        lane = lanes.setdefault(r["lane"], {"lane": r["lane"], "dag_id": r["writer"].get("dag_id"),
                                            "task_id": r["writer"].get("task_id"),
                                            "instants": 0, "committed": 0, "conflicts": 0, "rows": 1})
        lane["instants"] += 1
        lane["committed"] += r["outcome"] == "committed"
        lane["conflicts"] += r["outcome"] == "conflict"
        r["lane_row"] = 0
        if r["start_ms"] is None:
            continue
        end = max(r["end_ms"] if r["end_ms"] is not None else r["start_ms"], r["start_ms"])
        subs = ends.setdefault(r["lane"], [])
        free = next((i for i, e in enumerate(subs) if e <= r["start_ms"]), None)
        if free is None:
            subs.append(end)
            free = len(subs) - 1
        else:
            subs[free] = end
        r["lane_row"] = free
        lane["rows"] = max(lane["rows"], len(subs))
    return list(lanes.values())
