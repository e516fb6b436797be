"""Hudi's own option set, as data: every ``hoodie.*`` key Hudi 1.2 defines, and what it means here.

Why: a Hudi user brings an options dict written for Java Hudi. The strict key check
(:func:`~airflow_hudi_occ.core.config.check_option_keys`) is right for typos and wrong for
Hudi's own keys: the first real job failed on ``hoodie.parquet.compression.codec`` as "unknown".
So the key set comes from Hudi itself, read by reflection from the Hudi 1.2 Spark bundle
(``scripts/regenerate-hudi-options.sh`` runs ``scripts/hudi_options/DumpHudiOptions.java``) and
pinned in ``hudi_options.json`` beside this module; each key then carries one status:

- **honored**: a :class:`~airflow_hudi_occ.core.config.ConfigProperty` reads it (the typed
  config; docs/configuration.md's tables say what it does);
- **no effect here**: a setting of Java's engine with no meaning in ours (a parallelism, an RDD
  cache level, the timeline server, a read option); accepted, logged once with the reason;
- **refused**: a meaning this project does not implement. Set, it is a ``ConfigError`` naming
  the key, the reason and the way out, raised by the options check before anything is written.
  Values that ask for nothing this project does not do (the feature's "off", or Hudi's default
  where that is what happens here) are accepted, so a copied config that merely spells out
  Hudi's defaults keeps working.

The statuses are the hand-kept :data:`RULES` below (regular expressions, first match wins; the
last refuses what nothing more specific covers, accepting Hudi's default).
``scripts/hudi_options/write_doc.py`` regenerates the doc's generated section from the same data.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Collection, Mapping

log = logging.getLogger(__name__)

HONORED = "honored"
NO_EFFECT = "no effect here"
REFUSED = "refused"
STATUSES = (HONORED, NO_EFFECT, REFUSED)

PINNED_FILE = Path(__file__).with_name("hudi_options.json")
#: Hudi's default value stands for itself in :attr:`Rule.accept`
DEFAULT = object()


@dataclass(frozen=True)
class HudiKey:
    """One key of Hudi's set, as its config class declares it (first sentence of its doc)."""

    key: str
    alternatives: tuple[str, ...]
    default: str | None
    group: str
    cls: str
    since: str
    deprecated: str
    doc: str


@dataclass(frozen=True)
class Rule:
    """The status of the keys matching ``pattern`` (a full-match regular expression).

    A refused rule's ``accept`` values (compared case-insensitively; :data:`DEFAULT` is Hudi's
    default) and ``accept_if(value, options)`` name the values that ask for nothing this project
    lacks: with them the key is accepted and has no effect."""

    pattern: str
    status: str
    reason: str
    remedy: str = ""
    accept: tuple[Any, ...] = (DEFAULT,)
    accept_if: Callable[[str, Mapping[str, Any]], bool] | None = None
    accept_note: str = ""

    def accepts(self, key: "HudiKey | None", value: Any, options: Mapping[str, Any]) -> bool:
        text = str(value).strip()
        if text == "":
            return True  # an empty value is no value: the typed config reads it as unset
        if self.accept_if is not None and self.accept_if(text, options):
            return True
        for ok in self.accept:
            if ok is DEFAULT:
                if key is not None and key.default is not None and text.lower() == key.default.lower():
                    return True
            elif text.lower() == str(ok).lower():
                return True
        return False

    def accepted_values(self, key: "HudiKey | None") -> str:
        """The accepted values in words, for the doc and the error."""
        if self.accept_note:
            return self.accept_note
        words = []
        for ok in self.accept:
            if ok is DEFAULT:
                if key is not None and key.default not in (None, ""):
                    words.append(f"Hudi's default {key.default}")
            else:
                words.append(str(ok))
        return ", ".join(dict.fromkeys(words))


def _no(pattern: str, reason: str) -> Rule:
    return Rule(pattern, NO_EFFECT, reason)


def _refuse(pattern: str, reason: str, remedy: str, *accept: Any, accept_if=None, note: str = "") -> Rule:
    return Rule(pattern, REFUSED, reason, remedy, tuple(accept) if accept else (DEFAULT,), accept_if, note)


def _off(pattern: str, reason: str, remedy: str) -> Rule:
    """A feature switch: refused on, accepted off."""
    return _refuse(pattern, reason, remedy, "false")


# --- the reasons that repeat -------------------------------------------------------------------

PARALLELISM = ("Java's Spark task parallelism; this project's Spark engine sizes its tasks from its "
               "input, and the core writer runs in one process")
STORAGE_LEVEL = "the level at which Java's engine caches an RDD between stages; this project caches no RDDs"
MEMORY = ("memory and spill sizing of Java's JVM-side record maps; this project merges records with "
          "pyarrow")
TIMELINE_SERVER = ("Java's embedded timeline server and file-system view service; none runs here: each "
                   "writer reads the timeline itself and writes its markers directly")
READ_OPTION = ("a read option of Java's Spark datasource; a write does not read it (nor does Java's "
               "writer); this project's readers take their own arguments (docs/python-library.md)")
SPARK_SQL = ("a setting of Hudi's Spark SQL commands (INSERT INTO, MERGE INTO, CREATE INDEX); this "
             "project is written through its operators, job and library, not Spark SQL")
STREAMING = ("a setting of Hudi's Structured Streaming sink or HoodieStreamer; this project writes "
             "batches")
INTERNAL = "set by Java's Spark writer for itself, not a user setting"
ESTIMATE = ("an estimate Java's writer plans files and splits with; this project sizes files by the "
            "bytes it writes (hoodie.parquet.max.file.size)")
TABLE_PROPERTY = ("a table property Hudi keeps in .hoodie/hoodie.properties and maintains itself; "
                  "writers read it from the table, not from a write's options")
JAVA_CLASS = "it names a Java class to plug into Hudi's writer; this project's writers run no Java code"
JAVA_CLASS_REMEDY = ("remove it (Hudi's default class is what this project does), or run the job on "
                     "Java Hudi with HudiJavaWriteOperator (docs/java-engine.md)")
NOT_IMPLEMENTED = "this project does not implement this setting beyond Hudi's default"
NOT_IMPLEMENTED_REMEDY = ("remove it (Hudi's default is accepted), or run the job on Java Hudi with "
                          "HudiJavaWriteOperator (docs/java-engine.md)")
SYNC_SETTING = ("a setting of Java's sync tools that this project's catalog sync (docs/catalog-sync.md) "
                "does not read: JDBC / HiveQL modes, Glue's and BigQuery's tuning, Java-only switches")
TABLE_SERVICE_REMEDY = ("set it to false and run the service as its own task: HudiTableServiceOperator "
                        "with service='{service}' (docs/operators.md), which plans and runs it under OCC")


def _gated(what: str, gate: str) -> str:
    return f"read only by {what}, which is refused here ({gate})"


#: The status of every key of Hudi's set that no ConfigProperty honours, first match wins.
#: Keep specific rules above the general ones.
RULES: tuple[Rule, ...] = (
    # --- the keys a Hudi user sets most (issue 41) ---------------------------------------------
    _no(r"hoodie\.merge\.allow\.duplicate\.on\.inserts",
        "an insert here combines its batch's copies of a key whatever this says (stricter than Java "
        "with true, which may keep them)"),
    _refuse(r"hoodie\.(write\.)?record\.merge\.strategy\.id|hoodie\.write\.record\.merge\.custom\.implementation\.classes",
            "custom record merging (a merger strategy of Java's) is not implemented",
            "remove it: records merge by hoodie.record.merge.mode (EVENT_TIME_ORDERING or "
            "COMMIT_TIME_ORDERING), which is honoured"),
    _refuse(r"hoodie\.metadata\.index\.column\.stats\.enable",
            "this writer keeps the column_stats and partition_stats a table's metadata table has "
            "(hoodie.occ.metadata.files.maintain), but builds none: on a table without them the "
            "index would silently not exist",
            "remove it (a table whose metadata table has column stats keeps them up to date), or "
            "build the index once with Java Hudi (HudiJavaTableServiceOperator or a Java write)",
            "false"),
    _off(r"hoodie\.clustering\.(inline|schedule\.inline|async\.enabled)",
         "clustering is not run inside a write task after its commit here: a service task after "
         "the write does the same under the same table lock, without holding the write's slot, "
         "failing the ingestion when the service fails or repeating the write on its retries",
         TABLE_SERVICE_REMEDY.format(service="cluster")),
    _off(r"hoodie\.compact\.(inline|schedule\.inline)",
         "compaction is not run inside a write task after its commit here: a service task after "
         "the write does the same under the same table lock (every "
         "hoodie.compact.inline.max.delta.commits deltacommits), without holding the write's slot, "
         "failing the ingestion when the service fails or repeating the write on its retries",
         TABLE_SERVICE_REMEDY.format(service="compact")),
    _off(r"hoodie\.(log\.compaction\.(enable|inline)|metadata\.log\.compaction\.enable)",
         "log compaction (merging a file slice's log files into one log) is not implemented",
         "remove it; compact the file slices instead (HudiTableServiceOperator, service='compact')"),
    _off(r"hoodie\.schema\.on\.read\.enable",
         "Hudi's schema-on-read evolution (renames, drops and type changes kept as an internal "
         "schema in the commit metadata) is not implemented",
         "remove it; for batches with fewer columns or narrower numbers than the table set "
         "hoodie.datasource.write.reconcile.schema=true (honoured); new columns are added as "
         "nullable anyway"),
    _off(r"hoodie\.datasource\.hive_sync\.(bucket_sync|sync_comment|recreate_table_on_error)"
         r"|hoodie\.meta\.sync\.(no_partition_metadata|touch\.partitions\.enabled)",
         "this catalog-sync feature of Java's (bucket specs, column comments, re-creating the table on "
         "an error, no partition metadata, touching partitions) is not implemented (docs/catalog-sync.md)",
         "remove it (or set it to false); the sync registers the table as Java's does by default"),
    _refuse(r"hoodie\.datasource\.hive_sync\.base_file_format",
            "the tables this project writes have parquet base files", "remove it, or set it to PARQUET",
            "PARQUET"),
    _no(r"hoodie\.datasource\.(hive_sync|meta\.sync|meta_sync)\..*|hoodie\.meta[._]sync\..*"
        r"|hoodie\.datasource\.partition_extractor_class|hoodie\.table\.partition_extractor_class",
        SYNC_SETTING),

    # --- gates: a feature refused on, its settings without effect -------------------------------
    _off(r"hoodie\.metrics\.on",
         "Java's metrics reporters (Graphite, JMX, Datadog, Prometheus, CloudWatch, M3) are not here",
         "remove it; this project reports each attempt in the task log, the table's attempt log "
         "and the timeline page (docs/timeline-page.md), and lineage through OpenLineage"),
    _off(r"hoodie\.metadata\.metrics\.enable|hoodie\.metrics\.lock\.enable",
         "Java's metrics reporters are not here",
         "remove it; this project reports through its logs and the timeline page (docs/timeline-page.md)"),
    _no(r"hoodie\.metrics.*", _gated("Java's metrics reporters", "hoodie.metrics.on")),
    _off(r"hoodie\.write\.commit\.callback\.on",
         "Java's commit callbacks (HTTP, Kafka, Pulsar) are not implemented",
         "remove it; react to the commit from Airflow instead (the write operator's XCom and its "
         "hudi:// asset, docs/assets-and-lineage.md)"),
    _no(r"hoodie\.write\.commit\.callback\..*",
        _gated("Java's commit callbacks", "hoodie.write.commit.callback.on")),
    _off(r"hoodie\.errortable\.enable", "Hudi's error table (failed records kept in a side table) is not "
         "implemented: a record that cannot be written fails the write here",
         "remove it; fix or filter the records the error names"),
    _no(r"hoodie\.errortable\..*", _gated("Hudi's error table", "hoodie.errortable.enable")),
    _refuse(r"hoodie\.precommit\.validators|hoodie\.prewrite\.validators",
            "Java's pre-write and pre-commit validators (Java classes run inside the write) are not "
            "implemented", "remove it; validate the batch before the write, e.g. in an upstream task", ""),
    _no(r"hoodie\.precommit\.validators\..*",
        _gated("Java's pre-commit validators", "hoodie.precommit.validators")),
    _off(r"hoodie\.partition\.ttl\.inline", "partition TTL management is not implemented",
         "remove it; drop old partitions with an insert_overwrite or delete of their rows"),
    _no(r"hoodie\.partition\.ttl\..*", _gated("Hudi's partition TTL management", "hoodie.partition.ttl.inline")),
    _off(r"hoodie\.table\.service\.manager\.enabled|hoodie\.metadata\.table\.service\.manager\.enabled",
         "Hudi's table service manager (a remote service that runs table services) is not used here",
         "remove it; run table services with HudiTableServiceOperator (docs/operators.md)"),
    _no(r"hoodie\.(metadata\.)?table\.service\.manager\..*",
        _gated("Hudi's table service manager", "hoodie.table.service.manager.enabled")),
    _off(r"hoodie\.metaserver\.enabled", "Hudi's metaserver (a timeline kept in a server) is not used here",
         "remove it: this project's writers keep the timeline in the table's .hoodie folder"),
    _no(r"hoodie\.metaserver\..*", _gated("Hudi's metaserver", "hoodie.metaserver.enabled")),
    _refuse(r"hoodie\.bootstrap\.base\.path|hoodie\.bootstrap\.(mode\.selector.*|full\.input\.provider"
            r"|partitionpath\.translator\.class|data\.queries\.only|index\..*)",
            "bootstrapping an existing parquet or ORC dataset into a Hudi table is not implemented",
            "bootstrap the table with Java Hudi (a Java write with operation bootstrap), then write it "
            "here; or remove the key"),
    _no(r"hoodie\.clean\.delete\.bootstrap\.base\.file", _gated("the clean of bootstrapped tables",
                                                              "hoodie.bootstrap.*")),
    _refuse(r"hoodie\.keygen\.timebased\.timestamp\.type",
            "Hudi's TimestampBasedKeyGenerator (partition paths formatted from a timestamp column) is "
            "not implemented: the partition paths would differ from Java's",
            "format the partition column in the input (e.g. date_format) and partition by it with the "
            "simple key generator", ""),
    _no(r"hoodie\.keygen\..*", _gated("Hudi's TimestampBasedKeyGenerator", "hoodie.keygen.timebased.timestamp.type")),
    _refuse(r"hoodie\.payload\.ordering\.field",
            "Hudi's older name for the ordering field, no longer read by Hudi 1.x's writers",
            "use hoodie.datasource.write.precombine.field", ""),
    _no(r"hoodie\.payload\.event\.time\.field",
        "the field Java's DefaultHoodieRecordPayload copies into commit metadata as event-time "
        "statistics; records merge by the ordering field either way"),
    _refuse(r"hoodie\.(table\.)?base\.file\.format",
            "this project writes parquet base files only", "remove it, or set it to PARQUET", "PARQUET"),
    _no(r"hoodie\.(orc|lance)\..*", _gated("ORC and Lance base files", "hoodie.base.file.format=PARQUET")),
    _off(r"hoodie\.table\.cdc\.enabled", "Hudi's change-data-capture log (CDC blocks) is not written here",
         "remove it; read changes with an incremental read (docs/python-library.md)"),
    _no(r"hoodie\.table\.cdc\..*", _gated("Hudi's change-data-capture log", "hoodie.table.cdc.enabled")),
    _refuse(r"hoodie\.index\.class", JAVA_CLASS, JAVA_CLASS_REMEDY, ""),
    _no(r"hoodie\.(bloom\.index|global\.(simple\.index|index)|record\.index|simple\.index)\..*",
        "tuning of Java's bloom, global and record-level indexes and of its simple index's Spark join; "
        "this project's indexes (hoodie.index.type SIMPLE or BUCKET) find keys by reading the "
        "partition's files or hashing the key"),
    _refuse(r"hoodie\.bucket\.index\.partition\.(expressions|rule\.type)",
            "a number of buckets per partition (partition-level bucket index) is not implemented",
            "remove it; hoodie.bucket.index.num.buckets applies to every partition"),
    _no(r"hoodie\.bucket\.index\.(max|min)\.num\.buckets|hoodie\.bucket\.index\.(merge|split)\.threshold",
        _gated("the consistent-hashing bucket engine", "hoodie.index.bucket.engine=CONSISTENT_HASHING")),
    _no(r"hoodie\.bucket\.index\.query\.pruning", READ_OPTION),
    _no(r"hoodie\.bucket\.index\.remote\.partitioner\.enable", PARALLELISM),
    _off(r"hoodie\.metadata\.(record\.level\.index\.enable|global\.record\.level\.index\.enable"
         r"|index\.bloom\.filter\.enable|bloom\.filter\.enable|index\.expression\.enable|index\.async)",
         "this writer keeps a metadata table's files, column_stats and partition_stats partitions and "
         "refuses a table with a record, secondary, bloom-filter or expression index "
         "(docs/java-interop.md); it builds none",
         "remove it; build and keep such an index with Java Hudi writers (docs/java-engine.md)"),
    _no(r"hoodie\.metadata\.index\.secondary\.enable",
        "Java maintains the secondary indexes a table defines; this writer refuses a table that has "
        "one whatever this says (docs/java-interop.md)"),
    _refuse(r"hoodie\.metadata\.index\.(drop|secondary\.column|expression\.column|expression\.options"
            r"|bloom\.filter\.column\.list)",
            "defining or dropping a metadata-table index is not implemented",
            "do it with Java Hudi (Spark SQL CREATE INDEX / DROP INDEX)", ""),
    _no(r"hoodie\.metadata\.(auto\.initialize|record\.level\.index\.defer\.init)",
        "this writer never creates a metadata table or an index in it (hoodie.metadata.enable); "
        "Java's writers do"),
    _no(r"hoodie\.metadata\.(index\.(bloom\.filter|expression|secondary|column\.stats|partition\.stats)\."
        r"(file\.group\.count|parallelism)|(global\.)?record\.level\.index\.(min|max)\.filegroup\.count"
        r"|record\.index\.(max\.filegroup\.size|growth\.factor|enable\.validation\.on\.initialization)"
        r"|bloom\.filter\.(dynamic\.max\.entries|fpp|num\.entries|type)|index\.check\.timeout\.seconds)",
        "sizing of metadata-table indexes as Java builds them; this writer builds none"),
    _no(r"hoodie\.metadata\.(file\.cache\.max\.size\.mb|max\.init\.parallelism|max\.reader\.(buffer\.size|memory)"
        r"|spillable\.map\.path|optimized\.log\.blocks\.scan\.enable|range\.repartition\..*|repartition\..*"
        r"|record\.preparation\.parallelism|streaming\.write\..*|index\.column\.stats\.inMemory\.projection\.threshold"
        r"|index\.column\.stats\.processing\.mode\.override|write\.concurrency\.mode"
        r"|write\.fail\.on\.table\.service\.failures|max\.deltacommits\.when_pending)",
        "how Java's engine reads, partitions and schedules its metadata-table work; this writer "
        "writes the metadata table in the same commit under the table lock (docs/java-interop.md)"),
    _refuse(r"hoodie\.metadata\.(compact\.(max\.delta\.seconds|trigger\.strategy)|dir\.filter\.regex"
            r"|max\.logfile\.size|derive\.from\.datatable\.clean\.policy)",
            NOT_IMPLEMENTED + " (the metadata table is compacted after "
            "hoodie.metadata.compact.max.delta.commits deltacommits)", NOT_IMPLEMENTED_REMEDY),

    # --- Java's engine ---------------------------------------------------------------------------
    _no(r"hoodie\..*parallelism(\..*)?|hoodie\.clustering\.max\.parallelism", PARALLELISM),
    _no(r"hoodie\..*storage\.level", STORAGE_LEVEL),
    _no(r"hoodie\.memory\..*|hoodie\.common\.(spillable\.diskmap\.type|diskmap\.compression\.enabled)"
        r"|hoodie\.file\.index\.cache\..*|hoodie\.cdc\.file\.group\.iterator\.memory\.spill\.bytes", MEMORY),
    _no(r"hoodie\.embed\.timeline\.server\..*|hoodie\.filesystem\.(view|remote)\..*"
        r"|hoodie\.markers\.timeline_server_based\.batch\.interval_ms", TIMELINE_SERVER),
    _no(r"hoodie\.write\.(executor|buffer)\..*",
        "Java's in-task record queue between reading and writing; this project writes Arrow batches"),
    _no(r"hoodie\.(consistency\.check\..*|optimistic\.consistency\.guard\.sleep_time_ms)",
        "Java's guard for eventually consistent stores (deprecated since Hudi 0.7); the object "
        "stores this project writes to are strongly consistent"),
    _no(r"hoodie\.filesystem\.operation\.retry\..*",
        "Java's Hadoop file-system retries; this project's stores retry with their own bounded "
        "clients (docs/configuration.md, Object stores)"),
    _no(r"hoodie\.fs\.atomic_creation\.support",
        "which stores Java's file-system lock creates files atomically on; this project's locks "
        "do not read it (docs/concurrency.md)"),
    _no(r"hoodie\.write\.lock\.hivemetastore\..*",
        _gated("Java's HiveMetastoreBasedLockProvider", "hoodie.write.lock.provider")),
    _no(r"hoodie\.write\.lock\.heartbeat_interval_ms",
        "the lock heartbeat of Java's lock providers; this project's keep their lock by the "
        "ZooKeeper session or by renewing the storage lease (hoodie.write.lock.storage.renew.interval.secs)"),
    _no(r"hoodie\.block\.writes\.on\.speculative\.execution|hoodie\.release\.resource\.on\.completion\.enable"
        r"|hoodie\.clean\.optimize\.using\.local\.engine\.context"
        r"|hoodie\.clustering\.plan\.generation\.use\.local\.engine\.context",
        "how Java's engine uses Spark (speculative tasks, cached RDDs, local planning); this "
        "project's writers do not depend on it"),
    _no(r"hoodie\.(clean\.incremental\.enabled|table\.services\.incremental\.enabled)",
        "whether Java plans table services from the timeline since the last run or from a full "
        "listing; the plan's result is the same"),
    _no(r"hoodie\.(parquet\.compression\.ratio|logfile\.to\.parquet\.compression\.ratio"
        r"|record\.size\.estimation\.threshold|record\.size\.estimator\.average\.metadata\.size"
        r"|copyonwrite\.insert\.(auto\.split|split\.size))", ESTIMATE),
    _no(r"hoodie\.(datasource\.read\..*|datasource\.query\..*|datasource\.streaming\.startOffset"
        r"|enable\.data\.skipping|file\.index\.enable|read\..*|hfile\.block\.cache\..*"
        r"|merge\.use\.record\.positions|file\.group\.reader\.enabled|datasource\.merge\.type"
        r"|compaction\.(lazy\.block\.read|reverse\.log\.read)|spark\.polaris\.catalog\.class)", READ_OPTION),
    _no(r"hoodie\.(spark\.sql\..*|sql\..*|expression\.index\..*|index\.name|table\.checksum)", SPARK_SQL),
    _no(r"hoodie\.(datasource\.write\.streaming\..*|streamer\..*|datasource\.compaction\.async\.enable)",
        STREAMING),
    _no(r"hoodie\.(internal\..*|bulkinsert\.(overwrite\.operation\.type|schema\.ddl)|static\.overwrite\.partition\.paths"
        r"|avro\.schema|write\.schema|avro\.schema\.external\.transformation|base\.path"
        r"|datasource\.write\.row\.writer\.enable)",
        INTERNAL + "; here the input's Arrow schema is the writer schema and the table path is "
                   "the write's own argument"),
    _no(r"hoodie\.(table\.(version|initial\.version|create\.schema|metadata\.partitions(\.inflight)?|timeline\.path"
        r"|history\.path|keygenerator\.(class|type)|legacy\.payload\.class)|timeline\.(history\.path|path|layout\.version)"
        r"|archivelog\.folder|compaction\.payload\.class)", TABLE_PROPERTY),
    _no(r"hoodie\.(sensitive\.config\.keys|write\.application\.id)",
        "what Java's logs mask and the application name its commits carry; this project's writers "
        "read neither (its commits name the writer; its job keeps secrets out of its arguments, "
        "core/job_secrets.py)"),
    _no(r"hoodie\.combine\.before\.delete", "a delete removes a key however many times its batch names it"),
    _no(r"hoodie\.write\.record\.positions",
        "record positions in Java's log blocks, an optimisation of its readers; readers of this "
        "project's log blocks merge by key"),
    _refuse(r"hoodie\.table\.timeline\.timezone",
            "this project's instant times are always UTC (core/format/instant_time.py); Java's "
            "default LOCAL is the JVM's zone, the same only on machines whose zone is UTC",
            "remove it, or set it to UTC (and run Java writers of the same table with UTC too)", "UTC"),
    _no(r"hoodie\.(clustering\.(async|inline)\.max\.commits)",
        _gated("clustering after commits", "hoodie.clustering.inline / async.enabled")),
    _no(r"hoodie\.compaction\.daybased\.target\.partitions|hoodie\.clean\.hours\.retained",
        "read only by a strategy or policy this project refuses (DayBasedCompactionStrategy, "
        "KEEP_LATEST_BY_HOURS)"),
    _no(r"hoodie\.commits\.archival\.batch",
        "how many instants Java archives per batch; this project archives every due instant at once"),
    _no(r"hoodie\.auto\.adjust\.lock\.configs",
        "Java's adjustment of lock retries for its async services; this project's lock keys are "
        "taken as given (docs/configuration.md, Lock)"),
    _refuse(r"hoodie\..*\.class", JAVA_CLASS, JAVA_CLASS_REMEDY, DEFAULT, ""),

    # --- everything else of Hudi's set: a meaning not implemented --------------------------------
    _refuse(r"hoodie\..*", NOT_IMPLEMENTED, NOT_IMPLEMENTED_REMEDY),
)


@functools.lru_cache(maxsize=None)
def _compiled() -> tuple[tuple[re.Pattern, Rule], ...]:
    return tuple((re.compile(r.pattern), r) for r in RULES)


@functools.lru_cache(maxsize=None)
def pinned() -> tuple[str, tuple[HudiKey, ...]]:
    """The pinned dump: where it came from and its keys (read once, on first use)."""
    data = json.loads(PINNED_FILE.read_text(encoding="utf-8"))
    keys = tuple(HudiKey(e["key"], tuple(e["alternatives"]), e["default"], e["group"], e["class"],
                         e["since"], e["deprecated"], e["doc"]) for e in data["keys"])
    return data["source"], keys


@functools.lru_cache(maxsize=None)
def hudi_keys() -> dict[str, HudiKey]:
    """Every key of Hudi's set and every alternative name of one, to its :class:`HudiKey`."""
    out: dict[str, HudiKey] = {}
    for k in pinned()[1]:
        out.setdefault(k.key, k)
    for k in pinned()[1]:
        for alt in k.alternatives:
            out.setdefault(alt, k)
    return out


def rule_for(key: str) -> Rule:
    """The rule of a key no ConfigProperty honours (the catch-all refusal at worst)."""
    for pattern, rule in _compiled():
        if pattern.fullmatch(key):
            return rule
    raise LookupError(key)  # the last rule matches every hoodie.* key


@dataclass(frozen=True)
class KeyStatus:
    key: str
    status: str
    reason: str
    remedy: str = ""


_logged: set[str] = set()


def unread_name(entry: HudiKey, honored: Collection[str]) -> str | None:
    """For a key some of whose names a ConfigProperty reads: the name to use instead of the
    others (Hudi's older spellings this project does not read), else None."""
    return next((n for n in (entry.key, *entry.alternatives) if n in honored), None)


def judge(key: str, value: Any, options: Mapping[str, Any], honored: Collection[str] = ()) -> KeyStatus | None:
    """What ``key`` set to ``value`` means here, for a key no ConfigProperty reads (``honored``:
    the keys some do): None when it is not Hudi's (unknown to both), else no effect (accepted)
    or refused. A no-effect key is logged once per process at INFO with its reason."""
    entry = hudi_keys().get(key)
    if entry is None:
        return None
    read = unread_name(entry, honored)
    if read is not None:  # another name of an honored key: reading it would need a second alias
        return KeyStatus(key, REFUSED, f"an older name of {read}, which this project reads under that name only",
                         f"rename it to {read}")
    rule = rule_for(entry.key)
    if rule.status == REFUSED and not rule.accepts(entry, value, options):
        return KeyStatus(key, REFUSED, rule.reason, rule.remedy)
    reason = rule.reason if rule.status == NO_EFFECT else f"set to {value!r}, which asks for nothing more: {rule.reason}"
    if key not in _logged:
        _logged.add(key)
        log.info("Hudi option %s has no effect here: %s", key, reason)
    return KeyStatus(key, NO_EFFECT, reason)


# --- the doc ---------------------------------------------------------------------------------

DOC_BEGIN = "<!-- BEGIN generated from airflow_hudi_occ/core/hudi_options.json by scripts/regenerate-hudi-options.sh -->"
DOC_END = "<!-- END generated -->"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _honored_sections(handwritten: str) -> dict[str, str]:
    """The section of the hand-written doc whose table documents each honored key."""
    sections: dict[str, str] = {}
    heading = ""
    for line in handwritten.splitlines():
        if line.startswith("## "):
            heading = line[3:].strip()
        cells = line.split(" | ")
        if heading and line.startswith("| `hoodie."):  # a table row: the key, then its aliases
            for name in re.findall(r"`(hoodie\.[A-Za-z0-9_.\-]+)`", " ".join(cells[:2])):
                sections.setdefault(name, heading)
    return sections


def status_of(k: HudiKey, honored: Collection[str], accepted: Mapping[str, str],
              sections: Mapping[str, str] | None = None) -> tuple[str, str]:
    """A key's status and its note: honored (where), no effect (why), refused (why, the way
    out and the values accepted). ``honored``: the keys ConfigProperties read; ``accepted``:
    config's hand-kept no-effect keys and their reasons; ``sections``: the doc section of each
    honored key."""
    names = (k.key, *k.alternatives)
    read = unread_name(k, honored)
    if read is not None:
        where = (sections or {}).get(read) or (sections or {}).get(k.key)
        note = f"see \"{where}\" above" if where else "read by core/config.py"
        unread = [n for n in names if n not in honored]
        if unread:
            note += (f"; under the name{'s' if len(unread) > 1 else ''} {', '.join(unread)} refused: "
                     f"rename it to {read}")
        return HONORED, note
    if k.key in accepted:
        return NO_EFFECT, accepted[k.key]
    rule = rule_for(k.key)
    if rule.status != REFUSED:
        return rule.status, rule.reason
    ok = rule.accepted_values(k)
    return REFUSED, f"{rule.reason}. Way out: {rule.remedy}" + (f" (accepted: {ok})" if ok else "")


def render_doc_section(honored: Collection[str], accepted: Mapping[str, str], handwritten: str) -> str:
    """The generated section: every key of Hudi's set with its status and note. ``honored``: the
    keys ConfigProperties read; ``accepted``: config's hand-kept no-effect keys with their reasons;
    ``handwritten``: the rest of the doc (an honored key's note names its section there)."""
    source, keys = pinned()
    sections = _honored_sections(handwritten)
    counts = dict.fromkeys(STATUSES, 0)
    rows = []
    for k in keys:
        alts = ", ".join(f"`{a}`" for a in k.alternatives)
        status, note = status_of(k, honored, accepted, sections)
        counts[status] += 1
        dflt = "" if k.default in (None, "") else f"`{_cell(k.default)}`"
        rows.append(f"| `{k.key}` | {alts} | {dflt} | {status} | {_cell(note)} |")
    summary = ", ".join(f"{n} {s}" for s, n in counts.items())
    return "\n".join([
        DOC_BEGIN,
        "",
        f"Every `hoodie.*` key of {source} ({len(keys)} keys: {summary}), read by reflection from the "
        "bundle (`scripts/regenerate-hudi-options.sh`) and pinned in "
        "`airflow_hudi_occ/core/hudi_options.json`; the statuses are kept in "
        "`airflow_hudi_occ/core/hudi_options.py`. **honored**: this project implements it (its "
        "section above says how); **no effect here**: a setting of Java's engine with no meaning "
        "in ours, accepted and logged once; **refused**: a `ConfigError` naming the key, the "
        "reason and the way out, before anything is written, unless set to a value listed as "
        "accepted. The default column is Hudi's (this project's own defaults are in the tables "
        "above).",
        "",
        "| key | alternatives | Hudi's default | status | note |",
        "| --- | --- | --- | --- | --- |",
        *rows,
        "",
        DOC_END,
    ])


def splice_doc(doc: str, section: str) -> str:
    """``doc`` with its generated section replaced by ``section`` (appended if there is none)."""
    begin, end = doc.find(DOC_BEGIN), doc.find(DOC_END)
    if begin < 0 or end < 0:
        return doc.rstrip("\n") + "\n\n## Hudi's option set\n\n" + section + "\n"
    return doc[:begin] + section + doc[end + len(DOC_END):]


def handwritten_part(doc: str) -> str:
    begin, end = doc.find(DOC_BEGIN), doc.find(DOC_END)
    return doc if begin < 0 or end < 0 else doc[:begin] + doc[end + len(DOC_END):]


def generated_doc(doc: str, honored: Collection[str], accepted: Mapping[str, str]) -> str:
    """``doc`` (docs/configuration.md's text) with its generated section as the data makes it
    (``honored``, ``accepted``: as :func:`render_doc_section`; config passes its own, as
    ``scripts/hudi_options/write_doc.py`` does)."""
    return splice_doc(doc, render_doc_section(honored, accepted, handwritten_part(doc)))
