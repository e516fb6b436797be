"""attempts, and the history half of conflicts: render what core.inspection.attempt_history
reads from the attempt log, for attempts whose instants may be long gone from the timeline."""

from __future__ import annotations

from typing import Any

from airflow_hudi_occ.cli.context import PROG, Context, Result, instant_time_arg, limit_arg
from airflow_hudi_occ.cli.render import render_table
from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.errors import InstantStateError
from airflow_hudi_occ.core.inspection.attempt_history import attempt_of, list_attempts
from airflow_hudi_occ.core.job_protocol import EXIT_OK, EXIT_WOULD_ABORT


def _who(r: dict[str, Any]) -> str:
    if r["dag_id"] or r["task_id"]:
        return (f"{r['dag_id'] or '?'} \u203a {r['task_id'] or '?'}"
                + (f" run {r['run_id']}" if r["run_id"] else "")
                + (f" try {r['try_number']}" if r["try_number"] else ""))
    return f"writer {r['writer_id']}" if r["writer_id"] else "-"


def _fate(r: dict[str, Any]) -> str:
    if r["timeline_state"] == "rolled back":
        return f"rolled back by {r['rolled_back_by']}"
    return r["timeline_state"]


def _pruned_line(pruned: dict | None) -> str | None:
    if not pruned:
        return None
    return (f"clean pruned {pruned['count']} older records (the newest {pruned.get('newest_instant') or '-'}; "
            f"records younger than {attempt_log.RETAINED_MS // attempt_log.DAY_MS} days are kept)")


def cmd_attempts(ctx: Context) -> Result:
    """Every recorded write attempt: who, how it ended, whom it lost to, on which file groups,
    what became of its instant, and its retries."""
    t = instant_time_arg(ctx.args.instant) if ctx.args.instant else None
    limit = limit_arg(ctx.args.limit, "attempts", "newest")
    doc = list_attempts(ctx.table, ctx.timeline, instant=t, outcomes=ctx.args.outcome,
                        dag_id=ctx.args.dag_id, limit=limit)
    rows = doc["attempts"]
    if t is not None and not rows:
        raise InstantStateError(
            f"the attempt log of {ctx.table.base_uri} has no record of instant {t}", instant=t,
            remedy=f"`{PROG} attempts TABLE` lists the recorded attempts; writers that are not "
                   "this library's (Java Hudi) keep none"
                   + ("; " + _pruned_line(doc["pruned"]) if doc["pruned"] else ""))
    text = render_table(
        ["INSTANT", "OUTCOME", "WRITER", "ATTEMPT", "LOST_TO", "FILE_GROUPS", "DISCARDED_S",
         "INSTANT_NOW", "RETRY_OF", "RETRIED_AS"],
        [[r["instant"], r["outcome"], _who(r), r["attempt"], r["other_instant"], r["file_groups"],
          f"{r['seconds_discarded']:.3f}" if r["outcome"] != attempt_log.COMMITTED else None,
          _fate(r), r["retry_of"], r["retried_by"]] for r in rows], empty="no recorded attempts")
    filtered = bool(t or ctx.args.outcome or ctx.args.dag_id)
    text += (f"\n{len(rows)} of {doc['matched']} matching" if filtered or doc["truncated"] else f"\n{len(rows)}") \
        + f" attempts ({doc['records']} recorded"
    text += f", oldest {doc['oldest']})" if doc["oldest"] else ")"
    if doc["pruned"]:
        text += "\n" + _pruned_line(doc["pruned"])
    return doc, text, EXIT_OK


def conflict_history(ctx: Context, t: str) -> Result | None:
    """``conflicts --instant T`` for an instant no longer on the timeline: what its attempt
    record says (how it ended, the winner, the rollback, the retry), or None without one.
    Exit 3 as for a pending instant that would abort: this one did."""
    row = attempt_of(ctx.table, ctx.timeline, t)
    if row is None:
        return None
    w, retry = row["winner"], row["retry"]
    lines = [f"instant    {t} ({row['action']}, not on the timeline: {_fate(row)})",
             f"writer     {_who(row)}, attempt {row['attempt']}",
             f"outcome    {row['outcome']}" + (f" ({row['error']})" if row["error"] else ""),
             f"lost to    {row['other_instant']}" + (f" ({_who(w)}, {w['outcome']})" if w else "")
             if row["other_instant"] else None,
             f"file groups {len(row['file_groups'])}: {', '.join(row['file_groups'][:8])}"
             + (" ..." if len(row["file_groups"]) > 8 else "") if row["file_groups"] else None,
             f"discarded  {row['seconds_discarded']:.3f} s of work, {row['files_discarded']} "
             + ("file" if row["files_discarded"] == 1 else "files")
             if row["outcome"] != attempt_log.COMMITTED else None,
             f"retried as {row['retried_by']} ({retry['outcome']})" if retry else None,
             f"message    {row['message']}" if row["message"] else None,
             ""]
    lines = [x for x in lines if x is not None]
    if row["outcome"] == attempt_log.COMMITTED:
        lines.append(f"verdict: {t} committed (answered from the attempt log; the instant was "
                     f"{_fate(row)})")
        code = EXIT_OK
    else:
        lines.append(f"verdict: {t} ABORTED ({row['outcome']}"
                     + (f" against {row['other_instant']}" if row["other_instant"] else "")
                     + "); answered from the attempt log")
        code = EXIT_WOULD_ABORT
    doc = {"table": ctx.table.base_uri, "instant": t, "on_timeline": False, "source": "attempt_log",
           "would_abort": row["outcome"] != attempt_log.COMMITTED, "attempt": row}
    return doc, "\n".join(lines), code
