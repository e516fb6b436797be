"""The set of known keys, the closest-match suggestion and the non-strict escape hatch."""

import re
from pathlib import Path

import pytest

from airflow_hudi_occ.core import hudi_options
from airflow_hudi_occ.core.commit.write_options import all_known_keys
from airflow_hudi_occ.core.config import (ACCEPTED_HUDI_KEYS, FAILED_WRITES_POLICY, FailedWritesPolicy,
                                          check_option_keys, closest_key, known_keys)
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
    from airflow_hudi_occ.core.config import WriteConfig
    for entry in (WriteConfig.from_options, check_write_options):
        with pytest.raises(ConfigError) as e:
            entry(options)
        assert e.value.key == next(iter(options)) and f"did you mean {meant!r}" in e.value.message


def test_the_strict_escape_warns_through_the_library_too(caplog):
    from airflow_hudi_occ.core.config import WriteConfig
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
