"""Hudi's option set (core/hudi_options.py, the pinned core/hudi_options.json): every key of
Hudi 1.2's set is honored, without effect or refused with its reason and remedy, never
"unknown"; typos still are; docs/configuration.md's generated section is the data's."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from airflow_hudi_occ.core import hudi_options
from airflow_hudi_occ.core.commit.write_options import check_write_options
from airflow_hudi_occ.core.config import (ACCEPTED_HUDI_KEYS, WriteConfig, check_option_keys, honored_keys,
                                          known_keys)
from airflow_hudi_occ.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "configuration.md"
#: a value no rule accepts: a refused key set to it must be refused
ODD_VALUE = "no-such-value-42"

#: the keys issue 41 found refused as unknown in a Hudi user's options (with values users give)
ISSUE_KEYS = {
    "hoodie.parquet.compression.codec": "zstd",
    "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
    "hoodie.write.record.merge.mode": "COMMIT_TIME_ORDERING",
    "hoodie.bulkinsert.sort.mode": "GLOBAL_SORT",
    "hoodie.write.num.retries.on.conflict.failures": "3",
    "hoodie.metadata.index.column.stats.enable": "true",
    "hoodie.clustering.inline": "true",
    "hoodie.compact.inline": "true",
    "hoodie.schema.on.read.enable": "true",
    "hoodie.datasource.write.reconcile.schema": "true",
    "hoodie.datasource.meta.sync.enable": "true",
}


def _all_names() -> list[str]:
    return sorted(hudi_options.hudi_keys())


def _status(name: str) -> str:
    entry = hudi_options.hudi_keys()[name]
    return hudi_options.status_of(entry, honored_keys(), ACCEPTED_HUDI_KEYS)[0]


def test_the_pinned_file_is_hudis_whole_writer_side_set():
    source, keys = hudi_options.pinned()
    assert source == "org.apache.hudi:hudi-spark3.5-bundle_2.12:1.2.0"
    classes = {k.cls.rsplit(".", 1)[-1] for k in keys}
    # the parts of HoodieWriteConfig the issue names, and the Spark writer's own options
    assert {"HoodieWriteConfig", "HoodieStorageConfig", "HoodieIndexConfig", "HoodiePayloadConfig",
            "KeyGeneratorOptions", "HoodieCompactionConfig", "HoodieClusteringConfig", "HoodieCleanConfig",
            "HoodieArchivalConfig", "HoodieLockConfig", "HoodieMetadataConfig", "DataSourceWriteOptions",
            "HiveSyncConfig", "HoodieSyncConfig"} <= classes
    assert len(keys) > 600 and all(k.key.startswith("hoodie.") for k in keys)
    assert len({k.key for k in keys}) == len(keys)


@pytest.mark.parametrize("value", ["true", "false", ODD_VALUE, "0"])
def test_no_key_of_hudis_set_is_unknown(value):
    """Every name (key and alternative) with any value: accepted, or refused as Hudi's key with a
    reason, never "unknown". Honored keys may refuse a bad value by their own parse, as before."""
    for name in _all_names():
        try:
            check_write_options({name: value})
        except ConfigError as e:
            assert not e.message.startswith("unknown option"), (name, e.message)
            if name not in honored_keys():
                assert e.key == name and e.message.startswith(f"Hudi option {name}="), (name, e.message)


def test_every_key_has_one_of_the_three_statuses_and_the_doc_counts_them():
    seen = {hudi_options.HONORED: 0, hudi_options.NO_EFFECT: 0, hudi_options.REFUSED: 0}
    for entry in hudi_options.pinned()[1]:
        status, note = hudi_options.status_of(entry, honored_keys(), ACCEPTED_HUDI_KEYS)
        assert status in hudi_options.STATUSES and note.strip(), entry.key
        seen[status] += 1
    assert all(seen.values()), seen
    summary = ", ".join(f"{n} {s}" for s, n in seen.items())
    assert summary in DOC.read_text()


def test_honored_keys_are_exactly_those_a_config_property_reads():
    honored = honored_keys()
    for entry in hudi_options.pinned()[1]:
        reads = any(n in honored for n in (entry.key, *entry.alternatives))
        assert (_status(entry.key) == hudi_options.HONORED) == reads, entry.key
    # and the ones this project has always honoured stay honoured, reading the value
    assert WriteConfig.from_options({"hoodie.write.lock.provider": "zookeeper"}).lock.provider == "zookeeper"


def test_every_refused_key_names_itself_its_reason_and_the_way_out():
    refused = [e for e in hudi_options.pinned()[1] if _status(e.key) == hudi_options.REFUSED]
    assert len(refused) > 50
    for entry in refused:
        rule = hudi_options.rule_for(entry.key)
        with pytest.raises(ConfigError) as e:
            WriteConfig.from_options({entry.key: ODD_VALUE})
        err = e.value
        assert err.key == entry.key and err.value == ODD_VALUE
        assert entry.key in err.message and rule.reason in err.message
        assert rule.remedy and err.remedy.startswith(rule.remedy)


def test_a_refused_key_is_accepted_at_the_values_that_ask_for_nothing_missing():
    """A copied config that spells out Hudi's "off" (or a default this project matches) works."""
    for key, value in [("hoodie.compact.inline", "false"), ("hoodie.clustering.inline", "FALSE"),
                       ("hoodie.datasource.meta.sync.enable", "false"),
                       ("hoodie.datasource.hive_sync.enable", "false"),
                       ("hoodie.allow.empty.commit", "true")]:  # the catch-all: Hudi's default
        check_write_options({key: value})
        assert hudi_options.judge(key, value, {key: value}).status == hudi_options.NO_EFFECT


def test_both_merge_modes_are_honoured_and_custom_is_refused():
    """Issue 41 item 2: the mode is honoured whatever the ordering field (COMMIT_TIME_ORDERING
    with one ignores it, as Java does; tests/core/table/test_merge_mode.py judges it by Java)."""
    with_ordering = {"hoodie.datasource.write.precombine.field": "ts"}
    for mode in ("EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"):
        assert WriteConfig.from_options({**with_ordering, "hoodie.record.merge.mode": mode}).merge_mode.value == mode
        assert WriteConfig.from_options({"hoodie.write.record.merge.mode": mode}).merge_mode.value == mode
    with pytest.raises(ConfigError) as e:
        WriteConfig.from_options({**with_ordering, "hoodie.record.merge.mode": "CUSTOM"})
    assert e.value.key == "hoodie.record.merge.mode"


@pytest.mark.parametrize("key, value", [*ISSUE_KEYS.items(), *(
    (k, "true") for k in sorted(hudi_options.hudi_keys()) if k.startswith("hoodie.datasource.hive_sync."))])
def test_the_keys_the_issue_found_unknown_are_hudis_now(key, value):
    """Issue 41: 25 keys of a Hudi user's options were refused as unknown. Each is now judged as
    Hudi's: accepted, or refused naming what to do (the sync switches name the issue's sync)."""
    try:
        check_write_options({**{"hoodie.datasource.write.precombine.field": "ts"}, key: value})
    except ConfigError as e:
        # refused as Hudi's (naming what to do), or honored and the value refused by its parser
        # (a sync key given "true" where it takes a number, a mode or key=value pairs)
        assert e.key == key and e.remedy, e
        assert e.message.startswith(f"Hudi option {key}=") or repr(value) in e.message, e.message


@pytest.mark.parametrize("typo, meant", [
    ("hoodie.parquet.compresion.codec", "hoodie.parquet.compression.codec"),
    ("hoodie.compact.inlne", "hoodie.compact.inline"),
    ("hoodie.datasource.hive_sync.databse", "hoodie.datasource.hive_sync.database"),
    ("hoodie.write.lock.providr", "hoodie.write.lock.provider"),
])
def test_a_typo_next_to_a_hudi_key_is_still_unknown_with_the_closest_name(typo, meant):
    with pytest.raises(ConfigError) as e:
        check_write_options({typo: "x"})
    assert e.value.key == typo and e.value.message == f"unknown option {typo!r}: did you mean {meant!r}?"


def test_an_older_name_of_an_honored_key_is_refused_with_the_name_to_use():
    with pytest.raises(ConfigError) as e:
        WriteConfig.from_options({"hoodie.datasource.write.storage.type": "MERGE_ON_READ"})
    assert e.value.remedy.startswith("rename it to hoodie.datasource.write.table.type")


def test_a_key_without_effect_is_accepted_and_logged_once_with_its_reason(caplog, monkeypatch):
    monkeypatch.setattr(hudi_options, "_logged", set())
    key = "hoodie.embed.timeline.server.port"
    with caplog.at_level(logging.INFO, logger=hudi_options.__name__):
        for _ in range(3):
            WriteConfig.from_options({key: "26754"})
    lines = [r for r in caplog.records if key in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO
    assert hudi_options.rule_for(key).reason in lines[0].getMessage()


def test_the_non_strict_escape_warns_of_a_refused_key_instead():
    """As for unknown keys: configs shared with other tools (the Java table-service operator
    passes Hudi's keys on to Java this way) are warned about, through the caller's logger."""
    warned = []
    options = {"hoodie.compact.inline": "true", "hoodie.occ.options.strict": "false"}
    assert isinstance(WriteConfig.from_options(options, warn=warned.append), WriteConfig)
    assert len(warned) == 1 and "hoodie.compact.inline='true'" in warned[0]
    assert hudi_options.rule_for("hoodie.compact.inline").reason in warned[0]


def test_hudis_keys_do_not_widen_the_set_this_project_reads():
    """known_keys() stays what properties read (plus the accepted few): the doc test and the
    CLI's listing rely on it; Hudi's set is judged apart."""
    assert "hoodie.compact.inline" not in known_keys()
    assert "hoodie.compact.inline" in hudi_options.hudi_keys()


def test_every_rule_decides_some_key():
    """A rule no key reaches (a key a property now honours, a typo in a pattern) is dead text."""
    used = set()
    for entry in hudi_options.pinned()[1]:
        if hudi_options.unread_name(entry, honored_keys()) is None and entry.key not in ACCEPTED_HUDI_KEYS:
            used.add(hudi_options.rule_for(entry.key))
    assert [r.pattern for r in hudi_options.RULES if r not in used] == []


def test_every_key_has_a_rule_more_specific_than_the_catch_all_where_users_set_it_most():
    """The keys of the issue's list get reasons of their own, not the generic one (or are
    honoured: a ConfigProperty reads them)."""
    for key in ISSUE_KEYS:
        if key in honored_keys():
            continue
        assert hudi_options.rule_for(key).reason != hudi_options.NOT_IMPLEMENTED, key


def test_the_doc_section_is_what_the_generator_makes_from_the_pinned_file():
    text = DOC.read_text()
    assert hudi_options.DOC_BEGIN in text and hudi_options.DOC_END in text
    assert hudi_options.generated_doc(text, honored_keys(), ACCEPTED_HUDI_KEYS) == text, \
        "docs/configuration.md is stale: run bash scripts/regenerate-hudi-options.sh --doc-only"
    for entry in hudi_options.pinned()[1]:
        assert f"| `{entry.key}` |" in text


def test_the_pinned_file_ships_in_the_wheel():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "hudi_options.json" in data["airflow_hudi_occ.core"]
    assert hudi_options.PINNED_FILE.parent == ROOT / "airflow_hudi_occ" / "core"


@pytest.mark.slow
def test_the_pinned_file_is_what_the_hudi_bundle_defines(tmp_path):
    """Rerun the Java dump against the installed bundle: the pinned file is its output (one JVM,
    about 10 s of CPU)."""
    from airflow_hudi_occ.testing.java_hudi import DEFAULT_DIR
    if not (DEFAULT_DIR / "setup.json").exists():
        pytest.fail("Java Hudi is not installed: run scripts/install-java-hudi.sh (scripts/bootstrap.sh does); "
                    "this check never skips")
    out = tmp_path / "dump.json"
    subprocess.run(["bash", str(ROOT / "scripts" / "regenerate-hudi-options.sh"), "--out", str(out)],
                   check=True, capture_output=True, text=True, timeout=300,
                   env={**os.environ, "PYTHON": sys.executable})
    assert json.loads(out.read_text()) == json.loads(hudi_options.PINNED_FILE.read_text())
