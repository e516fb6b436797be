"""A user's Java Hudi job as a team would have it: ``df.write.format("hudi")`` with its own
table settings and nothing about locks, OCC or this project (the operator adds those through
``hudi-defaults.conf``). Runs under the Java side's pyspark; imports pyspark only.

Usage: ``write_rows.py <table> <rows JSON> [--gate FILE]``: upsert the rows ``[[id, p, ts, v],
...]``. With ``--gate``, every row waits in a Python UDF (so after Hudi began its instant, while
it reads the input) until ``FILE`` exists, and ``FILE.waiting`` is created first: the tests'
way to hold this writer between its begin and its commit while another one commits.
"""

import json
import os
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def main(argv):
    table, rows = argv[0], json.loads(argv[1])
    gate = argv[argv.index("--gate") + 1] if "--gate" in argv else None
    spark = SparkSession.builder.appName("user hudi job").getOrCreate()
    df = spark.createDataFrame([tuple(r) for r in rows], "id long, p string, ts long, v string")
    if gate:
        def held(v):
            open(gate + ".waiting", "a").close()
            deadline = time.time() + 1200
            while not os.path.exists(gate) and time.time() < deadline:
                time.sleep(0.2)
            return v
        df = df.withColumn("v", F.udf(held, "string")("v"))
    (df.write.format("hudi")
     .option("hoodie.table.name", "orders")
     .option("hoodie.datasource.write.recordkey.field", "id")
     .option("hoodie.datasource.write.partitionpath.field", "p")
     .option("hoodie.datasource.write.precombine.field", "ts")
     .option("hoodie.datasource.write.operation", "upsert")
     .mode("append").save(table))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
