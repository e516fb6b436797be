"""A table's requests to S3, sent by a client written in Rust: obstore, the Python face of the
``object_store`` crate that delta-rs speaks to stores with.

Why: a Hudi commit is dozens of small requests (timeline listings, instant files, markers, a
heartbeat, footers), and on the scale bench's writers (issue 43) the Python S3 stack under
fsspec cost a writer more CPU than everything else a commit does. Measured against the loopback
S3 server, CPU of the calling process per request: botocore, aiobotocore and fsspec's event-loop
glue 3.5 ms for a GET, 4.8 ms for a LIST, 4.0 ms for a conditional PUT; obstore 0.4, 0.9 and
0.4 ms. With 8 to 32 writer processes on two cores that CPU, not the store, set how many commits
a second the table took.

Which requests: every one :class:`~airflow_hudi_occ.core.format.storage.Storage` and
``format/versioned`` send for a table on S3 (GET whole or by suffix, LIST, HEAD, PUT, PUT with
``If-None-Match: *``, PUT with ``If-Match``, DELETE one or in bulk): one process speaks to one
store through one client, so a write this process made is what its next read sees. The fsspec
file system (s3fs) stays for what streams (a file opened to read a long footer, pyarrow's and
Spark's own reads).

When (:func:`s3_client_config`): the ``obstore`` package is installed (the ``s3`` extra) and the
storage options say only what it can be told: credentials given (``key``/``secret``/``token``,
the ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` variables) or ``anon``; an endpoint and a
region; botocore's timeouts and attempts in ``config_kwargs``. Anything else (a profile, an
instance role found by botocore's chain, extra request arguments such as server-side
encryption, requester pays, a CA bundle) keeps s3fs for every request, so no option the user
gave is dropped.

Bounded waits, as for s3fs (``storage.S3_CLIENT_DEFAULTS``): a connect gets ``connect_timeout``
(5 s), a request ``2 x read_timeout`` whole (20 s), tried ``total_max_attempts`` times (2), so a
store that accepts and never answers fails within about 42 s, as with s3fs. object_store bounds
a whole request, not botocore's gap between bytes: a file read whole (a base file, a log file)
must arrive within it, about 2 GB at 100 MB/s; raise ``config_kwargs.read_timeout`` for more.

A process forked after it used obstore cannot use it (its runtime's threads stay in the
parent, and the child's first request waits for them forever: measured, obstore 0.12): such a
child sends its requests through s3fs (:func:`usable`, ``Storage.objects``), which fsspec
makes safe after a fork. Processes started fresh (spawn, subprocess, Spark's workers) use
obstore.

Errors, as fsspec raises them so the callers need no second vocabulary: a missing key is
``FileNotFoundError``; a conditional PUT that lost (412, or 409 for a concurrent conditional
write) ``FileExistsError``; a store that refused our credentials ``PermissionError``; a store
that did not answer :class:`NoAnswerError`, one whose answer was not HTTP
:class:`GarbledAnswerError` (``Storage``'s boundary makes either a ``StorageUnavailableError``
naming the endpoint); a store that does not implement a conditional
PUT (501) ``OSError(ENOSYS)``; any other answer the store gave (a 503 after the retries)
``OSError(EIO)`` naming it.
"""

from __future__ import annotations

import datetime
import errno
import os
import re
import threading
from typing import Any, Iterable

#: s3fs options that change nothing about the requests (its caches and buffer sizes)
_IGNORED = frozenset({"use_listings_cache", "listings_expiry_time", "max_paths", "skip_instance_cache",
                      "default_block_size", "default_fill_cache", "default_cache_type", "cache_regions",
                      "max_concurrency", "use_ssl", "asynchronous"})
_CLIENT_KWARGS = frozenset({"endpoint_url", "region_name", "aws_access_key_id", "aws_secret_access_key",
                            "aws_session_token", "verify"})
_CONFIG_KWARGS = frozenset({"connect_timeout", "read_timeout", "retries", "max_pool_connections",
                            "region_name", "s3"})
#: what object_store says when no answer came (refused, reset, timed out)
#: (not "timeout": every message's debug text names its ``retry_timeout``)
_NO_ANSWER = ("error sending request", "timed out", "connection closed", "connection reset",
              "connection refused", "broken pipe", "incomplete message")


#: whether this process started obstore's runtime, and whether it was forked from one that had
_runtime = {"started": False, "inherited": False}


def _forked() -> None:
    if _runtime["started"]:
        _runtime["inherited"] = True


os.register_at_fork(after_in_child=_forked)


def usable() -> bool:
    """Whether this process may send requests through obstore (not a fork of a process that
    did: module docstring)."""
    return not _runtime["inherited"]


class NoAnswerError(ConnectionError):
    """The store did not answer (refused, timed out, closed the connection) on every attempt."""


class ConnectionRefusedByStoreError(NoAnswerError):
    """Nobody listens at the store's endpoint (botocore's ``EndpointConnectionError``)."""


class StoreTimeoutError(NoAnswerError):
    """The store took a connection and said nothing within the request's time (botocore's
    ``ReadTimeoutError``)."""


class GarbledAnswerError(ConnectionError):
    """The store answered, but not in HTTP the client could read (a misbehaving store or proxy)."""


def s3_client_config(fs_options: dict[str, Any], environ=os.environ) -> dict[str, Any] | None:
    """obstore ``S3Store`` keyword arguments (without the bucket) for s3fs's ``fs_options``
    (as ``storage.open_fs`` completes them), or None when an option has no equivalent there or
    the credentials would come from botocore's own chain (a profile, an instance role)."""
    if set(fs_options) - _IGNORED - {"key", "secret", "token", "anon", "endpoint_url",
                                       "client_kwargs", "config_kwargs"}:
        return None
    client = dict(fs_options.get("client_kwargs") or {})
    config = dict(fs_options.get("config_kwargs") or {})
    if set(client) - _CLIENT_KWARGS or set(config) - _CONFIG_KWARGS:
        return None
    addressing = (config.get("s3") or {})
    if set(addressing) - {"addressing_style"}:
        return None
    verify = client.get("verify", True)
    if verify not in (True, False):  # a CA bundle's path: botocore's
        return None
    out: dict[str, Any] = {}
    key = fs_options.get("key") or client.get("aws_access_key_id")
    secret = fs_options.get("secret") or client.get("aws_secret_access_key")
    token = fs_options.get("token") or client.get("aws_session_token")
    if fs_options.get("anon"):
        out["skip_signature"] = True
    elif key and secret:
        out.update(access_key_id=key, secret_access_key=secret)
        if token:
            out["session_token"] = token
    elif environ.get("AWS_ACCESS_KEY_ID") and environ.get("AWS_SECRET_ACCESS_KEY") and not environ.get("AWS_PROFILE"):
        out.update(access_key_id=environ["AWS_ACCESS_KEY_ID"], secret_access_key=environ["AWS_SECRET_ACCESS_KEY"])
        if environ.get("AWS_SESSION_TOKEN"):
            out["session_token"] = environ["AWS_SESSION_TOKEN"]
    else:
        return None
    endpoint = (fs_options.get("endpoint_url") or client.get("endpoint_url")
                or environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL"))
    region = (client.get("region_name") or config.get("region_name") or environ.get("AWS_REGION")
              or environ.get("AWS_DEFAULT_REGION"))
    if not region and not endpoint:  # AWS itself: botocore finds the bucket's region by redirects
        return None
    out["region"] = region or "us-east-1"
    client_options: dict[str, Any] = {}
    if endpoint:
        out["endpoint"] = endpoint
        client_options["allow_http"] = str(endpoint).startswith("http://")
    if addressing.get("addressing_style") == "virtual":
        out["virtual_hosted_style_request"] = True
    if verify is False:
        client_options["allow_invalid_certificates"] = True
    connect = float(config.get("connect_timeout", 60))
    read = float(config.get("read_timeout", 60))
    retries = config.get("retries") or {}
    attempts = (int(retries["total_max_attempts"]) if "total_max_attempts" in retries
                else int(retries["max_attempts"]) + 1 if "max_attempts" in retries else 3)
    client_options.update(connect_timeout=f"{connect:g}s", timeout=f"{2 * read:g}s")
    out["client_options"] = client_options
    out["retry_config"] = {"max_retries": max(0, attempts - 1),
                           "retry_timeout": datetime.timedelta(seconds=attempts * (connect + 2 * read)),
                           "backoff": {"init_backoff": datetime.timedelta(milliseconds=100),
                                       "max_backoff": datetime.timedelta(seconds=2), "base": 2}}
    out["conditional_put"] = "etag"  # PUT If-None-Match / If-Match, as S3 has had since 2024
    return out


_STATUS = re.compile(r"status code: (\d{3})\b")


def answered_status(text: str) -> int | None:
    """The HTTP status an obstore error says the store answered, or None. Read from its own
    words ("status code: 501"), never from any three digits in the text: the same text names
    the request's elapsed time ("in 103.412756ms") and its key, where a 412 or a 501 may
    stand for anything."""
    found = _STATUS.search(text)
    return int(found.group(1)) if found else None


def as_fsspec_error(e: BaseException, path: str) -> BaseException:
    """An obstore error as the exception fsspec would raise for it (module docstring)."""
    from obstore import exceptions as ox
    text = str(e)
    first = text.splitlines()[0] if text else type(e).__name__
    status = answered_status(text)
    if isinstance(e, (FileNotFoundError, ox.NotFoundError)):
        return FileNotFoundError(errno.ENOENT, f"no such key: {path}")
    if isinstance(e, (ox.AlreadyExistsError, ox.PreconditionError)):
        return FileExistsError(errno.EEXIST, f"{path}: the conditional write's condition did not hold "
                                             "(PreconditionFailed)")
    if isinstance(e, (ox.PermissionDeniedError, ox.UnauthenticatedError)) or (
            isinstance(e, ox.GenericError) and status in (401, 403)):
        return PermissionError(errno.EACCES, f"{path}: {first}")
    if isinstance(e, ox.NotSupportedError) or status == 501 or "<Code>NotImplemented</Code>" in text:
        return OSError(errno.ENOSYS, f"{path}: NotImplemented: {first}")
    if not isinstance(e, ox.GenericError):
        return e
    lowered = text.lower()
    compact = "".join(lowered.split())
    if "hyper::error(parse(" in compact:
        return GarbledAnswerError(f"{path}: the answer was not HTTP ({first})")
    if "connectionrefused" in compact:
        return ConnectionRefusedByStoreError(f"{path}: connection refused ({first})")
    if "kind:timeout" in compact or "timedout" in compact:
        return StoreTimeoutError(f"{path}: no answer within the request's time ({first})")
    if any(s in lowered for s in _NO_ANSWER):
        return NoAnswerError(f"{path}: {first}")
    # anything else the store answered (a 500 or 503 after the retries): an OSError, as s3fs
    # raises, so callers that take a storage OSError as "cannot tell now" still do
    return OSError(errno.EIO, f"{path}: {first}")


class ObjectStore:
    """One process's client to the S3 buckets of a table's storage: paths are s3fs's
    (``bucket/key``), as :class:`Storage` builds them."""

    def __init__(self, config: dict[str, Any]):
        self._config = config
        self._stores: dict[str, Any] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_s3(cls, fs_options: dict[str, Any]) -> "ObjectStore | None":
        """The client for these options, or None: obstore not installed, or an option it
        cannot take (:func:`s3_client_config`); s3fs then sends every request."""
        try:
            import obstore  # noqa: F401 - the optional client
        except ImportError:
            return None
        if not usable():
            return None
        config = s3_client_config(fs_options)
        return cls(config) if config is not None else None

    def _where(self, path: str) -> tuple[Any, str]:
        bucket, _, key = path.lstrip("/").partition("/")
        store = self._stores.get(bucket)
        if store is None:
            from obstore.store import S3Store
            with self._lock:
                store = self._stores.get(bucket)
                if store is None:
                    _runtime["started"] = True
                    store = self._stores[bucket] = S3Store(bucket, **self._config)
        return store, key

    def _call(self, path: str, fn, *args, **kwargs):
        """``fn(store, key, *args, **kwargs)`` for ``path``, its errors translated: the one
        door every request passes (the scale bench counts them here)."""
        store, key = self._where(path)
        try:
            return fn(store, key, *args, **kwargs)
        except Exception as e:  # noqa: BLE001 - translated, or raised as it came
            translated = as_fsspec_error(e, path)
            if translated is e:
                raise
            raise translated from e

    # -- reads -------------------------------------------------------------------------------

    def get(self, path: str) -> bytes:
        import obstore
        return self._call(path, lambda s, k: bytes(obstore.get(s, k).bytes()))

    def get_versioned(self, path: str) -> tuple[bytes, str]:
        """The bytes and the ETag they had, from one GET."""
        import obstore

        def get(s, k):
            result = obstore.get(s, k)
            return bytes(result.bytes()), result.meta["e_tag"]
        return self._call(path, get)

    def get_tail(self, path: str, nbytes: int) -> bytes:
        """The last ``nbytes`` (the whole object when shorter), from one suffix-range GET."""
        import obstore
        return self._call(path, lambda s, k: bytes(obstore.get(s, k, options={"range": {"suffix": nbytes}}).bytes()))

    def head(self, path: str) -> dict[str, Any]:
        """``{"size", "mtime" (epoch seconds), "e_tag"}``; ``FileNotFoundError`` if missing."""
        import obstore
        meta = self._call(path, obstore.head)
        return {"size": int(meta["size"]), "mtime": meta["last_modified"].timestamp(), "e_tag": meta["e_tag"]}

    def listing(self, path: str) -> tuple[dict[str, dict[str, Any]], list[str]]:
        """One delimited listing of the folder ``path``: ``({name: {"size", "mtime"}}, [folder
        names])``; a folder that does not exist is empty (as on S3, where none do)."""
        import obstore
        prefix = path.rstrip("/") + "/"
        found = self._call(prefix, lambda s, k: obstore.list_with_delimiter(s, k))
        files = {}
        for meta in found["objects"]:
            name = meta["path"].rsplit("/", 1)[-1]
            if name:
                files[name] = {"size": int(meta["size"]), "mtime": meta["last_modified"].timestamp()}
        return files, [p.rstrip("/").rsplit("/", 1)[-1] for p in found["common_prefixes"]]

    def walk(self, path: str) -> list[str]:
        """Every key below the folder ``path``, relative to it."""
        import obstore
        prefix = path.rstrip("/") + "/"
        _store, key_prefix = self._where(prefix)

        def walk(s, k):
            return [meta["path"][len(key_prefix):] for batch in obstore.list(s, k) for meta in batch]
        return self._call(prefix, walk)

    def exists(self, path: str) -> bool:
        """A key, or a folder holding one (s3fs's answer: a HEAD, then a listing)."""
        import obstore
        try:
            self.head(path)
            return True
        except FileNotFoundError:
            pass
        prefix = path.rstrip("/") + "/"

        def any_below(s, k):
            for batch in obstore.list(s, k, chunk_size=1):
                return bool(batch)
            return False
        return self._call(prefix, any_below)

    # -- writes ------------------------------------------------------------------------------

    def put(self, path: str, data: bytes, *, mode: str | None = None, if_version: str | None = None) -> str:
        """Write ``data`` whole; ``mode="create"`` only where the key is absent
        (``If-None-Match: *``), ``if_version`` only over that ETag (``If-Match``). One PUT
        (a conditional write cannot be a multipart upload). Returns the new ETag."""
        import obstore
        how: Any = {"e_tag": if_version} if if_version is not None else (mode or "overwrite")
        conditional = how != "overwrite"
        result = self._call(path, lambda s, k: obstore.put(s, k, bytes(data), mode=how,
                                                           use_multipart=False if conditional else None))
        return result["e_tag"]

    def delete(self, paths: Iterable[str]) -> None:
        """Delete keys (a missing one counts as deleted), in bulk requests of up to 1,000."""
        import obstore
        by_bucket: dict[str, list[str]] = {}
        for p in paths:
            by_bucket.setdefault(p.lstrip("/").partition("/")[0], []).append(p)
        for group in by_bucket.values():
            keys = [self._where(p)[1] for p in group]
            self._call(group[0], lambda s, _k: obstore.delete(s, keys if len(keys) > 1 else keys[0]))


__all__ = ["ConnectionRefusedByStoreError", "GarbledAnswerError", "NoAnswerError", "ObjectStore", "answered_status",
           "as_fsspec_error",
           "StoreTimeoutError", "s3_client_config", "usable"]
