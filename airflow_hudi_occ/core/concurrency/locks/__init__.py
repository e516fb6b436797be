"""Lock providers for the commit critical section, chosen by ``hoodie.write.lock.provider``.

The value may be a short name (``zookeeper``, ``filesystem``, ``storage``, ``inprocess``; case and
underscores ignored), the Java class name Hudi users already have in their configs, or a
dotted Python path (``pkg.module:Class`` or ``pkg.module.Class``) to a :class:`LockProvider`
subclass of your own. Providers are imported only when chosen (as fsspec's registry does),
so kazoo is not imported by a writer that locks with files.

Every provider is built as ``cls(config, base_path=..., table_name=..., storage=...,
lock_key=...)``. ``lock_key`` asks for a separate lock (a different node or file) per key,
for example per file group ``partition/fileId``; without it the table-wide lock is used.

Errors: :class:`UnknownLockProviderError` names the value and the accepted names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_hudi_occ.core.config import LOCK_PROVIDER, LockConfig
from airflow_hudi_occ.core.plugins import Registry
from airflow_hudi_occ.core.errors import LockError, UnknownLockProviderError
from airflow_hudi_occ.core.concurrency.locks.base import LockHolder, LockManager, LockProvider

if TYPE_CHECKING:  # pragma: no cover
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.format.storage import Storage

_BUILTIN: dict[str, str] = {
    "zookeeper": "airflow_hudi_occ.core.concurrency.locks.zookeeper:ZookeeperBasedLockProvider",
    "filesystem": "airflow_hudi_occ.core.concurrency.locks.filesystem:FileSystemBasedLockProvider",
    "inprocess": "airflow_hudi_occ.core.concurrency.locks.inprocess:InProcessLockProvider",
    "storage": "airflow_hudi_occ.core.concurrency.locks.storage_based:StorageBasedLockProvider",
}

_JAVA_PACKAGE = "org.apache.hudi.client.transaction.lock."
JAVA_CLASS_NAMES: dict[str, str] = {
    _JAVA_PACKAGE + "ZookeeperBasedLockProvider": "zookeeper",
    _JAVA_PACKAGE + "FileSystemBasedLockProvider": "filesystem",
    _JAVA_PACKAGE + "InProcessLockProvider": "inprocess",
    _JAVA_PACKAGE + "StorageBasedLockProvider": "storage",
}


def _normalize(value: str) -> str:
    # A short name ignores case, "_" and "-"; a Java class name (dotted) only case, as before.
    if "." in value:
        return value.lower()
    return value.lower().replace("_", "").replace("-", "")


def valid_provider_names() -> list[str]:
    return [*_BUILTIN, *JAVA_CLASS_NAMES, "<python.module>:<Class>"]


def _unknown(value: str, why: str) -> UnknownLockProviderError:
    return UnknownLockProviderError(
        f"unknown lock provider {value!r}: {why}; valid: {', '.join(valid_provider_names())}",
        key=LOCK_PROVIDER.key, value=value,
        remedy=f"set {LOCK_PROVIDER.key} to zookeeper, filesystem, storage or inprocess (or Hudi's Java "
               "class name for one of them), or to an importable LockProvider subclass")


_REGISTRY = Registry(LockProvider, _unknown, normalize=_normalize, reserved_prefix="org.apache.hudi.",
                     reserved_reason="this Java lock provider has no Python implementation here",
                     empty_reason="empty")
for _name, _path in _BUILTIN.items():
    _REGISTRY.add(_path, _name)
for _java, _name in JAVA_CLASS_NAMES.items():
    _REGISTRY.add(_BUILTIN[_name], _java)


def resolve_provider_class(value: str) -> type[LockProvider]:
    """The LockProvider class named by a ``hoodie.write.lock.provider`` value."""
    return _REGISTRY.resolve(value)


def check_provider(value: str) -> None:
    """Raise :class:`UnknownLockProviderError` if ``value`` names no provider; a built-in is
    not imported (kazoo stays unloaded in a DAG file that only checks its options)."""
    _REGISTRY.check(value)


def get_lock_provider(config: LockConfig, *, base_path: str, table_name: str,
                      storage: "Storage | None" = None, lock_key: str | None = None) -> LockProvider:
    cls = resolve_provider_class(config.provider)
    return cls(config, base_path=base_path, table_name=table_name, storage=storage,
               lock_key=lock_key)


def table_lock_manager(table, config: "WriteConfig", *, lock_key: str | None = None):
    """The LockManager guarding a table (or one key of it) with the configured provider."""
    provider = get_lock_provider(config.lock, base_path=table.base_uri, table_name=table.name,
                                 storage=table.storage, lock_key=lock_key)
    return LockManager(provider, config.lock)


def table_lock_holder(table, config: "WriteConfig") -> LockHolder | None:
    """Who holds the table's lock now (None: free), asked of the configured provider once and
    without taking it: what ``hudi-occ show`` / ``writers`` print. A lock service that does not
    answer raises :class:`~airflow_hudi_occ.core.errors.LockServiceUnreachableError` within its
    connection timeout; a provider whose holder no other process can see (inprocess) raises
    :class:`~airflow_hudi_occ.core.errors.LockError`."""
    provider = get_lock_provider(config.lock, base_path=table.base_uri, table_name=table.name,
                                 storage=table.storage)
    try:
        if not provider.visible_to_other_processes:
            raise LockError(f"the {provider.provider_name} lock lives inside the writing process: "
                            "another process cannot see who holds it", lock=provider.name,
                            remedy="the writing process's own log names its waits; writers in "
                                   "several processes need the filesystem or zookeeper lock")
        return provider.holder()
    finally:
        provider.close()


__all__ = [
    "JAVA_CLASS_NAMES",
    "check_provider",
    "get_lock_provider",
    "resolve_provider_class",
    "table_lock_holder",
    "table_lock_manager",
    "valid_provider_names",
]
