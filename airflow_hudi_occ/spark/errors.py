"""Errors of the Spark engine, in core's hierarchy (structured fields plus a remedy)."""

from __future__ import annotations

from airflow_hudi_occ.core.commit.pipeline import Failure
from airflow_hudi_occ.core.concurrency import abort_signal
from airflow_hudi_occ.core.errors import HudiOccError
from airflow_hudi_occ.spark.jobgroup import JobAborted

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


def spark_failure(error: BaseException, instant: str, what: str) -> Failure:
    """What a failed Spark action on the driver (a write, a clustering, a compaction: ``what``
    names it in the message) records in its rollback and raises, for both pipelines:

    - the driver cancelled the job (:class:`JobAborted`: a conflict or an abort signal): the
      conflict or abort the signal stood for (``abort_signal.error_for``), with whether the
      job was cancelled while it ran and its task counts then; the cancelled job says nothing
      more (no cause);
    - an error of ours (a conflict at commit, a refusal), or the process being stopped: as it
      came;
    - anything else (an executor's exception, as Spark reports it): recorded as it came,
      raised as a :class:`SparkWriteError` whose cause it is.

    The reason recorded is cut (:func:`short_message`): a Spark error carries whole stacks."""
    if isinstance(error, JobAborted):
        err = abort_signal.error_for(instant, error.info)
        err.job_cancelled = bool(error.info.get("job_cancelled"))
        for k in ("tasks_done_at_cancel", "tasks_total"):
            if k in error.info:
                setattr(err, k, error.info[k])
        err.__cause__ = None
        return Failure(err, err, _reason(err))
    if isinstance(error, (HudiOccError, KeyboardInterrupt, SystemExit)):
        return Failure(error, error, _reason(error))
    err = SparkWriteError(f"the Spark {what} failed: {short_message(error)}", instant=instant,
                          cause=type(error).__name__)
    err.__cause__ = error
    return Failure(error, err, _reason(error))


def _reason(e: BaseException) -> str:
    return f"{type(e).__name__}: {short_message(e)}"
