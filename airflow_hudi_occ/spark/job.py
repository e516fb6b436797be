"""The spark-submit entry point: one write of one batch, with an exit code an orchestrator reads.

::

    spark-submit --master local[2] airflow_hudi_occ/spark/job.py --table PATH --operation upsert \
        --source PATH_OR_SQL --source-format parquet|csv|json|sql --option k=v ...
    python -m airflow_hudi_occ.spark.job ...          (the same, with a local session)
    python -m airflow_hudi_occ.spark.job --remote sc://HOST:15002 ...   (a Spark Connect client)

Exit codes: ``0`` committed (``"outcome"``: ``committed``; ``already_committed`` when the
``--batch-key`` is already in a completed instant, named by ``"instant"``, and nothing new was
written; ``recommitted`` when a dead writer's staged instant of the batch was completed
without rewriting its files, see core/recovery.py); ``75`` (EX_TEMPFAIL) a retryable conflict
(write conflict, early conflict, abort signal, lock timeout): retry with a fresh attempt;
``1`` anything else (bad options, schema refused, a failed job): do not retry; ``2`` bad
command-line usage (all as :mod:`airflow_hudi_occ.core.job_protocol` defines them). A
``HUDI_OCC_BEGIN`` line names the instant once it is requested. The last ``HUDI_OCC_RESULT``
line is ONE JSON object with
the instant, the attempt, the write stats summary, and on a conflict the other instant, the
file groups, the seconds of work discarded, the base files the doomed attempt had written
(``files_written``) of the file groups it planned (``file_groups_planned``), and whether the
driver cancelled the running Spark job (``job_cancelled``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

if __package__ in (None, ""):  # run as a file by spark-submit: make the package importable
    sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

from airflow_hudi_occ.core.errors import HudiOccError, RetryableError, TableNotFoundError  # noqa: E402
from airflow_hudi_occ.core.format.storage import Storage  # noqa: E402
from airflow_hudi_occ.core.job_secrets import read_job_secrets  # noqa: E402
from airflow_hudi_occ.core.table.table import Table, check_new_table_location  # noqa: E402
from airflow_hudi_occ.core.table.write_guard import check_for_write  # noqa: E402
from airflow_hudi_occ.spark.submit.options import SparkWriteOptions  # noqa: E402
from airflow_hudi_occ.core.config import OPERATIONS  # noqa: E402
from airflow_hudi_occ.spark.source import read_source  # noqa: E402
from airflow_hudi_occ.spark.submit.source import SOURCE_FORMATS, check_source  # noqa: E402
from airflow_hudi_occ.core.job_protocol import (EXIT_OK, EXIT_USAGE, ArgumentParser,  # noqa: E402
                                                UsageError, emit_begin, emit_progress, emit_result,
                                                exit_code_for,
                                                parse_options, usage_result)

#: what a lost write reports beyond the instants and file groups: how far the doomed attempt got
WRITE_CONFLICT_DETAILS = ("files_discarded", "files_written", "file_groups_planned")


def parse_args(argv=None) -> argparse.Namespace:
    p = ArgumentParser(prog="airflow_hudi_occ.spark.job", description=__doc__.split("\n")[0])
    p.add_argument("--table", required=True, help="base path of the Hudi table")
    p.add_argument("--operation", default="upsert", choices=list(OPERATIONS))
    p.add_argument("--source", required=True, help="input path, or a SQL query with --source-format sql")
    p.add_argument("--source-format", default="parquet", choices=list(SOURCE_FORMATS))
    p.add_argument("--option", action="append", default=[], metavar="K=V",
                   help="a hoodie.* option (repeatable)")
    p.add_argument("--attempt", type=int, default=1)
    p.add_argument("--checkpoint", default=None, help="source position recorded in the commit")
    p.add_argument("--batch-key", default=None, help="idempotency key recorded in the commit")
    p.add_argument("--batch-checked", action="store_true",
                   help="the caller has just looked the batch key up among the completed instants "
                        "(the operator does, before it submits): only a dead writer's staged instant "
                        "of it is searched here, and the commit looks again under the lock")
    p.add_argument("--writer-id", default=None)
    p.add_argument("--master", default=None, help="only when not run by spark-submit (default local[2])")
    p.add_argument("--remote", default=None, metavar="sc://HOST:PORT",
                   help="a Spark Connect server (default: $SPARK_REMOTE): this process is the "
                        "client, the data work runs in the server's executors")
    p.add_argument("--conf", action="append", default=[], metavar="K=V",
                   help="a Spark setting of the session the job builds (repeatable; with --remote "
                        "runtime SQL settings only; under spark-submit prefer its own --conf)")
    args = p.parse_args(argv)
    args.conf = {k: str(v) for k, v in parse_options(args.conf, "--conf").items()}
    if args.remote and "token=" in args.remote.lower():
        p.error("--remote carries a token, which every user of this machine can read on the "
                "command line: give the URL in $SPARK_REMOTE instead")
    return args


def preflight(args, options: "dict | SparkWriteOptions", storage_options: dict | None = None) -> None:
    """Everything that can be judged before a Spark session exists, so that a wrong option, a
    missing input or a folder that is not a Hudi table costs a second, not a Spark start, and
    nothing is written: every option (keys, values, plug-in names), the source, and the
    table's location (an existing table this write can write, or a new or empty folder)."""
    opts = (options if isinstance(options, SparkWriteOptions)
            else SparkWriteOptions.from_options(options)).check_writable()
    check_source(args.source, args.source_format, storage_options)
    try:
        # a metadata table or a version this write cannot produce: refused before Spark starts;
        # every commit keeps the listing and the column and partition stats, as the
        # transaction does (core/commit/transaction.py)
        table = Table.open(args.table, storage_options)
        check_for_write(table, opts.write_config)
    except TableNotFoundError:
        try:
            check_new_table_location(Storage(args.table, storage_options))
        except FileExistsError:  # created meanwhile by another writer
            pass


def announce_begin(tx) -> None:
    """The ``HUDI_OCC_BEGIN`` line, as soon as the instant is requested: a watcher (the
    operator, the early-conflict sensor) can follow the write before it ends."""
    emit_begin({"instant": tx.instant_time, "attempt": tx.attempt, "writer_id": tx.writer_id,
                "pid": os.getpid()})


def report_end(payload: dict) -> None:
    """The last progress line, just before the result line: committed, or stopped by whom."""
    outcome = payload.get("outcome")
    if outcome == "committed":
        st = payload.get("stats") or {}
        emit_progress("committed", f"instant {payload.get('instant')} completed at "
                                   f"{payload.get('completion_time')}: {st.get('rows_written', 0)} rows "
                                   f"in {st.get('files', 0)} file(s), {payload.get('seconds')} s")
    elif outcome == "conflict":
        groups = payload.get("file_groups") or []
        shown = ", ".join(groups[:3]) + (" ..." if len(groups) > 3 else "")
        err = payload.get("error") or {}
        emit_progress("conflict", f"instant {payload.get('instant')} lost to "
                                  f"{payload.get('other_instant')} on {len(groups)} file group(s) "
                                  f"[{shown}] ({err.get('error')}); rolled back, "
                                  f"{payload.get('seconds_discarded')} s discarded; retry as a fresh attempt")
    elif outcome == "error":
        err = payload.get("error") or {}
        emit_progress("failed", f"{err.get('error')}: {str(err.get('message', ''))[:300]}")


def parse_command_line(parse_args, argv):
    """``(args, options)``; or, when the command line is wrong (or ``--help``), the exit code,
    after one result line saying so, so that an orchestrator always finds a result. The
    options handed over off the command line (``core.job_secrets``: credentials, the storage
    options) are merged in and win; the storage options are ``args.storage_options``."""
    try:
        args = parse_args(argv)
        options = parse_options(args.option)
        secrets = read_job_secrets()
        args.storage_options = secrets.storage_options or None
        return args, {**options, **secrets.options}
    except UsageError as e:
        print(e.usage + e.message, file=sys.stderr, flush=True)
        emit_result(usage_result(e.message))
        return EXIT_USAGE
    except ValueError as e:  # a malformed --option
        emit_result(usage_result(str(e)))
        return EXIT_USAGE
    except SystemExit as e:
        if e.code not in (0, None):
            emit_result(usage_result(str(e.code)))
            return EXIT_USAGE
        return EXIT_OK


def conflict_result(error: RetryableError, t0: float, details: tuple[str, ...] = ()) -> dict:
    """The result of a job that lost a conflict (its instant already rolled back)."""
    d = error.to_dict()
    out = {"outcome": "conflict", "instant": d.get("instant"), "other_instant": d.get("other_instant"),
           "file_groups": d.get("file_groups", []),
           "seconds_discarded": d.get("seconds_discarded", round(time.time() - t0, 3)), "error": d}
    return {**out, **{k: d.get(k) for k in details}}


def error_result(error: BaseException) -> dict:
    """The result of a job that failed; a foreign exception is traced on stderr too, the
    orchestrator gets a line, not only a trace."""
    if isinstance(error, HudiOccError):
        return {"outcome": "error", "error": error.to_dict()}
    traceback.print_exc()
    return {"outcome": "error", "error": {"error": type(error).__name__, "message": str(error)[:2000]}}


def main(argv=None, *, before_commit=None, on_begin=announce_begin, on_progress=emit_progress) -> int:
    """Run one write. ``on_begin(tx)`` is called once the instant is requested (default: the
    ``HUDI_OCC_BEGIN`` line); ``before_commit(tx)`` once all files are written, just before the
    commit (the seams harnesses such as airflow_hudi_occ/testing/spark_job.py use);
    ``on_progress(stage, text)`` at each step (default: ``hudi-occ <stage>: <text>`` lines)."""
    parsed = parse_command_line(parse_args, argv)
    if isinstance(parsed, int):
        return parsed
    args, options = parsed
    from airflow_hudi_occ.spark.writer import SparkHudiWriter

    t0 = time.time()
    base = {"table": args.table, "operation": args.operation, "attempt": args.attempt}
    if args.batch_key is not None:
        base["batch_key"] = args.batch_key
    spark = None
    try:
        # A store that refuses our credentials: one listing says so, naming the store and the
        # fix, before anything else reads or writes.
        Storage(args.table, args.storage_options).check_access()
        # The options are checked once, here; every stage after reads the checked ones.
        opts = SparkWriteOptions.from_options(options).with_operation(args.operation).check_writable()
        # Before Spark starts and the source is read: a batch already in the table, or staged
        # by a writer that died before completing it, needs neither (nor its source, which
        # may be gone by the time a re-run finds the batch committed).
        res = SparkHudiWriter(None, args.table, opts, writer_id=args.writer_id,
                              storage_options=args.storage_options).prepare(
            args.batch_key, attempt=args.attempt, committed_checked=args.batch_checked)
        if res is None:
            preflight(args, opts, args.storage_options)
            on_progress("starting", f"{args.operation} into {args.table}: options, source and "
                                    "table checked; starting Spark")
            spark = _session(args)
            stop_on_sigterm(spark)
            writer = SparkHudiWriter(spark, args.table, opts, writer_id=args.writer_id,
                                     on_begin=on_begin, on_progress=on_progress,
                                     storage_options=args.storage_options)
            df = read_source(spark, args.source, args.source_format, args.storage_options)
            res = writer.write(df, args.operation, checkpoint=args.checkpoint,
                               batch_key=args.batch_key, attempt=args.attempt,
                               before_commit=before_commit, recover=False)
        if res.outcome != "committed":
            print(f"batch {args.batch_key!r}: {res.outcome.replace('_', ' ')} as instant "
                  f"{res.instant}" + (" (no data written)" if res.outcome == "already_committed"
                                      else " (its staged files re-committed, none rewritten)"),
                  flush=True)
        out = {**base, **res.to_json()}
        report_end(out)
        emit_result(out)
        return EXIT_OK
    except RetryableError as e:
        d = e.to_dict()
        out = {**base, **conflict_result(e, t0, WRITE_CONFLICT_DETAILS),
               "job_cancelled": d.get("job_cancelled", False)}
        report_end(out)
        emit_result(out)
        return exit_code_for(e)
    except Exception as e:  # noqa: BLE001 - every failure ends with a result line
        out = {**base, **error_result(e)}
        report_end(out)
        emit_result(out)
        return exit_code_for(e)
    finally:
        try:
            if spark is not None:
                spark.stop()
        except Exception:  # pragma: no cover
            pass


def stop_on_sigterm(spark) -> None:
    """A Spark Connect client's SIGTERM (an orchestrator's kill) raises ``KeyboardInterrupt``
    here, so the running job is interrupted on the server (``jobgroup.run_watched``) and the
    instant rolled back, rather than the job running on without its driver (a local or
    spark-submit driver takes its jobs down with it)."""
    import signal
    import threading

    from airflow_hudi_occ.spark.compat import is_connect
    if not is_connect(spark) or threading.current_thread() is not threading.main_thread():
        return

    def interrupt(signum, frame):
        # once: a second SIGTERM (a process-tree kill signals the group and each process)
        # must not break into the cancel's wait or the rollback it leads to
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, interrupt)


def _session(args):
    from airflow_hudi_occ.spark.session import job_session
    return job_session(f"hudi-occ {args.operation} {os.path.basename(args.table)}", args.master,
                       remote=args.remote, conf=args.conf)


if __name__ == "__main__":
    sys.exit(main())
