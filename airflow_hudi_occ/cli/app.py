"""``hudi-occ``: look at a table from the command line, to answer "why did my write fail?".

Every subcommand only *reads* the table (timeline, file groups, heartbeats, markers) and
prints either aligned plain-text tables or, with ``--json``, one JSON document on stdout::

    hudi-occ show        TABLE                        summary: properties, instants, file groups, writers
    hudi-occ timeline    TABLE [--state S] [--limit N]
    hudi-occ file-groups TABLE [--as-of T] [--partition P]
    hudi-occ writers     TABLE                        pending writes: heartbeat age, alive or expired
    hudi-occ markers     TABLE [--instant T]
    hudi-occ conflicts   TABLE --instant T [--file-group P/F ...] [--strategy NAME]
                                                      a loser already rolled back: from the attempt log
    hudi-occ attempts    TABLE [--instant T] [--outcome O ...] [--dag-id D] [--limit N]
                                                      the attempt log: outcome, winner, file groups, retries
    hudi-occ early-check TABLE --instant T --partition P --file-id F [--strategy NAME]
                               [--check-commit-conflict]

Table services (these write to the table): ``clean TABLE [--dry-run]``, ``rollback TABLE
[--instant T]``, ``cluster schedule|run|show TABLE [--instant T]``, ``compact TABLE [--schedule-only |
--execute T | --show] [--force]`` (merge-on-read), ``archive TABLE [--dry-run]``; and ``sync TABLE``
(the catalog: docs/catalog-sync.md). A retryable conflict
(the clustering lost at its commit) exits 75, as the spark-submit jobs do.

Global options (before or after the subcommand): ``--option KEY=VALUE`` (Hudi write options,
the same keys a writer uses, so heartbeat expiry and the conflict strategy are judged as the
writers judge them), ``--storage-option KEY=VALUE`` (fsspec options; values are read as JSON
when they parse, so ``anon=true`` is a boolean), ``--secrets-file PATH``, ``--json``.

Credentials need not be on the command line, where every user of the machine can read them
(``ps``): botocore reads ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` /
``AWS_SESSION_TOKEN`` / ``AWS_PROFILE`` and ``AWS_ENDPOINT_URL_S3`` from the environment, and
``--secrets-file PATH`` (or ``$HUDI_OCC_SECRETS_FILE``) names a JSON file in the Spark job's
secrets format, ``{"options": {...}, "storage_options": {...}}`` (``core/job_secrets``).

Exit codes: 0 ok; 3 when ``conflicts`` finds that the instant would abort or ``early-check``
that the file would be stopped; 2 for anything the user can get wrong (a missing table, an
unknown instant or strategy, corrupt metadata, a malformed ``KEY=VALUE``) and for a store or
lock service that does not answer (``StorageUnavailableError``, naming the endpoint, after the
bounded timeouts of docs/configuration.md); 1 for a bug.

Error handling: every :class:`HudiOccError` and every storage ``OSError`` is caught in
:func:`main` and printed as ``error: <message>`` plus its remedy on stderr (with ``--json``,
as the error's ``to_dict()`` on stderr), never as a traceback: the person running this is
already debugging a failed write and needs the next step, not our stack.
``HUDI_OCC_DEBUG=1`` re-raises unexpected exceptions for developers.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any, Callable, Sequence

from airflow_hudi_occ.cli.context import PROG, Context, Result, UsageError
from airflow_hudi_occ.cli.diagnose_commands import cmd_conflicts, cmd_early_check
from airflow_hudi_occ.cli.history_commands import cmd_attempts
from airflow_hudi_occ.cli.inspect_commands import cmd_file_groups, cmd_markers, cmd_show, cmd_timeline, cmd_writers
from airflow_hudi_occ.cli.service_commands import (cmd_archive, cmd_clean, cmd_cluster, cmd_compact, cmd_rollback,
                                                   cmd_sync)
from airflow_hudi_occ.core.config import CONFLICT_RESOLUTION_STRATEGY, ECD_CHECK_COMMIT_CONFLICT, ECD_STRATEGY
from airflow_hudi_occ.core.errors import HudiOccError, RetryableError
from airflow_hudi_occ.core.format.instant import State
from airflow_hudi_occ.core.inspection.attempt_history import OUTCOMES as ATTEMPT_OUTCOMES
from airflow_hudi_occ.core.job_protocol import EXIT_ERROR, EXIT_OK, EXIT_RETRYABLE, EXIT_USAGE


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so usage errors share the error path (and
    come out as JSON with --json)."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message, remedy=f"see `{self.prog} --help`")


def _count(value: str) -> int:
    """A count of things to show: a whole number, 0 or more (a negative one used to print
    "no instants" and exit 0, hiding the typo); a ``--limit`` of 0 is refused after parsing,
    by :func:`~airflow_hudi_occ.cli.context.limit_arg`, as every subcommand's is."""
    text = str(value).strip()
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"expected a whole number, 0 or more, got {value!r}")
    return int(text)


def _add_common(p: argparse.ArgumentParser, *, top: bool) -> None:
    # Sub-level copies use other dests: argparse lets a subparser's defaults overwrite what the
    # top level parsed, so both are kept and merged in Context.
    prefix = "global_" if top else ""
    p.add_argument("--option", "-o", dest=f"{prefix}option", action="append", metavar="KEY=VALUE",
                   help="a Hudi write option (hoodie.*), repeatable")
    p.add_argument("--storage-option", dest=f"{prefix}storage_option", action="append",
                   metavar="KEY=VALUE", help="an fsspec storage option, repeatable")
    p.add_argument("--json", dest=f"{prefix}json", action="store_true", default=False,
                   help="print one JSON document instead of tables")
    p.add_argument("--secrets-file", dest=f"{prefix}secrets_file", metavar="PATH",
                   help="a JSON file {\"options\": {...}, \"storage_options\": {...}} (the Spark "
                        "job's secrets format) with credentials kept off the command line; "
                        "default $HUDI_OCC_SECRETS_FILE. AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, "
                        "AWS_SESSION_TOKEN, AWS_PROFILE and AWS_ENDPOINT_URL(_S3) are read by "
                        "botocore from the environment as usual; the command line wins over the "
                        "file, the file over the environment")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Look at a Hudi table written by several writers: its "
                     "timeline, file groups, live writers, markers, and why a write conflicts.")
    _add_common(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def add(name: str, func: Callable[[Context], Result], help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        p.add_argument("table", metavar="TABLE", help="base path or URL of the table")
        _add_common(p, top=False)
        p.set_defaults(func=func)
        return p

    add("show", cmd_show, "summary: properties, instants by state, file groups, live writers")
    p = add("timeline", cmd_timeline, "every instant: times, state, duration, operation, writer, "
            "attempt, checkpoint; what each rollback removed")
    p.add_argument("--state", choices=[s.value for s in State])
    p.add_argument("--limit", type=_count, metavar="N", help="only the last N instants (N >= 1)")
    p = add("file-groups", cmd_file_groups, "the latest base file of each file group")
    p.add_argument("--as-of", metavar="T", help="as of this instant time (time travel)")
    p.add_argument("--partition", metavar="P")
    add("writers", cmd_writers, "pending write instants: heartbeat age, alive or expired, markers")
    p = add("markers", cmd_markers, "markers of pending (or failed) instants")
    p.add_argument("--instant", metavar="T")
    p = add("conflicts", cmd_conflicts, "would this pending instant commit or abort, and "
            "because of which instants (exit 3: abort); for an instant already rolled back, "
            "what its attempt record says")
    p.add_argument("--instant", metavar="T", required=True)
    p.add_argument("--file-group", metavar="PARTITION/FILEID", action="append",
                   help="judge these file groups instead of the instant's markers (repeatable)")
    p.add_argument("--strategy", metavar="NAME", help="conflict resolution strategy "
                   "(simple, bucket, prefer-writer or a class name); default from --option "
                   f"{CONFLICT_RESOLUTION_STRATEGY.key}")
    p = add("attempts", cmd_attempts, "the attempt log: every write attempt, how it ended, the "
            "instant it lost to and on which file groups, what became of its instant, its retries")
    p.add_argument("--instant", metavar="T", help="only this attempt")
    p.add_argument("--outcome", action="append", choices=list(ATTEMPT_OUTCOMES),
                   help="only attempts that ended so (repeatable)")
    p.add_argument("--dag-id", metavar="DAG", help="only attempts this Airflow DAG made")
    p.add_argument("--limit", type=int, metavar="N", help="only the newest N (N >= 1)")
    p = add("early-check", cmd_early_check, "would early conflict detection stop this instant "
            "from writing this file group (exit 3: stopped)")
    p.add_argument("--instant", metavar="T", required=True)
    p.add_argument("--partition", metavar="P", required=True)
    p.add_argument("--file-id", metavar="F", required=True)
    p.add_argument("--strategy", metavar="NAME", help="early conflict detection strategy; "
                   f"default from --option {ECD_STRATEGY.key}")
    p.add_argument("--check-commit-conflict", action="store_true",
                   help=f"also check commits completed since the instant began ({ECD_CHECK_COMMIT_CONFLICT.key})")
    p = add("clean", cmd_clean, "roll back dead writers (LAZY), then delete file versions the "
            "clean policy no longer retains (hoodie.clean.policy, ...commits.retained)")
    p.add_argument("--dry-run", action="store_true", help="only show what would be deleted")
    p = add("archive", cmd_archive, "move old completed instants to the LSM history "
            "(hoodie.keep.min.commits / hoodie.keep.max.commits), never past a pending instant")
    p.add_argument("--dry-run", action="store_true", help="only show what would be archived")
    p = add("rollback", cmd_rollback, "roll back one pending instant, or every pending write "
            "whose heartbeat expired")
    p.add_argument("--instant", metavar="T")
    p = add("compact", cmd_compact, "merge-on-read: schedule a compaction under the lock "
            "(hoodie.compact.inline.trigger.strategy, ...max.delta.commits) and execute it here "
            "with Arrow; for big tables run airflow_hudi_occ.spark.service_job --service compact")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--schedule-only", action="store_true", help="only plan (<t>.compaction.requested)")
    g.add_argument("--execute", metavar="T", help="execute this pending compaction")
    g.add_argument("--show", action="store_true", help="list pending compactions")
    p.add_argument("--force", action="store_true", help="schedule even if the trigger is not reached")
    add("sync", cmd_sync, "register the table in its catalog (Hive Metastore) or bring the "
        "catalog up to the timeline, as a commit's sync does: --option "
        "hoodie.datasource.hive_sync.metastore.uris=thrift://HOST:PORT and the other "
        "hoodie.datasource.hive_sync.* keys (docs/catalog-sync.md)")
    p = sub.add_parser("cluster", help="schedule, run (in this process, with Arrow) or show "
                       "clustering; for big tables run airflow_hudi_occ.spark.service_job",
                       description="clustering: schedule | run | show")
    p.add_argument("action", choices=["schedule", "run", "show"])
    p.add_argument("table", metavar="TABLE", help="base path or URL of the table")
    p.add_argument("--instant", metavar="T", help="run: this plan (default: the earliest pending)")
    _add_common(p, top=False)
    p.set_defaults(func=cmd_cluster)
    return parser


def _print_error(err: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(err, indent=2, default=str), file=sys.stderr)
        return
    print(f"error: {err['message']}", file=sys.stderr)
    if err.get("remedy"):
        print(f"remedy: {err['remedy']}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    # The library logs warnings (e.g. the early conflict it just found) for writers' logs; here
    # the same facts are in the output, so when nobody configured logging they are not repeated
    # on stderr by logging's last-resort handler.
    quiet = logging.NullHandler() if not logging.getLogger().handlers else None
    package_logger = logging.getLogger("airflow_hudi_occ")
    if quiet is not None:
        package_logger.addHandler(quiet)
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    finally:
        if quiet is not None:
            package_logger.removeHandler(quiet)


def _main(argv: list[str]) -> int:
    # Known before parsing, so a parse error can already come out as JSON.
    as_json = "--json" in argv
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:  # --help
            return e.code if isinstance(e.code, int) else EXIT_OK
        as_json = bool(args.global_json or getattr(args, "json", False))
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        ctx = Context(args)
        doc, text, code = args.func(ctx)
        if as_json:
            print(json.dumps(doc, indent=2, default=str))
        else:
            print(text)
        sys.stdout.flush()
        return code
    except RetryableError as e:
        _print_error(e.to_dict(), as_json)
        return EXIT_RETRYABLE
    except HudiOccError as e:
        _print_error(e.to_dict(), as_json)
        return EXIT_USAGE
    except BrokenPipeError:
        # `hudi-occ timeline T | head`: the reader left; that is not an error.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_OK
    except OSError as e:
        _print_error({"error": type(e).__name__, "message": f"storage error: {e}",
                      "remedy": "check the path, permissions and --storage-option credentials"},
                     as_json)
        return EXIT_USAGE
    except Exception as e:  # a bug: say so plainly, without a wall of stack
        if os.environ.get("HUDI_OCC_DEBUG") == "1":
            raise
        _print_error({"error": type(e).__name__, "message": f"internal error: {type(e).__name__}: {e}",
                      "remedy": "this is a bug in hudi-occ; rerun with HUDI_OCC_DEBUG=1 for the "
                                "traceback and report it"}, as_json)
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
