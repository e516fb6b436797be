"""Compare-and-swap on one small file: read it with a version, replace it only if unchanged.

A lease-style lock kept in a file (Hudi's storage-based lock, RFC-91) must be renewed and
released by *overwriting* the file, and a waiter takes over an expired lease the same way.
Create-if-absent (:meth:`Storage.create_if_absent`) is not enough for that: two writers that
both read the expired lease must not both replace it. So this module offers the second
primitive, truthfully per backend:

- s3: the object's ETag is the version; a replace is ``PutObject`` with ``If-Match: <etag>``,
  a create is ``If-None-Match: *`` (both answered by 412 when someone else wrote first).
- local: there is no ETag, so the replace runs under an exclusive ``flock`` on a guard file
  beside the target (one host's processes and threads exclude each other), and the version is
  the inode, modification time, size and content digest; the new content is renamed into
  place, so readers see the old or the new file, whole.
- memory: one process-wide lock.

Any other backend raises :class:`StorageError` naming the ones that work.

Errors: :class:`VersionConflictError` (a ``FileExistsError``) when the file is no longer the
version the caller read (or exists, for a create); ``FileNotFoundError`` from reads.
"""

from __future__ import annotations

import hashlib
import os
import threading

from airflow_hudi_occ.core.errors import StorageError
from airflow_hudi_occ.core.format.storage import Storage, local_tmp_copy

_MEMORY_LOCK = threading.Lock()


class VersionConflictError(FileExistsError):
    """Someone else wrote the file since the caller read it (or created it first)."""


def supports_versioned_writes(storage: Storage) -> bool:
    return storage.is_local or storage.protocol in ("s3", "s3a", "memory")


def _refuse(storage: Storage) -> StorageError:
    return StorageError(
        f"storage '{storage.protocol}' offers no conditional overwrite (compare-and-swap) here",
        protocol=storage.protocol,
        remedy="keep the table (or the lock) on local storage or S3, or use the zookeeper lock "
               "provider")


def _local_version(st: os.stat_result, data: bytes) -> str:
    return f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}:{hashlib.sha1(data).hexdigest()}"


def read_versioned(storage: Storage, path: str) -> tuple[bytes, str]:
    """The file's bytes and an opaque version for :func:`put_if_version`."""
    if storage.is_local:
        with open(path, "rb") as f:
            data = f.read()
            return data, _local_version(os.fstat(f.fileno()), data)
    if storage.protocol == "memory":
        with _MEMORY_LOCK:
            data = storage.fs.cat_file(path)
        return data, hashlib.sha1(data).hexdigest()
    if storage.protocol in ("s3", "s3a"):
        return _s3_get(storage, path)
    raise _refuse(storage)


def current_version(storage: Storage, path: str) -> str | None:
    """The version :func:`read_versioned` would return for ``path`` now, without reading the
    bytes where the store can tell (S3: one HEAD, its ETag); None when the file is missing.
    What lets a caller confirm, with one small request under a lock, that a file it read
    before the lock is unchanged."""
    if storage.protocol in ("s3", "s3a"):
        return _s3_head(storage, path)
    try:
        return read_versioned(storage, path)[1]
    except FileNotFoundError:
        return None


def put_if_version(storage: Storage, path: str, data: bytes, version: str | None) -> str:
    """Write ``data`` to ``path`` only if it still has ``version`` (``None``: only if absent).

    Returns the new version; raises :class:`VersionConflictError` if another writer got there
    first (including a delete of the file when a version was expected)."""
    if storage.is_local:
        return _local_put(storage, path, data, version)
    if storage.protocol == "memory":
        with _MEMORY_LOCK:
            exists = storage.fs.exists(path)
            if version is None and exists:
                raise VersionConflictError(path)
            if version is not None and (not exists or
                                        hashlib.sha1(storage.fs.cat_file(path)).hexdigest() != version):
                raise VersionConflictError(path)
            storage.fs.pipe_file(path, data)
            return hashlib.sha1(data).hexdigest()
    if storage.protocol in ("s3", "s3a"):
        return _s3_put(storage, path, data, version)
    raise _refuse(storage)


# -- local ------------------------------------------------------------------------------------

def _local_put(storage: Storage, path: str, data: bytes, version: str | None) -> str:
    import fcntl

    directory, name = os.path.split(path)
    os.makedirs(directory, exist_ok=True)
    guard = os.open(os.path.join(directory, f".{name}.guard"), os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(guard, fcntl.LOCK_EX)
        try:
            with open(path, "rb") as f:
                current = f.read()
                current_version = _local_version(os.fstat(f.fileno()), current)
        except FileNotFoundError:
            current_version = None
        if current_version != version:
            raise VersionConflictError(path)
        tmp = local_tmp_copy(path, data, fsync=False)
        os.replace(tmp, path)
        with open(path, "rb") as f:
            return _local_version(os.fstat(f.fileno()), f.read())
    finally:
        os.close(guard)  # closing the descriptor drops the flock


# -- s3 ---------------------------------------------------------------------------------------

_PRECONDITION_CODES = {"PreconditionFailed", "ConditionalRequestConflict"}


def _s3_precondition_failed(e: BaseException | None) -> bool:
    """412 (the condition did not hold) or 409 (a concurrent conditional write won), found in
    the botocore error s3fs wraps into an OSError."""
    seen = 0
    while e is not None and seen < 5:
        code = (getattr(e, "response", None) or {}).get("Error", {}).get("Code")
        if code in _PRECONDITION_CODES or "pre-conditions you specified did not hold" in str(e):
            return True
        e, seen = e.__cause__ or e.__context__, seen + 1
    return False


def _s3_get(storage: Storage, path: str) -> tuple[bytes, str]:
    if storage.objects is not None:
        return storage.objects.get_versioned(path)
    from fsspec.asyn import sync

    fs = storage.fs
    bucket, key, _ = fs.split_path(path)

    async def get():
        resp = await fs._call_s3("get_object", Bucket=bucket, Key=key)
        body = resp["Body"]
        try:
            data = await body.read()
        finally:
            body.close()
        return data, resp["ETag"]

    return sync(fs.loop, get)


def _s3_head(storage: Storage, path: str) -> str | None:
    if storage.objects is not None:
        try:
            return storage.objects.head(path)["e_tag"]
        except FileNotFoundError:
            return None
    from fsspec.asyn import sync

    fs = storage.fs
    bucket, key, _ = fs.split_path(path)

    async def head():
        return (await fs._call_s3("head_object", Bucket=bucket, Key=key))["ETag"]

    try:
        return sync(fs.loop, head)
    except FileNotFoundError:
        return None


def _s3_put(storage: Storage, path: str, data: bytes, version: str | None) -> str:
    if storage.objects is not None:
        try:
            return storage.objects.put(path, data, mode="create" if version is None else None,
                                       if_version=version)
        except (FileExistsError, FileNotFoundError) as e:  # lost the race; or If-Match on a deleted key
            raise VersionConflictError(path) from e
    from fsspec.asyn import sync

    fs = storage.fs
    bucket, key, _ = fs.split_path(path)
    condition = {"IfNoneMatch": "*"} if version is None else {"IfMatch": version}

    async def put():
        return await fs._call_s3("put_object", Bucket=bucket, Key=key, Body=data, **condition)

    try:
        resp = sync(fs.loop, put)
    except FileNotFoundError as e:  # If-Match on a deleted object
        raise VersionConflictError(path) from e
    except Exception as e:
        if _s3_precondition_failed(e):
            raise VersionConflictError(path) from e
        raise
    return resp["ETag"]


__all__ = ["VersionConflictError", "current_version", "put_if_version", "read_versioned",
           "supports_versioned_writes"]
