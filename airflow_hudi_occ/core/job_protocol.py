"""How a job talks to whoever runs it: exit codes, the prefixed JSON lines, ``K=V`` options.

One definition for both spark-submit jobs (writes and table services), the operators and hooks that read the job's output, and the ``hudi-occ``
CLI. The contract an orchestrator relies on:

- exit ``0`` done; ``75`` (EX_TEMPFAIL) a retryable conflict: retry as a fresh attempt; ``1``
  an error not worth retrying; ``2`` the command line itself is wrong; ``3`` (CLI only) a
  diagnosis that says the write would abort;
- ``HUDI_OCC_BEGIN {...}`` as soon as the instant is requested (instant, attempt, writer id,
  pid), so a watcher can follow the write before it ends;
- exactly one ``HUDI_OCC_RESULT {...}`` line last, whatever happened, usage errors included;
- SIGTERM to a Spark Connect client: it cancels its job on the server and rolls the instant
  back within :func:`stop_grace_s`, which is what its launcher waits before SIGKILL.

Between them a write job reports its progress for people, one plain line per step
(``hudi-occ <stage>: <text>``, :func:`emit_progress`): planning, tagging, the early conflict
checks, writing (bounded: at 25/50/75/100% of the write tasks, or every few seconds),
committing, and the end (committed, or stopped by whom). Nothing parses them but tests
(:func:`progress_stages`); their wording may change.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from typing import Any, Iterable, TextIO

from airflow_hudi_occ.core.errors import RetryableError

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_WOULD_ABORT = 3
EXIT_RETRYABLE = 75  # EX_TEMPFAIL (sysexits.h): "temporary failure, try again later"

#: The stop of a Spark Connect job (spark/jobgroup.py), in seconds: how long it keeps
#: cancelling until its action returns (normally well under a second), how often Spark's Python
#: runner looks whether its task was interrupted (``PythonRunner``'s monitor, fixed in Spark),
#: Spark's default ``spark.python.task.killTimeout``, a margin for the kill, and a bound for
#: the rollback after them (a few timeline files, the markers' files, the attempt record)
STOP_CANCEL_S = 20.0
MONITOR_POLL_S = 2.0
PYTHON_KILL_TIMEOUT_S = 2.0
KILL_MARGIN_S = 0.5
STOP_ROLLBACK_S = 10.0

RESULT_PREFIX = "HUDI_OCC_RESULT "
BEGIN_PREFIX = "HUDI_OCC_BEGIN "
PROGRESS_PREFIX = "hudi-occ "


def stop_grace_s(python_kill_timeout_s: float = PYTHON_KILL_TIMEOUT_S) -> float:
    """The longest a Spark Connect job stopped by SIGTERM takes to roll back: its cancel, the
    wait for the cancelled tasks' Python workers (``python_kill_timeout_s``: the server's
    ``spark.python.task.killTimeout``) and the rollback. Its launcher sends SIGKILL only after
    it: an earlier kill cuts the rollback short and leaves the instant to the next writer's
    lazy rollback once its heartbeat expired."""
    return STOP_CANCEL_S + MONITOR_POLL_S + python_kill_timeout_s + KILL_MARGIN_S + STOP_ROLLBACK_S


def emit(prefix: str, payload: dict, stream: TextIO | None = None) -> None:
    """Print one protocol line (flushing what the job printed before, so the line stays whole)."""
    stream = stream or sys.stdout
    stream.flush()
    print(prefix + json.dumps(payload, sort_keys=True, default=str), file=stream, flush=True)


def emit_result(payload: dict, stream: TextIO | None = None) -> None:
    emit(RESULT_PREFIX, payload, stream)


def emit_begin(payload: dict, stream: TextIO | None = None) -> None:
    emit(BEGIN_PREFIX, payload, stream)


def emit_progress(stage: str, text: str, stream: TextIO | None = None) -> None:
    """One progress line for people: ``hudi-occ <stage>: <text>`` (flushed at once)."""
    print(f"{PROGRESS_PREFIX}{stage}: {text}", file=stream or sys.stdout, flush=True)


def progress_stages(lines: str | Iterable[str]) -> list[str]:
    """The stages of the progress lines in a job's output, in order (repeats kept)."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    out = []
    for line in lines:
        if line.startswith(PROGRESS_PREFIX):
            stage, sep, _ = line[len(PROGRESS_PREFIX):].partition(":")
            if sep and stage and " " not in stage:
                out.append(stage)
    return out


def parse_line(line: str, prefix: str) -> dict | None:
    """The payload of ``line`` if it is a ``prefix`` line (leading log noise allowed)."""
    i = line.find(prefix)
    if i < 0:
        return None
    try:
        out = json.loads(line[i + len(prefix):])
    except ValueError:
        return None
    return out if isinstance(out, dict) else None


def last_payload(lines: str | Iterable[str], prefix: str = RESULT_PREFIX) -> dict | None:
    """The last ``prefix`` payload in a job's output (a string or an iterable of lines)."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    found = None
    for line in lines:
        payload = parse_line(line, prefix)
        if payload is not None:
            found = payload
    return found


def usage_result(message: str, remedy: str | None = None) -> dict:
    """The result line of a job whose command line was wrong."""
    return {"outcome": "error", "error": {"error": "UsageError", "message": message,
                                          "remedy": remedy or "fix the command line (--help lists it)"}}


class UsageError(Exception):
    """A wrong command line, with argparse's own words (``argument --operation: invalid
    choice: 'upsertt' ...``) rather than a bare exit status 2."""

    def __init__(self, message: str, usage: str = ""):
        self.message, self.usage = message, usage
        super().__init__(message)


class ArgumentParser(argparse.ArgumentParser):
    """argparse, except that a usage error raises :class:`UsageError` instead of printing to
    stderr and exiting 2: the job puts the message in its result line, where the operator
    (and the Airflow task's exception) can quote it."""

    def error(self, message: str):
        raise UsageError(f"{self.prog}: {message}", self.format_usage())


class OptionError(ValueError):
    """A malformed ``KEY=VALUE`` item; ``message`` says what, ``remedy`` how to write it."""

    def __init__(self, message: str, remedy: str):
        self.message, self.remedy = message, remedy
        super().__init__(f"{message}; {remedy}")


def parse_options(items: Iterable[str] | None, flag: str = "--option", *,
                  coerce: bool = False) -> dict[str, Any]:
    """``["k=v", ...]`` as a dict; ``coerce`` reads JSON values (numbers, booleans, objects).

    Raises :class:`OptionError` naming the flag and the bad item; callers turn it into their
    usage error.
    """
    out: dict[str, Any] = {}
    for item in items or ():
        key, sep, value = str(item).partition("=")
        key = key.strip()
        if not sep or not key:
            raise OptionError(f"{flag} expects KEY=VALUE, got {item!r}",
                              f"write it as {flag} some.key=value (no spaces around '=')")
        if coerce:
            value = _json_value(flag, key, value)
        out[key] = value
    return out


#: Python's spellings of JSON's literals: taken as strings they are all true ("False" too)
_PYTHON_LITERALS = {"True": "true", "False": "false", "None": "null"}


def _json_value(flag: str, key: str, text: str) -> Any:
    """``text`` read as JSON; a plain string stays a string (a region, a URL), but a value
    that was meant as JSON and is not (an object or list that does not parse, Python's
    ``True``/``False``/``None``) raises :class:`OptionError`: taken as a string it would reach
    the storage backend as one (s3fs then fails with ``'str' object has no attribute
    'copy'``, or takes ``anon=False`` as true)."""
    try:
        return json.loads(text)
    except ValueError as e:
        error = e
    stripped = text.strip()
    if stripped in _PYTHON_LITERALS:
        spelled = _PYTHON_LITERALS[stripped]
        raise OptionError(
            f"{flag} {key}={text}: {stripped} is Python's spelling, not JSON's; as a string it "
            "would be true", f"write {flag} {key}={spelled} (JSON), or {key}='\"{stripped}\"' "
            "if the string is meant")
    if stripped[:1] not in ("{", "["):
        return text
    try:
        example = json.dumps(ast.literal_eval(stripped))  # a Python dict or list: its JSON form
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        example = '{"name": "value"}' if stripped[:1] == "{" else '["value"]'
    raise OptionError(
        f"{flag} {key}={text}: the value is not valid JSON ({error})",
        f"write the value as JSON, with double quotes around keys and strings, and quote the "
        f"whole item for the shell: {flag} '{key}={example}'")


def format_options(options: dict[str, Any], flag: str = "--option") -> list[str]:
    """The command-line form of ``options``: ``[flag, "k=v", flag, "k=v", ...]`` (sorted)."""
    out: list[str] = []
    for k, v in sorted(options.items()):
        out += [flag, f"{k}={json.dumps(v) if isinstance(v, (dict, list)) else v}"]
    return out


def exit_code_for(error: BaseException) -> int:
    """The exit code a job returns for ``error``: 75 for a retryable conflict, else 1."""
    return EXIT_RETRYABLE if isinstance(error, RetryableError) else EXIT_ERROR


__all__ = ["EXIT_OK", "EXIT_ERROR", "EXIT_USAGE", "EXIT_WOULD_ABORT", "EXIT_RETRYABLE",
           "RESULT_PREFIX", "BEGIN_PREFIX", "PROGRESS_PREFIX", "OptionError", "emit", "emit_result", "emit_begin",
           "emit_progress", "progress_stages", "parse_line",
           "last_payload", "usage_result", "UsageError", "ArgumentParser", "parse_options", "format_options", "exit_code_for"]
