"""The subcommands that write: clean, rollback, cluster, compact, archive (each under the table
lock, as a table service; a clustering that loses at its commit exits 75 like the spark-submit
jobs), and sync (the catalog, under the table's sync lock)."""

from __future__ import annotations

from airflow_hudi_occ.cli.context import Context, Result, instant_time_arg, require_instant
from airflow_hudi_occ.cli.render import render_table
from airflow_hudi_occ.core.catalog.sync import sync_table
from airflow_hudi_occ.core.commit.archival import run_archival
from airflow_hudi_occ.core.commit.rollback import rollback_failed_writes, rollback_instant
from airflow_hudi_occ.core.job_protocol import EXIT_OK
from airflow_hudi_occ.core.services.clean import run_clean
from airflow_hudi_occ.core.services.clustering import execute_clustering, schedule_clustering, show_clustering
from airflow_hudi_occ.core.services.compaction import run_compaction, show_compaction


def cmd_clean(ctx: Context) -> Result:
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


def cmd_archive(ctx: Context) -> Result:
    res = run_archival(ctx.table, ctx.options, dry_run=ctx.args.dry_run)
    doc = res.to_json()
    verb = "would archive" if res.dry_run else "archived"
    text = (f"{verb} {len(res.archived)} instants"
            + (f" into {res.history_file}" if res.history_file else "")
            + f" ({res.active_writes_before} completed writes were active"
            + (f"; stopped before {res.boundary}: {res.boundary_reason}" if res.boundary else "")
            + ")")
    if res.finished_interrupted:
        text += f"\nfinished an interrupted archival of {len(res.finished_interrupted)} instants"
    if res.compacted:
        text += "\nhistory compacted into " + ", ".join(res.compacted)
    return doc, text, EXIT_OK


def cmd_rollback(ctx: Context) -> Result:
    if ctx.args.instant:
        t = instant_time_arg(ctx.args.instant)
        require_instant(ctx, t)
        res = [rollback_instant(ctx.table, t, ctx.config, reason="requested from the CLI")]
    else:
        res = rollback_failed_writes(ctx.table, ctx.config)
    doc = {"rolled_back": [r.to_json() for r in res]}
    text = render_table(["INSTANT", "ROLLBACK", "FILES DELETED", "SKIPPED"],
                        [[r.rolled_back, r.rollback_instant, len(r.deleted_files), r.skipped_reason]
                         for r in res], empty="no failed writes to roll back")
    return doc, text, EXIT_OK


def cmd_cluster(ctx: Context) -> Result:
    action = ctx.args.action
    if action == "schedule":
        t = schedule_clustering(ctx.table, ctx.options)
        return {"scheduled": t}, (f"scheduled clustering {t}" if t else "nothing to cluster"), EXIT_OK
    if action == "run":
        t = instant_time_arg(ctx.args.instant) if ctx.args.instant else None
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


def cmd_compact(ctx: Context) -> Result:
    args = ctx.args
    if args.show:
        plans = show_compaction(ctx.table, ctx.options)
        text = render_table(["INSTANT", "STATE", "EXECUTOR", "FILE GROUPS", "LOG FILES"],
                            [[p["instant"], p["state"], "alive" if p["executor_alive"] else "-",
                              len(p["file_groups"]), p["log_files"]] for p in plans],
                            empty="no pending compaction")
        return {"pending": plans}, text, EXIT_OK
    t = None
    if args.execute:
        t = instant_time_arg(args.execute, "--execute")
        require_instant(ctx, t)
    res = run_compaction(ctx.table, ctx.options, schedule_only=args.schedule_only, instant=t,
                         force=args.force)
    lines = []
    if not args.execute:
        lines.append(f"scheduled compaction {res['scheduled']}" if res["scheduled"] else
                     "nothing scheduled (trigger not reached, or no log files to compact; "
                     "--force skips the trigger)")
    ex = res["executed"]
    if ex:
        lines.append(f"compaction {ex['instant']} committed at {ex['completion_time']}: "
                     f"{ex['file_groups']} file groups, {ex['log_files_compacted']} log files merged")
    return res, "\n".join(lines), EXIT_OK



def cmd_sync(ctx: Context) -> Result:
    """The catalog sync a commit runs, on demand: after a metastore outage, or for a table whose
    writers do not sync (the sync keys come from --option; the switch itself is implied)."""
    rep = sync_table(ctx.table, ctx.config, force=True)
    doc = rep.to_json()
    if rep.error is not None:  # ignore_exceptions: reported, not raised
        return doc, f"sync failed (ignored): {rep.error}", EXIT_OK
    lines = [f"synced {rep.database}.{', '.join(rep.tables) or '(nothing: no completed write)'} "
             f"to last_commit_time_sync={rep.last_commit_time_sync or '-'} "
             f"({rep.calls} metastore calls, {rep.instants_read} instants read"
             + (", every partition listed" if rep.full_listing else "") + ")"]
    for name in rep.created:
        lines.append(f"  created {rep.database}.{name}")
    for name in rep.schema_changed:
        lines.append(f"  schema or properties of {rep.database}.{name} updated")
    for name, parts in rep.added.items():
        lines.append(f"  {rep.database}.{name}: {len(parts)} partitions added or present")
    for name, parts in rep.dropped.items():
        lines.append(f"  {rep.database}.{name}: dropped {', '.join(parts)}")
    return doc, "\n".join(lines), EXIT_OK
