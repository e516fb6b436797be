"""check_write_options: every value and plug-in name judged before anything runs."""

import sys

import pytest

from airflow_hudi_occ.core.commit.write_options import check_write_options
from airflow_hudi_occ.core.errors import ConfigError, UnknownLockProviderError, UnknownStrategyError


@pytest.mark.parametrize("options, error, words", [
    ({"hoodie.write.lock.provider": "zookeepr"}, UnknownLockProviderError, "did you mean 'zookeeper'"),
    ({"hoodie.write.lock.conflict.resolution.strategy": "prefer-writr"}, UnknownStrategyError,
     "did you mean 'prefer-writer'"),
    ({"hoodie.write.concurrency.early.conflict.detection.strategy": "simpel"}, UnknownStrategyError,
     "did you mean 'simple'"),
    ({"hoodie.write.lock.provider": "zookeeper"}, ConfigError, "needs the ensemble's hosts"),
    ({"hoodie.write.lock.wait_time_ms": "-5"}, ConfigError, "must not be negative"),
    ({"hoodie.write.lock.zookeeper.port": "0", "hoodie.write.lock.zookeeper.url": "zk"}, ConfigError,
     "is not a TCP port"),
    ({"hoodie.datasource.write.table.type": "MERGE_ON_WRITE"}, ConfigError, "MERGE_ON_READ"),
    ({"hoodie.clean.commits.retained": "0"}, ConfigError, "at least one commit"),
    ({"hoodie.clustering.updates.strategy": "maybe"}, ConfigError, "unknown clustering updates strategy"),
    ({"hoodie.client.heartbeat.interval_in_ms": "soon"}, ConfigError, "invalid value 'soon'"),
])
def test_a_bad_value_is_refused_naming_the_key(options, error, words):
    with pytest.raises(error) as e:
        check_write_options(options)
    assert words in str(e.value) and e.value.key.startswith("hoodie.") and e.value.remedy


def test_a_built_in_lock_provider_is_checked_without_importing_it():
    sys.modules.pop("airflow_hudi_occ.core.concurrency.locks.zookeeper", None)
    cfg = check_write_options({"hoodie.write.lock.provider": "zookeeper",
                               "hoodie.write.lock.zookeeper.url": "zk1:2181"})
    assert cfg.lock.provider == "zookeeper"
    assert "airflow_hudi_occ.core.concurrency.locks.zookeeper" not in sys.modules


def test_partial_options_leave_the_zookeeper_hosts_to_the_connection():
    check_write_options({"hoodie.write.lock.provider": "zookeeper"}, partial=True)
    with pytest.raises(UnknownLockProviderError):
        check_write_options({"hoodie.write.lock.provider": "zookeepr"}, partial=True)


def test_a_users_own_provider_path_must_import():
    with pytest.raises(UnknownLockProviderError, match="cannot import module 'no_such_module'"):
        check_write_options({"hoodie.write.lock.provider": "no_such_module:Lock"})
    path = "airflow_hudi_occ.core.concurrency.locks.inprocess:InProcessLockProvider"
    assert check_write_options({"hoodie.write.lock.provider": path}).lock.provider == path


def test_non_strict_warns_about_unknown_keys_and_goes_on():
    seen = []
    check_write_options({"hoodie.write.lock.providr": "x", "hoodie.occ.options.strict": "false"},
                        warn=seen.append)
    assert seen and "hoodie.write.lock.providr" in seen[0]


def test_merge_on_read_is_a_valid_table_type_for_the_core():
    """MergeOnReadWriter writes it; the Spark engine refuses it itself (tests/spark/test_options.py)."""
    check_write_options({"hoodie.datasource.write.table.type": "merge_on_read"})
