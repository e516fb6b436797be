"""The Java side of :mod:`airflow_hudi_occ.testing.java_hudi`: Java Hudi driven from one JVM.

This file is a spark-submit script, run by the harness under the Java side's own pyspark
(Spark 3.5, the line Hudi's bundle is built for; ``scripts/install-java-hudi.sh``). It is
never imported by the package: it imports the standard library and pyspark only, so that it
runs in that second environment, which does not have this package installed; and the
engine's ``spark/java_service_job.py`` (standard library and pyspark too), which the harness
ships beside it with ``--py-files``, for the one way both build Hudi's write client.

Usage: ``spark-submit --jars <hudi bundle> java_hudi_driver.py <spec.json> <result.json>``

The spec is ``{"steps": [...], "continue_on_error": false}``; each step is one of

- ``{"op": "write", "path", "operation", "rows" (a parquet path), "table_type", "table_name",
  "record_key", "partition_fields", "ordering_field", "table_version", "options", "mode"}``:
  the Spark datasource, ``df.write.format("hudi")``; absent keys are left to Hudi (which
  takes an existing table's own config);
- ``{"op": "read", "path", "query": snapshot|read_optimized|time_travel|incremental,
  "as_of", "start", "end", "options", "where", "output"}``: ``spark.read.format("hudi")``,
  filtered by the SQL predicate ``where`` when given; the rows
  go to ``output`` as parquet;
- ``{"op": "service", "path", "service": clean|cluster|compact|archive|rollback_failed_writes,
  "options", "instant", "schedule_only"}``: Hudi's ``SparkRDDWriteClient``, configured as
  Hudi's own SQL procedures do (the table's config, then the given options); for cluster and
  compact, ``instant`` executes that pending plan instead of scheduling one, ``schedule_only``
  schedules without executing;
- ``{"op": "mdt_check", "path", "columns"}``: Java's metadata-table reader
  (``HoodieBackedTableMetadata``) on the table: its partitions and files, its column and
  partition stats records for ``columns``, the stats ``ParquetUtils`` computes from each
  listed parquet file, and those Java computes from each listed log file's records
  (``HoodieTableMetadataUtil.getLogFileColumnRangeMetadata``, what Java's metadata
  validator and its index bootstrap read a log file with) (``{"check": {...}}``);
- ``{"op": "timeline", "path"}``: Java's own timelines of a table (any table: a metadata
  table's ``.hoodie/metadata`` too): ``HoodieActiveTimeline``'s instants and all of
  ``HoodieArchivedTimeline``'s (the LSM history), each ``{requested, action, state,
  completed}``, in the order Java lists them (``{"timeline": {"active", "archived"}}``);
- ``{"op": "hfile", "file", "lookups", "meta", "info"}``: one local HFile read by Hudi's own
  reader (``org.apache.hudi.io.hfile.HFileReaderImpl``, what the metadata table reads with):
  every entry in order (``entries``: key and value as hex), the entry count it reports, the
  result of seeking each of ``lookups`` in the order given, from the first entry, as Hudi's
  forward-only cursor does (0 found, 1 in range, -1 before the first key, 2 past the end), and the ``meta`` blocks and file-``info`` values asked for (hex, or None).

Why the steps share one JVM: Spark and Hudi take seconds to start, and a test often needs a
write and a read or two.

The result file gets one entry per step: ``ok``, the instants the step added to the timeline
(completed and pending, from the file names), ``count`` and ``output`` for reads, and for a
failed step ``error``: the Java exception's class and message and those of its causes, so a
test can check for ``org.apache.hudi.exception.HoodieWriteConflictException``. Unless
``continue_on_error``, the first failed step ends the run (exit code 1); the result file is
written either way.
"""

from __future__ import annotations

import decimal
import json
import os
import re
import sys
import time
import traceback

_COMPLETED = re.compile(r"^(\d{17})_(\d{17})\.([a-z]+)$")
_PENDING = re.compile(r"^(\d{17})\.([a-z]+)(?:\.(requested|inflight))?$")


# -- the timeline, from file names (layout 2: tables of versions 8 and 9) ---------------------------

def timeline_files(path: str) -> set[str]:
    folder = os.path.join(path, ".hoodie", "timeline")
    try:
        return {n for n in os.listdir(folder) if not n.startswith(".")}
    except FileNotFoundError:
        return set()


def describe_instants(names: set[str]) -> dict:
    """Completed instants as ``{requested, completed, action}``; pending ones as
    ``{requested, action, state}`` (only those not completed among ``names``)."""
    completed, pending = [], {}
    for n in names:
        m = _COMPLETED.match(n)
        if m:
            completed.append({"requested": m.group(1), "completed": m.group(2), "action": m.group(3)})
    done = {c["requested"] for c in completed}
    for n in sorted(names):
        m = _PENDING.match(n)
        if not m or m.group(1) in done:
            continue
        # "<t>.inflight" is a commit's inflight file; "<t>.<action>.inflight" the others'
        entry = pending.setdefault(m.group(1), {"requested": m.group(1), "action": "commit",
                                                "state": "requested"})
        if m.group(2) != "inflight":
            entry["action"] = m.group(2)
        if m.group(2) == "inflight" or m.group(3) == "inflight":
            entry["state"] = "inflight"
    return {"completed": sorted(completed, key=lambda c: c["completed"]),
            "pending": sorted(pending.values(), key=lambda p: p["requested"])}


def read_properties(path: str) -> dict[str, str]:
    """``hoodie.properties`` (Java's Properties format, keys and values without escapes)."""
    props = {}
    try:
        with open(os.path.join(path, ".hoodie", "hoodie.properties"), encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    k, v = line.split("=", 1)
                    props[k.strip()] = v.strip().replace("\\:", ":").replace("\\=", "=")
    except FileNotFoundError:
        pass
    return props


# -- errors ------------------------------------------------------------------------------------

def java_error(exc: BaseException) -> dict:
    """The Java exception behind ``exc`` (py4j's ``Py4JJavaError`` or pyspark's converted
    ``CapturedException``) with its causes, outermost first; a Python-only error as itself."""
    chain = []
    throwable = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    seen = 0
    while throwable is not None and seen < 20:
        seen += 1
        try:
            chain.append({"class": throwable.getClass().getName(),
                          "message": str(throwable.getMessage())})
            cause = throwable.getCause()
        except Exception:  # a dead gateway: keep what was read
            break
        if cause is None or cause.equals(throwable):
            break
        throwable = cause
    if not chain:
        chain = [{"class": f"python:{type(exc).__name__}", "message": str(exc)}]
    return {"class": chain[0]["class"], "message": chain[0]["message"], "chain": chain,
            "trace": traceback.format_exc()[-6000:]}


# -- steps ---------------------------------------------------------------------------------------

def do_write(spark, step: dict) -> dict:
    path = step["path"]
    existing = read_properties(path)
    opts = {"hoodie.datasource.write.operation": step.get("operation", "upsert"),
            "hoodie.table.name": step.get("table_name") or existing.get("hoodie.table.name")
            or os.path.basename(os.path.normpath(path))}
    if step.get("table_type"):
        opts["hoodie.datasource.write.table.type"] = step["table_type"]
    if step.get("record_key"):
        opts["hoodie.datasource.write.recordkey.field"] = step["record_key"]
    if step.get("partition_fields") is not None:
        fields = step["partition_fields"]
        opts["hoodie.datasource.write.partitionpath.field"] = fields
        if not fields:
            opts["hoodie.datasource.write.keygenerator.class"] = \
                "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
    if step.get("ordering_field"):
        opts["hoodie.datasource.write.precombine.field"] = step["ordering_field"]
    if step.get("table_version") is not None:
        opts["hoodie.write.table.version"] = str(step["table_version"])
    elif existing.get("hoodie.table.version"):
        # Hudi 1.2 defaults hoodie.write.table.version to 9 and upgrades a version 8 table
        # silently; a test upgrades only when it asks to.
        opts["hoodie.write.table.version"] = existing["hoodie.table.version"]
    opts.update({k: str(v) for k, v in (step.get("options") or {}).items()})
    df = spark.read.parquet(step["rows"])
    df.write.format("hudi").options(**opts).mode(step.get("mode", "append")).save(path)
    return {"options": opts}


def do_read(spark, step: dict) -> dict:
    query = step.get("query", "snapshot")
    opts = {}
    if query in ("snapshot", "time_travel"):
        opts["hoodie.datasource.query.type"] = "snapshot"
    elif query == "read_optimized":
        opts["hoodie.datasource.query.type"] = "read_optimized"
    elif query == "incremental":
        opts["hoodie.datasource.query.type"] = "incremental"
        opts["hoodie.datasource.read.begin.instanttime"] = step.get("start") or "000"
        if step.get("end"):
            opts["hoodie.datasource.read.end.instanttime"] = step["end"]
    else:
        raise ValueError(f"unknown query {query!r}: snapshot, read_optimized, time_travel or incremental")
    if query == "time_travel":
        opts["as.of.instant"] = step["as_of"]
    opts.update({k: str(v) for k, v in (step.get("options") or {}).items()})
    df = spark.read.format("hudi").options(**opts).load(step["path"])
    if step.get("where"):
        df = df.where(step["where"])
    out = step["output"]
    df.coalesce(1).write.mode("overwrite").parquet(out)
    return {"output": out, "count": spark.read.parquet(out).count(), "options": opts}


def do_service(spark, step: dict) -> dict:
    jvm = spark._jvm
    service = step["service"]
    empty = jvm.org.apache.hudi.common.util.Option.empty()
    from java_service_job import write_client  # shipped by the harness (--py-files)
    client, meta_client = write_client(spark, step["path"], step.get("options") or {})
    out: dict = {}
    try:
        if service == "clean":
            meta = client.clean()
            out["clean_instant"] = meta.getStartCleanTime() if meta is not None else None
        elif service == "archive":
            client.archive()
        elif service in ("cluster", "compact"):
            instant = step.get("instant")
            if instant is None:
                scheduled = (client.scheduleClustering(empty) if service == "cluster"
                             else client.scheduleCompaction(empty))
                instant = scheduled.get() if scheduled.isPresent() else None
                out["scheduled"] = instant
            if instant is not None and not step.get("schedule_only"):
                if service == "cluster":
                    client.cluster(instant, True)
                else:
                    client.compact(instant, True)
        elif service == "rollback_failed_writes":
            out["rolled_back"] = bool(client.rollbackFailedWrites(meta_client))
        else:
            raise ValueError(f"unknown service {service!r}: clean, cluster, compact, archive "
                             f"or rollback_failed_writes")
    finally:
        client.close()
    return out


def do_hfile(spark, step: dict) -> dict:
    jvm = spark._jvm
    with open(step["file"], "rb") as f:
        data = f.read()
    stream = jvm.org.apache.hudi.io.ByteArraySeekableDataInputStream(
        jvm.org.apache.hudi.io.ByteBufferBackedInputStream(bytearray(data)))
    reader = jvm.org.apache.hudi.io.hfile.HFileReaderImpl(stream, len(data))
    try:
        reader.initializeMetadata()
        entries = []
        if reader.seekTo():
            while True:
                kv = reader.getKeyValue().get()
                raw = bytes(kv.getBytes())
                value = raw[kv.getValueOffset():kv.getValueOffset() + kv.getValueLength()]
                entries.append([kv.getKey().getContentInString(), value.hex()])
                if not reader.next():
                    break
        # Hudi's cursor only seeks forward (the metadata table looks keys up in sorted
        # order): back to the first entry, then each lookup in the order given
        reader.seekTo()
        lookups = {k: reader.seekTo(jvm.org.apache.hudi.io.hfile.UTF8StringKey(k)) for k in step.get("lookups") or []}
        meta = {}
        for name in step.get("meta") or []:
            found = reader.getMetaBlock(name)
            if found.isPresent():
                buf = found.get()
                copy = jvm.java.util.Arrays.copyOfRange  # one py4j call, not one per byte
                start = buf.arrayOffset() + buf.position()
                meta[name] = bytes(copy(buf.array(), start, start + buf.remaining())).hex()
            else:
                meta[name] = None
        info = {}
        for name in step.get("info") or []:
            found = reader.getMetaInfo(jvm.org.apache.hudi.io.hfile.UTF8StringKey(name))
            info[name] = bytes(found.get()).hex() if found.isPresent() else None
        return {"count": reader.getNumKeyValueEntries(), "entries": entries, "lookups": lookups,
                "meta": meta, "info": info}
    finally:
        reader.close()


def _plain(value):
    """A Java stat value as JSON: a boxed number or string as itself, a wrapper record as its
    one field, a ``BigDecimal`` as its plain string without trailing zeros (a version-1 record
    keeps decimals at scale 15, the footer at the column's), a ``ByteBuffer`` or ``byte[]`` as
    hex, anything else (dates, instants) as its ``toString``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, decimal.Decimal):  # py4j hands a BigDecimal over as a Decimal
        return format(value.normalize(), "f")
    try:
        name = value.getClass().getName()
    except Exception:
        return str(value)
    if name.startswith("org.apache.hudi.avro.model."):
        return _plain(value.get(0))  # a wrapper record: its one field
    if name.endswith("ByteBuffer"):
        data = bytes(value.array())
        start = value.arrayOffset() + value.position()
        return data[start:start + value.remaining()].hex()
    return str(value)


def _stats_json(name, stats, unwrap=None) -> dict:
    """``unwrap``: a record's ``ValueMetadata``, to turn its wrapped min and max into the
    values Java compares (as the footer's, for :func:`_plain`)."""
    low, high = stats.getMinValue(), stats.getMaxValue()
    if unwrap is not None:
        low, high = unwrap.unwrapValue(low), unwrap.unwrapValue(high)
    return {"name": name, "column": str(stats.getColumnName()), "min": _plain(low),
            "max": _plain(high), "null_count": stats.getNullCount(),
            "value_count": stats.getValueCount(), "total_size": stats.getTotalSize(),
            "total_uncompressed_size": stats.getTotalUncompressedSize()}


def do_mdt_check(spark, step: dict) -> dict:
    jvm = spark._jvm
    hudi = jvm.org.apache.hudi
    path = step["path"]
    columns = list(step.get("columns") or [])
    conf = hudi.storage.hadoop.HadoopStorageConfiguration(spark._jsc.hadoopConfiguration())
    meta_client = hudi.common.table.HoodieTableMetaClient.builder().setConf(conf).setBasePath(path).build()
    storage = meta_client.getStorage()
    engine = hudi.client.common.HoodieSparkEngineContext(spark._jsc)
    config = hudi.common.config.HoodieMetadataConfig.newBuilder().enable(True).build()
    tm = hudi.metadata.HoodieBackedTableMetadata(engine, storage, config, path)
    version = hudi.metadata.HoodieTableMetadataUtil.existingIndexVersionOrDefault("column_stats", meta_client)
    utils = hudi.common.util.ParquetUtils()
    out = {"partitions": [], "files": {}, "column_stats": [], "partition_stats": [], "file_stats": {},
           "log_stats": {}}
    util = hudi.metadata.HoodieTableMetadataUtil
    schema = None
    try:
        out["partitions"] = sorted(str(p) for p in tm.getAllPartitionPaths())
        jcols = jvm.java.util.ArrayList()
        for c in columns:
            jcols.add(c)
        for part in out["partitions"]:
            ppath = hudi.storage.StoragePath(path if part == "" else path + "/" + part)
            infos = tm.getAllFilesInPartition(ppath)
            out["files"][part] = {str(i.getPath().getName()): i.getLength() for i in infos}
            for name in out["files"][part]:
                if name.endswith(".parquet"):
                    ranges = utils.readColumnStatsFromMetadata(
                        storage, hudi.storage.StoragePath(ppath, name), jcols, version)
                    out["file_stats"].setdefault(part, {})[name] = [_stats_json(name, r) for r in ranges]
                elif ".log." in name:
                    if schema is None:  # the table's schema with the meta fields, as the writer's
                        schema = hudi.common.table.TableSchemaResolver(meta_client).getTableSchema()
                    ranges = util.getLogFileColumnRangeMetadata(
                        str(hudi.storage.StoragePath(ppath, name)), part, meta_client, jcols,
                        hudi.common.util.Option.of(schema), 10 * 1024 * 1024)
                    out["log_stats"].setdefault(part, {})[name] = [_stats_json(name, r) for r in ranges]
        for mdt_partition in ("column_stats", "partition_stats"):
            keys = jvm.java.util.ArrayList()
            for c in columns:
                keys.add(hudi.metadata.ColumnStatsIndexPrefixRawKey(c))
            try:
                records = tm.getRecordsByKeyPrefixes(hudi.common.data.HoodieListData.eager(keys),
                                                     mdt_partition, False).collectAsList()
            except Exception as e:  # the partition is not there
                out[mdt_partition] = {"error": str(e)[:500]}
                continue
            for rec in records:
                found = rec.getData().getColumnStatMetadata()
                if found.isPresent():
                    st = found.get()
                    vt = st.getValueType()
                    unwrap = (hudi.stats.ValueMetadata.getEmptyValueMetadata(version) if vt is None
                              else hudi.stats.ValueMetadata.getValueMetadata(vt))
                    item = _stats_json(str(st.getFileName()), st, unwrap)
                    item["deleted"] = bool(st.getIsDeleted())
                    item["key"] = str(rec.getRecordKey())
                    out[mdt_partition].append(item)
    finally:
        tm.close()
    return {"check": out}


def _instant_json(inst) -> dict:
    return {"requested": str(inst.requestedTime()), "action": str(inst.getAction()),
            "state": str(inst.getState().name()), "completed": inst.getCompletionTime()}


def do_timeline(spark, step: dict) -> dict:
    hudi = spark._jvm.org.apache.hudi
    conf = hudi.storage.hadoop.HadoopStorageConfiguration(spark._jsc.hadoopConfiguration())
    meta_client = hudi.common.table.HoodieTableMetaClient.builder().setConf(conf).setBasePath(step["path"]).build()
    active = [_instant_json(i) for i in meta_client.getActiveTimeline().getInstants()]
    archived = [_instant_json(i) for i in meta_client.getArchivedTimeline("", False).getInstants()]
    return {"timeline": {"active": active, "archived": archived}}


def do_sql(spark, step: dict) -> dict:
    """One Spark SQL query (a session with Hive support reads the catalog's tables through
    Hudi), its rows written as parquet; ``refresh`` names tables whose cached metadata
    (partitions, schema) Spark drops first."""
    for name in step.get("refresh") or []:
        spark.catalog.refreshTable(name)
    df = spark.sql(step["query"])
    out = step["output"]
    df.coalesce(1).write.mode("overwrite").parquet(out)
    return {"output": out, "count": spark.read.parquet(out).count()}


STEPS = {"write": do_write, "read": do_read, "service": do_service, "hfile": do_hfile,
         "mdt_check": do_mdt_check, "timeline": do_timeline, "sql": do_sql}


def run_spec(spark, spec: dict, result_path: str) -> str:
    """Run one call's steps in order, rewriting ``result_path`` after each; its status."""
    results: list[dict] = []

    def flush(status: str) -> None:
        tmp = result_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"status": status, "steps": results}, f)
        os.replace(tmp, result_path)

    status = "ok"
    for i, step in enumerate(spec["steps"]):
        path = step.get("path", "")
        before = timeline_files(path) if path else set()
        started = time.monotonic()
        entry: dict = {"index": i, "op": step.get("op")}
        try:
            entry.update(STEPS[step["op"]](spark, step))
            entry["ok"] = True
        except Exception as exc:  # every failure is reported by class; the harness decides
            entry["ok"] = False
            entry["error"] = java_error(exc)
        entry["seconds"] = round(time.monotonic() - started, 3)
        after = timeline_files(path) if path else set()
        entry["instants"] = describe_instants(after - before)
        results.append(entry)
        flush("running")
        if not entry["ok"]:
            status = "failed"
            if not spec.get("continue_on_error"):
                break
    flush(status)
    return status


def serve(spark, inbox: str, harness_pid: int, idle_s: float) -> int:
    """Kept JVM: run every call dropped into ``inbox`` (``<n>.request`` naming its spec and
    result files), one at a time in arrival order, until the ``stop`` file appears, the
    harness process is gone, or nothing came for ``idle_s`` seconds. One Spark and Hudi
    start-up then serves a whole test session (a JVM start costs 10-20 s of CPU)."""
    last = time.monotonic()
    while True:
        if os.path.exists(os.path.join(inbox, "stop")) or time.monotonic() - last > idle_s:
            return 0
        try:
            os.kill(harness_pid, 0)
        except OSError:
            return 0
        requests = sorted(n for n in os.listdir(inbox) if n.endswith(".request"))
        if not requests:
            time.sleep(0.05)
            continue
        name = os.path.join(inbox, requests[0])
        with open(name, encoding="utf-8") as f:
            req = json.load(f)
        os.remove(name)
        with open(req["spec"], encoding="utf-8") as f:
            run_spec(spark, json.load(f), req["result"])
        last = time.monotonic()


def main(argv: list[str]) -> int:
    from pyspark.sql import SparkSession
    builder = SparkSession.builder.appName("java-hudi-harness")
    # The session's settings come from spark-submit's --conf (the harness), so a test can
    # change them without editing this file.
    spark = builder.getOrCreate()
    try:
        if argv[1] == "--serve":
            return serve(spark, argv[2], int(argv[3]), float(argv[4]))
        with open(argv[1], encoding="utf-8") as f:
            spec = json.load(f)
        return 0 if run_spec(spark, spec, argv[2]) == "ok" else 1
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
