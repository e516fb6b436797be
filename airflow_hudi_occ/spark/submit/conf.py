"""The project's Spark settings for a job's session, for spark-submit's ``--conf`` (the hook)
and for the session the job builds (``spark.session``): the keys a submitter did not choose.

Why these values: few shuffle partitions (the tables here are small and every shuffle
partition is a task), the UI off (start-up time and a port per session), UTC, Arrow on;
parallelism and driver memory are sized for one machine, so they apply to local masters only.

Spark's log level is ``WARN`` (``spark.log.level``): a write task's log reads as the job's own
progress lines, not as Spark's ~400 INFO lines. A driver on this machine (client mode, local
masters) also starts with :data:`QUIET_LOG4J2` (:func:`log_conf`), so even spark-submit's
start-up lines stay out. ``spark.log.level=INFO`` (an operator's ``spark_conf``, or the Spark
connection's extras) brings them all back.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from airflow_hudi_occ.spark.submit.master import is_local_master

#: Spark's own key (3.5+): the log level a SparkContext sets when it starts
LOG_LEVEL_KEY = "spark.log.level"
DEFAULT_LOG_LEVEL = "WARN"
#: the levels that keep Spark's INFO lines: no quiet log4j2 file for them
VERBOSE_LOG_LEVELS = frozenset({"ALL", "TRACE", "DEBUG", "INFO"})
#: WARN and above to stderr in Spark's layout (shipped with the package)
QUIET_LOG4J2 = Path(__file__).with_name("log4j2-quiet.properties")
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"

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
    LOG_LEVEL_KEY: DEFAULT_LOG_LEVEL,
}


#: what can still be set on a running session (the rest must be on the spark-submit line)
RUNTIME_CONF_KEYS = frozenset(k for k in DEFAULT_CONF if k.startswith("spark.sql."))
#: sized for one machine; a cluster's own defaults are better there
LOCAL_ONLY_CONF_KEYS = frozenset({"spark.default.parallelism", "spark.driver.memory"})


def default_conf(master: str | None) -> dict[str, str]:
    """The project's defaults for a session on ``master`` (spark-submit's ``--conf`` for the
    keys the submitter did not choose)."""
    local = is_local_master(master) or not master
    return {k: v for k, v in DEFAULT_CONF.items() if local or k not in LOCAL_ONLY_CONF_KEYS}


def log_conf(conf: Mapping[str, str], *, driver_local: bool) -> dict[str, str]:
    """The driver's Java options that keep spark-submit's own start-up INFO lines out (before
    any SparkContext reads ``spark.log.level``): ``-Dlog4j2.configurationFile`` naming
    :data:`QUIET_LOG4J2`, appended to ``conf``'s ``spark.driver.extraJavaOptions``. Nothing
    (an empty dict) when the driver is not on this machine (the file is not there), when the
    level asked for keeps INFO, when the submitter names a log4j configuration already, or
    when the deployment has its own ``$SPARK_CONF_DIR/log4j2.properties``."""
    level = str(conf.get(LOG_LEVEL_KEY) or DEFAULT_LOG_LEVEL).upper()
    java = str(conf.get(DRIVER_JAVA_OPTIONS) or "")
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if (not driver_local or level in VERBOSE_LOG_LEVELS or "log4j" in java
            or not QUIET_LOG4J2.is_file()
            or (conf_dir and os.path.isfile(os.path.join(conf_dir, "log4j2.properties")))):
        return {}
    option = f"-Dlog4j2.configurationFile=file:{QUIET_LOG4J2}"
    if any(c.isspace() for c in option):  # Spark splits the Java options on blanks, not in quotes
        option = f'"{option}"'
    return {DRIVER_JAVA_OPTIONS: f"{java} {option}".strip()}
