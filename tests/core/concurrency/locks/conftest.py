"""Fixtures for the lock tests: a real ZooKeeper server and one factory per provider.

The ZooKeeper server is real (Debian's package, started by
:class:`airflow_hudi_occ.testing.zookeeper.ZooKeeperServer`) because what the ZooKeeper lock
must get right (ephemeral nodes, session expiry, Curator's node names) only exists on a real
server. A tick of 200 ms lets the tests ask for 2 s sessions, so expiry is quick.
"""

from __future__ import annotations

import uuid

import pytest

from airflow_hudi_occ.core.config import LockConfig
from airflow_hudi_occ.core.concurrency.locks import get_lock_provider
from airflow_hudi_occ.core.concurrency.locks.base import LockProvider
from airflow_hudi_occ.testing.zookeeper import ZooKeeperServer

#: short sessions so that expiry (and a SIGKILLed holder's node vanishing) takes ~2 s
ZK_SESSION_TIMEOUT_MS = 2000
ZK_CONNECTION_TIMEOUT_MS = 5000

PROVIDER_KINDS = ("inprocess", "filesystem", "storage", "zookeeper")


@pytest.fixture
def own_zk_server(tmp_path):
    server = ZooKeeperServer(tmp_path / "zookeeper", tick_time_ms=200)
    server.start()
    yield server
    server.stop(kill=True)


def zk_lock_config(hosts: str, **overrides) -> LockConfig:
    """A ZooKeeper LockConfig under a fresh base path, so tests never share lock nodes."""
    values = dict(provider="zookeeper", zk_url=hosts, zk_base_path=f"/test-{uuid.uuid4().hex[:10]}",
                  zk_session_timeout_ms=ZK_SESSION_TIMEOUT_MS,
                  zk_connection_timeout_ms=ZK_CONNECTION_TIMEOUT_MS)
    values.update(overrides)
    return LockConfig(**values)


class ProviderFactory:
    """Makes independent contenders for the same lock (each call = another writer)."""

    def __init__(self, kind: str, config: LockConfig, base_path: str, table_name: str = "tbl"):
        self.kind = kind
        self.config = config
        self.base_path = base_path
        self.table_name = table_name
        self._made: list[LockProvider] = []

    def __call__(self, lock_key: str | None = None) -> LockProvider:
        provider = get_lock_provider(self.config, base_path=self.base_path,
                                     table_name=self.table_name, lock_key=lock_key)
        self._made.append(provider)
        return provider

    @property
    def crosses_processes(self) -> bool:
        return self.kind != "inprocess"

    def close_all(self) -> None:
        for provider in self._made:
            provider.close()


@pytest.fixture(params=PROVIDER_KINDS)
def make_provider(request, tmp_path):
    kind = request.param
    base_path = str(tmp_path / "table")
    if kind == "zookeeper":
        config = zk_lock_config(request.getfixturevalue("zk_server").hosts)
    else:
        config = LockConfig(provider=kind)
    factory = ProviderFactory(kind, config, base_path)
    yield factory
    factory.close_all()
