"""The set of known keys, the closest-match suggestion and the non-strict escape hatch."""

import ast
import re
from pathlib import Path

import pytest

from airflow_hudi_occ.core import hudi_options
from airflow_hudi_occ.core.commit.write_options import all_known_keys
from airflow_hudi_occ.core.config import (ACCEPTED_HUDI_KEYS, FAILED_WRITES_POLICY, ArchivalConfig, CleanConfig,
                                          ClusteringConfig, CompactionConfig, EarlyConflictConfig, FailedWritesPolicy,
                                          HeartbeatConfig, IndexConfig, LockConfig, MetadataTableConfig, ReadConfig,
                                          WriteConfig, check_option_keys, closest_key, known_keys)
from airflow_hudi_occ.core.errors import ConfigError

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


@pytest.mark.parametrize("typo, meant", [
    ("hoodie.write.lock.providr", "hoodie.write.lock.provider"),
    ("hoodie.write.lock.zookeeper.ulr", "hoodie.write.lock.zookeeper.url"),
    ("hoodie.write.concurrency.early.conflict.detection.enabled",
     "hoodie.write.concurrency.early.conflict.detection.enable"),
    ("hoodie.clean.commit.retained", "hoodie.clean.commits.retained"),
])
def test_a_misspelt_key_is_refused_with_the_key_it_misspells(typo, meant):
    with pytest.raises(ConfigError) as e:
        check_option_keys({typo: "x", "hoodie.write.lock.provider": "filesystem"}, all_known_keys())
    assert e.value.key == typo and f"did you mean {meant!r}" in e.value.message
    assert e.value.remedy.startswith(f"rename it to {meant}")


def test_an_unrelated_key_gets_no_wrong_suggestion():
    assert closest_key("hoodie.something.else.entirely", all_known_keys()) is None
    with pytest.raises(ConfigError) as e:
        check_option_keys({"hoodie.something.else.entirely": "1"}, all_known_keys())
    assert e.value.message == "unknown option 'hoodie.something.else.entirely'"
    assert "docs/configuration.md" in e.value.remedy


def test_non_strict_returns_the_unknown_keys_instead_of_refusing():
    opts = {"hoodie.write.lock.providr": "x", "other.tool.key": "1", "hoodie.occ.options.strict": "false"}
    assert check_option_keys(opts, all_known_keys()) == ["hoodie.write.lock.providr", "other.tool.key"]


def test_hudis_own_names_are_known():
    # Hudi's documented keys, including the older failed-writes name, read as the same value.
    assert FAILED_WRITES_POLICY.get({"hoodie.cleaner.policy.failed.writes": "EAGER"}) is FailedWritesPolicy.EAGER
    for key in ("hoodie.upsert.shuffle.parallelism", "hoodie.metadata.enable", "hoodie.cleaner.policy",
                "hoodie.table.name", "hoodie.write.lock.zookeeper.base_path"):
        assert key in known_keys()


def test_every_known_key_is_documented():
    import airflow_hudi_occ.spark.submit.options  # noqa: F401 - the engine's keys
    documented = set(re.findall(r"`(hoodie\.[A-Za-z0-9_.]+)`", DOC.read_text()))
    missing = sorted(all_known_keys() - documented)
    assert not missing, f"docs/configuration.md lacks {missing}"
    stale = sorted(k for k in documented - all_known_keys()
                   if k not in ACCEPTED_HUDI_KEYS and k not in hudi_options.hudi_keys())
    assert not stale, f"docs/configuration.md documents keys nothing reads: {stale}"


@pytest.mark.parametrize("options, meant", [
    ({"hoodie.write.lock.providr": "zookeeper"}, "hoodie.write.lock.provider"),
    ({"hoodie.bucket.index.hash.feild": "id"}, "hoodie.bucket.index.hash.field"),
])
def test_the_librarys_own_config_refuses_unknown_keys_as_the_dag_and_cli_do(options, meant):
    """Issue 28: ``WriteConfig.from_options`` used to return, and the write then used the
    file-system lock; it now refuses exactly as ``check_write_options`` (DAG, CLI, job) does."""
    from airflow_hudi_occ.core.commit.write_options import check_write_options
    for entry in (WriteConfig.from_options, check_write_options):
        with pytest.raises(ConfigError) as e:
            entry(options)
        assert e.value.key == next(iter(options)) and f"did you mean {meant!r}" in e.value.message


def test_the_strict_escape_warns_through_the_library_too(caplog):
    warned = []
    cfg = WriteConfig.from_options({"hoodie.write.lock.providr": "zookeeper", "hoodie.occ.options.strict": "false"},
                                   warn=warned.append)
    assert cfg.lock.provider != "zookeeper"  # the misspelt key is read by nothing, as warned
    assert warned and "hoodie.write.lock.providr" in warned[0]


def test_every_key_is_known_as_soon_as_the_config_module_is():
    """The library's check runs with whatever modules are imported: a key defined in another
    module would be refused by a process that has not imported it yet. So a fresh interpreter
    that imports only ``core.config`` must know every key the whole package defines."""
    import json
    import subprocess
    import sys
    import airflow_hudi_occ.spark.submit.options  # noqa: F401 - the engine's keys
    from airflow_hudi_occ.core.commit import writer, mor_writer  # noqa: F401
    from airflow_hudi_occ.core.services import clean, clustering, compaction  # noqa: F401
    alone = subprocess.run(
        [sys.executable, "-c", "import json; from airflow_hudi_occ.core.config import known_keys; "
                               "print(json.dumps(sorted(known_keys())))"],
        capture_output=True, text=True, check=True).stdout
    assert set(json.loads(alone)) == all_known_keys()


# --- the typed config is the only way core reads options ---------------------------------------

CORE = Path(__file__).resolve().parents[2] / "airflow_hudi_occ" / "core"
#: the modules that parse the raw ``hoodie.*`` mapping: the typed config, and Hudi's key set
#: (which judges keys no property reads)
PARSERS = {"config.py", "hudi_options.py"}
#: modules that hold a raw options mapping for a reason other than reading a meaning, each with
#: why; exact (a stale entry fails too), so it only shrinks
RAW_ALLOWED = {
    "job_secrets.py": "carries the secret options from the secret store to the job process "
                      "(serialises them; reads no key)",
}
#: the names a raw options mapping goes by in a function's parameters and locals
RAW_NAMES = {"options", "opts"}


def _config_property_names() -> set[str]:
    from airflow_hudi_occ.core import config
    return {n for n, v in vars(config).items() if isinstance(v, config.ConfigProperty)}


def _mentions_raw(node: ast.AST) -> bool:
    """Whether ``node`` is (or wraps: ``(options or {})``, ``dict(options)``) a raw mapping."""
    return any((isinstance(n, ast.Name) and n.id in RAW_NAMES)
               or (isinstance(n, ast.Attribute) and n.attr == "options") for n in ast.walk(node))


def raw_option_reads(source: str, properties: set[str]) -> list[tuple[int, str]]:
    """Each place ``source`` reads the raw options: a ``X.options`` attribute (the carried
    mapping of a config), ``options.get(...)`` / ``options[...]`` on a mapping, a property's
    ``PROP.get(...)``, or a ``ConfigProperty(...)`` defined outside config.py."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "options" and isinstance(node.ctx, ast.Load):
            found.append((node.lineno, f"{ast.unparse(node)}: the raw mapping of a config"))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _mentions_raw(node.value):
            found.append((node.lineno, f"{ast.unparse(node)}: a key read from the raw mapping"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver, method = node.func.value, node.func.attr
            name = receiver.attr if isinstance(receiver, ast.Attribute) else getattr(receiver, "id", None)
            if method == "get" and name in properties:
                found.append((node.lineno, f"{ast.unparse(node)}: a property parsed outside config.py"))
            elif method == "get" and _mentions_raw(receiver):
                found.append((node.lineno, f"{ast.unparse(node)}: a key read from the raw mapping"))
            elif method == "get" and any(_mentions_raw(a) for a in node.args):
                found.append((node.lineno, f"{ast.unparse(node)}: a property parsed outside config.py"))
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "ConfigProperty":
            found.append((node.lineno, f"{ast.unparse(node)[:60]}: a property defined outside config.py"))
    return sorted(set(found))


def test_the_checker_sees_every_way_of_reading_raw_options():
    """The check below is only as good as its patterns: each is seen, and typed reads are not."""
    props = {"WRITE_KIND", "BUCKET_NUM"}
    for bad in ("config.options.get('k')", "self.config.options['k']", "f(self.config.options)",
                "options.get('k')", "(options or {}).get('k')", "opts[k]", "WRITE_KIND.get(x)",
                "config.BUCKET_NUM.get(x)", "prop.get(options)", "P = ConfigProperty('hoodie.x', 1)"):
        assert raw_option_reads(bad, props), bad
    for fine in ("config.write_kind", "config.index.num_buckets", "storage_options.get('k')",
                 "d.get('options')", "ReadConfig.from_options(options)", "WRITE_KIND.key",
                 "self.options = options"):
        assert not raw_option_reads(fine, props), fine


def test_core_reads_options_only_through_the_typed_config():
    """Issue 41: every option a core module needs is a typed field of its config, parsed once
    by ``from_options`` (errors name the key there, before anything runs) with its default
    stated once; no module reads a meaning out of the raw mapping, which a config carries only
    to pass it on to another process."""
    properties = _config_property_names()
    found, allowed_hits = [], set()
    for path in sorted(CORE.rglob("*.py")):
        rel = path.relative_to(CORE).as_posix()
        if rel in PARSERS:
            continue
        hits = raw_option_reads(path.read_text(), properties)
        if rel in RAW_ALLOWED:
            allowed_hits.add(rel) if hits else None
            continue
        found += [f"core/{rel}:{line}: {what}" for line, what in hits]
    assert not found, "raw options read outside core/config.py:\n" + "\n".join(found)
    assert allowed_hits == set(RAW_ALLOWED), f"stale RAW_ALLOWED entries: {set(RAW_ALLOWED) - allowed_hits}"


CONFIG_CLASSES = [LockConfig, HeartbeatConfig, EarlyConflictConfig, IndexConfig, MetadataTableConfig, ReadConfig,
                  WriteConfig, CleanConfig, ClusteringConfig, CompactionConfig, ArchivalConfig]


@pytest.mark.parametrize("cls", CONFIG_CLASSES, ids=lambda c: c.__name__)
def test_a_config_built_in_code_has_the_defaults_of_empty_options(cls):
    """Each default is stated once, on its property: the dataclass's field defaults are the
    properties' (``LOCK_PROVIDER.default``), so ``cls()`` and ``cls.from_options({})`` agree."""
    assert cls() == cls.from_options({})


def test_typed_parts_parse_what_core_reads():
    cfg = WriteConfig.from_options({
        "hoodie.index.type": "bucket", "hoodie.bucket.index.hash.field": "a, b",
        "hoodie.occ.writer.labels": '{"dag_id": "d", "try_number": 2}', "hoodie.occ.write.kind": "backfill",
        "hoodie.occ.recovery.grace_period_ms": "5", "hoodie.combine.before.insert": "true",
        "hoodie.metadata.index.column.stats.column.list": "x,y", "hoodie.metadata.compact.max.delta.commits": "3",
        "hoodie.clustering.updates.strategy": "allow"})
    assert (cfg.index.type, cfg.index.buckets, cfg.index.num_buckets_given, cfg.index.hash_fields) == \
        ("BUCKET", 4, None, ("a", "b"))
    assert cfg.conflict_strategy == "bucket"  # Hudi's inference under the bucket index
    assert cfg.writer_labels == {"dag_id": "d", "try_number": "2"} and cfg.write_kind == "backfill"
    assert cfg.recovery_grace_period_ms == 5 and cfg.combine_before_insert
    assert cfg.metadata.column_stats_columns == ("x", "y") and cfg.metadata.compact_max_delta_commits == 3
    assert not cfg.rejects_clustering_updates
    plain = WriteConfig.from_options({"hoodie.write.lock.conflict.resolution.strategy": "prefer-writer"})
    assert plain.index.buckets is None and plain.conflict_strategy == "prefer-writer"
    assert not plain.rejects_clustering_updates and WriteConfig().rejects_clustering_updates
    assert WriteConfig.from_options({"hoodie.occ.writer.labels": "nightly"}).writer_labels == {"label": "nightly"}


@pytest.mark.parametrize("options, key", [
    ({"hoodie.index.type": "BLOOM"}, "hoodie.index.type"),
    ({"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "0"}, "hoodie.bucket.index.num.buckets"),
    ({"hoodie.clustering.updates.strategy": "maybe"}, "hoodie.clustering.updates.strategy"),
    ({"hoodie.metadata.compact.max.delta.commits": "many"}, "hoodie.metadata.compact.max.delta.commits"),
    ({"hoodie.occ.recovery.grace_period_ms": "soon"}, "hoodie.occ.recovery.grace_period_ms"),
])
def test_a_bad_value_is_refused_once_when_parsed_naming_its_key(options, key):
    with pytest.raises(ConfigError) as e:
        WriteConfig.from_options(options)
    assert e.value.key == key
