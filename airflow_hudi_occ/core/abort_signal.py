"""An abort signal another process can raise for a running write.

The early-conflict sensor in Airflow (or an operator, or the CLI) learns that a running write
is doomed; it cannot reach into the Spark job, but it can leave a file. Writers check for it
before every marker and between Arrow batches, so even a long file stops early.

The signal is ``.hoodie/.aux/.abort/<instant>`` holding a JSON reason. It is advisory: the
commit-time conflict check stays the judge of correctness; the signal only saves work.
"""

from __future__ import annotations

import json
import time

from .errors import WriteAbortedError


def _path(table, instant_time: str) -> str:
    return table.storage.path(".hoodie", ".aux", ".abort", instant_time)


def raise_abort(table, instant_time: str, reason: str, *, source: str = "") -> None:
    body = json.dumps({"instant": instant_time, "reason": reason, "source": source,
                       "at_ms": int(time.time() * 1000)}).encode()
    try:
        table.storage.create_if_absent(_path(table, instant_time), body)
    except FileExistsError:
        pass  # already signalled; the first reason stands


def abort_reason(table, instant_time: str) -> dict | None:
    try:
        data = table.storage.read(_path(table, instant_time))
    except FileNotFoundError:
        return None
    try:
        return json.loads(data.decode() or "{}")
    except ValueError:
        return {"instant": instant_time, "reason": "abort requested (unreadable reason)"}


def check_abort(table, instant_time: str) -> None:
    info = abort_reason(table, instant_time)
    if info is not None:
        raise WriteAbortedError(f"write {instant_time} was asked to abort: {info.get('reason')}",
                                instant=instant_time, reason=info.get("reason"),
                                remedy="the write is doomed (usually an early conflict seen by a "
                                       "sensor); retry with a fresh instant time")


def clear_abort(table, instant_time: str) -> None:
    table.storage.delete(_path(table, instant_time))
