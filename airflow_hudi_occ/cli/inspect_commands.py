"""The read-only subcommands: show, timeline, file-groups, writers, markers."""

from __future__ import annotations

from typing import Any

from airflow_hudi_occ.core.services.compaction import deltacommits_since_compaction, show_compaction
from airflow_hudi_occ.core.table.table import MERGE_ON_READ
from airflow_hudi_occ.core.table.history import TimelineHistory
from airflow_hudi_occ.cli.context import (Context, Result, UsageError, instant_time_arg, limit_arg,
                                          require_instant)
from airflow_hudi_occ.cli.render import duration_text, iso_time, render_table
from airflow_hudi_occ.core.concurrency.abort_signal import abort_reason
from airflow_hudi_occ.core.concurrency.locks import table_lock_holder
from airflow_hudi_occ.core.errors import LockError, LockServiceUnreachableError
from airflow_hudi_occ.core.concurrency.heartbeat import heartbeat_age_s, is_expired, list_heartbeats
from airflow_hudi_occ.core.concurrency.markers.folder import list_marker_instants, read_marker_type
from airflow_hudi_occ.core.concurrency.markers.write_markers import markers_for
from airflow_hudi_occ.core.format.instant import Instant, State
from airflow_hudi_occ.core.format.layout import FileGroupId, file_group_names
from airflow_hudi_occ.core.inspection.diagnose import heartbeat_doc
from airflow_hudi_occ.core.inspection.timeline_view import describe_instant, rollbacks_by_target
from airflow_hudi_occ.core.job_protocol import EXIT_OK
from airflow_hudi_occ.core.table.file_system_view import FileSystemView, list_partitions
from airflow_hudi_occ.core.table.mor_reader import ReadBound, merge_file_slices


def _metadata_table_line(m: dict) -> str:
    if m["enabled"] and m.get("unmaintained_partitions"):
        return (f"enabled ({', '.join(m['partitions'] + m['inflight_partitions'])}); this project's "
                f"writers refuse the table: {', '.join(m['unmaintained_partitions'])} would be lost "
                "(drop them in Java, or hoodie.metadata.enable=false with "
                "hoodie.occ.metadata.delete.unmaintained=true, which removes the metadata table)")
    if m["enabled"]:
        return (f"enabled ({', '.join(m['partitions'] + m['inflight_partitions'])}); this project's "
                "writers refuse the table unless hoodie.metadata.enable=false, which removes it")
    if m["folder_exists"]:
        return "none (a .hoodie/metadata folder is left over; no reader uses it)"
    return "none"


def writer_status(ctx: Context, inst: Instant, rolled_back_by: dict[str, str]) -> dict[str, Any]:
    age = heartbeat_age_s(ctx.table, inst.requested_time, now=ctx.now)
    expired = is_expired(ctx.table, inst.requested_time, ctx.config.heartbeat, now=ctx.now)
    abort = abort_reason(ctx.table, inst.requested_time)
    return {
        "instant": inst.requested_time, "action": inst.action.value, "state": inst.state.value,
        "is_table_service": inst.is_table_service or ctx.timeline.is_clustering(inst),
        "heartbeat_age_s": None if age is None else round(age, 3),
        "last_beat": iso_time(None if age is None else ctx.now - age),
        "alive": not expired,
        "status": "missing" if age is None else ("expired" if expired else "alive"),
        "markers": len(markers_for(ctx.table, inst.requested_time).all_markers()),
        "being_rolled_back_by": rolled_back_by.get(inst.requested_time),
        "abort_requested": abort.get("reason") if abort else None,
    }


def lock_status(ctx: Context) -> dict[str, Any]:
    """The table lock's holder, as the configured provider (``--option
    hoodie.write.lock.provider=...``) sees it; a lock service that does not answer is reported,
    not raised: the rest of the page is still worth printing."""
    doc: dict[str, Any] = {"provider": ctx.config.lock.provider, "held": None, "holder": None,
                           "error": None}
    try:
        holder = table_lock_holder(ctx.table, ctx.config)
    except (LockServiceUnreachableError, LockError) as e:  # unreachable, or not visible from here
        doc["error"] = e.message
        return doc
    doc["held"] = holder is not None
    doc["holder"] = holder.to_dict(ctx.now) if holder is not None else None
    if holder is not None:
        doc["description"] = holder.describe(ctx.now)
    return doc


def _lock_line(lock: dict[str, Any]) -> str:
    if lock["error"]:
        return f"lock         {lock['provider']}: unknown ({lock['error']})"
    if not lock["held"]:
        return f"lock         {lock['provider']}: free"
    line = (f"lock         {lock['provider']}: held by {lock['description']} "
            f"(owner {lock['holder']['owner']})")
    if lock["holder"].get("stale"):
        line += f"; stale: {lock['holder']['stale']}, so the next writer takes it over"
    return line


def cmd_timeline(ctx: Context) -> Result:
    limit = limit_arg(ctx.args.limit, "instants", "last")
    rows = [describe_instant(ctx.timeline, i) for i in ctx.timeline]
    if ctx.args.state:
        rows = [r for r in rows if r["state"] == ctx.args.state]
    if limit is not None:
        rows = rows[-limit:]
    doc = {"table": ctx.table.base_uri, "version": ctx.table.version, "instants": rows}
    text = render_table(
        ["REQUESTED", "ACTION", "STATE", "COMPLETED", "DURATION", "OPERATION", "FGS", "WRITER",
         "ATTEMPT", "CHECKPOINT", "NOTE"],
        [[r["requested_time"], r["action"], r["state"], r["completion_time"],
          duration_text(r["duration_ms"]), r["operation_type"],
          None if r["file_groups"] is None else len(r["file_groups"]),
          r["writer_id"], r["attempt"], r["checkpoint"],
          f"rolled back {','.join(r['rolled_back'])}" if r["rolled_back"] else None]
         for r in rows], empty="no instants")
    return doc, text, EXIT_OK


def cmd_file_groups(ctx: Context) -> Result:
    as_of = instant_time_arg(ctx.args.as_of, "--as-of") if ctx.args.as_of else None
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
    mor = ctx.table.config.table_type == MERGE_ON_READ
    # merge-on-read: the log files each slice reads as of that time (completion-time slicing)
    logs = ({fs.file_group: [lf.name for lf in fs.log_files]
             for fs in merge_file_slices(ctx.table, view, ReadBound(as_of=as_of))} if mor else {})
    rows = []
    for s in slices:
        inst = ctx.timeline.get(s.instant_time)
        row = {**s.to_json(), "file_group": str(FileGroupId(s.partition, s.file_id)),
               "completion_time": inst.completion_time if inst is not None else None}
        if mor:
            row["log_files"] = logs.get(s.file_group, [])
        rows.append(row)
    doc = {"table": ctx.table.base_uri, "as_of": as_of, "partition": ctx.args.partition,
           "count": len(rows), "file_groups": rows}
    text = render_table(["PARTITION", "FILE_ID", "INSTANT", "COMPLETED", "PATH"] + (["LOGS"] if mor else []),
                        [[r["partition"] or "(none)", r["file_id"], r["instant_time"],
                          r["completion_time"], r["path"]] + ([len(r["log_files"])] if mor else [])
                         for r in rows], empty="no file groups")
    text += f"\n{len(rows)} file groups" + (f" as of {as_of}" if as_of else "")
    return doc, text, EXIT_OK


def cmd_writers(ctx: Context) -> Result:
    by = rollbacks_by_target(ctx.timeline)
    writers = [writer_status(ctx, i, by) for i in ctx.timeline.pending_writes()]
    pending = {i.requested_time for i in ctx.timeline.pending()}
    orphans = [t for t in list_heartbeats(ctx.table) if t not in pending]
    lock = lock_status(ctx)
    doc = {"table": ctx.table.base_uri, "now": iso_time(ctx.now), "heartbeat": heartbeat_doc(ctx.config),
           "writers": writers, "orphan_heartbeats": orphans, "lock": lock}
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
    text += "\n" + _lock_line(lock)
    return doc, text, EXIT_OK


def _markers_doc(ctx: Context, t: str) -> dict[str, Any]:
    inst = ctx.timeline.get(t)
    mtype = read_marker_type(ctx.table, t)
    markers = markers_for(ctx.table, t, mtype).all_markers()
    return {
        "instant": t, "state": inst.state.value if inst is not None else None,
        "marker_type": (mtype.value if mtype is not None else "DIRECT"), "count": len(markers),
        "file_groups": file_group_names({m.file_group for m in markers}),
        "markers": [{"partition": m.partition, "file_id": m.file_id,
                     "data_file_name": m.data_file_name, "io_type": m.io_type.value,
                     "path": m.relative_path} for m in markers],
    }


def cmd_markers(ctx: Context) -> Result:
    present = list_marker_instants(ctx.table)
    if ctx.args.instant:
        t = instant_time_arg(ctx.args.instant)
        if t not in present:
            require_instant(ctx, t)  # unknown instant: an error; known without markers: empty
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


def _history_doc(table) -> dict:
    """What archival moved to the LSM history (times only; the metadata stays unread)."""
    history = TimelineHistory(table)
    files = history.files()
    times = sorted(history.instant_times()) if files else []
    return {"snapshot": history.latest_version(), "files": len(files), "instants": len(times),
            "earliest": times[0] if times else None, "latest": times[-1] if times else None}


def cmd_show(ctx: Context) -> Result:
    tl = ctx.timeline
    by_state: dict[str, int] = {s.value: 0 for s in State}
    by_action: dict[str, int] = {}
    for inst in tl:
        by_state[inst.state.value] += 1
        by_action[inst.action.value] = by_action.get(inst.action.value, 0) + 1
    done = tl.completed_by_completion_time()
    latest = describe_instant(tl, done[-1]) if done else None
    view = FileSystemView(ctx.table, tl)
    slices = view.latest_file_slices()
    # a metadata table that is another table's (core/table/metadata_trust.py): listed from storage
    foreign = list(getattr(view.listing, "foreign", ()))
    per_part: dict[str, int] = {}
    for s in slices:
        per_part[s.partition] = per_part.get(s.partition, 0) + 1
    by = rollbacks_by_target(tl)
    writers = [writer_status(ctx, i, by) for i in tl.pending_writes()]
    doc = {
        "table": {**ctx.table.describe(), "properties": dict(sorted(ctx.table.config.properties.items())),
                  "metadata_table_foreign_instants": foreign},
        "instants": {"total": len(tl), "by_state": by_state, "by_action": dict(sorted(by_action.items())),
                     "latest_completed": latest},
        "file_groups": {"total": len(slices), "partitions": len(per_part),
                        "by_partition": dict(sorted(per_part.items()))},
        "writers": {"pending": len(writers), "alive": sum(w["alive"] for w in writers),
                    "expired": sum(not w["alive"] for w in writers),
                    "heartbeat": heartbeat_doc(ctx.config), "instants": writers},
        "marker_instants": list_marker_instants(ctx.table),
        "history": _history_doc(ctx.table),
        "lock": lock_status(ctx),
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
        f"metadata table: {_metadata_table_line(d['metadata_table'])}"
        + (f"; NOT this table's: it holds deltacommits of {len(foreign)} instant(s) this table never had "
           f"({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}), so readers list the storage "
           "and writers refuse it (a write with hoodie.metadata.enable=false removes it)" if foreign else ""),
        "archived     " + (f"{doc['history']['instants']} instants, {doc['history']['earliest']} .. "
                            f"{doc['history']['latest']} in {doc['history']['files']} files "
                            f"(snapshot {doc['history']['snapshot']})" if doc['history']['instants']
                            else "none"),
        f"writers      {len(writers)} pending: {doc['writers']['alive']} alive, "
        f"{doc['writers']['expired']} expired (expiry {ctx.config.heartbeat.expiry_ms} ms)",
        _lock_line(doc["lock"]),
    ]
    if ctx.table.config.table_type == MERGE_ON_READ:
        # compaction: what is scheduled, whether an executor runs it, and how much waits for it
        n, _ = deltacommits_since_compaction(tl)
        plans = show_compaction(ctx.table, ctx.options)
        doc["compaction"] = {"pending": plans, "deltacommits_since_last": n}
        lines.append(f"compaction   {len(plans)} pending"
                     + "".join(f"; {p['instant']} {p['state']}"
                               + (" (executor alive)" if p["executor_alive"] else "")
                               + f", {len(p['file_groups'])} file groups" for p in plans)
                     + f"; {n} deltacommits since the last compaction")
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
