"""conflicts and early-check: parse the question, ask core.inspection.diagnose, render the verdict
(an instant already gone from the timeline: its attempt record, through history_commands)."""

from __future__ import annotations

from typing import Any

from airflow_hudi_occ.cli.context import PROG, Context, Result, UsageError, instant_time_arg, file_group_arg, require_instant
from airflow_hudi_occ.cli.history_commands import conflict_history
from airflow_hudi_occ.cli.render import render_table
from airflow_hudi_occ.core.concurrency.markers.folder import marker_dir, read_marker_type
from airflow_hudi_occ.core.config import ECD_CHECK_COMMIT_CONFLICT, ECD_ENABLE, ECD_STRATEGY, MARKERS_TYPE
from airflow_hudi_occ.core.errors import InstantStateError
from airflow_hudi_occ.core.inspection.diagnose import diagnose_conflicts, diagnose_early_check, strategy_for
from airflow_hudi_occ.core.job_protocol import EXIT_OK, EXIT_WOULD_ABORT


def cmd_conflicts(ctx: Context) -> Result:
    # Arguments first, then the table: a typo is reported as a typo, not as a missing instant.
    t = instant_time_arg(ctx.args.instant)
    given = {file_group_arg(v) for v in ctx.args.file_group or ()}
    bare = sorted(f for p, f in given if not p)
    if bare and ctx.table.config.partition_fields:
        # a bare fileId would match no file group of a partitioned table: a silent "would commit"
        raise UsageError(
            f"--file-group {bare[0]} names no partition, but table {ctx.table.name} is partitioned "
            f"by {','.join(ctx.table.config.partition_fields)}",
            remedy=f"give PARTITION/FILEID, e.g. --file-group <partition path>/{bare[0]} "
                   f"(`{PROG} file-groups {ctx.table.base_uri}` lists them)")
    strategy = strategy_for(ctx.table, ctx.config, ctx.args.strategy, now=ctx.now)
    if ctx.timeline.get(t) is None:
        # a loser is rolled back at once: the question "why did it abort" is asked after that
        answered = conflict_history(ctx, t)
        if answered is not None:
            return answered
    inst = require_instant(ctx, t)
    if inst.is_completed:
        raise InstantStateError(
            f"instant {t} is completed (at {inst.completion_time or 'an unrecorded time'}): it "
            "passed conflict resolution and committed", instant=t,
            remedy=f"`{PROG} conflicts` judges pending instants; `{PROG} timeline` shows what "
                   "committed after it")
    doc = diagnose_conflicts(ctx.table, ctx.timeline, ctx.config, inst, file_groups=given,
                             strategy=strategy, now=ctx.now)
    groups, candidates = doc["file_groups"], doc["candidates"]
    lines = [f"instant    {t} ({inst.action.value}, {inst.state.value}, {doc['operation_type']})",
             f"strategy   {doc['strategy']}",
             f"file groups ({doc['file_groups_source']}): {len(groups)}"
             + (f"  {', '.join(groups[:8])}" + (" ..." if len(groups) > 8 else "")
                if groups else "  none: nothing to conflict on"),
             f"based on   last completed {doc['snapshot']['last_completed'] or '-'}"
             + ("" if doc["snapshot"]["exact"]
                else " (approximate: this table version records no completion times)"),
             ""]
    if candidates:
        lines.append(render_table(
            ["CANDIDATE", "ACTION", "STATE", "COMPLETED", "OPERATION", "CONFLICT", "ABORTS", "FILE_GROUPS"],
            [[c["instant"], c["action"], c["state"], c["completion_time"], c["operation_type"],
              c["conflict"], c["would_abort"], c["conflicting_file_groups"]] for c in candidates]))
    else:
        lines.append("no candidate instants: nothing committed or was scheduled since this write began")
    lines.append("")
    if doc["would_abort"]:
        lines.append(f"verdict: {t} would ABORT")
        lines.extend(f"  - {r['message']}" for r in doc["reasons"])
    else:
        lines.append(f"verdict: {t} would commit")
    return doc, "\n".join(lines), EXIT_WOULD_ABORT if doc["would_abort"] else EXIT_OK


def cmd_early_check(ctx: Context) -> Result:
    """Ask the real detector, as the writer of ``T`` would have asked it before creating the
    marker of ``F`` (the instant may be rolled back already)."""
    t = instant_time_arg(ctx.args.instant)
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
    # The writer's marker type picks the default strategy; unless the options name one, the
    # instant's own marker folder says which it used (gone after a rollback: options decide).
    marker_source = "options"
    if MARKERS_TYPE.key not in ctx.options:
        on_disk = read_marker_type(ctx.table, t)
        if on_disk is not None:
            changes[MARKERS_TYPE.key] = on_disk.value
            marker_source = "the instant's MARKERS.type"
        elif ctx.table.storage.exists(marker_dir(ctx.table, t)):
            marker_source = "the instant's marker folder: direct"
    cfg = ctx.with_options(**changes)
    doc = diagnose_early_check(ctx.table, ctx.timeline, cfg, t, partition, file_id, now=ctx.now)
    inst = ctx.timeline.get(t)
    rolled_back_by = doc["rolled_back_by"]
    lines = [f"instant    {t} " + (f"({inst.action.value}, {inst.state.value})" if inst is not None
                                   else "(not on the timeline" + (f": rolled back by {rolled_back_by}"
                                                                  if rolled_back_by else "")
                                   + "; judged as a writer that began at that time)"),
             f"file group {doc['file_group']}",
             f"markers    {cfg.marker_type.value} (from {marker_source})",
             f"strategy   {doc['strategy']}"
             + ("  + commit conflict check" if doc["check_commit_conflict"] else ""),
             f"candidates {', '.join(doc['candidates']) or 'none'} (earlier instants with markers "
             f"and a live heartbeat, expiry {cfg.heartbeat.expiry_ms} ms)"]
    if not cfg.early_conflict.enabled:
        lines.append(f"note       {ECD_ENABLE.key} is not true in these options: such a writer "
                     "does not check early; the commit-time check still runs")
    lines.append("")
    if doc["stopped"]:
        lines.append(f"verdict: STOPPED by {doc['kind'].replace('_', ' ')} of {doc['other_instant']}")
        lines.append(f"  {doc['message']}")
    else:
        lines.append("verdict: passes (no earlier live writer has markers on it"
                     + (", and nothing completed since it began touched it)"
                        if doc["check_commit_conflict"] else ")"))
    doc["marker_type"] = cfg.marker_type.value
    doc["marker_type_source"] = marker_source
    return doc, "\n".join(lines), EXIT_WOULD_ABORT if doc["stopped"] else EXIT_OK
