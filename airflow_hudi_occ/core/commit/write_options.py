"""The whole check of a writer's ``hoodie.*`` options, before anything runs.

Why one place: a write that starts with a misspelt key or an unknown strategy name either
falls back to a default silently (``hoodie.write.lock.providr`` meant the file-system lock
for everyone who typed it) or fails minutes later inside a Spark job, after the cluster was
paid for. Everything that can be judged from the options alone is judged here, where a DAG
file, an operator's ``execute`` and the Spark job's first line can all call it: every key is
known (or refused with the closest known key), every value parses, every named plug-in
(lock provider, conflict-resolution and early-detection strategy, clustering update
strategy) exists. Nothing is constructed: a ZooKeeper lock is named, not connected to.

Every ``hoodie.*`` property is defined in :mod:`airflow_hudi_occ.core.config`, so that
:func:`~airflow_hudi_occ.core.config.known_keys` is whole as soon as that module is imported
and the library's own :meth:`WriteConfig.from_options` refuses unknown keys exactly as this
check does; an engine adds its own keys by defining its properties before it calls
:func:`check_write_options`.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from airflow_hudi_occ.core.config import (CleanConfig, ClusteringConfig, WriteConfig, check_datasource_options,
                                          known_keys)
from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.concurrency.conflict import check_strategy
from airflow_hudi_occ.core.concurrency.early_conflict.detector import check_detection_strategy
from airflow_hudi_occ.core.concurrency.locks import check_provider


def all_known_keys() -> set[str]:
    """Every key a write accepts (of this layer; an engine's own keys join when defined)."""
    return known_keys()


def check_write_options(options: Mapping[str, Any] | None, *,
                        warn: Callable[[str], None] | None = None, partial: bool = False) -> WriteConfig:
    """The typed :class:`WriteConfig` of ``options``, or a :class:`ConfigError` naming the
    first wrong key, what is wrong and the fix. Also parses the clean and clustering keys
    (a writer may clean or cluster after its commit) and the table type.

    ``partial``: ``options`` are only part of what the write will get (a DAG file's operator
    options, before an Airflow connection adds the rest): checks that need the whole set
    (the ZooKeeper hosts of a ZooKeeper lock) are left for the complete options."""
    options = {str(k): v for k, v in (options or {}).items() if v is not None}
    config = WriteConfig.from_options(options, warn=warn)  # refuses (or warns of) unknown keys
    check_datasource_options(options)  # the engine's keys (table type, operation, file sizes)
    check_provider(config.lock.provider)
    if config.conflict_resolution_strategy:
        check_strategy(config.conflict_resolution_strategy)
    check_detection_strategy(config.early_conflict.strategy)
    _check_lock_numbers(config, partial)
    CleanConfig.from_options(options, write=config)
    ClusteringConfig.from_options(options, write=config)
    return config


def _check_lock_numbers(config: WriteConfig, partial: bool) -> None:
    lock = config.lock
    for key, value in (("hoodie.write.lock.wait_time_ms", lock.wait_time_ms),
                       ("hoodie.write.lock.num_retries", lock.num_retries),
                       ("hoodie.write.lock.client.num_retries", lock.client_num_retries),
                       ("hoodie.write.lock.wait_time_ms_between_retry", lock.wait_time_ms_between_retry),
                       ("hoodie.write.lock.zookeeper.session_timeout_ms", lock.zk_session_timeout_ms),
                       ("hoodie.write.lock.zookeeper.connection_timeout_ms", lock.zk_connection_timeout_ms)):
        if value < 0:
            raise ConfigError(f"{key} must not be negative, got {value}", key=key, value=value,
                              remedy=f"set {key} to 0 or more")
    if not 0 < lock.zk_port < 65536:
        raise ConfigError(f"ZooKeeper port {lock.zk_port} is not a TCP port",
                          key="hoodie.write.lock.zookeeper.port", value=lock.zk_port,
                          remedy="use the ensemble's client port, e.g. 2181")
    zookeeper = lock.provider.strip().lower().replace("_", "") == "zookeeper" or \
        lock.provider.strip().endswith("ZookeeperBasedLockProvider")
    if zookeeper and not partial:
        if not lock.zk_url.strip():
            raise ConfigError("the ZooKeeper lock needs the ensemble's hosts",
                              key="hoodie.write.lock.zookeeper.url", value="",
                              remedy="set hoodie.write.lock.zookeeper.url to zk1:2181,zk2:2181 "
                                     "(or use a hudi_zookeeper connection)")
