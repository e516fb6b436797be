"""The file-system lock: our provider through ``LockManager`` against bare system calls.

- ours: ``LockManager(FileSystemBasedLockProvider).acquire(); release()`` on
  ``<table>/.hoodie/lock``: create-if-absent of a file holding the owner (temp file, fsync,
  ``os.link``), and a release that reads the file back to check it is still ours first;
- bare: ``os.open(O_CREAT | O_EXCL)``, ``os.close``, ``os.unlink`` in the same folder: mutual
  exclusion with nothing else (no owner, no durability);
- durable floor: what an atomic, durable create-if-absent of a small file costs at least
  (write a temp file, fsync, link, unlink the temp file, unlink the lock).

It runs in the system temp dir (a disk), not on tmpfs where fsync costs nothing; ``--dir``
overrides. Both ratios are informational: the gap to the bare loop is the price of the owner
check and of durability, and the gap to the durable floor is the library's own overhead.
"""

from __future__ import annotations

import os

from airflow_hudi_occ.core.config import LockConfig
from airflow_hudi_occ.core.concurrency.locks import get_lock_provider
from airflow_hudi_occ.core.concurrency.locks.base import LockManager
from airflow_hudi_occ.core.format.storage import Storage

from .common import Figure, describe_dir, sample_pair, work_dir

NAME = "fs_lock"


def figure_names(quick: bool = False) -> list[str]:
    return ["fs.lock.acquire_release.vs_bare", "fs.lock.acquire_release.vs_durable_floor"]


def run(ctx) -> list[Figure]:
    n = 200 if ctx.quick else 1_000
    with work_dir(ctx.disk_dir, "fslock") as root:
        hoodie = os.path.join(root, ".hoodie")
        os.makedirs(hoodie)
        cfg = LockConfig(provider="filesystem", wait_time_ms=5_000,
                         client_wait_time_ms_between_retry=10)
        manager = LockManager(get_lock_provider(cfg, base_path=root, table_name="bench",
                                                storage=Storage(root)), cfg)
        bare_path = os.path.join(hoodie, "bare.lock")
        durable_path = os.path.join(hoodie, "durable.lock")
        payload = b'{"acquired_at_ms": 1700000000000, "expire_minutes": 0, "owner": "host:1:t:abc"}'

        def ours():
            manager.acquire()
            manager.release()

        def bare():
            fd = os.open(bare_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            os.close(fd)
            os.unlink(bare_path)

        def durable():
            tmp = durable_path + ".tmp"
            fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            os.write(fd, payload)
            os.fsync(fd)
            os.close(fd)
            os.link(tmp, durable_path)
            os.unlink(tmp)
            os.unlink(durable_path)

        ctx.log(f"fs_lock: {n} cycles each, alternating blocks")
        a, b = sample_pair(ours, bare, n=n, warmup=20, blocks=5)
        a2, c = sample_pair(ours, durable, n=n, warmup=5, blocks=5)
        manager.close()
    common = {"cycles": n, "storage": describe_dir(ctx.disk_dir)}
    return [
        Figure("fs.lock.acquire_release.vs_bare", NAME,
               "LockManager + FileSystemBasedLockProvider acquire+release, per cycle",
               a.median_ms, "ms", "bare O_CREAT|O_EXCL + unlink", b.median_ms,
               details={**common, "ours": a.summary(), "bare": b.summary()}),
        Figure("fs.lock.acquire_release.vs_durable_floor", NAME,
               "the same, against the least an atomic durable create-if-absent costs",
               a2.median_ms, "ms", "tmp+fsync+link+unlink", c.median_ms,
               details={**common, "ours": a2.summary(), "durable_floor": c.summary()}),
    ]
