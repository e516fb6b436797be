"""A Java Hudi datasource job as the operators run it: what it must be told for OCC, how it is
told without changing the user's script, and what it did, read back from the table.

Why a ``hudi-defaults.conf`` and not a helper the script calls: Java Hudi merges the global
properties of ``$HUDI_CONF_DIR/hudi-defaults.conf`` (``DFSPropertiesConfiguration``) into every
datasource write, under the options the script sets itself, and the commit-metadata prefix
applies to them too (verified with Hudi 1.2.0: ``hoodie.datasource.write.commitmeta.key.prefix``
and the keys under it, set only in that file, reach the completed commit's ``extraMetadata``;
``tests/provider/test_java_job.py``). So an unmodified ``df.write.format("hudi")`` script gets
the lock, the concurrency mode, the LAZY failed-writes policy, early conflict detection with
direct markers and the attempt's writer id and batch key. The file is read once per JVM: each
attempt is its own spark-submit with its own file (0600, in a private folder, deleted after).

What the file cannot do: a script that sets its own ``commitmeta.key.prefix`` (or overrides
the lock) wins over it, as Hudi merges the script's options last; the operator then finds no
commit carrying the attempt's writer id and fails the task saying so.

The outcome is read from the table: the completed write whose commit metadata carries the
attempt's writer id. The driver's output only classifies a failure: Hudi's
``HoodieWriteConflictException`` or ``HoodieEarlyConflictDetectionException`` anywhere in it
is a conflict (retried on a fresh instant), anything else is an error quoted from the output.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from airflow_hudi_occ.core.concurrency.locks import JAVA_CLASS_NAMES
from airflow_hudi_occ.spark.submit.conf import QUIET_LOG4J2
from airflow_hudi_occ.core.config import (FAILED_WRITES_POLICY, LOCK_PROVIDER, NUM_RETRIES_ON_CONFLICT, RECORD_KEY, TABLE_NAME,
                                          WRITE_TABLE_VERSION)
from airflow_hudi_occ.core.concurrency.markers.write_markers import markers_for
from airflow_hudi_occ.core.errors import HudiOccError
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.format.layout import FileGroupId
from airflow_hudi_occ.core.format.metadata import EXTRA_ATTEMPT, EXTRA_BATCH_KEY, EXTRA_CHECKPOINT, EXTRA_WRITER_ID
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.spark.submit.options import SparkWriteOptions

#: the Hudi bundle a job gets when neither the operator nor the Spark connection names one
DEFAULT_BUNDLE = "org.apache.hudi:hudi-spark3.5-bundle_2.12:1.2.0"
#: Hudi's global properties: ``$HUDI_CONF_DIR/hudi-defaults.conf``
CONF_DIR_ENV = "HUDI_CONF_DIR"
DEFAULTS_FILE = "hudi-defaults.conf"
#: Hudi's datasource key naming the prefix of options copied into the commit's extraMetadata
COMMITMETA_PREFIX_KEY = "hoodie.datasource.write.commitmeta.key.prefix"
#: the prefix of this project's commit-metadata keys (``core/format/metadata.py``)
COMMITMETA_PREFIX = EXTRA_WRITER_ID.rsplit(".", 1)[0] + "."

#: what OCC needs of every Java writer; an option given by the connection or the operator wins
#: only where it does not undo OCC (the concurrency mode and the failed-writes policy are forced)
FORCED_OPTIONS = {
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    FAILED_WRITES_POLICY.key: "LAZY",
    # the operator spends the conflict budget (this key, or conflict_retries), one attempt per
    # job on a fresh instant: a Java job retrying inside an attempt would spend it twice over
    NUM_RETRIES_ON_CONFLICT.key: "0",
}
#: early conflict detection on direct markers, so that it (and the project's sensor and page)
#: sees every writer's markers on storage; the connection or the operator may turn it off
DEFAULT_OPTIONS = {
    "hoodie.write.concurrency.early.conflict.detection.enable": "true",
    "hoodie.write.markers.type": "DIRECT",
}
#: Spark settings the Hudi datasource asks for (its quick-start), where the submitter set none
SPARK_CONF = {
    "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
    "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
    "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
}

#: keys that are this project's and mean nothing to Java (the attempt log's labels, ...)
_OURS_ONLY = ("hoodie.occ.",)
_ZK = "hoodie.write.lock.zookeeper."
_JAVA_LOCK = {name: cls for cls, name in JAVA_CLASS_NAMES.items()}

WRITE_CONFLICT = "org.apache.hudi.exception.HoodieWriteConflictException"
EARLY_CONFLICT = "org.apache.hudi.exception.HoodieEarlyConflictDetectionException"
CONFLICT_CLASSES = (WRITE_CONFLICT, EARLY_CONFLICT)
# ConcurrentOperation.toString in Hudi's conflict message: "first operation = {actionType=commit,
# instantTime=2026..., ...}, second operation = {... instantTime=2026...}" (this writer first)
_INSTANT_IN_MESSAGE = re.compile(r"instantTime=(\d{17})")
#: Hudi's heartbeat client logs this (INFO) when the write begins its instant: how the operator
#: learns the running instant of its own job while it runs (two Java writers' pending instants
#: look alike on the timeline; the writer id reaches only the completed commit)
HEARTBEAT_LOGGER = "org.apache.hudi.client.heartbeat.HoodieHeartbeatClient"
_BEGIN_LINE = re.compile(r"start heartbeat for instant time (\d{17})")
LOG4J2_FILE = "log4j2.properties"
_FOLDER_PREFIX = "hudi-occ-java-conf-"
_JAVA_CAUSE_LINE = re.compile(r"^Caused by: ((?:org|java|scala)\.[\w.$]+(?:Exception|Error))(?::\s*(.*))?$")
_JAVA_EXCEPTION_LINE = re.compile(r"^(?::\s*)?((?:org|java|scala|py4j)\.[\w.$]+(?:Exception|Error))(?::\s*(.*))?$")


def zookeeper_url_with_port(url: str, port: str | None) -> str:
    """Hudi 1.2's ``ZookeeperBasedLockProvider`` gives Curator the url alone and ignores
    ``hoodie.write.lock.zookeeper.port``: a host without a port would go to 2181. So each host
    of the url gets the port (a chroot after the last host is kept)."""
    if not port:
        return url
    hosts, slash, chroot = url.partition("/")
    out = [h if ":" in h or not h.strip() else f"{h.strip()}:{port}" for h in hosts.split(",")]
    return ",".join(out) + (slash + chroot if slash else "")


def occ_options(options: Mapping[str, str]) -> dict[str, str]:
    """The connection's and operator's ``hoodie.*`` options as any Java Hudi client takes them
    (a datasource write or a table service): the lock as Java's class and url, OCC, LAZY,
    early detection on direct markers. No attempt stamp: :func:`java_options` adds it."""
    out = {**DEFAULT_OPTIONS}
    out.update({k: str(v) for k, v in options.items()
                if not k.startswith(_OURS_ONLY) and k not in FAILED_WRITES_POLICY.aliases})
    out.update(FORCED_OPTIONS)
    provider = out.get(LOCK_PROVIDER.key)
    if provider:
        out[LOCK_PROVIDER.key] = _JAVA_LOCK.get(provider, provider)
    if out.get(_ZK + "url"):
        out[_ZK + "url"] = zookeeper_url_with_port(out[_ZK + "url"], out.get(_ZK + "port"))
    return out


def java_options(options: Mapping[str, str], *, writer_id: str, batch_key: str, attempt: int,
                 checkpoint: str | None = None) -> dict[str, str]:
    """The connection's and operator's ``hoodie.*`` options as a Java writer takes them, plus
    what OCC needs and the attempt's stamp (``airflow_hudi_occ.*`` commit metadata)."""
    out = occ_options(options)
    out[COMMITMETA_PREFIX_KEY] = COMMITMETA_PREFIX
    out[EXTRA_WRITER_ID] = writer_id
    out[EXTRA_BATCH_KEY] = batch_key
    out[EXTRA_ATTEMPT] = str(attempt)
    if checkpoint:
        out[EXTRA_CHECKPOINT] = str(checkpoint)
    return out


#: the table version Java Hudi 1.2 writes when ``hoodie.write.table.version`` is not given
JAVA_WRITE_TABLE_VERSION = "9"


def first_write_table_options(options: Mapping[str, str]) -> "SparkWriteOptions | None":
    """The table a Java first write expects, from the options the job gets (they reach it as
    ``hudi-defaults.conf``): made before the job by the operator (create-if-absent, as our
    engine's first write), so that Java's first writers are admitted one at a time. None
    when the options do not name the table and its record key: the user's script alone knows
    them, and a table made from a guess would make Java refuse the write ("Config conflict");
    Java then makes its own table and its first writes race (docs/concurrency.md)."""
    opts = {str(k): str(v) for k, v in options.items() if v is not None}
    if not TABLE_NAME.get(opts) or not RECORD_KEY.get(opts):
        return None
    opts.setdefault(WRITE_TABLE_VERSION.key, JAVA_WRITE_TABLE_VERSION)
    return SparkWriteOptions.from_options(opts, warn=lambda *a, **k: None, partial=True)


def render_defaults(options: Mapping[str, str]) -> str:
    """``hudi-defaults.conf``: one ``key=value`` a line (Hudi splits at the first ``=``); a value
    with a line break would be cut there, so it is refused."""
    lines = []
    for k, v in sorted(options.items()):
        if "\n" in str(v) or "\r" in str(v) or "=" in k or not k.strip():
            raise ValueError(f"option {k!r} cannot be written to {DEFAULTS_FILE}: a line break "
                             "in its value or an '=' in its key")
        lines.append(f"{k}={v}")
    return "\n".join(lines) + "\n"


class DefaultsFolder:
    """A private ``HUDI_CONF_DIR`` for one attempt (0700 folder, 0600 file: the lock's
    credentials may be in it); removed by :meth:`remove` (the operator does so after the job).
    Beside it, the driver's log4j2 file: the project's quiet one (WARN) plus Hudi's heartbeat
    client at INFO, whose first line names the attempt's instant (:func:`began_instant`)."""

    def __init__(self, options: Mapping[str, str]):
        text = render_defaults(options)  # a value it cannot carry fails before any folder exists
        self.path = tempfile.mkdtemp(prefix=_FOLDER_PREFIX)
        fd = os.open(os.path.join(self.path, DEFAULTS_FILE), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        with open(self.log4j2, "w") as f:
            f.write(QUIET_LOG4J2.read_text() + f"logger.hudi_begin.name = {HEARTBEAT_LOGGER}\n"
                    "logger.hudi_begin.level = info\n")

    @property
    def log4j2(self) -> str:
        return os.path.join(self.path, LOG4J2_FILE)

    def remove(self) -> None:
        remove_folder(self.path)


def remove_folder(path: str | None) -> None:
    """A :class:`DefaultsFolder` removed by its path (a deferred attempt's, on resuming); a
    path that is not one is left alone."""
    if path and os.path.basename(os.path.normpath(path)).startswith(_FOLDER_PREFIX):
        shutil.rmtree(path, ignore_errors=True)


#: the table connection's extra holding the Java set-up: {"spark_submit", "spark_home",
#: "python", "bundle", "jars"} (each optional; an operator's arguments win)
CONN_EXTRA = "java"
SETUP_KEYS = ("spark_submit", "spark_home", "python", "bundle", "jars")
#: Hadoop's s3a connector for the Java side's Hadoop (3.3.4 in the Spark 3.5 that Hudi 1.2's
#: bundle is built for) and the AWS SDK that Hadoop release pins: what a job needs for an S3
#: table (``scripts/install-java-hudi.sh`` fetches them; give them as ``jars``)
S3A_JARS = ("org.apache.hadoop:hadoop-aws:3.3.4", "com.amazonaws:aws-java-sdk-bundle:1.12.262")


@dataclass
class JavaSetup:
    """Where a Java job's Spark and Hudi come from, shared by the Java operators (the write and
    the table services): each field from the operator's argument, else the table connection's
    ``java`` extra, else the worker's defaults (``docs/java-engine.md``, "The Java set-up")."""

    spark_submit: str | None = None
    spark_home: str | None = None
    python: str | None = None
    bundle: str | None = None
    #: more jars for the job (paths or comma-separated), e.g. :data:`S3A_JARS` for an S3 table
    jars: list | str | None = None

    @classmethod
    def resolve(cls, extras: Mapping | None, **given: str | None) -> "JavaSetup":
        """``given`` (the operator's arguments, by :data:`SETUP_KEYS` name) over the connection's
        ``java`` extra; a malformed extra is a ``ValueError`` naming the shape it must have."""
        setup = (extras or {}).get(CONN_EXTRA) or {}
        if not isinstance(setup, dict):
            raise ValueError(f"the table connection's extra {CONN_EXTRA!r} must be a JSON object, "
                             'e.g. {"java": {"spark_submit": "/opt/spark/bin/spark-submit"}}')
        return cls(**{k: given.get(k) or setup.get(k) for k in SETUP_KEYS})

    def bundle_conf(self, spark_conf: Mapping) -> tuple[str | None, str | None]:
        """``(jars, packages)`` for spark-submit: the bundle given, else none where ``spark_conf``
        or ``$SPARK_CONF_DIR/spark-defaults.conf`` already names jars, else :data:`DEFAULT_BUNDLE`."""
        bundle = self.bundle
        if not bundle:
            keys = ("spark.jars", "spark.jars.packages")
            if any(k in spark_conf for k in keys):
                return None, None
            defaults = os.path.join(os.environ.get("SPARK_CONF_DIR") or "", "spark-defaults.conf")
            try:
                with open(defaults) as f:
                    if any(line.split(None, 1)[:1] and line.split(None, 1)[0] in keys for line in f):
                        return None, None
            except OSError:
                pass
            bundle = DEFAULT_BUNDLE
        more = self.jars.split(",") if isinstance(self.jars, str) else list(self.jars or [])
        more = [str(j).strip() for j in more if str(j).strip()]
        if bundle.endswith(".jar") or "/" in bundle:
            return ",".join([bundle, *more]), None
        return ",".join(more) or None, bundle

    def job_settings(self, spark_conf: Mapping, spark_env: Mapping, conf_dir: "DefaultsFolder", *,
                     table_path: str, storage_options: Mapping | None) -> dict:
        """What ``HudiSparkJobHook`` takes for one Java job: its Spark conf (the table's store as
        Hadoop settings under the user's own, the driver's log4j2 file), environment (the
        store's credentials, never on the command line), jars or packages, spark-submit."""
        store_conf, store_env = hadoop_store_settings(table_path, storage_options)
        jars, packages = self.bundle_conf(spark_conf)
        return {"conf": driver_conf({**store_conf, **spark_conf}, conf_dir),
                "env_vars": {**store_env, **self.env(spark_env, conf_dir)},
                "jars": jars, "packages": packages, "spark_submit": self.spark_submit}


    def env(self, spark_env: Mapping, conf_dir: "DefaultsFolder") -> dict[str, str]:
        """The job's environment: its Spark home and Python, the user's ``spark_env``, and the
        attempt's ``HUDI_CONF_DIR``."""
        env = {}
        if self.spark_home:
            env["SPARK_HOME"] = self.spark_home
        if self.python:
            env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = self.python
        env.update({k: str(v) for k, v in spark_env.items()})
        env[CONF_DIR_ENV] = conf_dir.path
        return env


def hadoop_store_settings(table_path: str, storage_options: Mapping | None) -> tuple[dict, dict]:
    """The connection's storage options (s3fs's: ``key``, ``secret``, ``token``,
    ``endpoint_url`` / ``client_kwargs``, ``anon``) as Hadoop's s3a connector takes them, for
    an ``s3://`` or ``s3a://`` table: ``(spark conf, environment)``. ``s3://`` is served by
    ``S3AFileSystem`` too, so the job and the operator name the table alike. The credentials go
    to the environment (``AWS_ACCESS_KEY_ID`` ..., which s3a's default provider chain reads):
    the spark-submit command line is visible to every user of the host. With a driver on the
    cluster or executors on other hosts, that environment stays here: give those the
    credentials their own way (instance roles, ``spark.executorEnv.*``). Other stores: nothing
    (``spark_conf`` carries their Hadoop settings)."""
    scheme = table_path.split("://", 1)[0].lower() if "://" in table_path else ""
    so = dict(storage_options or {})
    if scheme not in ("s3", "s3a") or not so:
        return {}, {}
    client = so.get("client_kwargs") or {}
    hadoop = {"fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem"}
    endpoint = so.get("endpoint_url") or client.get("endpoint_url")
    if endpoint:  # an S3-compatible store: buckets in the path, plain HTTP if it says so
        hadoop["fs.s3a.endpoint"] = str(endpoint)
        hadoop["fs.s3a.path.style.access"] = "true"
        hadoop["fs.s3a.connection.ssl.enabled"] = str(str(endpoint).startswith("https://")).lower()
    region = so.get("region_name") or client.get("region_name")
    if region:
        hadoop["fs.s3a.endpoint.region"] = str(region)
    if so.get("anon"):
        hadoop["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"
    env = {name: str(so[key]) for key, name in (("key", "AWS_ACCESS_KEY_ID"), ("secret", "AWS_SECRET_ACCESS_KEY"),
                                                ("token", "AWS_SESSION_TOKEN")) if so.get(key)}
    return {f"spark.hadoop.{k}": v for k, v in hadoop.items()}, env

def driver_conf(spark_conf: Mapping, conf_dir: "DefaultsFolder") -> dict:
    """``spark_conf`` with the driver pointed at the attempt's log4j2 file (Hudi's heartbeat and
    service lines let through), unless the user names a log4j configuration of their own."""
    conf = dict(spark_conf)
    java_opts = str(conf.get("spark.driver.extraJavaOptions") or "")
    if "log4j" not in java_opts:
        conf["spark.driver.extraJavaOptions"] = (
            f"{java_opts} -Dlog4j2.configurationFile=file:{conf_dir.log4j2}").strip()
    return conf


def began_instant(line: str) -> str | None:
    """The instant a Java write began, from its heartbeat client's line; else None."""
    m = _BEGIN_LINE.search(line)
    return m.group(1) if m else None


def log_lines(path: str | None, keep: int = 2000) -> list[str]:
    """The last ``keep`` lines of a detached job's log (``provider/deferred_job.py``); [] if
    this host cannot read it."""
    if not path:
        return []
    try:
        with open(path, errors="replace") as f:
            return [line.rstrip("\n") for line in collections.deque(f, maxlen=keep)]
    except OSError:
        return []


def began_in(lines: Iterable[str]) -> str | None:
    """The first instant Hudi's heartbeat line names in ``lines``; None if none does."""
    for line in lines:
        if inst := began_instant(line):
            return inst
    return None


@dataclass
class JobFailure:
    """What the driver's output says about a job that did not commit."""

    conflict: bool = False
    java_class: str | None = None
    message: str = ""
    instant: str | None = None
    other_instant: str | None = None
    tail: list = field(default_factory=list)


def read_failure(lines: Iterable[str]) -> JobFailure:
    """Classify a failed job from its output: a Hudi conflict class anywhere is a conflict (with
    the two instants of Hudi's message, this writer's first); else the last Java exception
    line (with the ``Caused by:`` lines of its stack trace), else the last Python exception
    line, is the job's own error."""
    lines = list(lines)
    out = JobFailure(tail=lines[-20:])
    last_java = last_python = None
    causes: list[str] = []
    for line in lines:
        text = line.strip()
        for cls in CONFLICT_CLASSES:
            if cls in text and not out.conflict:
                out.conflict, out.java_class = True, cls
                out.message = text.split(cls, 1)[1].lstrip(": ").strip()
        if out.conflict and out.instant is None:
            times = _INSTANT_IN_MESSAGE.findall(text)
            if len(times) >= 2:
                out.instant, out.other_instant = times[0], times[1]
        m = _JAVA_EXCEPTION_LINE.match(text)
        cause = _JAVA_CAUSE_LINE.match(text)
        if m and not m.group(1).startswith("py4j."):
            last_java, causes = (m.group(1), m.group(2) or ""), []
        elif cause and last_java is not None:
            said = f"{cause.group(1)}: {cause.group(2) or ''}".strip(": ")
            if said not in causes and len(causes) < 3:
                causes.append(said)
        elif re.match(r"^[A-Za-z_][\w.]*(Error|Exception)(:|$)", text):
            last_python = tuple(text.split(":", 1)) if ":" in text else (text, "")
    if not out.conflict:
        found = last_java or last_python
        if found:
            out.java_class, out.message = found[0].strip(), found[1].strip()
        if last_java and causes:  # Hudi wraps the root cause ("Unable to load class"): name it
            out.message = "; ".join([out.message, *(f"caused by {c}" for c in causes)]).lstrip("; ")
    return out


def find_writer_commit(table_path: str, storage_options: Mapping | None, writer_id: str):
    """The completed write instant whose commit metadata carries ``writer_id``, and that
    metadata; ``(None, None)`` when there is none (or no table)."""
    try:
        table = Table.open(table_path, dict(storage_options or {}) or None)
    except Exception:  # noqa: BLE001 - no table: nothing committed
        return None, None
    tl = table.timeline()
    for inst in reversed(tl.completed_by_completion_time()):
        if inst.is_write:
            meta = tl.commit_metadata(inst)
            if meta.extra_metadata.get(EXTRA_WRITER_ID) == writer_id:
                return inst, meta
    return None, None


def new_pending_writes(table_path: str, storage_options: Mapping | None, before: set[str]) -> list[str]:
    """Requested times of write instants pending now that were not on the timeline ``before``:
    a Java attempt that failed leaves its instant for the LAZY rollback."""
    try:
        tl = Table.open(table_path, dict(storage_options or {}) or None).timeline()
    except Exception:  # noqa: BLE001
        return []
    return [i.requested_time for i in tl.pending() if i.is_write and i.requested_time not in before]


def instants_on(table_path: str, storage_options: Mapping | None) -> set[str]:
    try:
        tl = Table.open(table_path, dict(storage_options or {}) or None).timeline()
    except Exception:  # noqa: BLE001
        return set()
    return {i.requested_time for i in tl.instants}


def discarded_work(table_path: str, storage_options: Mapping | None, instant: str) -> tuple[list[str], int]:
    """What a lost Java attempt wrote and will lose: its file groups and data files, from its
    markers (left until the LAZY rollback removes them with the files); ``([], 0)`` if none."""
    try:
        markers = markers_for(Table.open(table_path, dict(storage_options or {}) or None), instant)
        groups = sorted(str(FileGroupId(*g)) for g in markers.file_groups())
        return groups, len(markers.data_files())
    except Exception:  # noqa: BLE001 - best effort: the record says less, nothing fails
        return [], 0


class JavaJobError(HudiOccError):
    """A Java Hudi job failed with an error of its own (not a conflict): ``java_class`` and the
    message are the job's, quoted from its output; ``service`` and ``instant`` say what it was
    doing, where known."""

    def __init__(self, message: str, *, java_class: str | None = None, service: str | None = None,
                 instant: str | None = None, remedy: str | None = None):
        self.java_class = java_class
        self.service = service
        self.instant = instant
        super().__init__(message, remedy=remedy or "fix the cause the Java job names (its log is in the "
                                                   "task log); a plan it left pending runs again next time")


#: what each Java service leaves on the timeline when it did its work (its completed action)
SERVICE_ACTIONS = {"clean": Action.CLEAN, "cluster": Action.REPLACE_COMMIT, "compact": Action.COMMIT}


def service_outcome(before, after, service: str) -> dict:
    """What a Java table service did, read from the timeline ``before`` and ``after`` its job
    (two core :class:`Timeline` loads): the instant it completed (a clean, a clustering
    replacecommit, a compaction commit), the failed writes its clean rolled back (LAZY),
    the instants archival moved off the active timeline, and a plan it left pending."""
    was_done = {i.requested_time for i in before.completed()}
    was_pending = {i.requested_time for i in before.pending()}
    new = [i for i in after.completed_by_completion_time() if i.requested_time not in was_done]
    out: dict = {"rolled_back": [{"rollback_instant": i.requested_time} for i in new if i.action is Action.ROLLBACK]}
    action = SERVICE_ACTIONS.get(service)
    if service == "archive":
        still = {i.requested_time for i in after.instants}
        out["archived"] = sorted(t for t in was_done if t not in still)
        return out
    def of_service(i) -> bool:
        if service == "cluster":
            return after.is_clustering(i)
        if service == "compact":  # a compaction completes as a commit; its plan stays beside it
            return i.action is Action.COMPACTION or (
                i.completed_action is action and (i.requested_time in was_pending or after.compaction_plan(i) is not None))
        return i.completed_action is action

    done = [i for i in new if of_service(i)]
    if done:
        out["instant"] = done[-1].requested_time
        out["completion_time"] = done[-1].completion_time
    left = [i.requested_time for i in after.pending() if i.requested_time not in was_pending and of_service(i)]
    if left:
        out["pending"] = left
    return out
