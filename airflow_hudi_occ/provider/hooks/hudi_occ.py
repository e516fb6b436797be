"""Hooks: a Hudi table connection and a ZooKeeper (lock) connection, turned into Hudi options.

Why a hook and not plain operator arguments: the table's storage options and its lock (which
ZooKeeper ensemble, which base path, which credentials) are deployment facts, the same for
every DAG that writes the table; they belong in one Airflow connection, and the DAG only says
what it writes. The hook merges, from weakest to strongest:

1. the ZooKeeper connection named by the table connection (``zookeeper_conn_id``), as Hudi's
   ``hoodie.write.lock.zookeeper.*`` keys;
2. the table connection's extras: ``lock_provider``, ``storage_options`` and ``options``
   (a JSON object of ``hoodie.*`` keys; top-level ``hoodie.*`` extras are accepted too);
3. the operator's own ``options``.

The result is a plain ``{hoodie key: value}`` mapping (what the Spark job takes as
``--option k=v``) and a typed :class:`~airflow_hudi_occ.core.config.WriteConfig` parsed from it,
so an invalid value fails in the task with the key named, before Spark starts.

A missing table connection is allowed when the operator gives the table path: the embedded
defaults (file-system lock) then apply, which is what the example DAGs do out of the box.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from typing import Any, Mapping

import psutil
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk.log import mask_secret

from airflow_hudi_occ.core.config import LOCK_PROVIDER, WriteConfig
from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.job_secrets import (SECRETS_ENV, SECRETS_FILE_ENV, JobSecrets,
                                               is_secret_key, remove_quietly, secret_values,
                                               write_secrets_file)
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider.get_provider_info import connection_type
from airflow_hudi_occ.provider.version_compat import AirflowException, BaseHook, Connection
from airflow_hudi_occ.provider.process_tree import kill_session_tree
from airflow_hudi_occ.spark.submit.conf import default_conf, log_conf
from airflow_hudi_occ.spark.submit.master import check_master_reachable, is_local_master
from airflow_hudi_occ.spark.submit.options import SparkWriteOptions
from airflow_hudi_occ.spark.submit.package import package_zip

ZK_PREFIX = "hoodie.write.lock.zookeeper."


def mask_secrets(options: Mapping[str, Any] | None = None,
                 storage_options: Mapping[str, Any] | None = None) -> None:
    """Register every credential among these options with Airflow's secret masker (task log,
    rendered fields, the supervisor's log): a connection's password is masked by Airflow, but
    a ``login:password`` made from it, or a key in the storage options, is not."""
    for value in secret_values(options, storage_options):
        mask_secret(value)


def _extras(conn) -> dict:
    if conn is None:
        return {}
    try:
        return dict(conn.extra_dejson or {})
    except Exception:  # noqa: BLE001 - unreadable extras are a config error below
        raise ConfigError(f"the extras of connection {conn.conn_id!r} are not a JSON object",
                          key="extra", remedy="fix the connection's extra field (JSON)") from None


def _json_object(value: Any, what: str) -> dict:
    if value in (None, ""):
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    try:
        d = json.loads(value)
    except (TypeError, ValueError):
        d = None
    if not isinstance(d, dict):
        raise ConfigError(f"{what} must be a JSON object, got {value!r}", key=what,
                          remedy=f"give {what} as a JSON object, e.g. {{}}")
    return d


def zookeeper_lock_options(conn) -> dict[str, str]:
    """Hudi's ZooKeeper lock keys from a ``hudi_zookeeper`` connection.

    host = comma-separated hosts (``zk1:2181,zk2``; a chroot may follow), port = default port,
    schema = lock base path, login/password = digest credentials, extras ``lock_key``,
    ``session_timeout_ms``, ``connection_timeout_ms``.
    """
    if not conn.host:
        raise ConfigError(f"ZooKeeper connection {conn.conn_id!r} has no hosts",
                          key="host", remedy="set the connection's host to zk1:2181,zk2:2181")
    ex = _extras(conn)
    opts = {"hoodie.write.lock.provider": "zookeeper",
            ZK_PREFIX + "url": conn.host.strip(),
            ZK_PREFIX + "port": str(conn.port or 2181)}
    base = (conn.schema or ex.get("base_path") or "").strip()
    if base:
        opts[ZK_PREFIX + "base_path"] = base if base.startswith("/") else "/" + base
    if conn.login:
        if not conn.password:
            raise ConfigError(f"ZooKeeper connection {conn.conn_id!r} has a login but no password",
                              key="password", remedy="set both login and password for digest auth, or neither")
        opts[ZK_PREFIX + "auth"] = f"{conn.login}:{conn.password}"
        mask_secrets(opts)
    for extra, key in (("lock_key", "lock_key"), ("session_timeout_ms", "session_timeout_ms"),
                       ("connection_timeout_ms", "connection_timeout_ms")):
        if ex.get(extra) not in (None, ""):
            opts[ZK_PREFIX + key] = str(ex[extra])
    return opts


def _ui_field_behaviour(cls) -> dict[str, Any]:
    """The connection form's field behaviour, from provider.yaml (``ui-field-behaviour``).

    Airflow 3.2+ reads the form from provider.yaml itself and never calls the hooks'
    ``get_ui_field_behaviour``/``get_connection_form_widgets`` (it deprecates them). They
    remain for an Airflow that still asks the hook, and derive from the same yaml, so the two
    cannot drift apart. Each hook class binds them in its own body: Airflow looks in the
    class's ``__dict__``, not its bases."""
    b = connection_type(cls.conn_type).get("ui-field-behaviour") or {}
    return {"hidden_fields": list(b.get("hidden-fields") or []),
            "relabeling": dict(b.get("relabeling") or {}),
            "placeholders": dict(b.get("placeholders") or {})}


def _connection_form_widgets(cls) -> dict[str, Any]:
    """The extra fields of the connection form, from provider.yaml (``conn-fields``)."""
    from flask_appbuilder.fieldwidgets import BS3TextFieldWidget
    from flask_babel import lazy_gettext
    from wtforms import IntegerField, StringField

    out = {}
    for name, f in (connection_type(cls.conn_type).get("conn-fields") or {}).items():
        types = f.get("schema", {}).get("type") or ["string"]
        field = IntegerField if "integer" in types else StringField
        out[name] = field(lazy_gettext(f.get("label", name)), widget=BS3TextFieldWidget(),
                          description=f.get("description"))
    return out


class HudiZooKeeperHook(BaseHook):
    """A ZooKeeper ensemble used as Hudi's lock (Java-compatible lock nodes, see core.locks)."""

    conn_name_attr = "zookeeper_conn_id"
    default_conn_name = "hudi_zookeeper_default"
    conn_type = "hudi_zookeeper"
    hook_name = "ZooKeeper (Hudi lock)"
    get_ui_field_behaviour = classmethod(_ui_field_behaviour)
    get_connection_form_widgets = classmethod(_connection_form_widgets)

    def __init__(self, zookeeper_conn_id: str = default_conn_name, **kwargs):
        super().__init__(**kwargs)
        self.zookeeper_conn_id = zookeeper_conn_id

    def lock_options(self) -> dict[str, str]:
        return zookeeper_lock_options(self.get_connection(self.zookeeper_conn_id))

    def get_conn(self):
        """A started kazoo client for the ensemble (the caller stops it)."""
        from kazoo.client import KazooClient

        from airflow_hudi_occ.core.concurrency.locks.zookeeper import connect_string
        opts = self.lock_options()
        auth = opts.get(ZK_PREFIX + "auth")
        client = KazooClient(hosts=connect_string(opts[ZK_PREFIX + "url"], int(opts[ZK_PREFIX + "port"])),
                             auth_data=[("digest", auth)] if auth else None)
        client.start(timeout=int(opts.get(ZK_PREFIX + "connection_timeout_ms", 15000)) / 1000)
        return client


class HudiOccHook(BaseHook):
    """One Hudi table: its path, storage options and lock, as Hudi write options."""

    conn_name_attr = "hudi_conn_id"
    default_conn_name = "hudi_occ_default"
    conn_type = "hudi_occ"
    hook_name = "Hudi table (OCC)"
    get_ui_field_behaviour = classmethod(_ui_field_behaviour)
    get_connection_form_widgets = classmethod(_connection_form_widgets)

    def __init__(self, hudi_conn_id: str | None = default_conn_name, *, table_path: str | None = None,
                 options: Mapping[str, Any] | None = None, lock_provider: str | None = None,
                 zookeeper_conn_id: str | None = None, storage_options: Mapping[str, Any] | None = None,
                 **kwargs):
        super().__init__(**kwargs)
        self.hudi_conn_id = hudi_conn_id
        self._table_path = table_path
        self._options = {str(k): v for k, v in (options or {}).items() if v is not None}
        self._lock_provider = lock_provider
        self._zookeeper_conn_id = zookeeper_conn_id
        self._storage_options = dict(storage_options) if storage_options is not None else None
        self._conn = None
        self._conn_loaded = False

    # -- the connection -------------------------------------------------------------------------

    @property
    def connection(self):
        """The table connection, or None when it does not exist and the path is given."""
        if not self._conn_loaded:
            self._conn_loaded = True
            if self.hudi_conn_id:
                try:
                    self._conn = self.get_connection(self.hudi_conn_id)
                except Exception as e:  # noqa: BLE001 - AirflowNotFoundException and friends
                    if not self._table_path:
                        raise ConfigError(
                            f"connection {self.hudi_conn_id!r} not found ({e}) and no table path "
                            "given", key="hudi_conn_id",
                            remedy="create the connection (type hudi_occ, host = table base path) "
                                   "or pass table_path to the operator") from e
                    self.log.info("no connection %s: using the operator's table path and the "
                                  "embedded defaults", self.hudi_conn_id)
        return self._conn

    @property
    def table_path(self) -> str:
        if self._table_path:
            return self._table_path
        conn = self.connection
        path = (conn.host or "") if conn is not None else ""
        if conn is not None and conn.schema and "://" not in path:
            path = f"{conn.schema}://{path}"  # e.g. schema s3 + host bucket/prefix
        path = path or _extras(conn).get("base_path", "")
        if not path:
            raise ConfigError("no table path: neither the operator nor the connection gives one",
                              key="table_path", remedy="pass table_path or set the connection's host")
        return path

    @property
    def storage_options(self) -> dict:
        if self._storage_options is not None:
            out = dict(self._storage_options)
        else:
            out = _json_object(_extras(self.connection).get("storage_options"), "storage_options")
        mask_secrets(storage_options=out)
        return out

    # -- options ---------------------------------------------------------------------------------

    def write_options(self, extra: Mapping[str, Any] | None = None) -> dict[str, str]:
        """The merged ``hoodie.*`` options (weakest first: ZooKeeper connection, table
        connection, hook arguments, ``extra``), as strings."""
        ex = _extras(self.connection)
        conn_opts = _json_object(ex.get("options"), "options")
        conn_opts.update({k: v for k, v in ex.items() if str(k).startswith("hoodie.")})
        explicit = {**self._options, **{str(k): v for k, v in (extra or {}).items() if v is not None}}
        provider = (self._lock_provider or explicit.get(LOCK_PROVIDER.key)
                    or conn_opts.get(LOCK_PROVIDER.key) or ex.get("lock_provider") or "")
        zk_id = self._zookeeper_conn_id or ex.get("zookeeper_conn_id")
        merged: dict[str, Any] = {}
        if str(provider).lower() == "zookeeper" or (zk_id and not provider):
            merged.update(HudiZooKeeperHook(zk_id or HudiZooKeeperHook.default_conn_name).lock_options())
        elif provider:
            merged[LOCK_PROVIDER.key] = provider
        merged.update(conn_opts)
        merged.update(explicit)
        if provider and LOCK_PROVIDER.key not in explicit:
            merged[LOCK_PROVIDER.key] = provider
        out = {k: (json.dumps(v) if isinstance(v, (dict, list)) else str(v)) for k, v in merged.items()}
        mask_secrets(out)
        return out

    def write_config(self, extra: Mapping[str, Any] | None = None) -> WriteConfig:
        """The typed config of the complete options (connection and operator); raises
        ConfigError naming a bad or unknown key before anything runs."""
        return SparkWriteOptions.from_options(self.write_options(extra), warn=self.log.warning).write_config

    def get_table(self):
        return Table.open(self.table_path, self.storage_options or None)

    def get_conn(self):
        return self.get_table()

    def test_connection(self) -> tuple[bool, str]:
        try:
            t = self.get_table()
            self.write_config()
            return True, f"table {t.name} (version {t.version}) at {self.table_path}"
        except Exception as e:  # noqa: BLE001 - shown in the UI
            return False, str(e)


# --- the Spark job ----------------------------------------------------------------------------


def _in_spark_defaults(key: str) -> bool:
    """Whether the deployment's spark-defaults.conf (``$SPARK_CONF_DIR``, which spark-submit
    reads) sets ``key``: a cap set there is a cap, and warning about it would mislead."""
    folder = os.environ.get("SPARK_CONF_DIR")
    try:
        with open(os.path.join(folder, "spark-defaults.conf")) if folder else open(os.devnull) as f:
            return any(line.split(None, 1)[:1] == [key] for line in f)
    except OSError:
        return False


def _split_secret_arguments(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """The job's arguments without the ``--option k=v`` items whose key is a credential, and
    those options."""
    public: list[str] = []
    secret: dict[str, str] = {}
    i = 0
    while i < len(args):
        a = str(args[i])
        if a == "--option" and i + 1 < len(args):
            key, sep, value = str(args[i + 1]).partition("=")
            if sep and is_secret_key(key.strip()):
                secret[key.strip()] = value
                i += 2
                continue
        elif a.startswith("--option="):
            key, sep, value = a[len("--option="):].partition("=")
            if sep and is_secret_key(key.strip()):
                secret[key.strip()] = value
                i += 1
                continue
        public.append(args[i])
        i += 1
    return public, secret


#: where a write job runs when the Spark connection does not exist (the example DAGs' case)
LOCAL_MASTER = "local[*]"


class HudiSparkJobHook(SparkSubmitHook):
    """The Apache Spark provider's SparkSubmitHook, with the changes the write needs.

    - spark-submit starts in its own session (``start_new_session``): its process group holds
      the JVM, the local-mode Python driver and the Python workers, so :meth:`kill_tree` can end
      all of them. The provider's own ``on_kill`` SIGKILLs spark-submit alone; measured here
      (tests/provider/test_kill.py), the local-mode Python driver survives it as an orphan and
      keeps writing (and heartbeating) until its job ends.
    - Every output line is also given to ``on_line``, so the operator reads the job's
      ``HUDI_OCC_BEGIN`` / ``HUDI_OCC_RESULT`` lines while the provider logs them as usual.
    - A non-zero exit is a return code, not an exception: exit 75 (retryable conflict) is a
      normal outcome for an optimistic writer.
    - ``spark-submit`` is looked up on PATH, then beside the running interpreter (a venv).
    - The engine travels with the job (``--py-files``, the package zip of
      ``spark/shipping.py``), so executors that do not have it installed still run it, and
      executors that have another version run the driver's.
    - No credential on the command line: ``--option`` items with a secret key and the table's
      ``storage_options`` are taken out of the arguments and handed to the driver in a 0600
      file named by the environment (``core/job_secrets.py``), deleted when the job ends;
      their values are registered with Airflow's secret masker.
    - The project's Spark defaults (``spark/submit/conf.py``) for every key the caller did not
      set, Spark's log level WARN among them (the driver's start-up lines quieted too, by a
      log4j2 file shipped with the package, when the driver runs here); ``PYSPARK_PYTHON`` only for a local master (a cluster's workers keep their own
      interpreter; the driver, here, runs ours).
    """

    def __init__(self, *args, on_line=None, storage_options: Mapping[str, Any] | None = None,
                 ship_package: bool = True, spark_submit: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._on_line = on_line
        # a spark-submit by path (another Spark install, e.g. the one carrying Java Hudi's
        # bundle): the Spark provider accepts only the names spark-submit/spark2-/spark3-submit
        self._spark_submit_path = spark_submit
        self._conf = dict(self._conf or {})  # ours to extend; the caller's dict stays as given
        public, secret = _split_secret_arguments(self._application_args or [])
        self._application_args = public
        self._secrets = JobSecrets(secret, dict(storage_options or {}))
        mask_secrets(self._secrets.options, self._secrets.storage_options)
        self._ship_package = ship_package
        self._secrets_file: str | None = None
        self._killed = False

    @property
    def master(self) -> str:
        return self._connection["master"]

    @property
    def _driver_on_cluster(self) -> bool:
        return self._connection["deploy_mode"] == "cluster"

    def _build_spark_common_args(self) -> list[str]:
        for k, v in default_conf(self.master).items():
            self._conf.setdefault(k, v)
        # Spark's INFO lines out of the task log from spark-submit's first line on (a driver
        # here); spark_conf={"spark.log.level": "INFO"} brings them back
        self._conf.update(log_conf(self._conf, driver_local=not self._driver_on_cluster))
        if self._ship_package:
            zip_path = str(package_zip())
            if zip_path not in (self._py_files or "").split(","):
                self._py_files = ",".join(p for p in (self._py_files, zip_path) if p)
        if (self.master.startswith("spark://") and "spark.cores.max" not in self._conf
                and not self._total_executor_cores and not _in_spark_defaults("spark.cores.max")):
            self.log.warning("no spark.cores.max: on a standalone cluster this application takes "
                             "every free core, and concurrent writers queue behind it instead of "
                             "overlapping; set spark_conf={'spark.cores.max': N}")
        args = super()._build_spark_common_args()
        env = dict(self._env or {})  # the provider's own env_vars in client mode, if any
        if not self._driver_on_cluster:
            if is_local_master(self.master):
                env.setdefault("PYSPARK_PYTHON", os.environ.get("PYSPARK_PYTHON") or sys.executable)
            env.setdefault("PYSPARK_DRIVER_PYTHON",
                           os.environ.get("PYSPARK_DRIVER_PYTHON") or sys.executable)
        if self._secrets_file:
            env[SECRETS_FILE_ENV] = self._secrets_file  # the path only: the file is 0600
        self._env = env or None
        return args

    def _resolve_connection(self) -> dict:
        """As the provider does, except that a missing connection means ``local[*]``, not
        YARN: the example DAGs run out of the box on one machine.

        The provider resolves a missing connection by logging "Could not load connection
        string spark_default, defaulting to yarn", which is false here (the job runs on
        ``local[*]``) and sent people looking for a YARN cluster. So a missing connection is
        resolved by the provider's own code from an in-memory ``spark`` connection to
        ``local[*]`` (no copy of its parsing), and one true line is logged instead."""
        try:
            self.get_connection(self._conn_id)
        except Exception:  # noqa: BLE001 - AirflowNotFoundException
            pass
        else:
            return super()._resolve_connection()
        local = Connection(conn_id=self._conn_id, conn_type="spark", host=LOCAL_MASTER)
        self.get_connection = lambda conn_id: local  # this instance, for the call below only
        try:
            data = super()._resolve_connection()
        finally:
            del self.get_connection
        self.log.info("no Airflow connection %r: the Spark job runs on %s (create the "
                      "connection to submit elsewhere)", self._conn_id, data["master"])
        return data

    def _get_spark_binary_path(self) -> list[str]:
        if self._spark_submit_path:
            return [self._spark_submit_path]
        binary = self._connection["spark_binary"] or "spark-submit"
        found = shutil.which(binary) or shutil.which(binary, path=os.path.dirname(sys.executable))
        return [found or binary]

    def _process_spark_submit_log(self, itr) -> None:
        def tee():
            for line in itr:
                if self._on_line is not None:
                    self._on_line(line.rstrip("\n"))
                yield line
        super()._process_spark_submit_log(tee())

    def write_job_secrets(self) -> str | None:
        """Hand the job's credentials over off the command line: a 0600 file (client mode), or
        refuse a cluster driver that has no other way to get them. The file's path, or None."""
        if self._secrets:
            if self._driver_on_cluster:
                if not any(k.endswith(SECRETS_ENV) for k in self._conf):
                    raise ConfigError(
                        "the driver runs on the cluster (deploy mode cluster): the job's "
                        "credentials and storage options cannot reach it in a local file",
                        key="deploy_mode",
                        remedy=f"give the driver the variable {SECRETS_ENV} from the cluster's "
                               "secret store (spark.kubernetes.driver.secretKeyRef."
                               f"{SECRETS_ENV}=<secret>:<key>, or spark.yarn.appMasterEnv."
                               f"{SECRETS_ENV} in a protected --properties-file), or use "
                               "client deploy mode")
            else:
                self._secrets_file = write_secrets_file(self._secrets)
        return self._secrets_file

    def run(self, application: str) -> int:
        """Run spark-submit to the end; the exit code (negative: killed by that signal)."""
        # fail in a second, naming the fix, rather than after Spark's minute of retries
        check_master_reachable(self.master)
        self.write_job_secrets()
        try:
            self.submit(application, start_new_session=True)
        except AirflowException:
            if self._submit_sp is None or self._submit_sp.returncode in (None, 0):
                raise
        finally:
            remove_quietly(self._secrets_file)  # the job deleted it on reading, if it started
            self._secrets_file = None
        code = self._submit_sp.returncode
        if self._killed and code == 0:
            # Measured on a standalone master: SIGTERM to the process group lets spark-submit's
            # JVM stop the SparkContext and exit 0, and a killed attempt with no result line
            # must not read as a success (the caller would report a commit that never was).
            return -signal.SIGTERM
        return code

    @property
    def pid(self) -> int | None:
        return self._submit_sp.pid if self._submit_sp is not None else None

    def kill_tree(self, grace_s: float = 5.0) -> list[int]:
        """SIGTERM the job's process group and every descendant, SIGKILL what outlives
        ``grace_s``. Returns the pids that were running. Descendants are listed BEFORE the
        signal: once spark-submit dies its children are re-parented and cannot be found."""
        sp = self._submit_sp
        self._killed = True  # before the signal: run() reads it once spark-submit returns
        if sp is None:
            return []
        try:
            pids = kill_session_tree(psutil.Process(sp.pid), grace_s)
        except psutil.NoSuchProcess:
            pids = []
        try:
            sp.wait(timeout=5)
        except Exception:  # noqa: BLE001 - already reaped
            pass
        return pids

    def on_kill(self) -> None:
        pids = self.kill_tree()
        self.log.info("killed the Spark process tree: %s", pids)
        super().on_kill()  # cluster modes: the provider kills the remote driver / application
