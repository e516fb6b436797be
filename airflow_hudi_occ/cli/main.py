"""``hudi-occ``: look at a table from the command line, to answer "why did my write fail?".

Every subcommand only *reads* the table (timeline, file groups, heartbeats, markers) and
prints either aligned plain-text tables or, with ``--json``, one JSON document on stdout::

    hudi-occ show        TABLE                        summary: properties, instants, file groups, writers
    hudi-occ timeline    TABLE [--state S] [--limit N]
    hudi-occ file-groups TABLE [--as-of T] [--partition P]
    hudi-occ writers     TABLE                        pending writes: heartbeat age, alive or expired
    hudi-occ markers     TABLE [--instant T]
    hudi-occ conflicts   TABLE --instant T [--file-group P/F ...] [--strategy NAME]
    hudi-occ early-check TABLE --instant T --partition P --file-id F [--strategy NAME]
                               [--check-commit-conflict]

Table services (these write to the table): ``clean TABLE [--dry-run]``, ``rollback TABLE
[--instant T]``, ``cluster schedule|run|show TABLE [--instant T]``. A retryable conflict
(the clustering lost at its commit) exits 75, as the spark-submit jobs do.

Global options (before or after the subcommand): ``--option KEY=VALUE`` (Hudi write options,
the same keys a writer uses, so heartbeat expiry and the conflict strategy are judged as the
writers judge them), ``--storage-option KEY=VALUE`` (fsspec options; values are read as JSON
when they parse, so ``anon=true`` is a boolean), ``--json``.

Exit codes: 0 ok; 3 when ``conflicts`` finds that the instant would abort or ``early-check``
that the file would be stopped; 2 for anything the user can get wrong (a missing table, an
unknown instant or strategy, corrupt metadata, a malformed ``KEY=VALUE``); 1 for a bug.

Error handling: every :class:`HudiOccError` and every storage ``OSError`` is caught in
:func:`main` and printed as ``error: <message>`` plus its remedy on stderr (with ``--json``,
as the error's ``to_dict()`` on stderr), never as a traceback: the person running this is
already debugging a failed write and needs the next step, not our stack.
``HUDI_OCC_DEBUG=1`` re-raises unexpected exceptions for developers.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Sequence

from airflow_hudi_occ.core.config import (CONFLICT_RESOLUTION_STRATEGY, ECD_CHECK_COMMIT_CONFLICT, ECD_ENABLE,
                     ECD_STRATEGY, WriteConfig)
from airflow_hudi_occ.core.errors import HudiOccError, InstantStateError, RetryableError
from airflow_hudi_occ.core.format.instant import Instant, State
from airflow_hudi_occ.core.inspection.timeline_view import describe_instant, rollbacks_by_target
from airflow_hudi_occ.core.inspection.timeline_view import fg_name as _fg, fg_names as _fgs

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_WOULD_ABORT = 3
EXIT_RETRYABLE = 75

PROG = "hudi-occ"


class UsageError(HudiOccError):
    """The command line itself is wrong (a malformed option, an impossible instant time)."""

    remedy = f"see `{PROG} --help` or `{PROG} <subcommand> --help`"


# --- small helpers --------------------------------------------------------------------------


def _parse_pairs(items: Iterable[str] | None, flag: str, *, coerce: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"{flag} expects KEY=VALUE, got {item!r}",
                             remedy=f"write it as {flag} some.key=value (no spaces around '=')")
        if coerce:
            try:
                value = json.loads(value)
            except ValueError:
                pass  # a plain string, e.g. a region name or a URL
        out[key] = value
    return out


def _instant_time(value: str, what: str = "instant") -> str:
    v = (value or "").strip()
    if not (v.isdigit() and len(v) in (14, 17)):
        raise UsageError(f"{what} {value!r} is not an instant time",
                         remedy="instant times are 17 digits, yyyyMMddHHmmssSSS (older tables: "
                                f"14 digits); list them with `{PROG} timeline TABLE`")
    return v


def _parse_file_group(value: str) -> tuple[str, str]:
    partition, _, file_id = value.strip().strip("/").rpartition("/")
    if not file_id:
        raise UsageError(f"--file-group expects PARTITION/FILEID, got {value!r}",
                         remedy="give the partition path and the fileId, e.g. 2024/01/01/"
                                "7b0ea4f9-3768-4e87-b12c-8d33efd22b55-0 (just the fileId for a "
                                "non-partitioned table)")
    return partition, file_id


def _iso(epoch_s: float | None) -> str | None:
    if epoch_s is None:
        return None
    return datetime.fromtimestamp(epoch_s, tz=timezone.utc).isoformat(timespec="milliseconds")


def _cell(v: Any) -> str:
    if v is None or v == "" or v == []:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.1f}"
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return str(v)


def render_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], empty: str = "(none)") -> str:
    """Plain padded columns, so output survives grep and pasting into a ticket; '-' keeps an
    empty cell from shifting the columns after it."""
    cells = [[_cell(v) for v in row] for row in rows]
    if not cells:
        return empty
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    for row in cells:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    return "\n".join(lines)


def _duration(ms: int | None) -> str | None:
    if ms is None:
        return None
    if ms < 60_000:
        return f"{ms / 1000:.3f}s"
    return f"{ms // 60_000}m{(ms % 60_000) / 1000:06.3f}s"


# --- the context every subcommand gets ----------------------------------------------------------


class Context:
    """One table, the writers' own options and one clock reading per run, so that heartbeat
    ages and expiry verdicts in one output agree with each other and with the writers."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.options: dict[str, Any] = _parse_pairs(
            [*(args.global_option or []), *(getattr(args, "option", None) or [])], "--option")
        self.storage_options = _parse_pairs(
            [*(args.global_storage_option or []), *(getattr(args, "storage_option", None) or [])],
            "--storage-option", coerce=True)
        self.config = WriteConfig.from_options(self.options)
        self.table = _open_table(args.table, self.storage_options)
        self.now = time.time()
        self._timeline = None

    @property
    def timeline(self):
        if self._timeline is None:
            self._timeline = self.table.timeline()
        return self._timeline

    def with_options(self, **changes: Any) -> WriteConfig:
        return WriteConfig.from_options({**self.options, **changes})


def _open_table(path: str, storage_options: dict[str, Any]):
    from airflow_hudi_occ.core.table.table import Table
    try:
        return Table.open(path, storage_options or None)
    except HudiOccError:
        raise
    except (ValueError, ImportError) as e:
        # fsspec: "Protocol not known", or the backend package (s3fs, gcsfs) is not installed.
        raise UsageError(f"cannot open storage for {path!r}: {e}",
                         remedy="check the URL scheme, install its fsspec backend (e.g. s3fs) "
                                "and pass credentials with --storage-option KEY=VALUE") from e


# --- what the timeline says about one instant ------------------------------------------------------


def _require_instant(ctx: Context, t: str) -> Instant:
    inst = ctx.timeline.get(t)
    if inst is not None:
        return inst
    by = rollbacks_by_target(ctx.timeline).get(t)
    if by is not None:
        raise InstantStateError(
            f"instant {t} is not on the timeline: rollback {by} rolled it back", instant=t,
            remedy=f"its write failed or was aborted and its files are gone; `{PROG} timeline` "
                   "shows the rollback, and the writer's own log says why it gave up")
    raise InstantStateError(
        f"instant {t} is not on the timeline of {ctx.table.base_uri}", instant=t,
        remedy=f"list instants with `{PROG} timeline TABLE`; an instant archived or rolled back "
               "before the archive is no longer visible")


# --- heartbeats ----------------------------------------------------------------------------------


def writer_status(ctx: Context, inst: Instant, rolled_back_by: dict[str, str]) -> dict[str, Any]:
    from airflow_hudi_occ.core.concurrency.abort_signal import abort_reason
    from airflow_hudi_occ.core.concurrency.heartbeat import heartbeat_age_s, is_expired
    from airflow_hudi_occ.core.concurrency.markers import markers_for
    age = heartbeat_age_s(ctx.table, inst.requested_time, now=ctx.now)
    expired = is_expired(ctx.table, inst.requested_time, ctx.config.heartbeat, now=ctx.now)
    abort = abort_reason(ctx.table, inst.requested_time)
    return {
        "instant": inst.requested_time, "action": inst.action.value, "state": inst.state.value,
        "is_table_service": inst.is_table_service or ctx.timeline.is_clustering(inst),
        "heartbeat_age_s": None if age is None else round(age, 3),
        "last_beat": _iso(None if age is None else ctx.now - age),
        "alive": not expired,
        "status": "missing" if age is None else ("expired" if expired else "alive"),
        "markers": len(markers_for(ctx.table, inst.requested_time).all_markers()),
        "being_rolled_back_by": rolled_back_by.get(inst.requested_time),
        "abort_requested": abort.get("reason") if abort else None,
    }


def _heartbeat_json(cfg: WriteConfig) -> dict[str, int]:
    hb = cfg.heartbeat
    return {"interval_ms": hb.interval_ms, "tolerable_misses": hb.tolerable_misses,
            "expiry_ms": hb.expiry_ms}


# --- subcommands ---------------------------------------------------------------------------------
# Each returns (json document, human text, exit code).

Result = tuple[Any, str, int]


def cmd_timeline(ctx: Context) -> Result:
    rows = [describe_instant(ctx.timeline, i) for i in ctx.timeline]
    if ctx.args.state:
        rows = [r for r in rows if r["state"] == ctx.args.state]
    if ctx.args.limit is not None:
        rows = rows[-ctx.args.limit:] if ctx.args.limit > 0 else []
    doc = {"table": ctx.table.base_uri, "version": ctx.table.version, "instants": rows}
    text = render_table(
        ["REQUESTED", "ACTION", "STATE", "COMPLETED", "DURATION", "OPERATION", "FGS", "WRITER",
         "ATTEMPT", "CHECKPOINT", "NOTE"],
        [[r["requested_time"], r["action"], r["state"], r["completion_time"],
          _duration(r["duration_ms"]), r["operation_type"],
          None if r["file_groups"] is None else len(r["file_groups"]),
          r["writer_id"], r["attempt"], r["checkpoint"],
          f"rolled back {','.join(r['rolled_back'])}" if r["rolled_back"] else None]
         for r in rows], empty="no instants")
    return doc, text, EXIT_OK


def cmd_file_groups(ctx: Context) -> Result:
    from airflow_hudi_occ.core.table.file_system_view import FileSystemView, list_partitions
    as_of = _instant_time(ctx.args.as_of, "--as-of") if ctx.args.as_of else None
    partitions = None
    if ctx.args.partition is not None:
        wanted = ctx.args.partition.strip("/")
        known = list_partitions(ctx.table)
        if wanted not in known:
            shown = ", ".join(repr(p) for p in known[:10]) + (" ..." if len(known) > 10 else "")
            raise UsageError(f"partition {wanted!r} does not exist in {ctx.table.base_uri}",
                             remedy=f"known partitions: {shown or 'none'}")
        partitions = [wanted]
    view = FileSystemView(ctx.table, ctx.timeline, as_of=as_of, partitions=partitions)
    slices = view.latest_file_slices()
    rows = []
    for s in slices:
        inst = ctx.timeline.get(s.instant_time)
        rows.append({**s.to_json(), "file_group": _fg(s.partition, s.file_id),
                     "completion_time": inst.completion_time if inst is not None else None})
    doc = {"table": ctx.table.base_uri, "as_of": as_of, "partition": ctx.args.partition,
           "count": len(rows), "file_groups": rows}
    text = render_table(["PARTITION", "FILE_ID", "INSTANT", "COMPLETED", "PATH"],
                        [[r["partition"] or "(none)", r["file_id"], r["instant_time"],
                          r["completion_time"], r["path"]] for r in rows], empty="no file groups")
    text += f"\n{len(rows)} file groups" + (f" as of {as_of}" if as_of else "")
    return doc, text, EXIT_OK


def cmd_writers(ctx: Context) -> Result:
    from airflow_hudi_occ.core.concurrency.heartbeat import list_heartbeats
    by = rollbacks_by_target(ctx.timeline)
    writers = [writer_status(ctx, i, by) for i in ctx.timeline.pending_writes()]
    pending = {i.requested_time for i in ctx.timeline.pending()}
    orphans = [t for t in list_heartbeats(ctx.table) if t not in pending]
    doc = {"table": ctx.table.base_uri, "now": _iso(ctx.now), "heartbeat": _heartbeat_json(ctx.config),
           "writers": writers, "orphan_heartbeats": orphans}
    text = render_table(
        ["INSTANT", "ACTION", "STATE", "HEARTBEAT_AGE_S", "STATUS", "MARKERS", "NOTE"],
        [[w["instant"], w["action"], w["state"], w["heartbeat_age_s"], w["status"], w["markers"],
          "; ".join(n for n in (
              f"being rolled back by {w['being_rolled_back_by']}" if w["being_rolled_back_by"] else "",
              f"abort requested: {w['abort_requested']}" if w["abort_requested"] else "",
              "table service" if w["is_table_service"] else "") if n)]
         for w in writers], empty="no pending writers")
    text += (f"\n{len(writers)} pending writers; expiry {ctx.config.heartbeat.expiry_ms} ms "
             f"(hoodie.client.heartbeat.interval_in_ms x tolerable.misses)")
    if orphans:
        text += f"\nheartbeats without a pending instant: {', '.join(orphans)}"
    return doc, text, EXIT_OK


def _markers_doc(ctx: Context, t: str) -> dict[str, Any]:
    from airflow_hudi_occ.core.concurrency.markers import markers_for, read_marker_type
    inst = ctx.timeline.get(t)
    mtype = read_marker_type(ctx.table, t)
    markers = markers_for(ctx.table, t, mtype).all_markers()
    return {
        "instant": t, "state": inst.state.value if inst is not None else None,
        "marker_type": (mtype.value if mtype is not None else "DIRECT"), "count": len(markers),
        "file_groups": _fgs({m.file_group for m in markers}),
        "markers": [{"partition": m.partition, "file_id": m.file_id,
                     "data_file_name": m.data_file_name, "io_type": m.io_type.value,
                     "path": m.relative_path} for m in markers],
    }


def cmd_markers(ctx: Context) -> Result:
    from airflow_hudi_occ.core.concurrency.markers import list_marker_instants
    present = list_marker_instants(ctx.table)
    if ctx.args.instant:
        t = _instant_time(ctx.args.instant)
        if t not in present:
            _require_instant(ctx, t)  # unknown instant: an error; known without markers: empty
        instants = [t]
    else:
        instants = present
    docs = [_markers_doc(ctx, t) for t in instants]
    doc = {"table": ctx.table.base_uri, "instants": docs}
    rows = []
    for d in docs:
        state = d["state"] or "not on timeline"
        if not d["markers"]:
            rows.append([d["instant"], state, d["marker_type"], None, None, None, None])
        for m in d["markers"]:
            rows.append([d["instant"], state, d["marker_type"], m["partition"] or "(none)",
                         m["file_id"], m["io_type"], m["data_file_name"]])
    text = render_table(["INSTANT", "STATE", "TYPE", "PARTITION", "FILE_ID", "IO", "DATA_FILE"], rows,
                        empty="no marker folders")
    text += f"\n{sum(d['count'] for d in docs)} markers in {len(docs)} instants"
    return doc, text, EXIT_OK


def reconstruct_snapshot(tl, t: str) -> tuple[Instant | None, set[str], set[str], bool]:
    """What the writer of ``t`` saw when it began: (last completed write, pending at start,
    completed at start, exact?).

    The writer's own snapshot lives only in its memory, so it is rebuilt from the timeline.
    ``t`` was generated under the lock after every completion time already on the timeline
    (both come from the same skew-waiting generator), so "completed before ``t``" is
    "completion time < ``t``". Version 6 has no completion times: an instant requested before
    ``t`` is then taken as completed before it, which is why the result is marked inexact.
    """
    exact = True
    completed: set[str] = set()
    pending: set[str] = set()
    last: Instant | None = None
    for inst in tl:
        if inst.requested_time >= t:
            continue
        if inst.is_completed and inst.completion_time is None:
            exact = False
        done_before = inst.is_completed and (inst.completion_time or inst.requested_time) < t
        if done_before:
            completed.add(inst.requested_time)
            if inst.is_write:
                last = inst  # the timeline is sorted by requested time, as last_completed_write()
        else:
            pending.add(inst.requested_time)
    return last, pending, completed, exact


def _strategy_for(ctx: Context, name: str | None):
    from airflow_hudi_occ.core.concurrency.conflict import strategy_from_options
    # The same construction as WriteTransaction.begin(), so the answer is the commit's answer.
    chosen = name or ctx.config.conflict_resolution_strategy
    return strategy_from_options({**ctx.config.options, CONFLICT_RESOLUTION_STRATEGY.key: chosen},
                                 table=ctx.table, heartbeat_config=ctx.config.heartbeat,
                                 clock=lambda: ctx.now)


def cmd_conflicts(ctx: Context) -> Result:
    from airflow_hudi_occ.core.concurrency.conflict import ConcurrentOperation, find_conflicts
    from airflow_hudi_occ.core.errors import WriteConflictError
    from airflow_hudi_occ.core.concurrency.heartbeat import heartbeat_age_s, is_expired
    from airflow_hudi_occ.core.concurrency.markers import markers_for
    # Arguments first, then the table: a typo is reported as a typo, not as a missing instant.
    t = _instant_time(ctx.args.instant)
    given = {_parse_file_group(v) for v in ctx.args.file_group or ()}
    strategy = _strategy_for(ctx, ctx.args.strategy)
    inst = _require_instant(ctx, t)
    tl = ctx.timeline
    if inst.is_completed:
        raise InstantStateError(
            f"instant {t} is completed (at {inst.completion_time or 'an unrecorded time'}): it "
            "passed conflict resolution and committed", instant=t,
            remedy=f"`{PROG} conflicts` judges pending instants; `{PROG} timeline` shows what "
                   "committed after it")
    own = ConcurrentOperation.from_timeline(tl, inst)
    if given:
        groups = given
        source = "given"
    else:
        groups = markers_for(ctx.table, t).file_groups()
        source = "markers"
        if own.mutated_file_groups - groups:
            # a pending replace's plan, or stats an inflight file already carries
            groups |= own.mutated_file_groups
            source = "markers+plan"
    current = ConcurrentOperation.for_current(inst, own.operation_type, groups)
    last, pending_at_start, _completed, exact = reconstruct_snapshot(tl, t)
    findings = find_conflicts(tl, current, strategy, last_successful=last,
                              pending_at_start=pending_at_start)
    candidates, reasons = [], []
    for f in findings:
        conflict = bool(f.file_groups) or f.would_abort
        row = {**f.other.to_json(), "conflicting_file_groups": _fgs(f.file_groups),
               "conflict": conflict, "would_abort": f.would_abort}
        candidates.append(row)
        if f.would_abort:
            try:
                strategy.resolve_conflict(current, f.other)
                message = strategy.conflict_error(current, f.other).message
            except WriteConflictError as e:
                message = e.message
            reasons.append({"kind": "conflict", "other_instant": f.other.requested_time,
                            "other_action": f.other.action.value,
                            "file_groups": _fgs(f.file_groups), "message": message})
    age = heartbeat_age_s(ctx.table, t, now=ctx.now)
    expired = is_expired(ctx.table, t, ctx.config.heartbeat, now=ctx.now)
    if expired:
        reasons.append({"kind": "heartbeat_expired", "other_instant": None, "file_groups": [],
                        "message": (f"the heartbeat of {t} is "
                                    + ("missing" if age is None else f"{age:.1f}s old")
                                    + f" (expiry {ctx.config.heartbeat.expiry_ms} ms): the writer "
                                      "refuses to commit and a clean will roll it back")})
    by = rollbacks_by_target(tl).get(t)
    if by is not None:
        reasons.append({"kind": "being_rolled_back", "other_instant": by, "file_groups": [],
                        "message": f"rollback {by} is removing {t}; it can no longer commit"})
    would_abort = bool(reasons)
    doc = {
        "table": ctx.table.base_uri, "instant": t, "action": inst.action.value,
        "state": inst.state.value, "operation_type": current.operation_type,
        "strategy": strategy.name or type(strategy).__name__,
        "file_groups": _fgs(groups), "file_groups_source": source,
        "snapshot": {"last_completed": last.requested_time if last else None,
                     "pending_at_start": sorted(pending_at_start), "exact": exact},
        "heartbeat": {"age_s": None if age is None else round(age, 3), "alive": not expired,
                      **_heartbeat_json(ctx.config)},
        "candidates": candidates,
        "conflicts": [c for c in candidates if c["conflict"]],
        "would_abort": would_abort,
        "reasons": reasons,
    }
    lines = [f"instant    {t} ({inst.action.value}, {inst.state.value}, "
             f"{current.operation_type})",
             f"strategy   {doc['strategy']}",
             f"file groups ({source}): {len(groups)}" + (f"  {', '.join(doc['file_groups'][:8])}"
                                                        + (" ..." if len(groups) > 8 else "")
                                                        if groups else "  none: nothing to conflict on"),
             f"based on   last completed {doc['snapshot']['last_completed'] or '-'}"
             + ("" if exact else " (approximate: this table version records no completion times)"),
             ""]
    if candidates:
        lines.append(render_table(
            ["CANDIDATE", "ACTION", "STATE", "COMPLETED", "OPERATION", "CONFLICT", "ABORTS", "FILE_GROUPS"],
            [[c["instant"], c["action"], c["state"], c["completion_time"], c["operation_type"],
              c["conflict"], c["would_abort"], c["conflicting_file_groups"]] for c in candidates]))
    else:
        lines.append("no candidate instants: nothing committed or was scheduled since this write began")
    lines.append("")
    if would_abort:
        lines.append(f"verdict: {t} would ABORT")
        lines.extend(f"  - {r['message']}" for r in reasons)
    else:
        lines.append(f"verdict: {t} would commit")
    return doc, "\n".join(lines), EXIT_WOULD_ABORT if would_abort else EXIT_OK


def cmd_early_check(ctx: Context) -> Result:
    """Ask the real detector, as the writer of ``T`` would have asked it before creating the
    marker of ``F``. The instant need not be on the timeline any more: a write stopped by an
    early conflict is usually rolled back by the time someone asks why."""
    from airflow_hudi_occ.core.concurrency.early_conflict import create_detector, get_detection_strategy
    from airflow_hudi_occ.core.errors import EarlyConflictError
    t = _instant_time(ctx.args.instant)
    partition = ctx.args.partition.strip("/")
    file_id = ctx.args.file_id.strip()
    if not file_id or "/" in file_id:
        raise UsageError(f"--file-id expects a fileId, got {ctx.args.file_id!r}",
                         remedy="the fileId is the part of a base file name before the first '_'")
    changes: dict[str, Any] = {}
    if ctx.args.strategy:
        changes[ECD_STRATEGY.key] = ctx.args.strategy
    if ctx.args.check_commit_conflict:
        changes[ECD_CHECK_COMMIT_CONFLICT.key] = "true"
    cfg = ctx.with_options(**changes)
    cls = get_detection_strategy(cfg.early_conflict.strategy, cfg)  # unknown name: error first
    inst = ctx.timeline.get(t)
    rolled_back_by = rollbacks_by_target(ctx.timeline).get(t) if inst is None else None
    _last, _pending, completed_at_start, _exact = reconstruct_snapshot(ctx.timeline, t)
    detector = create_detector(ctx.table, t, cfg, completed_at_start=completed_at_start,
                               clock=lambda: ctx.now)
    candidates = detector.view.candidates()
    conflict: EarlyConflictError | None = None
    try:
        if hasattr(detector, "run_check_once"):
            # The async checkers judge the whole write in the background and stop its next
            # marker, whichever file that is; announce F and run one round as the checker would.
            detector.add_pending(partition, file_id)
            conflict = detector.run_check_once()
        else:
            detector.check(partition, file_id)
    except EarlyConflictError as e:
        conflict = e
    finally:
        detector.stop()
    other = ctx.timeline.get(conflict.other_instant) if conflict is not None else None
    doc = {
        "table": ctx.table.base_uri, "instant": t, "on_timeline": inst is not None,
        "state": inst.state.value if inst is not None else None, "rolled_back_by": rolled_back_by,
        "partition": partition, "file_id": file_id, "file_group": _fg(partition, file_id),
        "strategy": cls.name or cls.__name__,
        "early_detection_enabled": cfg.early_conflict.enabled,
        "check_commit_conflict": cfg.early_conflict.check_commit_conflict,
        "heartbeat": _heartbeat_json(cfg),
        "candidates": candidates,
        "stopped": conflict is not None,
        "other_instant": conflict.other_instant if conflict else None,
        "other_action": conflict.other_action if conflict else None,
        "kind": None if conflict is None else (
            "completed_commit" if other is not None and other.is_completed else "markers"),
        "conflicting_file_groups": list(conflict.file_groups) if conflict else [],
        "message": conflict.message if conflict else None,
        "remedy": conflict.remedy if conflict else None,
    }
    lines = [f"instant    {t} " + (f"({inst.action.value}, {inst.state.value})" if inst is not None
                                   else "(not on the timeline" + (f": rolled back by {rolled_back_by}"
                                                                  if rolled_back_by else "")
                                   + "; judged as a writer that began at that time)"),
             f"file group {doc['file_group']}",
             f"strategy   {doc['strategy']}"
             + ("  + commit conflict check" if doc["check_commit_conflict"] else ""),
             f"candidates {', '.join(candidates) or 'none'} (earlier instants with markers and a "
             f"live heartbeat, expiry {cfg.heartbeat.expiry_ms} ms)"]
    if not cfg.early_conflict.enabled:
        lines.append(f"note       {ECD_ENABLE.key} is not true in these options: such a writer "
                     "does not check early; the commit-time check still runs")
    lines.append("")
    if conflict is not None:
        lines.append(f"verdict: STOPPED by {doc['kind'].replace('_', ' ')} of {conflict.other_instant}")
        lines.append(f"  {conflict.message}")
    else:
        lines.append("verdict: passes (no earlier live writer has markers on it"
                     + (", and nothing completed since it began touched it)"
                        if doc["check_commit_conflict"] else ")"))
    return doc, "\n".join(lines), EXIT_WOULD_ABORT if conflict is not None else EXIT_OK


def cmd_show(ctx: Context) -> Result:
    from airflow_hudi_occ.core.table.file_system_view import FileSystemView
    from airflow_hudi_occ.core.concurrency.markers import list_marker_instants
    tl = ctx.timeline
    by_state: dict[str, int] = {s.value: 0 for s in State}
    by_action: dict[str, int] = {}
    for inst in tl:
        by_state[inst.state.value] += 1
        by_action[inst.action.value] = by_action.get(inst.action.value, 0) + 1
    done = tl.completed_by_completion_time()
    latest = describe_instant(tl, done[-1]) if done else None
    slices = FileSystemView(ctx.table, tl).latest_file_slices()
    per_part: dict[str, int] = {}
    for s in slices:
        per_part[s.partition] = per_part.get(s.partition, 0) + 1
    by = rollbacks_by_target(tl)
    writers = [writer_status(ctx, i, by) for i in tl.pending_writes()]
    doc = {
        "table": {**ctx.table.describe(), "properties": dict(sorted(ctx.table.config.properties.items()))},
        "instants": {"total": len(tl), "by_state": by_state, "by_action": dict(sorted(by_action.items())),
                     "latest_completed": latest},
        "file_groups": {"total": len(slices), "partitions": len(per_part),
                        "by_partition": dict(sorted(per_part.items()))},
        "writers": {"pending": len(writers), "alive": sum(w["alive"] for w in writers),
                    "expired": sum(not w["alive"] for w in writers),
                    "heartbeat": _heartbeat_json(ctx.config), "instants": writers},
        "marker_instants": list_marker_instants(ctx.table),
    }
    d = ctx.table.describe()
    lines = [
        f"table        {d['name']} ({d['type']}, version {d['version']})",
        f"base path    {d['base_path']}",
        f"record key   {','.join(d['record_key_fields']) or '-'}    partition fields "
        f"{','.join(d['partition_fields']) or '(none)'}    precombine {d['precombine_field'] or '-'}",
        f"instants     {len(tl)}: " + ", ".join(f"{n} {s}" for s, n in by_state.items())
        + ("  (" + ", ".join(f"{a} {n}" for a, n in sorted(by_action.items())) + ")" if by_action else ""),
        "latest       " + (f"{latest['requested_time']} {latest['action']} "
                            f"{latest['operation_type'] or ''} completed {latest['completion_time'] or '-'}"
                            if latest else "-"),
        f"file groups  {len(slices)} in {len(per_part)} partitions",
        f"writers      {len(writers)} pending: {doc['writers']['alive']} alive, "
        f"{doc['writers']['expired']} expired (expiry {ctx.config.heartbeat.expiry_ms} ms)",
    ]
    if writers:
        lines.append("")
        lines.append(render_table(["INSTANT", "ACTION", "STATE", "HEARTBEAT_AGE_S", "STATUS", "MARKERS"],
                                  [[w["instant"], w["action"], w["state"], w["heartbeat_age_s"],
                                    w["status"], w["markers"]] for w in writers]))
    if per_part:
        lines.append("")
        lines.append(render_table(["PARTITION", "FILE_GROUPS"],
                                  [[p or "(none)", n] for p, n in sorted(per_part.items())]))
    return doc, "\n".join(lines), EXIT_OK


# --- table services (these subcommands write: clean, rollback, clustering) -----------------------


def cmd_clean(ctx: Context) -> Result:
    from airflow_hudi_occ.core.services.clean import run_clean
    res = run_clean(ctx.table, ctx.options, dry_run=ctx.args.dry_run)
    doc = res.to_json()
    files = res.planned_files if res.dry_run else res.deleted_files
    head = (f"dry run: would delete {len(files)} files" if res.dry_run else
            f"clean {res.clean_instant or '(nothing to clean)'}: deleted {len(files)} files, "
            f"rolled back {len(res.rolled_back)} failed writes")
    text = head + f" (policy {res.policy}, earliest retained {res.earliest_commit_to_retain or '-'})"
    if files:
        text += "\n" + "\n".join(f"  {f}" for f in files)
    return doc, text, EXIT_OK


def cmd_rollback(ctx: Context) -> Result:
    from airflow_hudi_occ.core.commit.rollback import rollback_failed_writes, rollback_instant
    if ctx.args.instant:
        t = _instant_time(ctx.args.instant)
        _require_instant(ctx, t)
        res = [rollback_instant(ctx.table, t, ctx.config, reason="requested from the CLI")]
    else:
        res = rollback_failed_writes(ctx.table, ctx.config)
    doc = {"rolled_back": [r.to_json() for r in res]}
    text = render_table(["INSTANT", "ROLLBACK", "FILES DELETED", "SKIPPED"],
                        [[r.rolled_back, r.rollback_instant, len(r.deleted_files), r.skipped_reason]
                         for r in res], empty="no failed writes to roll back")
    return doc, text, EXIT_OK


def cmd_cluster(ctx: Context) -> Result:
    from airflow_hudi_occ.core.services.clustering import execute_clustering, schedule_clustering, show_clustering
    action = ctx.args.action
    if action == "schedule":
        t = schedule_clustering(ctx.table, ctx.options)
        return {"scheduled": t}, (f"scheduled clustering {t}" if t else "nothing to cluster"), EXIT_OK
    if action == "run":
        t = _instant_time(ctx.args.instant) if ctx.args.instant else None
        res = execute_clustering(ctx.table, ctx.options, t)
        return res.to_json(), (f"clustering {res.instant} committed at {res.completion_time}: "
                               f"{res.to_json()['replaced_file_groups']} file groups into "
                               f"{len(res.stats)}"), EXIT_OK
    plans = show_clustering(ctx.table)
    text = render_table(["INSTANT", "STATE", "SORT", "GROUPS", "FILE GROUPS", "OUTPUT FGS"],
                        [[p["instant"], p["state"], p["sort_columns"], len(p["groups"]),
                          sum(len(g["file_groups"]) for g in p["groups"]),
                          sum(g["num_output_file_groups"] for g in p["groups"])] for p in plans],
                        empty="no pending clustering")
    return {"pending": plans}, text, EXIT_OK


# --- the parser --------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so usage errors share the error path (and
    come out as JSON with --json)."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message, remedy=f"see `{self.prog} --help`")


def _add_common(p: argparse.ArgumentParser, *, top: bool) -> None:
    # Sub-level copies use other dests: argparse lets a subparser's defaults overwrite what the
    # top level parsed, so both are kept and merged in Context.
    prefix = "global_" if top else ""
    p.add_argument("--option", "-o", dest=f"{prefix}option", action="append", metavar="KEY=VALUE",
                   help="a Hudi write option (hoodie.*), repeatable")
    p.add_argument("--storage-option", dest=f"{prefix}storage_option", action="append",
                   metavar="KEY=VALUE", help="an fsspec storage option, repeatable")
    p.add_argument("--json", dest=f"{prefix}json", action="store_true", default=False,
                   help="print one JSON document instead of tables")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Look at a Hudi table written by several writers: its "
                     "timeline, file groups, live writers, markers, and why a write conflicts.")
    _add_common(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def add(name: str, func: Callable[[Context], Result], help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        p.add_argument("table", metavar="TABLE", help="base path or URL of the table")
        _add_common(p, top=False)
        p.set_defaults(func=func)
        return p

    add("show", cmd_show, "summary: properties, instants by state, file groups, live writers")
    p = add("timeline", cmd_timeline, "every instant: times, state, duration, operation, writer, "
            "attempt, checkpoint; what each rollback removed")
    p.add_argument("--state", choices=[s.value for s in State])
    p.add_argument("--limit", type=int, metavar="N", help="only the last N instants")
    p = add("file-groups", cmd_file_groups, "the latest base file of each file group")
    p.add_argument("--as-of", metavar="T", help="as of this instant time (time travel)")
    p.add_argument("--partition", metavar="P")
    add("writers", cmd_writers, "pending write instants: heartbeat age, alive or expired, markers")
    p = add("markers", cmd_markers, "markers of pending (or failed) instants")
    p.add_argument("--instant", metavar="T")
    p = add("conflicts", cmd_conflicts, "would this pending instant commit or abort, and "
            "because of which instants (exit 3: abort)")
    p.add_argument("--instant", metavar="T", required=True)
    p.add_argument("--file-group", metavar="PARTITION/FILEID", action="append",
                   help="judge these file groups instead of the instant's markers (repeatable)")
    p.add_argument("--strategy", metavar="NAME", help="conflict resolution strategy "
                   "(simple, bucket, prefer-writer or a class name); default from --option "
                   f"{CONFLICT_RESOLUTION_STRATEGY.key}")
    p = add("early-check", cmd_early_check, "would early conflict detection stop this instant "
            "from writing this file group (exit 3: stopped)")
    p.add_argument("--instant", metavar="T", required=True)
    p.add_argument("--partition", metavar="P", required=True)
    p.add_argument("--file-id", metavar="F", required=True)
    p.add_argument("--strategy", metavar="NAME", help="early conflict detection strategy; "
                   f"default from --option {ECD_STRATEGY.key}")
    p.add_argument("--check-commit-conflict", action="store_true",
                   help=f"also check commits completed since the instant began ({ECD_CHECK_COMMIT_CONFLICT.key})")
    p = add("clean", cmd_clean, "roll back dead writers (LAZY), then delete file versions the "
            "clean policy no longer retains (hoodie.clean.policy, ...commits.retained)")
    p.add_argument("--dry-run", action="store_true", help="only show what would be deleted")
    p = add("rollback", cmd_rollback, "roll back one pending instant, or every pending write "
            "whose heartbeat expired")
    p.add_argument("--instant", metavar="T")
    p = sub.add_parser("cluster", help="schedule, run (in this process, with Arrow) or show "
                       "clustering; for big tables run airflow_hudi_occ.spark.service_job",
                       description="clustering: schedule | run | show")
    p.add_argument("action", choices=["schedule", "run", "show"])
    p.add_argument("table", metavar="TABLE", help="base path or URL of the table")
    p.add_argument("--instant", metavar="T", help="run: this plan (default: the earliest pending)")
    _add_common(p, top=False)
    p.set_defaults(func=cmd_cluster)
    return parser


# --- entry point -----------------------------------------------------------------------------------


def _print_error(err: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(err, indent=2, default=str), file=sys.stderr)
        return
    print(f"error: {err['message']}", file=sys.stderr)
    if err.get("remedy"):
        print(f"remedy: {err['remedy']}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    # The library logs warnings (e.g. the early conflict it just found) for writers' logs; here
    # the same facts are in the output, so when nobody configured logging they are not repeated
    # on stderr by logging's last-resort handler.
    quiet = logging.NullHandler() if not logging.getLogger().handlers else None
    package_logger = logging.getLogger("airflow_hudi_occ")
    if quiet is not None:
        package_logger.addHandler(quiet)
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    finally:
        if quiet is not None:
            package_logger.removeHandler(quiet)


def _main(argv: list[str]) -> int:
    # Known before parsing, so a parse error can already come out as JSON.
    as_json = "--json" in argv
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:  # --help
            return e.code if isinstance(e.code, int) else EXIT_OK
        as_json = bool(args.global_json or getattr(args, "json", False))
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        ctx = Context(args)
        doc, text, code = args.func(ctx)
        if as_json:
            print(json.dumps(doc, indent=2, default=str))
        else:
            print(text)
        sys.stdout.flush()
        return code
    except RetryableError as e:
        _print_error(e.to_dict(), as_json)
        return EXIT_RETRYABLE
    except HudiOccError as e:
        _print_error(e.to_dict(), as_json)
        return EXIT_USAGE
    except BrokenPipeError:
        # `hudi-occ timeline T | head`: the reader left; that is not an error.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_OK
    except OSError as e:
        _print_error({"error": type(e).__name__, "message": f"storage error: {e}",
                      "remedy": "check the path, permissions and --storage-option credentials"},
                     as_json)
        return EXIT_USAGE
    except Exception as e:  # a bug: say so plainly, without a wall of stack
        if os.environ.get("HUDI_OCC_DEBUG") == "1":
            raise
        _print_error({"error": type(e).__name__, "message": f"internal error: {type(e).__name__}: {e}",
                      "remedy": "this is a bug in hudi-occ; rerun with HUDI_OCC_DEBUG=1 for the "
                                "traceback and report it"}, as_json)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
