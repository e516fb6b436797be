"""The test run's JVMs start on less CPU: the client compiler, the serial collector, and a
class-data archive of Spark's own classes.

Why: on this 2-core machine a test's spark-submit job is mostly JVM start-up. Measured (one
``spark-submit`` of a job that makes a session and counts one row, PySpark 4.2, JDK 17): 21.3 s
of CPU at the JVM's defaults, 13.9 s with the client compiler only and the serial collector
(C2's background compiles and G1's threads buy nothing in a job this short), 7.0-8.3 s when the
JVM also maps the classes it loads from a class-data archive (JDK 17's dynamic AppCDS) instead
of reading, verifying and linking them from Spark's jars again. Behaviour is the same: these are
start-up settings of the JVM, not of Spark.

The archive is built once per venv (``python -m airflow_hudi_occ.testing.jvm``, a step of
scripts/bootstrap.sh): a spark-submit of a small job that uses what the tests' jobs use (a
session, Arrow, parquet), its loaded classes written at exit. Its name carries PySpark's version
and the JDK's path and time stamp, so an upgrade of either builds a new one. A JVM whose class
path differs (another Spark line's spark-submit, the Java Hudi venv) cannot use it; with the
``cds`` log off it says nothing and starts as it would have without it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: the client compiler only and the serial collector (short, small JVMs on 2 cores)
FAST_START = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
#: a JVM that cannot map the archive (another class path) starts without it, silently
QUIET_ARCHIVE = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
#: the environment variable spark-submit adds to its JVM's command line (Spark's launcher)
SPARK_SUBMIT_OPTS = "SPARK_SUBMIT_OPTS"
BUILD_TIMEOUT_S = 300.0


def spark_home() -> Path | None:
    """The Spark of this interpreter's PySpark (pip's PySpark is its own SPARK_HOME); None
    without PySpark. Found, not imported: the tests' conftest asks at import time."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).resolve().parent


def archive_path() -> Path | None:
    """Where this venv's archive of Spark's classes is (or would be built); None without a JDK
    or PySpark."""
    java = shutil.which("java")
    home = spark_home()
    if java is None or home is None:
        return None
    java = os.path.realpath(java)
    version = importlib.metadata.version("pyspark")
    key = f"{home}|{version}|{java}|{os.stat(java).st_mtime_ns}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return Path(sys.prefix) / "share" / "airflow_hudi_occ" / f"spark-{version}-{digest}.jsa"


def spark_submit_opts() -> str:
    """The Java options for every spark-submit the tests start: :data:`FAST_START`, and the
    class-data archive when it has been built."""
    opts = list(FAST_START)
    archive = archive_path()
    if archive is not None and archive.is_file():
        opts += [f"-XX:SharedArchiveFile={archive}", *QUIET_ARCHIVE]
    return " ".join(opts)


def build_archive(*, log=None) -> Path:
    """Build this venv's archive (nothing when it exists): a spark-submit of :func:`train`
    with ``-XX:ArchiveClassesAtExit``, written to a temporary name and renamed when whole, so
    that a JVM never maps half an archive. Raises RuntimeError naming the log when it fails."""
    target = archive_path()
    if target is None:
        raise RuntimeError("no class-data archive: this needs a JDK on PATH and PySpark in the venv "
                           "(run scripts/bootstrap.sh)")
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    submit = spark_home() / "bin" / "spark-submit"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable,
               **{SPARK_SUBMIT_OPTS: " ".join([*FAST_START, f"-XX:ArchiveClassesAtExit={partial}"])})
    with tempfile.TemporaryDirectory(prefix="hudi-occ-cds-") as work:
        cmd = [str(submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false",
               __file__, "train", work]
        out = subprocess.run(cmd, env=env, cwd=work, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=BUILD_TIMEOUT_S)
    if log is not None:
        log(out.stdout)
    if out.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"building the class-data archive failed (exit {out.returncode}); "
                           f"the end of spark-submit's output:\n{out.stdout[-3000:]}")
    os.replace(partial, target)
    for old in target.parent.glob("spark-*.jsa"):  # an earlier PySpark's or JDK's
        if old != target:
            old.unlink(missing_ok=True)
    return target


def train(work: str) -> None:
    """What the archive learns from: a session, a DataFrame from Python rows and from Arrow,
    a parquet write and read, a shuffle, and mapInArrow (the classes the tests' jobs load)."""
    import pyarrow as pa
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.appName("hudi-occ class-data archive").getOrCreate()
    try:
        df = spark.createDataFrame([(i, str(i % 3), float(i)) for i in range(100)], "id long, p string, v double")
        df.write.partitionBy("p").parquet(os.path.join(work, "t"))
        back = spark.read.parquet(os.path.join(work, "t"))
        back.groupBy("p").count().collect()

        def batches(it):
            for b in it:
                yield pa.RecordBatch.from_pydict({"id": b.column("id")})
        back.mapInArrow(batches, "id long").collect()
        spark.createDataFrame(back.toPandas()).count()
    finally:
        spark.stop()


def main(argv: list[str]) -> int:
    if argv[:1] == ["train"]:
        train(argv[1])
        return 0
    t0 = time.monotonic()
    path = build_archive()
    print(f"class-data archive {path} ({path.stat().st_size // 1_000_000} MB, "
          f"{time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
