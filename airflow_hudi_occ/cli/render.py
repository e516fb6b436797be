"""Plain-text rendering: padded columns that survive grep and pasting into a ticket."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterable, Sequence


def iso_time(epoch_s: float | None) -> str | None:
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


def duration_text(ms: int | None) -> str | None:
    if ms is None:
        return None
    if ms < 60_000:
        return f"{ms / 1000:.3f}s"
    return f"{ms // 60_000}m{(ms % 60_000) / 1000:06.3f}s"
