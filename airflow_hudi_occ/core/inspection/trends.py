"""Contention over a window of days: what conflicts cost, and who fights whom.

Why a read model of its own: the timeline page answers "what happened just now"; the next
question is "how much cluster time did conflicts cost this week, and which DAGs and file
groups fight most?". The answer lives in the attempt log only (``commit/attempt_log``): a
loser's instant is rolled back and gone from the timeline, and only its record keeps the
seconds and files it threw away, the file groups it lost on, the instant that beat it and
the Airflow task that made it. :func:`build_trends` folds those records into per-bucket
counts (per hour for a window of a day or two, per UTC day beyond; admission waits and their
seconds beside the conflicts, from the label the write operator sets), per-DAG and per-file-group
costs, who-beat-whom pairs, and request-to-commit latencies, as plain JSON.

Reach: the clean service keeps every record younger than ``attempt_log.RETAINED_MS`` (the
longest window offered here plus the lookback), so the windows the page offers are whole; a
longer window asked for by URL can reach further back than the log does. ``covered_from_ms``
says where the log starts and ``pruned`` what clean removed (None when it never removed a
record), so the page can say "clean pruned records before ..." only when one did.

Access: a caller that serves people who may read only some DAGs passes ``may_read``, a
predicate over ``dag_id`` (``None`` for attempts no DAG made: they are shown only to callers
for whom ``may_read(None)`` is true, i.e. users who may read every DAG). Attempts of other DAGs
are left out of every number, and a winner from a DAG the reader may not see is named as
hidden rather than by name. Pure Python over core; an unreadable record is skipped (the
attempt log already warns), so a damaged log degrades the numbers, never the page.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.format.instant_time import format_ms, parse_ms

DAY_MS = attempt_log.DAY_MS
HOUR_MS = 3_600_000
#: windows the page offers (the longest is the attempt log's retention, which clean honours);
#: any ``<n>d`` or ``<n>h`` up to :data:`MAX_WINDOW_MS` is accepted
WINDOWS = ("1d", "7d", f"{attempt_log.TRENDS_WINDOW_DAYS}d")
DEFAULT_WINDOW = "7d"
MAX_WINDOW_MS = 366 * DAY_MS
#: windows up to this long are bucketed per hour, longer ones per UTC day
HOURLY_UP_TO_MS = 2 * DAY_MS
#: how far before the window records are read: the instant that beat a loser, and the first
#: attempt of a batch retried inside the window, usually started a little earlier
LOOKBACK_MS = attempt_log.TRENDS_LOOKBACK_DAYS * DAY_MS
HOT_FILE_GROUPS = 15

#: an attempt that ended without committing threw its work away
_FAILED = (attempt_log.CONFLICT, attempt_log.ABORTED, attempt_log.ERROR, attempt_log.ROLLED_BACK)

MayRead = Callable[[str | None], bool]


@dataclass(frozen=True)
class Window:
    text: str
    ms: int

    @property
    def bucket_ms(self) -> int:
        return HOUR_MS if self.ms <= HOURLY_UP_TO_MS else DAY_MS


_WINDOW_RE = re.compile(r"^([1-9][0-9]{0,3})([dh])$")


def parse_window(text: str | None) -> Window:
    """``"7d"``, ``"36h"``: a bad value is the caller's input error, so it names what works."""
    text = (text or DEFAULT_WINDOW).strip().lower()
    m = _WINDOW_RE.match(text)
    ms = int(m.group(1)) * (DAY_MS if m.group(2) == "d" else HOUR_MS) if m else 0
    if not m or ms > MAX_WINDOW_MS:
        raise ConfigError(f"unknown window {text!r}", key="window", value=text,
                          remedy=f"use a number of days or hours up to 366d, e.g. {', '.join(WINDOWS)} or 12h")
    return Window(text, ms)


def _percentile(sorted_values: list[int], q: float) -> int | None:
    """Nearest rank: a latency someone actually waited, not an interpolation between two."""
    if not sorted_values:
        return None
    rank = max(1, -(-len(sorted_values) * q // 1))
    return sorted_values[int(rank) - 1]


def _latency(values: list[int]) -> dict[str, Any]:
    v = sorted(values)
    return {"count": len(v), "median_ms": _percentile(v, 0.5), "p95_ms": _percentile(v, 0.95),
            "max_ms": v[-1] if v else None}


def _start_ms(rec: attempt_log.AttemptRecord) -> int | None:
    try:
        return parse_ms(rec.instant)
    except ValueError:
        return rec.started_at_ms or None


def _admission_wait(rec: attempt_log.AttemptRecord) -> float:
    """The admission wait the write operator recorded in the attempt's labels (0: none)."""
    try:
        return max(0.0, float((rec.labels or {}).get("admission_wait_s") or 0.0))
    except ValueError:
        return 0.0


def _floor(ms: int, bucket_ms: int) -> int:
    return ms - ms % bucket_ms  # UTC: epoch milliseconds have no offset


def build_trends(table, *, window: str | Window | None = None, now: float | None = None,
                 may_read: MayRead | None = None, dag_id: str | None = None,
                 records: Iterable[attempt_log.AttemptRecord] | None = None,
                 hot_limit: int = HOT_FILE_GROUPS, name: str | None = None) -> dict[str, Any]:
    """The trends of ``table`` over ``window`` ending at ``now``, as plain JSON.

    ``dag_id`` narrows to one DAG (the caller checks the reader may see it: asking for a DAG
    one may not read is an authorisation error, not an empty answer). ``records`` replaces
    the table's attempt log (tests, or a caller that already read it).
    """
    win = window if isinstance(window, Window) else parse_window(window)
    now_ms = int((time.time() if now is None else now) * 1000)
    start_ms = now_ms - win.ms
    may_read = may_read or (lambda _dag: True)
    oldest = pruned = None
    if records is None:
        oldest = attempt_log.oldest_instant(table)
        pruned = attempt_log.read_pruned_summary(table)
        records = attempt_log.read_records(table, since=format_ms(max(start_ms - LOOKBACK_MS, 0)))

    readable: dict[str | None, bool] = {}

    def visible(dag: str | None) -> bool:
        if dag not in readable:
            readable[dag] = bool(may_read(dag))
        return readable[dag]

    by_instant: dict[str, attempt_log.AttemptRecord] = {}
    covered_from: int | None = None
    if oldest is not None:
        try:
            covered_from = parse_ms(oldest)
        except ValueError:
            pass
    for rec in records:
        by_instant[rec.instant] = rec
        t = _start_ms(rec)
        if t is not None:
            covered_from = t if covered_from is None else min(covered_from, t)

    # Batches first, over every readable record (the lookback included): a retry inside the
    # window is a retry even when its first attempt started the day before.
    batches: dict[str, list[attempt_log.AttemptRecord]] = {}
    for rec in by_instant.values():
        key = attempt_log.batch_of(rec)
        if key is not None and rec.outcome != attempt_log.RUNNING:
            batches.setdefault(key, []).append(rec)
    first_of: dict[str, str] = {}
    for members in batches.values():
        members.sort(key=lambda r: r.instant)
        for m in members:
            first_of[m.instant] = members[0].instant

    b_ms = win.bucket_ms
    buckets: dict[int, dict[str, Any]] = {}
    t = _floor(start_ms, b_ms)
    while t <= now_ms:
        buckets[t] = {"start_ms": t, "label": _bucket_label(t, b_ms), "attempts": 0, "committed": 0,
                      "conflicts": 0, "aborted": 0, "errors": 0, "retries": 0,
                      "seconds_discarded": 0.0, "files_discarded": 0, "waits": 0, "wait_seconds": 0.0}
        t += b_ms

    dags: dict[str | None, dict[str, Any]] = {}
    groups: dict[str, dict[str, Any]] = {}
    fights: dict[tuple, dict[str, Any]] = {}
    commit_ms: dict[str | None, list[int]] = {}
    batch_ms: dict[str | None, list[int]] = {}
    totals = {"attempts": 0, "committed": 0, "conflicts": 0, "aborted": 0, "errors": 0,
              "retries": 0, "seconds_discarded": 0.0, "files_discarded": 0, "waits": 0,
              "wait_seconds": 0.0}
    hidden = False

    for rec in sorted(by_instant.values(), key=lambda r: r.instant):
        t = _start_ms(rec)
        if t is None or not (start_ms <= t <= now_ms) or rec.outcome == attempt_log.RUNNING:
            continue  # a running attempt has cost nothing yet that anyone could act on
        dag = (rec.labels or {}).get("dag_id") or None
        if dag_id is not None and dag != dag_id:
            continue
        if not visible(dag):
            hidden = True
            continue
        failed = rec.outcome in _FAILED
        retry = rec.attempt > 1 or first_of.get(rec.instant, rec.instant) != rec.instant
        secs = float(rec.seconds_discarded or 0) if failed else 0.0
        files = int(rec.files_discarded or 0) if failed else 0
        counts = {"attempts": 1, "committed": int(rec.outcome == attempt_log.COMMITTED),
                  "conflicts": int(rec.outcome == attempt_log.CONFLICT),
                  "aborted": int(rec.outcome == attempt_log.ABORTED),
                  "errors": int(rec.outcome == attempt_log.ERROR), "retries": int(retry),
                  "seconds_discarded": secs, "files_discarded": files}
        waited = _admission_wait(rec)  # seconds the attempt waited before it was submitted
        counts["waits"], counts["wait_seconds"] = int(waited > 0), waited
        d = dags.setdefault(dag, {"dag_id": dag, **{k: 0 for k in totals}, "seconds_discarded": 0.0,
                                  "wait_seconds": 0.0, "tasks": set()})
        if (rec.labels or {}).get("task_id"):
            d["tasks"].add(rec.labels["task_id"])
        for target in (totals, d, buckets[_floor(t, b_ms)]):
            for k, v in counts.items():
                target[k] += v

        if rec.outcome == attempt_log.COMMITTED and rec.completion_time:
            try:
                commit_ms.setdefault(dag, []).append(parse_ms(rec.completion_time) - t)
                first = by_instant.get(first_of.get(rec.instant, rec.instant), rec)
                batch_ms.setdefault(dag, []).append(parse_ms(rec.completion_time) - (_start_ms(first) or t))
            except ValueError:
                pass
        if not failed:
            continue
        winner = by_instant.get(rec.other_instant) if rec.other_instant else None
        winner_dag = (winner.labels or {}).get("dag_id") if winner is not None else None
        winner_hidden = winner is not None and not visible(winner_dag or None)
        for fg in rec.file_groups or []:
            g = groups.setdefault(fg, {"file_group": fg, "partition": fg.rsplit("/", 1)[0] if "/" in fg else "",
                                       "conflicts": 0, "failed_attempts": 0, "seconds_discarded": 0.0,
                                       "files_discarded": 0, "dags": set(), "last_ms": 0})
            g["failed_attempts"] += 1
            g["conflicts"] += rec.outcome == attempt_log.CONFLICT
            g["seconds_discarded"] += secs
            g["files_discarded"] += files
            g["dags"].add(dag or "")
            if winner is not None and not winner_hidden and winner_dag:
                g["dags"].add(winner_dag)
            g["last_ms"] = max(g["last_ms"], t)
        if rec.outcome == attempt_log.CONFLICT:
            # winner_dag None and not hidden: the winner is unknown (no record: pruned, or a
            # writer that keeps none, such as Java Hudi)
            key = (dag, None if winner_hidden else winner_dag, winner_hidden)
            f = fights.setdefault(key, {"loser_dag": dag, "winner_dag": key[1], "winner_hidden": winner_hidden,
                                        "conflicts": 0, "seconds_discarded": 0.0})
            f["conflicts"] += 1
            f["seconds_discarded"] += secs

    for d in dags.values():
        d["tasks"] = sorted(d["tasks"])
        d["seconds_discarded"] = round(d["seconds_discarded"], 3)
        d["commit_latency"] = _latency(commit_ms.get(d["dag_id"], []))
        d["batch_latency"] = _latency(batch_ms.get(d["dag_id"], []))
    for g in groups.values():
        g["dags"] = sorted(x for x in g["dags"] if x)
        g["seconds_discarded"] = round(g["seconds_discarded"], 3)
    for b in buckets.values():
        b["seconds_discarded"] = round(b["seconds_discarded"], 3)
    for f in fights.values():
        f["seconds_discarded"] = round(f["seconds_discarded"], 3)
    totals["seconds_discarded"] = round(totals["seconds_discarded"], 3)
    totals["wait_seconds"] = round(totals["wait_seconds"], 3)
    for d in dags.values():
        d["wait_seconds"] = round(d["wait_seconds"], 3)
    hot = sorted(groups.values(), key=lambda g: (-g["conflicts"], -g["seconds_discarded"], g["file_group"]))
    return {
        "table": {"name": name or getattr(table, "name", None)},
        "window": {"text": win.text, "ms": win.ms, "start_ms": start_ms, "end_ms": now_ms,
                   "bucket": "hour" if b_ms == HOUR_MS else "day", "bucket_ms": b_ms},
        "dag_id": dag_id,
        "filtered": hidden,
        "covered_from_ms": covered_from,
        "pruned": _pruned_doc(pruned),
        "totals": totals,
        "buckets": [buckets[k] for k in sorted(buckets)],
        "dags": sorted(dags.values(), key=lambda d: (-d["seconds_discarded"], -d["conflicts"],
                                                      d["dag_id"] or "")),
        "file_groups": hot[:hot_limit],
        "file_groups_total": len(hot),
        "fights": sorted(fights.values(), key=lambda f: (-f["conflicts"], f["loser_dag"] or "",
                                                          f["winner_dag"] or "")),
    }


def _pruned_doc(summary: dict | None) -> dict[str, Any] | None:
    """What clean pruned, for the page's note: how many records, and the newest one's time
    (records older than it may be missing from a window that reaches back that far)."""
    if not summary or not summary.get("count"):
        return None
    newest = summary.get("newest_instant")
    try:
        newest_ms = parse_ms(newest) if newest else None
    except ValueError:
        newest_ms = None
    return {"count": int(summary["count"]), "by_outcome": dict(summary.get("by_outcome") or {}),
            "newest_ms": newest_ms, "last_clean": summary.get("last_clean"),
            "retained_days": attempt_log.RETAINED_MS // DAY_MS}


def _bucket_label(start_ms: int, bucket_ms: int) -> str:
    t = time.gmtime(start_ms / 1000)
    return time.strftime("%Y-%m-%d" if bucket_ms >= DAY_MS else "%m-%d %H:00", t)
