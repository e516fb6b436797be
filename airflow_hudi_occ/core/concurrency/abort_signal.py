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

from airflow_hudi_occ.core.errors import EarlyConflictError, WriteAbortedError, WriteConflictError, from_dict


def abort_path(table, instant_time: str) -> str:
    """Where the signal of ``instant_time`` lives (its writer deletes it with its heartbeat)."""
    return table.storage.path(".hoodie", ".aux", ".abort", instant_time)


def raise_abort(table, instant_time: str, reason: str, *, source: str = "") -> None:
    body = json.dumps({"instant": instant_time, "reason": reason, "source": source,
                       "at_ms": int(time.time() * 1000)}).encode()
    try:
        table.storage.create_if_absent(abort_path(table, instant_time), body)
    except FileExistsError:
        pass  # already signalled; the first reason stands


def abort_reason(table, instant_time: str) -> dict | None:
    try:
        data = table.storage.read(abort_path(table, instant_time))
    except FileNotFoundError:
        return None
    try:
        return json.loads(data.decode() or "{}")
    except ValueError:
        return {"instant": instant_time, "reason": "abort requested (unreadable reason)"}


def error_for(instant_time: str, info: dict):
    """The error a stopped write reports for a signal. A reason that is a JSON error document
    (written by an executor, the driver's checker or the Airflow trigger) naming a conflict
    becomes an :class:`EarlyConflictError` with the other instant and the file groups, so every
    engine reports a signalled conflict as the conflict it is."""
    reason = info.get("reason")
    try:
        d = json.loads(reason) if isinstance(reason, str) else None
    except ValueError:
        d = None
    sent = from_dict(d) if isinstance(d, dict) else None
    if isinstance(sent, WriteConflictError):
        return EarlyConflictError(instant=instant_time, other_instant=getattr(sent, "other_instant", None) or "",
                                  file_groups=getattr(sent, "file_groups", None) or [],
                                  other_action=getattr(sent, "other_action", None),
                                  strategy=getattr(sent, "strategy", None))
    if isinstance(d, dict) and d.get("error"):
        return WriteAbortedError(f"write {instant_time} stopped: {d.get('message')}",
                                 instant=instant_time, reason=d.get("error"))
    return WriteAbortedError(f"write {instant_time} was asked to abort: {reason}",
                             instant=instant_time, reason=None if reason is None else str(reason),
                             remedy="the write is doomed (usually an early conflict seen by a "
                                    "sensor); retry with a fresh instant time")


def _from_signal(err):
    """Mark an error as raised by the signal: whoever catches it must not raise the signal
    again (the driver may have cleared it by then, see spark/executor.py)."""
    err.from_signal = True
    return err


def raised_by_signal(err: BaseException) -> bool:
    """Whether ``err`` came from this signal (:func:`check_abort`, :func:`remove_if_aborted`)."""
    return getattr(err, "from_signal", False)


def check_abort(table, instant_time: str, *, read=None) -> None:
    """Raise the signal's error (:func:`error_for`), marked as :func:`raised_by_signal`.
    ``read``: an :func:`abort_reason` started earlier (``Storage.ahead``), taken instead of
    reading the signal again."""
    info = read.result() if read is not None else abort_reason(table, instant_time)
    if info is not None:
        raise _from_signal(error_for(instant_time, info))


def remove_if_aborted(table, instant_time: str, path: str, rel: str) -> None:
    """Called right after a file is created: if the write was aborted meanwhile (its signal is
    up) or rolled back (its instant has left the timeline), remove the file and stop.

    Closes the race with a driver that cancelled and rolled back while the file was written:
    its rollback listed the files before this one existed, and it clears the signal once done,
    while a cancelled task may still be running then (Spark 4 ends a cancelled task by closing
    its Python worker's socket, not by killing the worker, which finishes the file in hand: a
    Spark Connect client stopped by SIGTERM saw one appear 0.3 s after its rollback). A file
    made before the instant left the timeline is in the listing of the driver's sweep after
    its rollback (``spark.writer.sweep_failed_base_files``); one made after is seen here. One
    timeline listing per file written."""
    if abort_reason(table, instant_time) is not None:
        why = "aborted"
    elif table.timeline().get(instant_time) is None:
        why = "rolled back"
    else:
        return
    table.storage.delete(path)
    raise _from_signal(WriteAbortedError(f"write {instant_time} {why} while writing {rel}",
                                         instant=instant_time, reason=why))


def clear_abort(table, instant_time: str) -> None:
    table.storage.delete(abort_path(table, instant_time))
