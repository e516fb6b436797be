"""Java Hudi's own table services on one table: the spark-submit application of
``HudiJavaTableServiceOperator`` (``provider/operators/java_table_service.py``).

Why a script of ours and not Hudi's: the Spark bundle, which is what a Spark cluster that
writes Hudi carries, has no service entry point a spark-submit can name (``HoodieCleaner``,
``HoodieClusteringJob`` and ``HoodieCompactor`` are in the utilities bundle; the SQL
procedures need a table in a catalog or a path and take their options as one string). So this
script builds Hudi's ``SparkRDDWriteClient`` as Hudi's SQL procedures do (the table's own
config, then the options) and calls the service: the scheduling, execution, lock and conflict
checks are all Java's.

It runs under the Java side's pyspark, which need not have this package installed: it
imports the standard library and pyspark only, and is shipped by path (never imported by the
package).

The options reach it as they reach the Java write operator's jobs: the operator writes them
(the connection's lock as Java's class, OCC, LAZY failed writes) to a private
``$HUDI_CONF_DIR/hudi-defaults.conf``, and this script lays Hudi's global properties
(``DFSPropertiesConfiguration.getGlobalProps``) over the table's config.

Usage: ``spark-submit --jars <hudi bundle> java_service_job.py <table> <service> [--instant T]
[--or-pending T]`` with ``service`` one of ``clean``, ``archive``, ``cluster``, ``compact``.
``cluster`` and ``compact`` schedule a plan and execute it; ``--instant`` executes that
pending plan instead; ``--or-pending`` executes that pending plan when nothing new is
scheduled (a compaction a dead job left). A failure is Java's exception, printed by pyspark
(exit 1); the operator reads the outcome from the timeline, not from here.
"""

from __future__ import annotations

import sys

SERVICES = ("clean", "archive", "cluster", "compact")


def write_client(spark, path: str, options: dict | None = None):
    """``(client, meta_client)``: Hudi's write client on ``path`` as Hudi's SQL procedures
    build one (``HoodieCLIUtils``): the table's config, what the datasource would derive from
    it (table type, ordering field), then Hudi's global properties (the operator's
    ``hudi-defaults.conf``), then ``options``. The Java harness's driver
    (``testing/java_hudi_driver.py``) builds its clients here too."""
    jvm = spark._jvm
    hadoop_conf = spark._jsparkSession.sessionState().newHadoopConf()
    storage_conf = jvm.org.apache.hudi.hadoop.fs.HadoopFSUtils.getStorageConf(hadoop_conf)
    meta_client = (jvm.org.apache.hudi.common.table.HoodieTableMetaClient.builder()
                   .setBasePath(path).setConf(storage_conf).build())
    schema = jvm.org.apache.hudi.common.table.TableSchemaResolver(meta_client).getTableSchema(False).toString()
    params = jvm.java.util.HashMap()
    props = meta_client.getTableConfig().getProps()
    for key in props.stringPropertyNames():
        params.put(key, props.getProperty(key))
    # what the datasource would have derived from the table (DataSourceUtils reads both)
    params.put("hoodie.datasource.write.table.type", props.getProperty("hoodie.table.type"))
    ordering = props.getProperty("hoodie.table.ordering.fields") or props.getProperty("hoodie.table.precombine.field")
    if ordering:
        params.put("hoodie.datasource.write.precombine.field", ordering)
    given = jvm.org.apache.hudi.common.config.DFSPropertiesConfiguration.getGlobalProps()
    for key in given.stringPropertyNames():
        params.put(key, given.getProperty(key))
    for k, v in (options or {}).items():
        params.put(k, str(v))
    jsc = jvm.org.apache.spark.api.java.JavaSparkContext(spark._jsc.sc())
    client = jvm.org.apache.hudi.DataSourceUtils.createHoodieClient(
        jsc, schema, path, meta_client.getTableConfig().getTableName(), params)
    return client, meta_client


def run_service(spark, path: str, service: str, instant: str | None, or_pending: str | None) -> str:
    """Run ``service``; a line for people saying what was done."""
    empty = spark._jvm.org.apache.hudi.common.util.Option.empty()
    client, _ = write_client(spark, path)
    try:
        if service == "clean":
            meta = client.clean()
            return f"clean {meta.getStartCleanTime()}" if meta is not None else "clean: nothing to clean"
        if service == "archive":
            client.archive()
            return "archive done"
        if instant is None:
            scheduled = client.scheduleClustering(empty) if service == "cluster" else client.scheduleCompaction(empty)
            instant = scheduled.get() if scheduled.isPresent() else or_pending
        if instant is None:
            return f"{service}: nothing scheduled"
        if service == "cluster":
            client.cluster(instant, True)
        else:
            client.compact(instant, True)
        return f"{service} {instant}"
    finally:
        client.close()


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] not in SERVICES:
        print(f"usage: java_service_job.py <table> <{'|'.join(SERVICES)}> [--instant T] [--or-pending T]",
              file=sys.stderr)
        return 2
    path, service = argv[0], argv[1]
    instant = argv[argv.index("--instant") + 1] if "--instant" in argv else None
    or_pending = argv[argv.index("--or-pending") + 1] if "--or-pending" in argv else None
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.appName(f"hudi-occ java {service}").getOrCreate()
    try:
        print(f"hudi-occ java service: {run_service(spark, path, service, instant, or_pending)}", flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
