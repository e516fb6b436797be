"""Java Hudi, the reference implementation, run from tests as separate processes.

Every table this project writes must be one that Java Hudi reads, services and shares. This
harness runs Java Hudi's Spark datasource and write client (Hudi 1.2.0's Spark 3.5 bundle,
under the pyspark 3.5.5 that ``scripts/install-java-hudi.sh`` puts in ``.work/java-hudi/``;
why that Spark and not ours: ``docs/java-interop.md``) in a JVM of its own per call, like
:mod:`.zookeeper` runs its server. Nothing is downloaded at test time.

One call is one ``spark-submit`` of :mod:`.java_hudi_driver` with a list of steps, run in
order in one JVM (Spark and Hudi take seconds to start: put a test's Java steps in one call
where the test allows). With ``keep_jvm=True`` (the test session's harness) :meth:`JavaHudi.run`
sends its calls to one JVM kept for the session instead; :meth:`JavaHudi.start` always starts
its own (races, kills). The steps:

- :class:`Write`: insert, upsert, delete, bulk_insert, insert_overwrite (any Hudi
  operation) of rows given as a pyarrow table or a list of dicts; COW or MOR; table version
  8 or 9 through ``hoodie.write.table.version``; any ``hoodie.*`` options (OCC, lock,
  metadata table on or off);
- :class:`Read`: snapshot, read-optimised, time travel (``as.of.instant``), incremental
  (begin/end completion times), returned as a pyarrow table;
- :class:`Service`: clean, cluster, compact, archive, rollback_failed_writes through Hudi's
  ``SparkRDDWriteClient`` (scheduled and executed at once);
- :class:`ReadHFile`: one local HFile read by Hudi's own HFile reader (``hudi-io``), for the
  HFiles this project writes for the metadata table;
- :class:`MetadataCheck`: the files, column stats and partition stats Java's metadata-table
  reader returns, and the stats Java computes from the files themselves;
- :class:`Sql`: a Spark SQL query (with Hive support: tables a catalog sync registered).

Errors: :class:`JavaHudiNotInstalledError` when the set-up has not run (the message names the
script); :class:`JavaHudiError` for a step Java failed, carrying the Java exception's class
and its causes (``err.has("HoodieWriteConflictException")``); :class:`JavaHudiProcessError`
when the JVM died or timed out before reporting (its log tail is quoted). ``check=False``
returns failed steps instead of raising, for tests that expect Java to refuse.

Usage::

    java = JavaHudi(tmp_path / "java")
    java.write(path, rows, operation="upsert", table_type="MERGE_ON_READ", table_version=9,
               record_key="id", partition_fields="p", ordering_field="ts")
    snapshot = java.read(path)
    w, ro = java.run(Write(path, more), Read(path, query="read_optimized"))
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

INSTALL_SCRIPT = "scripts/install-java-hudi.sh"
#: where the set-up keeps Java Hudi (git-ignored); HUDI_OCC_JAVA_HUDI_DIR moves it
DEFAULT_DIR = Path(__file__).resolve().parents[2] / ".work" / "java-hudi"
DRIVER = Path(__file__).resolve().with_name("java_hudi_driver.py")
#: the engine's Java service script: the driver builds Hudi's write client with its function
SERVICE_JOB = Path(__file__).resolve().parents[1] / "spark" / "java_service_job.py"

#: Hudi's exception for two writers that changed the same file group
WRITE_CONFLICT = "org.apache.hudi.exception.HoodieWriteConflictException"


class JavaHudiNotInstalledError(RuntimeError):
    """The Java Hudi set-up is missing or incomplete on this machine."""


class JavaHudiProcessError(RuntimeError):
    """The Java process died, timed out or wrote no result; the message quotes its log."""


class JavaHudiError(RuntimeError):
    """A step Java Hudi failed. ``java_class`` is the outermost Java exception's class,
    ``classes`` the whole cause chain (outermost first), ``step`` the failed step."""

    def __init__(self, step: "StepResult", log_path: Path | None = None):
        err = step.raw.get("error") or {}
        self.step = step
        self.java_class: str = err.get("class", "?")
        self.java_message: str = err.get("message", "")
        self.chain: list[dict] = err.get("chain", [])
        self.classes: list[str] = [c["class"] for c in self.chain]
        self.trace: str = err.get("trace", "")
        self.log_path = log_path
        causes = "".join(f"\n  caused by {c['class']}: {(c['message'] or '')[:300]}" for c in self.chain[1:])
        super().__init__(
            f"Java Hudi's {step.op} step #{step.index} failed with {self.java_class}: "
            f"{(self.java_message or '')[:1000]}{causes}"
            + (f"\n(spark-submit log: {log_path})" if log_path else ""))

    def has(self, name: str) -> bool:
        """Whether ``name`` (a full or simple class name) is anywhere in the cause chain."""
        return any(c == name or c.rsplit(".", 1)[-1] == name for c in self.classes)


# -- the set-up -------------------------------------------------------------------------------

@dataclass(frozen=True)
class JavaHudiSetup:
    """What ``scripts/install-java-hudi.sh`` installed (its ``setup.json``)."""

    hudi_version: str
    hudi_bundle: str
    hudi_jar: str
    pyspark_version: str
    python: str
    spark_submit: str
    spark_home: str
    #: Hadoop's s3a connector and the AWS SDK, for Java jobs on S3 tables (empty in a set-up
    #: made before the script fetched them: run it again)
    s3a_jars: tuple = ()

    @classmethod
    def load(cls, directory: str | os.PathLike | None = None) -> "JavaHudiSetup":
        d = Path(directory or os.environ.get("HUDI_OCC_JAVA_HUDI_DIR") or DEFAULT_DIR)
        setup_file = d / "setup.json"
        hint = f"run {INSTALL_SCRIPT} (scripts/bootstrap.sh runs it) to install Java Hudi into {d}"
        if not setup_file.is_file():
            raise JavaHudiNotInstalledError(f"Java Hudi is not installed: {setup_file} is missing; {hint}")
        try:
            data = json.loads(setup_file.read_text())
            setup = cls(**{k: data[k] for k in cls.__dataclass_fields__ if k != "s3a_jars"},
                        s3a_jars=tuple(data.get("s3a_jars") or ()))
        except (ValueError, KeyError, TypeError) as e:
            raise JavaHudiNotInstalledError(f"{setup_file} is unreadable or incomplete ({e!r}); {hint}") from e
        missing = [p for p in (setup.hudi_jar, setup.python, setup.spark_submit, setup.spark_home, *setup.s3a_jars)
                   if not os.path.exists(p)]
        if missing:
            raise JavaHudiNotInstalledError(f"Java Hudi's set-up is incomplete, missing: "
                                            f"{', '.join(missing)}; {hint}")
        return setup


# -- steps ---------------------------------------------------------------------------------------

Rows = pa.Table | list[dict]


@dataclass
class Write:
    """One ``df.write.format("hudi")``. ``None`` leaves a setting to Hudi (an existing table's
    own config, else Hudi's default). ``partition_fields=""`` is a non-partitioned table."""

    path: str
    rows: Rows
    operation: str = "upsert"
    table_type: str | None = None
    table_version: int | None = None
    record_key: str | None = None
    partition_fields: str | None = None
    ordering_field: str | None = None
    table_name: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    mode: str = "append"

    op = "write"

    def spec(self, run_dir: Path, n: int) -> dict:
        rows_path = run_dir / f"rows-{n}.parquet"
        table = self.rows if isinstance(self.rows, pa.Table) else pa.Table.from_pylist(self.rows)
        pq.write_table(table, rows_path)
        return {"op": "write", "path": str(self.path), "rows": str(rows_path),
                "operation": self.operation, "table_type": self.table_type,
                "table_version": self.table_version, "record_key": self.record_key,
                "partition_fields": self.partition_fields, "ordering_field": self.ordering_field,
                "table_name": self.table_name, "options": _strings(self.options), "mode": self.mode}


@dataclass
class Read:
    """One ``spark.read.format("hudi")``: ``query`` is snapshot, read_optimized, time_travel
    (``as_of``) or incremental (``start`` / ``end`` completion times); ``where``: a Spark SQL
    predicate applied to the relation, so that Hudi's file index prunes with it (data
    skipping through the metadata table's column stats with ``hoodie.enable.data.skipping``)."""

    path: str
    query: str = "snapshot"
    as_of: str | None = None
    start: str | None = None
    end: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    where: str | None = None

    op = "read"

    def spec(self, run_dir: Path, n: int) -> dict:
        return {"op": "read", "path": str(self.path), "query": self.query, "as_of": self.as_of,
                "start": self.start, "end": self.end, "options": _strings(self.options),
                "where": self.where, "output": str(run_dir / f"read-{n}")}


@dataclass
class MetadataCheck:
    """What Java's own metadata-table reader (``HoodieBackedTableMetadata``) returns for a
    table, beside what Java computes from the data files: the equivalent of
    ``HoodieMetadataTableValidator``'s listing, column stats and partition stats checks
    (hudi-utilities is not on Maven Central for 1.2.0). ``columns``: the columns whose stats
    are fetched. See :meth:`StepResult.metadata_check`."""

    path: str
    columns: list[str] = field(default_factory=list)

    op = "mdt_check"

    def spec(self, run_dir: Path, n: int) -> dict:
        return {"op": "mdt_check", "path": str(self.path), "columns": list(self.columns)}


@dataclass
class Service:
    """One table service through Hudi's write client: clean, cluster, compact (each
    scheduled and run at once), archive, or rollback_failed_writes. For cluster and compact,
    ``instant`` runs that pending plan instead of scheduling one (a plan another writer
    scheduled, ours included), and ``schedule_only`` only schedules (the step's
    ``scheduled``)."""

    path: str
    service: str
    options: dict[str, Any] = field(default_factory=dict)
    instant: str | None = None
    schedule_only: bool = False

    op = "service"

    def spec(self, run_dir: Path, n: int) -> dict:
        return {"op": "service", "path": str(self.path), "service": self.service,
                "options": _strings(self.options), "instant": self.instant,
                "schedule_only": self.schedule_only}


@dataclass
class ReadHFile:
    """One local HFile read by Hudi's own HFile reader (the metadata table's): its entries in
    order, the seek result of each of ``lookups``, the ``meta`` blocks and file-``info`` values
    named (see :meth:`StepResult.hfile`)."""

    file: str
    lookups: list[str] = field(default_factory=list)
    meta: list[str] = field(default_factory=list)
    info: list[str] = field(default_factory=list)

    op = "hfile"

    def spec(self, run_dir: Path, n: int) -> dict:
        return {"op": "hfile", "file": str(self.file), "lookups": list(self.lookups),
                "meta": list(self.meta), "info": list(self.info)}


@dataclass
class Timelines:
    """Java's own active and archived timelines of one table (a metadata table's folder
    ``.hoodie/metadata`` is a table too): ``HoodieActiveTimeline`` and the whole
    ``HoodieArchivedTimeline`` read from the LSM history. See :meth:`StepResult.timelines`."""

    path: str

    op = "timeline"

    def spec(self, run_dir: Path, n: int) -> dict:
        return {"op": "timeline", "path": str(self.path)}


@dataclass
class Sql:
    """One Spark SQL query, its rows returned (:attr:`StepResult.rows`): with a harness whose
    ``spark_conf`` turns on Hive support (``spark.sql.catalogImplementation=hive`` and
    ``spark.hadoop.hive.metastore.uris``), Spark SQL reading a table a catalog sync registered,
    through Hudi's relation (docs/catalog-sync.md). ``refresh``: tables whose cached metadata
    Spark drops first."""

    query: str
    refresh: list[str] = field(default_factory=list)

    op = "sql"

    def spec(self, run_dir: Path, n: int) -> dict:
        return {"op": "sql", "query": self.query, "refresh": list(self.refresh),
                "output": str(run_dir / f"sql-{n}")}


Step = Write | Read | Service | ReadHFile | MetadataCheck | Timelines | Sql


def _strings(options: dict[str, Any]) -> dict[str, str]:
    return {k: ("true" if v is True else "false" if v is False else str(v)) for k, v in options.items()}


@dataclass
class StepResult:
    """What one step did. ``completed`` / ``pending``: the instants that appeared on the
    timeline while it ran (``{requested, completed, action}`` / ``{requested, action, state}``),
    read from file names; with another writer on the table at the same time, its instants
    are among them (tests/interop/test_java_races.py tells them apart by their times)."""

    index: int
    op: str
    ok: bool
    raw: dict
    seconds: float
    completed: list[dict]
    pending: list[dict]
    error: JavaHudiError | None = None

    @property
    def instant(self) -> str | None:
        """The requested time of the last instant the step completed (``None`` if none)."""
        return self.completed[-1]["requested"] if self.completed else None

    @property
    def completion_time(self) -> str | None:
        return self.completed[-1]["completed"] if self.completed else None

    def hfile(self) -> dict:
        """What a :class:`ReadHFile` step found: ``count`` (as the reader reports it),
        ``entries`` ([(key, value bytes)]), ``lookups`` ({key: seek result, 0 = found}),
        ``meta`` and ``info`` ({name: bytes or None})."""
        raw = self.raw
        unhex = lambda v: None if v is None else bytes.fromhex(v)  # noqa: E731
        return {"count": raw["count"], "entries": [(k, bytes.fromhex(v)) for k, v in raw["entries"]],
                "lookups": dict(raw["lookups"]), "meta": {k: unhex(v) for k, v in raw["meta"].items()},
                "info": {k: unhex(v) for k, v in raw["info"].items()}}

    def timelines(self) -> dict:
        """What a :class:`Timelines` step found: ``active`` and ``archived``, lists of
        ``{requested, action, state, completed}`` in Java's order (duplicates kept, so that a
        test sees an instant archived twice)."""
        return self.raw["timeline"]

    def metadata_check(self) -> dict:
        """What a :class:`MetadataCheck` step found: ``partitions`` and ``files``
        ({partition: {name: size}}) per Java's metadata reader; ``column_stats`` and
        ``partition_stats``: the records it returns (``{file or partition, column, min, max,
        null_count, value_count, total_size, total_uncompressed_size, deleted}``); ``file_stats``:
        the same numbers Java computes from each listed parquet file's footer
        (``ParquetUtils.readColumnStatsFromMetadata``), keyed by partition and file name;
        ``log_stats``: the same for each listed log file, computed by Java over its records
        (``HoodieTableMetadataUtil.getLogFileColumnRangeMetadata``; sizes 0, none for a log
        of deletes only)."""
        return self.raw["check"]

    @property
    def rows(self) -> pa.Table:
        """A read's rows (every column, meta columns included)."""
        out = self.raw.get("output")
        if not out:
            raise ValueError(f"step #{self.index} ({self.op}) has no rows: only reads do")
        return pq.read_table(out)


# -- running ---------------------------------------------------------------------------------------

def read_results(result_path: Path, log_path: Path) -> tuple[str | None, list[StepResult]]:
    """``(status, results)`` of one call so far: the driver rewrites its result file after each
    step (status ``running``), then once more with ``ok`` or ``failed``."""
    try:
        data = json.loads(result_path.read_text())
    except (FileNotFoundError, ValueError):
        return None, []
    out = []
    for raw in data.get("steps", []):
        inst = raw.get("instants") or {}
        r = StepResult(index=raw["index"], op=raw["op"], ok=raw["ok"], raw=raw,
                       seconds=raw.get("seconds", 0.0), completed=inst.get("completed", []),
                       pending=inst.get("pending", []))
        if not r.ok:
            r.error = JavaHudiError(r, log_path)
        out.append(r)
    return data.get("status"), out


class JavaHudiRun:
    """One running ``spark-submit`` (from :meth:`JavaHudi.start`): :meth:`wait` for it,
    :meth:`kill` it (SIGKILL to its process group: a crashed Java writer)."""

    def __init__(self, proc: subprocess.Popen, run_dir: Path, steps: list[Step], timeout_s: float,
                 log_file):
        self.proc = proc
        self.run_dir = run_dir
        self.steps = steps
        self.timeout_s = timeout_s
        self.log_path = run_dir / "spark-submit.log"
        self._log_file = log_file
        self.started = time.monotonic()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except FileNotFoundError:
            return "(no log)"

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._log_file.close()

    def results(self) -> list[StepResult]:
        """The steps' results so far (the driver rewrites its result file after each step)."""
        return read_results(self.run_dir / "result.json", self.log_path)[1]

    def wait(self, *, check: bool = True) -> list[StepResult]:
        """Wait for the JVM; with ``check`` the first failed step raises its :class:`JavaHudiError`."""
        remaining = self.timeout_s - (time.monotonic() - self.started)
        try:
            self.proc.wait(timeout=max(remaining, 0.1))
        except subprocess.TimeoutExpired:
            self.kill()
            raise JavaHudiProcessError(
                f"Java Hudi did not finish within {self.timeout_s}s (run {self.run_dir}); "
                f"log tail:\n{self.log_tail()}") from None
        self._log_file.close()
        results = self.results()
        failed = [r for r in results if not r.ok]
        if len(results) < len(self.steps) and not failed:
            raise JavaHudiProcessError(
                f"Java Hudi exited with code {self.proc.returncode} after {len(results)} of "
                f"{len(self.steps)} steps without reporting an error (run {self.run_dir}); "
                f"log tail:\n{self.log_tail()}")
        if check and failed:
            raise failed[0].error
        return results


class JavaHudi:
    """Runs Java Hudi steps in separate JVMs, each call in its own folder under ``workdir``.

    ``master`` and ``driver_memory`` are modest by default (the machine is shared);
    ``spark_conf`` adds ``--conf`` settings. Construction fails fast with
    :class:`JavaHudiNotInstalledError` if the set-up is missing.
    """

    _counter = itertools.count()

    def __init__(self, workdir: str | os.PathLike, *, master: str = "local[2]",
                 driver_memory: str = "1g", spark_conf: dict[str, str] | None = None,
                 timeout_s: float = 600.0, setup: JavaHudiSetup | None = None,
                 keep_jvm: bool = False, idle_s: float = 1800.0, jars: list[str] | None = None,
                 env: dict[str, str] | None = None):
        self.setup = setup or JavaHudiSetup.load()
        #: more jars beside the bundle (``setup.s3a_jars`` for an ``s3://`` table), and the
        #: JVM's environment additions (s3a's credentials: ``java_job.hadoop_store_settings``)
        self.jars = list(jars or [])
        self.env = dict(env or {})
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.master = master
        self.driver_memory = driver_memory
        self.spark_conf = dict(spark_conf or {})
        self.timeout_s = timeout_s
        #: :meth:`run` sends its steps to one JVM kept for this harness's life (started on
        #: first use, restarted if it died) instead of starting one per call; :meth:`start`
        #: still starts its own JVM (a race needs two at once, a crash test kills it)
        self.keep_jvm = keep_jvm
        self.idle_s = idle_s
        self._kept: JavaHudiRun | None = None

    # -- the process -----------------------------------------------------------------------

    def _conf(self, run_dir: Path) -> dict[str, str]:
        log4j = run_dir / "log4j2.properties"
        log4j.write_text("rootLogger.level = warn\nrootLogger.appenderRef.stderr.ref = console\n"
                         "appender.console.type = Console\nappender.console.name = console\n"
                         "appender.console.target = SYSTEM_ERR\nappender.console.layout.type = PatternLayout\n"
                         "appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n%ex\n")
        return {
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
            "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
            "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
            "spark.sql.session.timeZone": "UTC",
            "spark.local.dir": str(run_dir / "tmp"),
            "spark.sql.warehouse.dir": str(run_dir / "warehouse"),
            # short-lived JVMs: C1 only and the serial collector start faster
            "spark.driver.extraJavaOptions": f"-XX:+UseSerialGC -XX:TieredStopAtLevel=1 "
                                             f"-Dlog4j.configurationFile=file:{log4j}",
            **self.spark_conf,
        }

    def _run_dir(self, steps, continue_on_error: bool) -> Path:
        if not steps:
            raise ValueError("a Java Hudi call needs at least one step")
        run_dir = self.workdir / f"run-{os.getpid()}-{next(self._counter):04d}"
        run_dir.mkdir(parents=True)
        spec = {"steps": [s.spec(run_dir, i) for i, s in enumerate(steps)],
                "continue_on_error": continue_on_error}
        (run_dir / "spec.json").write_text(json.dumps(spec, indent=1))
        return run_dir

    def start(self, *steps: Step, continue_on_error: bool = False) -> JavaHudiRun:
        """Start one JVM running ``steps`` in order; returns at once."""
        run_dir = self._run_dir(steps, continue_on_error)
        return self._spawn(run_dir, [str(run_dir / "spec.json"), str(run_dir / "result.json")], steps)

    def _spawn(self, run_dir: Path, args: list[str], steps) -> JavaHudiRun:
        cmd = [self.setup.spark_submit, "--master", self.master, "--driver-memory", self.driver_memory,
               "--jars", ",".join([self.setup.hudi_jar, *self.jars]), "--py-files", str(SERVICE_JOB)]
        for k, v in self._conf(run_dir).items():
            cmd += ["--conf", f"{k}={v}"]
        cmd += [str(DRIVER), *args]
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "SPARK_CONF_DIR", "PYSPARK_SUBMIT_ARGS", "SPARK_HOME",
                            "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")}
        env.update(SPARK_HOME=self.setup.spark_home, PYSPARK_PYTHON=self.setup.python,
                   PYSPARK_DRIVER_PYTHON=self.setup.python)
        env.update(self.env)
        env["PATH"] = os.path.dirname(self.setup.python) + os.pathsep + env.get("PATH", "")
        log_file = open(run_dir / "spark-submit.log", "wb")
        # its own process group, so kill() reaches the JVM and nothing else
        proc = subprocess.Popen(cmd, cwd=run_dir, env=env, stdout=log_file, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        return JavaHudiRun(proc, run_dir, list(steps), self.timeout_s, log_file)

    def run(self, *steps: Step, check: bool = True, continue_on_error: bool = False) -> list[StepResult]:
        """Run ``steps`` in one JVM and wait; with ``check`` a failed step raises."""
        if self.keep_jvm:
            return self._run_kept(steps, check, continue_on_error)
        return self.start(*steps, continue_on_error=continue_on_error).wait(check=check)

    def _run_kept(self, steps, check: bool, continue_on_error: bool) -> list[StepResult]:
        """One call on the kept JVM: the request goes to its inbox, the answer is the call's
        result file reaching ``ok`` or ``failed``; a JVM that dies or overruns ``timeout_s``
        is reported with its log tail (and killed, so the next call starts a fresh one)."""
        run_dir = self._run_dir(steps, continue_on_error)
        kept = self._kept
        if kept is None or kept.proc.poll() is not None:
            home = self.workdir / f"kept-{os.getpid()}-{next(self._counter):04d}"
            (home / "inbox").mkdir(parents=True)
            kept = self._kept = self._spawn(home, ["--serve", str(home / "inbox"), str(os.getpid()),
                                                   str(self.idle_s)], [])
        inbox = kept.run_dir / "inbox"
        request = inbox / f"{run_dir.name}.request"
        tmp = inbox / f"{run_dir.name}.tmp"
        tmp.write_text(json.dumps({"spec": str(run_dir / "spec.json"),
                                   "result": str(run_dir / "result.json")}))
        os.replace(tmp, request)
        deadline = time.monotonic() + self.timeout_s
        while True:
            status, results = read_results(run_dir / "result.json", kept.log_path)
            if status in ("ok", "failed"):
                break
            if kept.proc.poll() is not None:
                raise JavaHudiProcessError(
                    f"the kept Java Hudi JVM exited with code {kept.proc.returncode} during run "
                    f"{run_dir} ({len(results)} of {len(steps)} steps reported); log tail:\n{kept.log_tail()}")
            if time.monotonic() > deadline:
                kept.kill()
                raise JavaHudiProcessError(
                    f"Java Hudi did not finish run {run_dir} within {self.timeout_s}s (the kept JVM "
                    f"was killed; the next call starts another); log tail:\n{kept.log_tail()}")
            time.sleep(0.05)
        failed = [r for r in results if not r.ok]
        if check and failed:
            raise failed[0].error
        return results

    def close(self) -> None:
        """End the kept JVM, if any (its inbox's ``stop`` file; killed if it does not go)."""
        kept, self._kept = self._kept, None
        if kept is None or kept.proc.poll() is not None:
            return
        (kept.run_dir / "inbox" / "stop").touch()
        try:
            kept.proc.wait(timeout=30)
            kept._log_file.close()
        except subprocess.TimeoutExpired:
            kept.kill()

    # -- one step per call ------------------------------------------------------------------

    def write(self, path: str, rows: Rows, **kw) -> StepResult:
        return self.run(Write(str(path), rows, **kw))[0]

    def read(self, path: str, **kw) -> pa.Table:
        return self.run(Read(str(path), **kw))[0].rows

    def service(self, path: str, service: str, **kw) -> StepResult:
        return self.run(Service(str(path), service, **kw))[0]

