"""The engine's smoke on one Spark line, run by that line's interpreter (a venv of
``scripts/install-spark-lines.sh``) with the checkout on ``PYTHONPATH``:

    <line venv>/bin/python -m airflow_hudi_occ.testing.spark_line_smoke WORKDIR [--hudi-jar JAR]

Why a process of the line's own: PySpark's Python and its jars are one version per
interpreter; the tests' venv holds 4.2. In one ``local[2]`` session it writes, with
``SparkHudiWriter``: a copy-on-write table (bulk_insert, upsert, delete, then two writers on
the same keys, the later one with early conflict detection stopped before its job while the
earlier waits at its commit, and retried on a fresh instant once that one committed) and a
merge-on-read table (two upserts). With ``--hudi-jar`` (Hudi's Spark bundle of this line) the
session also carries Java Hudi, which reads the copy-on-write table back in the same session.

Prints one ``RESULT <json>`` line: the PySpark and jar versions, each write's outcome, the
loser's error and where it stopped, and Java Hudi's rows; the caller compares the tables (read
by hudi-rs) with its model. Exit 0 when every step ran (whatever the outcomes say), 1 otherwise.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import traceback

from airflow_hudi_occ.testing.tables import SPARK_TEST_OPTIONS

OPTS = SPARK_TEST_OPTIONS
ECD = {"hoodie.write.concurrency.early.conflict.detection.enable": "true"}
#: what the smoke writes, in order: (table, operation, first id, end id, ts, v); the caller's model
STEPS = [("cow", "bulk_insert", 0, 1000, 1, "a"), ("cow", "upsert", 500, 1500, 2, "b"),
         ("cow", "delete", 0, 100, 3, "x"),
         ("cow", "upsert", 100, 300, 5, "winner"),   # the earlier writer: waits at its commit
         ("cow", "upsert", 200, 400, 6, "loser"),    # the later one: stopped, then retried
         ("mor", "upsert", 0, 400, 1, "a"), ("mor", "upsert", 200, 600, 2, "b")]
#: Java Hudi in the session (Hudi's bundle asks for Kryo and its extension)
JAVA_CONF = {"spark.serializer": "org.apache.spark.serializer.KryoSerializer",
             "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
             "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension"}


def model(writes) -> dict:
    """``{id: row}`` after ``writes`` ((operation, first id, end id, ts, v), as :data:`STEPS`
    without the table) of :func:`batch`'s rows: the later write wins, a delete removes."""
    rows: dict = {}
    for op, lo, hi, ts, v in writes:
        for i in range(lo, hi):
            if op == "delete":
                rows.pop(i, None)
            else:
                rows[i] = {"id": i, "p": str(i % 4), "ts": ts, "v": v}
    return rows


def batch(spark, lo: int, hi: int, ts: int, v: str):
    return spark.range(lo, hi).selectExpr("id", "cast(id % 4 as string) as p", f"cast({ts} as long) as ts",
                                          f"'{v}' as v")


def run(work: str, hudi_jar: str | None) -> dict:
    import pyspark

    from airflow_hudi_occ.core.errors import EarlyConflictError
    from airflow_hudi_occ.spark.session import jar_version, local_session
    from airflow_hudi_occ.spark.writer import SparkHudiWriter

    conf = {**JAVA_CONF, "spark.jars": hudi_jar} if hudi_jar else {}
    spark = local_session("local[2]", f"hudi-occ-smoke-{pyspark.__version__}", conf)
    out: dict = {"pyspark": pyspark.__version__, "jars": jar_version(spark), "writes": []}
    paths = {"cow": os.path.join(work, "cow"), "mor": os.path.join(work, "mor")}
    writers = {"cow": SparkHudiWriter(spark, paths["cow"], OPTS),
               "mor": SparkHudiWriter(spark, paths["mor"], {**OPTS, "hoodie.datasource.write.table.type":
                                                           "MERGE_ON_READ"})}
    for table, op, lo, hi, ts, v in STEPS[:3]:
        out["writes"].append(writers[table].write(batch(spark, lo, hi, ts, v), op).to_json())

    # two writers on the same keys: the earlier waits at its commit, its markers written
    (_, _, lo_w, hi_w, ts_w, v_w), (_, _, lo_l, hi_l, ts_l, v_l) = STEPS[3], STEPS[4]
    at_commit, release, box = threading.Event(), threading.Event(), {}

    def hold(tx):
        at_commit.set()
        release.wait(300)

    def winner():
        try:
            box["winner"] = writers["cow"].write(batch(spark, lo_w, hi_w, ts_w, v_w), "upsert",
                                                 before_commit=hold).to_json()
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            box["winner_error"] = repr(e)
            at_commit.set()
    th = threading.Thread(target=winner)
    th.start()
    at_commit.wait(300)
    loser = SparkHudiWriter(spark, paths["cow"], {**OPTS, **ECD})
    try:
        loser.write(batch(spark, lo_l, hi_l, ts_l, v_l), "upsert")
        out["loser"] = {"error": None}
    except EarlyConflictError as e:
        d = e.to_dict()
        out["loser"] = {"error": type(e).__name__, "other_instant": d.get("other_instant"),
                        "stopped_before_job": d.get("stopped_before_job"),
                        "seconds_discarded": d.get("seconds_discarded")}
    release.set()
    th.join(300)
    out["writes"].append(box.get("winner") or {"error": box.get("winner_error")})
    out["writes"].append(loser.write(batch(spark, lo_l, hi_l, ts_l, v_l), "upsert", attempt=2).to_json())

    for table, op, lo, hi, ts, v in STEPS[5:]:
        out["writes"].append(writers[table].write(batch(spark, lo, hi, ts, v), op).to_json())

    if hudi_jar:  # Java Hudi reads what our engine wrote, in the same session
        rows = spark.read.format("hudi").load(paths["cow"]).select("id", "p", "ts", "v").collect()
        out["java_rows"] = sorted([r.asDict() for r in rows], key=lambda r: r["id"])
    spark.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse
    p = argparse.ArgumentParser(prog="airflow_hudi_occ.testing.spark_line_smoke")
    p.add_argument("work")
    p.add_argument("--hudi-jar", default=None)
    args = p.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        res = run(args.work, args.hudi_jar)
    except BaseException:  # noqa: BLE001 - the caller reads the trace
        traceback.print_exc()
        return 1
    print("RESULT " + json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
