"""The engine's spark-submit applications as the operators run them: where they are, the
project's Spark settings for them, what a job says back on its way (``core.job_protocol``'s
``HUDI_OCC_BEGIN`` and ``HUDI_OCC_RESULT`` lines), and the checks both operators make before
submitting (the task's ``hudi://`` assets) and the lineage they add to the Spark conf.

Errors: :func:`check_task_assets` raises ``AirflowFailException`` (a wrong asset is no reason
to retry); the rest raises nothing.
"""

from __future__ import annotations

import os

from airflow_hudi_occ.core.errors import HudiOccError
from airflow_hudi_occ.core.job_protocol import BEGIN_PREFIX, RESULT_PREFIX, parse_line
from airflow_hudi_occ.provider.assets import check_table_assets, table_uri
from airflow_hudi_occ.provider.version_compat import AirflowFailException

_SPARK_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "spark")
#: the applications spark-submit runs (``application=`` or ``HUDI_OCC_SPARK_APPLICATION`` point
#: both operators at another build of them, e.g. a ``local://`` path inside a cluster image)
SPARK_APP = os.path.join(_SPARK_DIR, "job.py")
SERVICE_APP = os.path.join(_SPARK_DIR, "service_job.py")
APPLICATION_ENV = "HUDI_OCC_SPARK_APPLICATION"
#: Java Hudi's table services (``HudiJavaTableServiceOperator``): runs under the Java side's
#: Spark, which need not have this package; not redirected by ``HUDI_OCC_SPARK_APPLICATION``
JAVA_SERVICE_APP = os.path.join(_SPARK_DIR, "java_service_job.py")

DEFAULT_SPARK_CONF = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}


def application_for(given: str | None, default: str) -> str:
    """The application to submit: the operator's own, else ``$HUDI_OCC_SPARK_APPLICATION``, else
    the engine's ``default``."""
    return given or os.environ.get(APPLICATION_ENV) or default


class JobOutput:
    """What a job said on its way: the ``HUDI_OCC_BEGIN`` payload (the running instant, handed
    to ``on_begin`` at once) and the last ``HUDI_OCC_RESULT`` payload. The hook's ``on_line``."""

    def __init__(self, on_begin=None):
        self.began: dict = {}
        self.result: dict = {}
        self._on_begin = on_begin

    def __call__(self, line: str) -> None:
        payload = parse_line(line, BEGIN_PREFIX)
        if payload is not None:
            self.began.update(payload)
            if self._on_begin is not None:
                self._on_begin(self.began)
            return
        payload = parse_line(line, RESULT_PREFIX)
        if payload is not None:
            self.result = payload


def check_task_assets(operator, table_path: str, storage_options: dict | None) -> None:
    """The hudi:// inlets/outlets the DAG gave are Hudi tables, before any Spark job."""
    try:
        own = table_uri(table_path)
    except HudiOccError:
        own = None
    try:
        check_table_assets(operator, storage_options, own)
    except HudiOccError as e:
        raise AirflowFailException(str(e)) from e


def with_parent_job(conf: dict, context) -> dict:
    """The Spark conf with OpenLineage's parent-job properties, where that provider is."""
    from airflow_hudi_occ.provider.openlineage import inject_parent_job
    return inject_parent_job(conf, context)
