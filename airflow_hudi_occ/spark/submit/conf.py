"""The project's Spark settings for a job's session, for spark-submit's ``--conf`` (the hook)
and for the session the job builds (``spark.session``): the keys a submitter did not choose.

Why these values: few shuffle partitions (the tables here are small and every shuffle
partition is a task), the UI off (start-up time and a port per session), UTC, Arrow on;
parallelism and driver memory are sized for one machine, so they apply to local masters only.
"""

from __future__ import annotations

from airflow_hudi_occ.spark.submit.master import is_local_master

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


#: what can still be set on a running session (the rest must be on the spark-submit line)
RUNTIME_CONF_KEYS = frozenset(k for k in DEFAULT_CONF if k.startswith("spark.sql."))
#: sized for one machine; a cluster's own defaults are better there
LOCAL_ONLY_CONF_KEYS = frozenset({"spark.default.parallelism", "spark.driver.memory"})


def default_conf(master: str | None) -> dict[str, str]:
    """The project's defaults for a session on ``master`` (spark-submit's ``--conf`` for the
    keys the submitter did not choose)."""
    local = is_local_master(master) or not master
    return {k: v for k, v in DEFAULT_CONF.items() if local or k not in LOCAL_ONLY_CONF_KEYS}
