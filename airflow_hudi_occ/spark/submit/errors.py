"""Errors of submitting the engine (the master probe, shipping the package), in core's
hierarchy with structured fields and a remedy. Both are raised before any instant exists, so a
caller reports them and stops: nothing was written."""

from __future__ import annotations

from airflow_hudi_occ.core.errors import HudiOccError


class EngineNotShippedError(HudiOccError):
    """Spark executors cannot import the engine (the package, or one of its dependencies):
    found by a one-task import check before any instant is requested, so nothing was
    written. ``cause`` is the executor's own ImportError, ``missing`` the module it names,
    ``python`` the executor's interpreter."""

    def __init__(self, message: str, *, cause: str | None = None, missing: str | None = None,
                 python: str | None = None, remedy: str | None = None):
        self.cause = cause
        self.missing = missing
        self.python = python
        super().__init__(message, remedy=remedy)


class SparkMasterUnreachableError(HudiOccError):
    """No Spark master answers at the URL the Spark connection names. Found by a TCP probe
    before spark-submit runs: Spark itself retries the master for about a minute and then
    leaves the driver waiting for resources, so without the probe the task hangs instead of
    failing. Nothing was submitted and nothing was written. ``master`` is the URL,
    ``cause`` the socket error of each address tried."""

    def __init__(self, message: str, *, master: str, cause: str | None = None,
                 remedy: str | None = None):
        self.master = master
        self.cause = cause
        super().__init__(message, remedy=remedy)
