"""What every subcommand gets: the parsed arguments, the table, the writers' options, one clock.

Also the argument checks that turn a typo into a :class:`UsageError` (exit 2) before the table
is read, so a mistyped instant is reported as a typo and not as a missing instant.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any, Iterable

from airflow_hudi_occ.core.commit.write_options import check_write_options
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import HudiOccError, InstantStateError
from airflow_hudi_occ.core.format.instant import Instant
from airflow_hudi_occ.core.format.layout import FileGroupId
from airflow_hudi_occ.core.inspection.timeline_view import rollbacks_by_target
from airflow_hudi_occ.core.job_protocol import OptionError, parse_options
from airflow_hudi_occ.core.job_secrets import JobSecrets, read_secrets_file
from airflow_hudi_occ.core.table.table import Table

PROG = "hudi-occ"
#: names a secrets file when --secrets-file does not
SECRETS_FILE_ENV = "HUDI_OCC_SECRETS_FILE"

#: what a subcommand returns: (JSON document, human text, exit code)
Result = tuple[Any, str, int]


class UsageError(HudiOccError):
    """The command line itself is wrong (a malformed option, an impossible instant time)."""

    remedy = f"see `{PROG} --help` or `{PROG} <subcommand> --help`"


def _parse_pairs(items: Iterable[str] | None, flag: str, *, coerce: bool = False) -> dict[str, Any]:
    try:
        return parse_options(items, flag, coerce=coerce)
    except OptionError as e:
        raise UsageError(e.message, remedy=e.remedy) from None


def instant_time_arg(value: str, what: str = "instant") -> str:
    v = (value or "").strip()
    if not (v.isdigit() and len(v) in (14, 17)):
        raise UsageError(f"{what} {value!r} is not an instant time",
                         remedy="instant times are 17 digits, yyyyMMddHHmmssSSS (older tables: "
                                f"14 digits); list them with `{PROG} timeline TABLE`")
    return v


def limit_arg(limit: int | None, what: str, kept: str) -> int | None:
    """``--limit N`` of a listing: N >= 1, or None for all. ``--limit 0`` is refused, in every
    subcommand alike: it listed nothing ("no instants" on a table that has some), which reads
    as an answer, not as a typo."""
    if limit is not None and limit < 1:
        raise UsageError(f"--limit {limit} lists nothing",
                         remedy=f"give a positive number of {what} (the {kept} are kept), or leave "
                                "--limit out for all of them")
    return limit


def file_group_arg(value: str) -> tuple[str, str]:
    partition, file_id = FileGroupId.parse(value.strip().strip("/"))
    if not file_id:
        raise UsageError(f"--file-group expects PARTITION/FILEID, got {value!r}",
                         remedy="give the partition path and the fileId, e.g. 2024/01/01/"
                                "7b0ea4f9-3768-4e87-b12c-8d33efd22b55-0 (just the fileId for a "
                                "non-partitioned table)")
    return partition, file_id


class Context:
    """One table, the writers' own options and one clock reading per run, so that heartbeat
    ages and expiry verdicts in one output agree with each other and with the writers."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        secrets = _secrets(args)
        # the command line wins over the file, key by key
        self.options: dict[str, Any] = {**secrets.options, **_parse_pairs(
            [*(args.global_option or []), *(getattr(args, "option", None) or [])], "--option")}
        self.storage_options = {**secrets.storage_options, **_parse_pairs(
            [*(args.global_storage_option or []), *(getattr(args, "storage_option", None) or [])],
            "--storage-option", coerce=True)}
        self.config = check_write_options(self.options)  # a misspelt key must not fall back
        self.table = _open_table(args.table, self.storage_options)
        self.now = time.time()
        self._timeline = None

    @property
    def timeline(self):
        if self._timeline is None:
            self._timeline = self.table.timeline()
        return self._timeline

    def with_options(self, **changes: Any) -> WriteConfig:
        return WriteConfig.from_options({**self.options, **changes})


def _secrets(args: argparse.Namespace) -> JobSecrets:
    """Credentials kept off the command line (where every user of the machine can read them):
    ``--secrets-file`` or ``$HUDI_OCC_SECRETS_FILE``, in the job's secrets format; never deleted."""
    path = getattr(args, "secrets_file", None) or args.global_secrets_file
    if path:
        return read_secrets_file(path, where="--secrets-file")
    if os.environ.get(SECRETS_FILE_ENV):
        return read_secrets_file(os.environ[SECRETS_FILE_ENV], where=SECRETS_FILE_ENV)
    return JobSecrets()


def _open_table(path: str, storage_options: dict[str, Any]):
    try:
        return Table.open(path, storage_options or None)
    except HudiOccError:
        raise
    except (ValueError, ImportError) as e:
        # fsspec: "Protocol not known", or the backend package (s3fs, gcsfs) is not installed.
        raise UsageError(f"cannot open storage for {path!r}: {e}",
                         remedy="check the URL scheme, install its fsspec backend (e.g. s3fs) "
                                "and pass credentials with --storage-option KEY=VALUE") from e


def require_instant(ctx: Context, t: str) -> Instant:
    inst = ctx.timeline.get(t)
    if inst is not None:
        return inst
    by = rollbacks_by_target(ctx.timeline).get(t)
    if by is not None:
        raise InstantStateError(
            f"instant {t} is not on the timeline: rollback {by} rolled it back", instant=t,
            remedy=f"its write failed or was aborted and its files are gone; `{PROG} timeline` "
                   "shows the rollback, and the writer's own log says why it gave up")
    raise InstantStateError(
        f"instant {t} is not on the timeline of {ctx.table.base_uri}", instant=t,
        remedy=f"list instants with `{PROG} timeline TABLE` and recorded attempts with `{PROG} "
               "attempts TABLE`; an instant archived, or rolled back with its attempt record "
               "pruned by clean, is no longer visible")
