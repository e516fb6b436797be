"""The engine's SparkSession: a local one (tests, the demo), or the one spark-submit started.

Why these settings:

- ``PYSPARK_PYTHON``: in local mode the executors are this machine's, so they run this
  interpreter (``sys.executable``, which has the project's dependencies). On a cluster the
  path of the driver's interpreter means nothing on a worker: the cluster's own choice
  (``spark.pyspark.python``, ``PYSPARK_PYTHON`` in ``spark-env.sh``, a packed venv from
  ``spark.archives``) is left alone, and the package itself is shipped (``shipping``).
- Few shuffle partitions: the tables here are small and every shuffle partition is a task.
- ``spark.task.maxFailures=1`` in local mode (Spark's own default there): a failing write task is
  not retried, and the driver cancels the job on a conflict anyway (see ``writer``).
- The UI is off: it only costs start-up time and a port per session.

Spark Connect (:func:`connect_session`, or any session made with ``remote("sc://...")``): this
process is a client; the driver-side steps (the transaction, the timeline, the lock, the
heartbeat) run here, the data work in the server's executors. A Connect session has no
SparkContext and no JVM in this process, so everything the engine asks of one goes through
:func:`is_connect`: the package is shipped as an artifact (``addArtifacts(pyfile=True)``),
jobs are cancelled by tag (jobgroup.py), the parallelism is asked of the server
(``compat.default_parallelism``), and only the server's runtime SQL settings can be chosen.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager, nullcontext
from typing import Mapping

from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.spark.compat import bounds_arrow_batch_bytes, is_connect
from airflow_hudi_occ.spark.submit.conf import (DEFAULT_CONF, DEFAULT_LOG_LEVEL, LOG_LEVEL_KEY,
                                                RUNTIME_CONF_KEYS, default_conf)
from airflow_hudi_occ.spark.submit.master import is_local_master


def ensure_python_env(master: str | None = "local") -> None:
    """In local mode, executors run this interpreter (it has the dependencies); on a cluster
    only the driver's own interpreter is named, never the executors'."""
    if is_local_master(master):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def local_session(master: str = "local[2]", app_name: str = "airflow_hudi_occ",
                  conf: Mapping[str, str] | None = None):
    """Get or create a session on ``master`` from this process (``getOrCreate``: a second call
    reuses the first). Not local: the package is added to the executors' Python path."""
    ensure_python_env(master)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    settings = {**default_conf(master), **dict(conf or {})}
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(settings.get(LOG_LEVEL_KEY) or DEFAULT_LOG_LEVEL)
    _ship_package(spark, master)
    return spark


def connect_session(remote: str, app_name: str = "airflow_hudi_occ",
                    conf: Mapping[str, str] | None = None, *, check_executors: bool = True):
    """A Spark Connect session on ``remote`` (``sc://host:port/;params``): the project's runtime
    SQL defaults where ``conf`` chooses nothing (the rest of a Connect server's settings are its
    own), the package added to the session's Python path on the server, and the one-task check
    that the server's executors import it (before any instant exists)."""
    from pyspark.sql import SparkSession
    try:
        from pyspark import SparkContext
    except ImportError:  # PySpark's thin client (pyspark-client): no classic session here
        SparkContext = None

    # PySpark's functions (F.col ...) build Connect or classic columns by a process-wide
    # switch: one process holds one kind of session. Asked before the builder, which on some
    # lines first wants the Connect client's packages (4.0 without grpcio) and on others
    # refuses only at getOrCreate (SESSION_ALREADY_EXIST)
    if SparkContext is not None and SparkContext._active_spark_context is not None:
        raise ConfigError(
            f"this process runs a classic Spark session already; it cannot also be a Spark "
            f"Connect client of {remote}", key="remote", value=remote,
            remedy="run the Connect write in a process of its own (python -m "
                   "airflow_hudi_occ.spark.job --remote ...), or stop the classic session first")
    builder = SparkSession.builder.remote(remote).appName(app_name)
    settings = {**{k: DEFAULT_CONF[k] for k in RUNTIME_CONF_KEYS}, **dict(conf or {})}
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    _ship_package(spark, None)
    if check_executors:
        _report_executors(spark)
    return spark


def submitted_master() -> str | None:
    """The master spark-submit gave this driver; None when not run by spark-submit. Read
    from the JVM's properties before any SparkContext exists, so that the Python settings
    can still depend on it."""
    if not os.environ.get("SPARK_ENV_LOADED"):
        return None
    from pyspark import SparkConf
    from pyspark.context import SparkContext
    SparkContext._ensure_initialized()  # connects to spark-submit's JVM; no context yet
    return SparkConf().get("spark.master", None)


#: Spark's own variable naming a Connect server (``sc://...``) for sessions built without one
REMOTE_ENV = "SPARK_REMOTE"


def job_session(app_name: str, master: str | None = None, *, remote: str | None = None,
                conf: Mapping[str, str] | None = None, check_executors: bool = True):
    """The session of a spark-submit job (or of ``python -m`` with ``--master``, or with
    ``--remote`` / ``$SPARK_REMOTE``: a Spark Connect client): the project's defaults where
    the submitter chose nothing, the package shipped to executors, and, on a cluster, a
    one-task check that executors import it (before any instant exists, so an executor that
    cannot import leaves nothing on the table). ``conf``: Spark settings of the session this
    builds (a Connect or ``--master`` session; under spark-submit, runtime settings set on
    the session, the rest belong on spark-submit's own ``--conf``)."""
    remote = remote or (None if master else os.environ.get(REMOTE_ENV))
    if remote:
        return connect_session(remote, app_name, conf, check_executors=check_executors)
    if master or not os.environ.get("SPARK_ENV_LOADED"):
        master = master or "local[2]"
        spark = local_session(master, app_name, conf)
    else:
        master = submitted_master()
        ensure_python_env(master)
        from pyspark import SparkConf
        from pyspark.sql import SparkSession
        builder = SparkSession.builder.appName(app_name)
        if not SparkConf().contains(LOG_LEVEL_KEY):  # a hand-written spark-submit: quiet too
            builder = builder.config(LOG_LEVEL_KEY, DEFAULT_LOG_LEVEL)
        spark = builder.getOrCreate()
        submitted = spark.sparkContext.getConf()
        for k in RUNTIME_CONF_KEYS:
            if not submitted.contains(k):  # the project's defaults unless the submitter chose
                spark.conf.set(k, DEFAULT_CONF[k])
        for k, v in (conf or {}).items():
            spark.conf.set(k, v)
        _ship_package(spark, master)
    if check_executors and not is_local_master(master):
        _report_executors(spark)
    return spark


def _report_executors(spark) -> None:
    from airflow_hudi_occ.spark.shipping import check_executors_import
    seen = check_executors_import(spark)
    print(f"executors import airflow_hudi_occ {seen['version']} from {seen['file']} "
          f"(Python {seen['python_version']} at {seen['python']})", flush=True)


#: the artifacts already added to a Connect session, by session id: the server keeps a
#: session's artifacts for its lifetime, and refuses a second file under a name it holds
_CONNECT_SHIPPED: dict[str, set[str]] = {}


def _ship_package(spark, master: str | None) -> None:
    """Add the package zip unless spark-submit's ``--py-files`` already carries one (the
    hook's does): a hand-written spark-submit to a cluster then works too. On Spark Connect
    the zip is a session artifact (``addArtifacts(pyfile=True)``): the server's Python
    workers of this session get it at the front of their path."""
    from airflow_hudi_occ.spark.submit.package import PACKAGE, PACKAGE_DIR, package_zip
    if is_connect(spark):
        if PACKAGE_DIR.is_dir():
            zipped = str(package_zip())
            shipped = _CONNECT_SHIPPED.setdefault(spark.session_id, set())
            if zipped not in shipped:
                spark.addArtifacts(zipped, pyfile=True)
                shipped.add(zipped)
        return
    if is_local_master(master) or not PACKAGE_DIR.is_dir():  # running from a zip already
        return
    shipped = spark.sparkContext.getConf().get("spark.submit.pyFiles", "") or ""
    if any(os.path.basename(f).startswith(PACKAGE + "-") for f in shipped.split(",") if f):
        return
    spark.sparkContext.addPyFile(str(package_zip()))


def jar_version(spark) -> str:
    """The Spark version of the running JVM (the jars; a Connect session: the server's), to
    compare with ``pyspark.__version__``."""
    return spark.version


#: the rows of one Arrow batch a write job hands to Python (Spark's default is 10,000); the
#: bytes of one stay bounded by Spark's own ``spark.sql.execution.arrow.maxBytesPerBatch``
#: (64 MB by default), measured on the rows themselves, so wide rows get fewer per batch
ARROW_BATCH_KEY = "spark.sql.execution.arrow.maxRecordsPerBatch"


@contextmanager
def session_conf(spark, key: str, value: str):
    """Run what the block does with ``key`` set to ``value`` on the session, then put the
    session's own value back (unset again when it had none)."""
    conf = spark.conf
    before = conf.get(key, None)
    conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            conf.unset(key)
        else:
            conf.set(key, before)


#: Spark's optimizer rule that evaluates a projection of a driver-side relation (a DataFrame
#: made from a list, pandas or Arrow: a ``LocalRelation``) on the driver, every row as if in
#: partition 0, and the key that turns optimizer rules off for a session
LOCAL_RELATION_RULE = "org.apache.spark.sql.catalyst.optimizer.ConvertToLocalRelation"
EXCLUDED_RULES_KEY = "spark.sql.optimizer.excludedRules"


@contextmanager
def task_ids_as_run(spark):
    """Run the block's jobs with ``spark_partition_id()`` (and ``monotonically_increasing_id()``)
    evaluated by the task that reads each row, even over a driver-side relation.

    Why: the route that writes new file groups per input task after counting them
    (file_group_plan.plan_by_task) counts records per ``spark_partition_id()`` in one job and
    relies on the same rows sitting in the same task in the write job. Over a ``LocalRelation`` Spark's
    ``ConvertToLocalRelation`` folds the projection on the driver, where every row gets
    partition 0, while the scan of the write job spreads the rows over up to
    ``defaultParallelism`` tasks. A file group then came from two tasks: Spark's parquet writer
    staged two files for it (``Spark wrote 2 files for file group``), and pyarrow's tasks wrote
    one file each under one name, the last rename keeping only its own rows (a bulk_insert of
    9 rows committed 4). Spark's own test sessions exclude the rule the same way; what it
    saves, evaluating a projection of a few driver-side rows once, is nothing next to a write."""
    rules = [r.strip() for r in (spark.conf.get(EXCLUDED_RULES_KEY, None) or "").split(",") if r.strip()]
    if LOCAL_RELATION_RULE in rules:
        yield
        return
    with session_conf(spark, EXCLUDED_RULES_KEY, ",".join(rules + [LOCAL_RELATION_RULE])):
        yield


def arrow_batches(spark, rows: int):
    """Run a job with up to ``rows`` records per Arrow batch, then put the session's value back.

    Why: a write task does fixed work per batch (split by file group, buffer, count). On a
    2 M-row bulk_insert, 131,072 against Spark's 10,000 measured 3.26 s against 3.87 s in one
    interleaved A/B (8 of 9 rounds faster) and no difference in another. Spark reads the value
    when the job is planned, so it is set only around the action; a job another thread of this
    session plans meanwhile sees it too, which changes its batch size, never its result.

    On Spark 3.5 the session's row count is kept: that line has no byte bound per batch
    (``spark.sql.execution.arrow.maxBytesPerBatch`` came with 4.0), so 131,072 rows of 1 MB
    would make one batch of 128 GB."""
    if not bounds_arrow_batch_bytes(spark):
        return nullcontext()
    return session_conf(spark, ARROW_BATCH_KEY, str(rows))
