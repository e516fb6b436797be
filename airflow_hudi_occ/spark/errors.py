"""Errors of the Spark engine, in core's hierarchy (structured fields plus a remedy)."""

from __future__ import annotations

from airflow_hudi_occ.core.errors import HudiOccError

#: the longest error text carried into an abort reason or a SparkWriteError
SHORT_MESSAGE_CHARS = 2000


def short_message(e: BaseException) -> str:
    """An error's text, cut to :data:`SHORT_MESSAGE_CHARS`: a Spark error carries the whole
    executor stack (often many kilobytes), which would otherwise fill the attempt record and
    the instant's rollback reason."""
    s = str(e)
    return s if len(s) < SHORT_MESSAGE_CHARS else s[:SHORT_MESSAGE_CHARS] + " ..."


class SparkWriteError(HudiOccError):
    """The Spark write job failed for a reason that a retry will not fix (bad data, a bug,
    an executor crash reported by Spark). The instant was rolled back."""

    remedy = "read the executor error above; fix the data or the options, then run the write again"

    def __init__(self, message: str, *, instant: str | None = None, cause: str | None = None,
                 remedy: str | None = None):
        self.instant = instant
        self.cause = cause
        super().__init__(message, remedy=remedy)

