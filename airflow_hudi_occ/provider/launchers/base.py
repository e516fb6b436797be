"""What the attempt loop asks of a launcher: the interface, and what the engine's own launchers
share (the job's command line, the writer id, reading a detached job's end from the table).

Why an interface: the OCC machinery around a write (admission, write windows, conflict retries
on fresh instants, deferral, the attempt record, the outcome decided from the table) is the
same whoever starts the job (``provider/attempt_loop.py``). A launcher only knows how to start
one attempt's job and how to read what it did:

- :meth:`Launcher.run_attempt`: start attempt ``n`` and wait for its end, on the worker
  (``deferrable=False``); the job's exit code, its BEGIN payload, its result, the seconds;
- :meth:`Launcher.start`: start it and return at once with a
  :class:`~airflow_hudi_occ.provider.deferred_job.DetachedJob` for ``HudiWriteJobTrigger``
  (``deferrable=True``), plus what the launcher keeps for :meth:`Launcher.outcome` (JSON: it
  travels with the deferral);
- :meth:`Launcher.outcome`: the deferred attempt's ``(status, exit code, result)`` from the
  trigger's event (the engine's job: the event already is the table's answer);
- :meth:`Launcher.check_arguments` (DAG parse time), :meth:`Launcher.check_options` (the
  complete options, once per task run), :meth:`Launcher.create_for_first_write` (a table's
  first write is admitted like any other), :meth:`Launcher.kill`.

The Spark Connect launcher (``connect.py``) plugged in the same way, with no change to the
loop: it runs ``python -m airflow_hudi_occ.spark.job`` + :func:`job_arguments` as a client
process (``SPARK_REMOTE`` in its environment; the provider never imports the engine or
pyspark) and reads its lines as :class:`SparkSubmitLauncher` does; detached through
``deferred_job.start_command``.

Errors: launchers raise :class:`~airflow_hudi_occ.core.errors.HudiOccError` (a
``ConfigError`` naming the argument) for what the user must fix; the loop turns it into the
task's failure.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Sequence

from airflow_hudi_occ.core.commit.attempt_log import LABELS_OPTION
from airflow_hudi_occ.core.concurrency import admission as core_admission
from airflow_hudi_occ.core.concurrency.footprint import REQUEST_LABEL
from airflow_hudi_occ.core.errors import TableNotFoundError
from airflow_hudi_occ.core.job_protocol import format_options
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider import deferred_job
from airflow_hudi_occ.provider.arguments import check_engine_write_arguments

if TYPE_CHECKING:
    from airflow_hudi_occ.provider.attempt_loop import WriteRun
    from airflow_hudi_occ.provider.hooks.hudi_occ import HudiOccHook
    from airflow_hudi_occ.spark.submit.options import SparkWriteOptions


class Launched(NamedTuple):
    """One synchronous attempt as the loop records it."""

    code: int
    began: dict
    result: dict
    seconds: float


class Launcher:
    """The base: what every launcher of the engine's job (``spark/job.py``) does alike.

    :param poll_interval: seconds between the trigger's looks at a deferred job
    :param instant_wait_s: how long the worker waits for a deferred attempt's instant before it
        defers (to push it to XCom first); the trigger finds it if it comes later
    """

    #: attributes Airflow renders (the operator lists the launcher among its template fields)
    template_fields: Sequence[str] = ()
    #: whether the write names its input (``source``, ``source_format``, ``operation``)
    takes_source = True

    def __init__(self, *, poll_interval: float = 5.0, instant_wait_s: float = 60.0):
        self.poll_interval = poll_interval
        self.instant_wait_s = instant_wait_s
        self.killed = False
        self.log: logging.Logger | Any = logging.getLogger(__name__)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={getattr(self, k, None)!r}" for k in self.template_fields)
        return f"{type(self).__name__}({shown})"

    # -- parse time ------------------------------------------------------------------------------

    def check_arguments(self, task_id: str, *, source: Any, source_format: Any, operation: Any,
                        options: Any) -> None:
        """The operator's arguments as this launcher's job reads them; a ``ConfigError`` makes
        the DAG file's import error."""
        check_engine_write_arguments(task_id, operation=operation, source=source,
                                     source_format=source_format, options=options)

    # -- once per task run -----------------------------------------------------------------------

    def attach(self, task, context) -> None:
        """The task this launcher runs for (its log; a launcher may read the context)."""
        self.log = task.log
        self.killed = False

    def check_options(self, hook: "HudiOccHook", options: dict) -> "SparkWriteOptions | None":
        """The complete options (connection and operator) checked once, as the engine reads them;
        every later step reads the result."""
        from airflow_hudi_occ.spark.submit.options import SparkWriteOptions
        return SparkWriteOptions.from_options(options, warn=hook.log.warning)

    def create_for_first_write(self, run: "WriteRun") -> Table | None:
        """A table's first write creates the table before admission, as its job would
        (``spark/submit/table_creation``, create-if-absent), so that its first writers find each
        other's requests and wait instead of racing (docs/concurrency.md, "A table's first
        write"). None when the job would refuse the write anyway (no record key, no source: it
        says so in its own words), leaving the location untouched."""
        from airflow_hudi_occ.core.errors import SourceNotFoundError
        from airflow_hudi_occ.spark.submit.source import check_source
        from airflow_hudi_occ.spark.submit.table_creation import open_or_create_table
        try:
            check_source(run.source, run.source_format, run.storage_options)
        except SourceNotFoundError:
            return None
        opts = run.checked.with_operation(run.operation).check_writable()
        if not opts.record_key_fields:
            return None
        self.check_reachable(run)
        table = open_or_create_table(run.table_path, opts, run.storage_options or None)
        self.log.info("table %s (%s) made before its first write (or found made by a rival): its "
                      "first writers are admitted one at a time", table.name, table.base_uri)
        return table

    def check_reachable(self, run: "WriteRun") -> None:
        """Before a first write makes the table: a write that cannot be submitted makes nothing."""

    # -- one attempt -----------------------------------------------------------------------------

    def run_attempt(self, run: "WriteRun", n: int, on_began: Callable[[dict], None]) -> Launched:
        """Attempt ``n`` to its end on the worker; ``on_began(payload)`` once its instant is known."""
        raise NotImplementedError

    def start(self, run: "WriteRun", n: int) -> tuple[deferred_job.DetachedJob, dict]:
        """Attempt ``n`` started for the trigger to follow; what :meth:`outcome` needs later."""
        raise NotImplementedError

    def wait_for_instant(self, run: "WriteRun", job: deferred_job.DetachedJob) -> str | None:
        """The attempt's instant, waited for (the job's start) so that XCom has it before the
        worker lets go; None if it takes longer than ``instant_wait_s`` (the trigger finds it)."""
        deadline = time.time() + self.instant_wait_s
        while time.time() < deadline and not self.killed:
            try:
                instant = deferred_job.find_instant(Table.open(run.table_path, run.storage_options or None), job)
            except TableNotFoundError:
                instant = (job.began() or {}).get("instant")
            if instant or job.alive() is False:
                return instant
            time.sleep(0.5)
        return None

    def on_running(self, run: "WriteRun", job: deferred_job.DetachedJob, n: int) -> None:
        """After the loop published the deferred attempt's instant (XCom, link)."""

    def outcome(self, run: "WriteRun", n: int, event: dict, seconds: float,
                kept: dict) -> tuple[str | None, int, dict]:
        """``(status, exit code, result)`` of deferred attempt ``n`` from the trigger's event:
        the engine's job reports through the table and its attempt log, which the trigger read."""
        return event.get("status"), deferred_job.exit_code_for(event), result_of_event(event)

    def kill(self) -> None:
        """End the running attempt's job (``on_kill``); the loop stops retrying."""
        self.killed = True


# -- the engine's job: its command line ---------------------------------------------------------


def writer_id(run: "WriteRun", n: int) -> str:
    """Attempt ``n``'s writer id: the job's records carry it, the trigger finds them by it."""
    lab = run.labels
    return (f"airflow:{lab['dag_id']}.{lab['task_id']}.{lab['map_index']}:{lab['run_id']}:"
            f"try{lab['try_number']}:attempt{n}")


def attempt_options(run: "WriteRun", n: int) -> dict:
    """The write options of attempt ``n``: its admission wait (seconds, whom for) joins its
    labels, so the table's attempt log keeps it: the trends count waits beside conflicts, the
    timeline page says whom each attempt waited for."""
    wait = next((w for w in run.waits if w.get("attempt") == n), None)
    if wait is None and not run.request_id:
        return run.options
    labels = dict(run.labels)
    if wait is not None:
        labels.update(core_admission.wait_labels(wait["seconds"], wait.get("waited_for") or []))
    if run.request_id:  # declared in the instant's footprint: admission finds its reach
        labels[REQUEST_LABEL] = run.request_id
    return {**run.options, LABELS_OPTION: json.dumps(labels, sort_keys=True)}


def job_arguments(run: "WriteRun", n: int, options: dict | None = None) -> list[str]:
    """Attempt ``n``'s arguments to the engine's job (``spark/job.py``): what to write, where,
    its batch key and attempt, and its options (``options``: these instead of the attempt's)."""
    args = ["--table", run.table_path, "--operation", run.operation, "--source", run.source,
            "--source-format", run.source_format, "--attempt", str(n), "--batch-key", run.batch_key,
            # every attempt looked the key up (committed_instant) just before it was launched
            "--batch-checked"]
    if run.checkpoint:
        args += ["--checkpoint", str(run.checkpoint)]
    return args + format_options(attempt_options(run, n) if options is None else options)


def result_of_event(event: dict) -> dict:
    """The trigger's event in the shape of the job's result line, for the loop's record and
    decision."""
    status = event.get("status")
    drop = ("status", "writer_id", "exit_code", "error", "message", "remedy")
    out = {k: v for k, v in event.items() if k not in drop}
    if status in (deferred_job.COMMITTED, deferred_job.ALREADY_COMMITTED):
        out["outcome"] = event.get("outcome") or status
        return out
    out["outcome"] = "conflict" if status == deferred_job.CONFLICT else "error"
    err = event.get("error")
    out["error"] = err if isinstance(err, dict) else {
        "error": err or status, "message": event.get("message"), "remedy": event.get("remedy")}
    return out
