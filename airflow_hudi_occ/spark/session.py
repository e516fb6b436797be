"""A local SparkSession configured for this engine (tests, the demo, spark-submit in local mode).

Why these settings:

- ``PYSPARK_PYTHON`` must be the interpreter that has this project installed, or executors'
  Python workers fail to import it; we default it to ``sys.executable``.
- Few shuffle partitions: the tables here are small and every shuffle partition is a task.
- ``spark.task.maxFailures=1`` in local mode (Spark's own default there): a failing write task is
  not retried, and the driver cancels the job on a conflict anyway (see ``writer``).
- The UI is off: it only costs start-up time and a port per session.
"""

from __future__ import annotations

import os
import sys
from typing import Mapping

DEFAULT_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.driver.memory": "2g",
    "spark.sql.adaptive.enabled": "false",
    "spark.python.worker.reuse": "true",
}


def ensure_python_env() -> None:
    """Executors must run the interpreter that has airflow_hudi_occ installed."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def local_session(master: str = "local[2]", app_name: str = "airflow_hudi_occ",
                  conf: Mapping[str, str] | None = None):
    """Get or create a local session (``getOrCreate``: a second call reuses the first)."""
    ensure_python_env()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    for k, v in {**DEFAULT_CONF, **dict(conf or {})}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def jar_version(spark) -> str:
    """The Spark version of the running JVM (the jars), to compare with ``pyspark.__version__``."""
    return spark.sparkContext._jsc.version()
