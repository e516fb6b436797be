"""The ZooKeeper lock: our provider through ``LockManager`` against a bare kazoo lock loop.

A real single-node server (Debian's package, :class:`ZooKeeperServer`) is started in a temp
dir. On it, in alternating blocks so that drift hits both alike:

- ours: ``LockManager(ZookeeperBasedLockProvider).acquire(); release()``, the table lock as
  a commit takes it (Curator-compatible node names, session and ownership bookkeeping);
- bare: ``kazoo.recipe.lock.Lock(client, path).acquire(); release()`` with one long-lived
  client, the least any kazoo-based lock can do.

Target: ours / bare <= 1.5. Two informational figures: the commit path's round trip
(acquire, ``check_held()``, which asks the server that our node still exists, release), and a
per-key lock (``lock_key="partition/fileId"``, as the transactional early-conflict strategy
takes one per file group), whose release also removes the key's empty parent node.
"""

from __future__ import annotations

import os

from kazoo.client import KazooClient
from kazoo.retry import KazooRetry
from kazoo.recipe.lock import Lock

from airflow_hudi_occ.core.config import LockConfig
from airflow_hudi_occ.core.concurrency.locks import get_lock_provider
from airflow_hudi_occ.core.concurrency.locks.base import LockManager
from airflow_hudi_occ.testing.zookeeper import ZooKeeperServer

from .common import Figure, sample_pair, work_dir

NAME = "zk_lock"


def figure_names(quick: bool = False) -> list[str]:
    return ["zk.lock.acquire_release.vs_kazoo", "zk.lock.commit_round_trip.vs_kazoo",
            "zk.lock.per_key.vs_kazoo"]


def _manager(hosts: str, lock_key: str | None = None) -> LockManager:
    cfg = LockConfig(provider="zookeeper", zk_url=hosts, zk_base_path="/bench/hudi/locks",
                     zk_lock_key="bench_table", zk_session_timeout_ms=10_000,
                     zk_connection_timeout_ms=5_000, wait_time_ms=5_000,
                     client_wait_time_ms_between_retry=10)
    provider = get_lock_provider(cfg, base_path="/tmp/bench_table", table_name="bench_table",
                                 lock_key=lock_key)
    return LockManager(provider, cfg)


def run(ctx) -> list[Figure]:
    n = 100 if ctx.quick else 600
    figures: list[Figure] = []
    with work_dir(ctx.base_dir, "zk") as root:
        server = ZooKeeperServer(os.path.join(root, "zk"), tick_time_ms=200)
        ctx.log(f"zk_lock: starting ZooKeeper in {root}")
        server.start()
        managers: list[LockManager] = []
        # the bare client's first handshake with a just-started server on a loaded machine
        # (the test suite's workers, their JVMs) once took longer than 10 s and failed the run:
        # a few tries, and at most 30 s to connect (a session, not the figures, is waited for)
        client = KazooClient(hosts=server.hosts, timeout=10.0,
                             connection_retry=KazooRetry(max_tries=5, delay=0.5, ignore_expire=False))
        try:
            client.start(timeout=30)
            bare_path = "/bench/bare/bench_table"
            client.ensure_path(bare_path)

            def bare():
                lock = Lock(client, bare_path)
                lock.acquire()
                lock.release()

            table_lock = _manager(server.hosts)
            managers.append(table_lock)

            def ours():
                table_lock.acquire()
                table_lock.release()

            def ours_commit_path():
                table_lock.acquire()
                table_lock.check_held()
                table_lock.release()

            key_lock = _manager(server.hosts,
                                lock_key="dt=2024-06-01/5f2a7c8e-1d3b-4c6a-9e0f-7a1b2c3d4e5f-0")
            managers.append(key_lock)

            def ours_per_key():
                key_lock.acquire()
                key_lock.release()

            common = {"server": "ZooKeeper 3.8 (Debian), single node, 127.0.0.1, forceSync=no",
                      "cycles": n, "storage": ctx.storage}
            ctx.log(f"zk_lock: {n} acquire+release cycles each, alternating blocks")
            a, b = sample_pair(ours, bare, n=n, warmup=20, blocks=6)
            figures.append(Figure(
                "zk.lock.acquire_release.vs_kazoo", NAME,
                "LockManager + ZookeeperBasedLockProvider acquire+release, per cycle",
                a.median_ms, "ms", "bare kazoo Lock acquire+release", b.median_ms, target=1.5,
                details={**common, "ours": a.summary(), "bare": b.summary()}))
            a, b = sample_pair(ours_commit_path, bare, n=n, warmup=5, blocks=6)
            figures.append(Figure(
                "zk.lock.commit_round_trip.vs_kazoo", NAME,
                "acquire + check_held() (server-side ownership check) + release, as a commit does",
                a.median_ms, "ms", "bare kazoo Lock acquire+release", b.median_ms,
                details={**common, "ours": a.summary(), "bare": b.summary()}))
            a, b = sample_pair(ours_per_key, bare, n=n, warmup=5, blocks=6)
            figures.append(Figure(
                "zk.lock.per_key.vs_kazoo", NAME,
                "per-file-group lock (lock_key=partition/fileId): acquire+release, parent removed",
                a.median_ms, "ms", "bare kazoo Lock acquire+release", b.median_ms,
                details={**common, "ours": a.summary(), "bare": b.summary()}))
        finally:
            for m in managers:
                m.close()
            client.stop()
            client.close()
            server.stop()
    return figures
