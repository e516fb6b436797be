"""A thin layer over fsspec with the one primitive OCC needs: create-if-absent.

Hudi's timeline relies on "bare minimum atomic puts": a completed instant file must appear
whole or not at all, and must never replace one that exists. fsspec has no such call, so it is
implemented here *truthfully per backend*:

- local: the bytes go to a temporary file, which is then ``os.link``-ed to its final name.
  ``link`` fails with EEXIST when the name exists, and readers see either no file or the
  whole file (never a half-written one).
- s3: a conditional put (``If-None-Match: *``), sent by obstore (``format/object_store``,
  which sends every request of an S3 table where its options allow) or else by s3fs's
  ``pipe_file(mode="create")``.
- memory: a process-wide lock (the memory file system is only shared inside one process).

Any other backend is refused with a :class:`StorageError` unless the caller declares that a
lock provider serialises every create (``assume_locked_creates=True``, or the storage option
``"assume_locked_creates": true``, which reaches every process that opens the table, Spark
executors included), because a check-then-write on a backend without conditional writes would
let two writers both "win". An S3-compatible store that answers the conditional PUT with
``501 NotImplemented`` (some S3-compatible stores do) is refused the same way, naming the store; with
the declaration it falls back to check-then-write under the caller's lock.

Bounded waits on object stores: botocore's own defaults (60 s connect and read timeouts, its
retries, and s3fs's five retries around them) keep a call to a store that accepts connections
and never answers silent for minutes (415 s measured for ``hudi-occ show``). An S3 storage gets
:data:`S3_CLIENT_DEFAULTS` (botocore ``Config``: connect 5 s, read 10 s, 2 attempts) unless its
``config_kwargs`` say otherwise, and s3fs's outer retry loop is cut to
:data:`S3FS_RETRIES`, so a store that refuses or never answers fails within about 45 s.
Every call to the store goes through one boundary (:func:`_boundary`) that turns "nobody
answered" (connection refused, connect or read timeout, connection closed) and "the answer was
not HTTP the client could read" into :class:`StorageUnavailableError` naming the endpoint,
whatever client raised it.

Errors: ``FileNotFoundError`` / ``FileExistsError`` pass through as fsspec raises them;
backend refusals are :class:`StorageError`; a store that does not answer is
:class:`StorageUnavailableError`; :meth:`Storage.check_access` turns a store that
refuses our credentials (403, or none found) into a :class:`StorageError` naming the store.
"""

from __future__ import annotations

import datetime
import errno
import functools
import inspect
import io
import os
import posixpath
import re
import threading
import uuid
from typing import Any, Iterable, Mapping

from fsspec.core import url_to_fs

from airflow_hudi_occ.core.config import closest_key
from airflow_hudi_occ.core.format.object_store import ObjectStore, answered_status
from airflow_hudi_occ.core.format.object_store import usable as object_store_usable
from airflow_hudi_occ.core.errors import (ConfigError, InvalidTablePathError, StorageError, StorageFullError,
                                         StorageUnavailableError, UnsafePathError)

_MEMORY_LOCK = threading.Lock()
#: the storage option that declares every create serialised by a lock (never given to fsspec)
ASSUME_LOCKED_CREATES = "assume_locked_creates"
_NO_CONDITIONAL_REMEDY = (
    "use a store that honours If-None-Match on PUT (AWS S3 does since August 2024), "
    "or serialise every commit with the zookeeper lock provider "
    "(hoodie.write.lock.provider=zookeeper) and add \"assume_locked_creates\": true to the "
    "table's storage_options")
_FULL = (errno.ENOSPC, errno.EDQUOT)

#: botocore ``Config`` defaults for s3 (each overridable through the storage option
#: ``config_kwargs``): a connect gets 5 s, a read may be silent for 10 s (the gap between bytes,
#: not a whole download), and a call is tried twice by botocore
S3_CLIENT_DEFAULTS: dict[str, Any] = {"connect_timeout": 5, "read_timeout": 10,
                                      "retries": {"total_max_attempts": 2, "mode": "standard"}}
#: s3fs's own retry loop around botocore's (5 by default: 5 x botocore's attempts in all)
S3FS_RETRIES = 2
#: the names of the exceptions that mean "the store did not answer", from botocore, obstore
#: (``format/object_store``)
#: (``EndpointConnectionError``, ``ConnectTimeoutError``, ``ReadTimeoutError``,
#: ``ConnectionClosedError``, ``ProxyConnectionError``), aiohttp and fsspec; by name, because
#: the core library does not depend on any of these clients
_UNANSWERED = frozenset({"EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError",
                         "ConnectionClosedError", "ProxyConnectionError", "ClientConnectorError",
                         "ServerTimeoutError", "FSTimeoutError", "NoAnswerError"})
#: ... and "it answered, but not in HTTP the client could read" (botocore wraps aiohttp's
#: protocol errors in ``HTTPClientError``): a misbehaving store or proxy, not a bug of ours
_GARBLED = frozenset({"HTTPClientError", "ResponseParserError", "GarbledAnswerError"})


def fsspec_options(storage_options: dict[str, Any] | None) -> dict[str, Any]:
    """The storage options fsspec itself takes (ours, such as ``assume_locked_creates``, out).

    An option named ``*_kwargs`` (s3fs's ``client_kwargs``, ``config_kwargs``,
    ``s3_additional_kwargs``; other backends' alike) is keyword arguments for a client and
    must be a mapping: given as a string (JSON text in a secrets file, say) the backend failed
    later with ``'str' object has no attribute 'copy'``. Raises :class:`ConfigError` naming the
    key and the type, never the value (it may hold credentials)."""
    out = dict(storage_options or {})
    out.pop(ASSUME_LOCKED_CREATES, None)
    for key, value in out.items():
        if str(key).endswith("_kwargs") and value is not None and not isinstance(value, Mapping):
            raise ConfigError(
                f"storage option {key!r} must be an object of keyword arguments, not a "
                f"{type(value).__name__}", key=str(key),
                remedy=f'give {key} as a JSON object, e.g. {{"{key}": {{"endpoint_url": '
                       '"http://host:9000"}} in a secrets file or the connection\'s extra, '
                       f"--storage-option '{key}={{\"endpoint_url\": \"http://host:9000\"}}' "
                       "on the command line (not a string holding JSON)")
    return out


def _unanswered(exc: BaseException) -> BaseException | None:
    """The exception in ``exc``'s chain that says the store did not answer, if any."""
    seen = 0
    while exc is not None and seen < 8:
        if {c.__name__ for c in type(exc).__mro__} & (_UNANSWERED | _GARBLED) or isinstance(
                exc, (ConnectionRefusedError, TimeoutError)):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


_UNEXPECTED_KEYWORD = re.compile(r"unexpected keyword argument '([^']+)'")


def unknown_storage_option(exc: BaseException, storage_options: dict[str, Any], protocol: str,
                           fs_class: type | None = None) -> ConfigError | None:
    """The :class:`ConfigError` for a storage option the backend does not take, when ``exc``
    (a ``TypeError``) is the backend refusing one of ``storage_options`` by name; else None.
    s3fs hands unknown options on to its session and fails at the first call with
    ``AioSession.__init__() got an unexpected keyword argument 'region'``, which read as
    "a bug in hudi-occ"."""
    found = _UNEXPECTED_KEYWORD.search(str(exc)) if isinstance(exc, TypeError) else None
    if found is None or found.group(1) not in storage_options:
        return None
    key = found.group(1)
    known = set()
    if fs_class is not None:
        try:
            known = {n for n, p in inspect.signature(fs_class.__init__).parameters.items()
                     if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n != "self"}
        except (TypeError, ValueError):
            known = set()
    hint = closest_key(key, known) if known else None
    return ConfigError(
        f"the {protocol} store does not take the storage option {key!r} "
        f"({type(exc).__name__}: {exc})", key=key,
        remedy=(f"did you mean {hint!r}? " if hint else "")
        + f"check the option names the {protocol} backend documents"
        + (" (s3fs: key, secret, token, endpoint_url, anon, client_kwargs={\"region_name\": ...}, "
           "config_kwargs, ...)" if protocol in ("s3", "s3a") else "")
        + ", or remove the option")


def _boundary(method):
    """Every call to the store: a store that did not answer is a typed error naming it (and
    a storage option the backend refused by name, a :class:`ConfigError` naming the key)."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except StorageError:
            raise
        except Exception as e:
            refused = unknown_storage_option(e, self.storage_options, self.protocol, type(self.fs))
            if refused is not None:
                raise refused from e
            found = None if self.is_local else _unanswered(e)
            if found is None:
                raise
            raise self.unavailable(found, args[0] if args else None) from e
    return wrapper


def with_s3_defaults(fs_options: dict[str, Any]) -> dict[str, Any]:
    """``fs_options`` with :data:`S3_CLIENT_DEFAULTS` under ``config_kwargs`` where the user
    set nothing (a value the user gave always wins, key by key)."""
    out = dict(fs_options)
    out["config_kwargs"] = {**S3_CLIENT_DEFAULTS, **(out.get("config_kwargs") or {})}
    return out


def open_fs(url: str, storage_options: dict[str, Any] | None = None):
    """``(fs, path)`` for ``url``, as ``fsspec.core.url_to_fs`` gives them, with the bounded s3
    client of :data:`S3_CLIENT_DEFAULTS` / :data:`S3FS_RETRIES`: every file system this package
    opens (a table's, a Spark task's) comes from here."""
    options = fsspec_options(storage_options)
    s3 = url.split("://", 1)[0] in ("s3", "s3a") if "://" in url else False
    if s3:
        options = with_s3_defaults(options)
    try:
        fs, path = url_to_fs(url, **options)
    except TypeError as e:  # a backend that checks its options when it is made
        refused = unknown_storage_option(e, options, url.split("://", 1)[0] if "://" in url else "file")
        if refused is not None:
            raise refused from e
        raise
    if s3 and hasattr(fs, "retries"):
        fs.retries = min(int(fs.retries), S3FS_RETRIES)
    if s3:
        _parse_times_quickly(fs)
    return fs, path


def s3_timestamp(value):
    """A timestamp of an S3 answer, as botocore's parser gives it, read by
    ``datetime.fromisoformat`` where the value is ISO 8601 (a listing's ``LastModified``:
    ``2026-11-30T02:41:16.583Z``); anything else (an HTTP date, epoch seconds) by botocore's
    own parser.

    Why: botocore parses every timestamp with ``dateutil``, about 100 us each; a listing of a
    timeline holds dozens, and listings are most of a commit's requests, so on the scale
    bench's writers (issue 43) that parsing was a fifth of a writer's CPU."""
    if isinstance(value, str) and "T" in value:
        try:
            return datetime.datetime.fromisoformat(value)
        except ValueError:
            pass
    from botocore.utils import parse_timestamp
    return parse_timestamp(value)


def _parse_times_quickly(fs) -> None:
    """Give an s3fs file system not yet connected the session it would make itself
    (``AioSession(**fs.kwargs)``, as s3fs does), with :func:`s3_timestamp` as its parser of
    timestamps. A file system that made its session already (fsspec hands out cached
    instances) keeps it; s3fs replaces the session only on a credentials refresh, which then
    parses with botocore's default again: slower, the same values."""
    if getattr(fs, "session", False) is not None or getattr(fs, "_s3", None) is not None:
        return
    try:
        from aiobotocore.session import AioSession
        session = AioSession(**getattr(fs, "kwargs", {}))
        session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=s3_timestamp)
    except (ImportError, AttributeError, TypeError):  # another s3fs / aiobotocore: its default
        return
    fs.session = session


def _typed_full(method):
    """A full disk is an expected condition with a remedy, not a crash: raise it typed."""
    @functools.wraps(method)
    def wrapper(self, path, *args, **kwargs):
        try:
            return method(self, path, *args, **kwargs)
        except OSError as e:
            if e.errno in _FULL:
                raise StorageFullError(f"no space left writing {path}: {e.strerror}", path=path,
                                       protocol=self.protocol) from e
            raise
    return wrapper


def base_path_problem(base_uri) -> str | None:
    """Why a table's base path would name a folder people cannot see it names, or None:
    whitespace at either end of the path or of one of its segments (``'t '``, ``'t\\n'``,
    ``'/lake /t'``), or a control character anywhere (``'\\x00'``, ``'\\x1b'``). A path
    that is not a string is one too."""
    if not isinstance(base_uri, str) or not base_uri.strip():
        return "an empty path" if isinstance(base_uri, str) else f"not a string ({type(base_uri).__name__})"
    control = sorted({c for c in base_uri if ord(c) < 0x20 or ord(c) == 0x7F})
    if control:
        return f"the control character(s) {', '.join(repr(c) for c in control)}"
    if base_uri != base_uri.strip():
        return "whitespace at its start or end"
    for seg in base_uri.split("/"):
        if seg != seg.strip():
            return f"whitespace at the start or end of {seg!r}"
    return None


def check_base_path(base_uri) -> None:
    """Refuse a base path with a character no one sees (:func:`base_path_problem`), before
    any folder is created or any file read: ``'t '`` would be written beside ``'t'``, and
    ``'t'`` typed again would say "no table". The message shows the path with ``repr()``."""
    problem = base_path_problem(base_uri)
    if problem is not None:
        raise InvalidTablePathError(
            f"the table path {base_uri!r} has {problem}, which no listing or log shows: a table "
            "written there would not be found at the path typed without it; nothing was created "
            "or read",
            base_path=base_uri if isinstance(base_uri, str) else repr(base_uri))


class Storage:
    """Storage rooted at a table's base path (a local path or any fsspec URL)."""

    def __init__(self, base_uri: str, storage_options: dict[str, Any] | None = None, *,
                 assume_locked_creates: bool = False):
        self.storage_options = dict(storage_options or {})
        declared = str(self.storage_options.get(ASSUME_LOCKED_CREATES, "false")).lower() in ("true", "1")
        check_base_path(base_uri)
        if "://" not in base_uri:
            base_uri = os.path.abspath(os.path.expanduser(base_uri))
        self.base_uri = base_uri.rstrip("/") or "/"
        self.fs, root = open_fs(self.base_uri, self.storage_options)
        self.root = root.rstrip("/") or "/"
        protocol = self.fs.protocol
        self.protocol = protocol[0] if isinstance(protocol, (tuple, list)) else protocol
        self.is_local = self.protocol in ("file", "local")
        self._no_conditional_writes = False
        self.assume_locked_creates = assume_locked_creates or declared
        self._objects: ObjectStore | None = (
            ObjectStore.for_s3(with_s3_defaults(fsspec_options(self.storage_options)))
            if self.protocol in ("s3", "s3a") else None)

    @property
    def objects(self) -> ObjectStore | None:
        """The S3 client that sends this table's requests (``format/object_store``: a tenth of
        botocore's CPU a request), or None: s3fs sends them (another store, obstore not
        installed, an option only botocore takes, or a process forked from one that used it)."""
        if self._objects is not None and not object_store_usable():
            self._objects = None
        return self._objects

    @property
    def atomic_creates(self) -> bool:
        """Whether :meth:`create_if_absent` is atomic on the backend itself, as a lock file
        needs; with ``assume_locked_creates`` on another backend (or an S3-compatible store
        declared without conditional writes) it is a check-then-write."""
        if self.protocol in ("s3", "s3a"):
            return not self.assume_locked_creates
        return self.is_local or self.protocol == "memory"

    @property
    def endpoint(self) -> str:
        """Where the store is, for messages: the configured endpoint, or the protocol's default."""
        so = self.storage_options
        from_env = (os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
                    if self.protocol in ("s3", "s3a") else None)  # where botocore looks next
        return (so.get("endpoint_url") or (so.get("client_kwargs") or {}).get("endpoint_url")
                or from_env or {"s3": "AWS S3", "s3a": "AWS S3", "gs": "Google Cloud Storage",
                    "gcs": "Google Cloud Storage", "az": "Azure Blob Storage",
                    "abfs": "Azure Blob Storage"}.get(self.protocol, self.protocol))

    def unavailable(self, exc: BaseException, path: str | None = None) -> StorageUnavailableError:
        """The typed error for a store that did not answer ``exc`` (see :func:`_boundary`)."""
        what = f" ({path})" if path else ""
        names = {c.__name__ for c in type(exc).__mro__}
        verb = ("gave no answer the client could read" if names & _GARBLED and not names & _UNANSWERED
                else "did not answer")
        return StorageUnavailableError(
            f"the {self.protocol} store at {self.endpoint} {verb}{what}: "
            f"{type(exc).__name__}: {exc}", endpoint=self.endpoint, protocol=self.protocol,
            cause=type(exc).__name__)

    @_boundary
    def check_access(self) -> None:
        """One listing of the base path: a store that refuses our credentials (403) or a
        client that finds none fails here, as a :class:`StorageError` naming the store and the
        fix, before anything is written (a local path is always accessible here)."""
        if self.is_local:
            return
        try:
            if self.objects is not None:
                self.objects.listing(self.root)
            else:
                self.fs.ls(self.root, detail=False, refresh=True)
        except FileNotFoundError:
            pass
        except Exception as e:  # noqa: BLE001 - the credential errors of every backend
            if not (isinstance(e, PermissionError) or "Credentials" in type(e).__name__
                    or "credentials" in str(e).lower()):
                raise
            raise StorageError(
                f"the {self.protocol} store at {self.endpoint} refused access to {self.uri()}: "
                f"{type(e).__name__}: {e}", protocol=self.protocol,
                remedy="give the table connection's storage_options credentials that may list, "
                       "read, write and delete under this path (fsspec's: key / secret, or a "
                       "profile; or an instance role on every driver and executor host), and "
                       "check the bucket name and the endpoint") from e

    # -- paths -------------------------------------------------------------------------------

    def path(self, *parts: str) -> str:
        """Absolute backend path of ``parts`` relative to the base path.

        A part with a ``..`` segment is refused (:class:`UnsafePathError`): every path the
        writers and services open, create or delete is built here, from data and from the
        timeline's files, so this is the last line that keeps them all inside the table
        (``core/format/partition_path`` refuses such values earlier, with the column named)."""
        parts = [p.strip("/") for p in parts if p not in ("", None)]
        for p in parts:
            if ".." in p and ".." in p.replace("\\", "/").split("/"):
                raise UnsafePathError(f"the path {'/'.join(parts)!r} would leave the table at "
                                      f"{self.base_uri} (a '..' segment); nothing was read, "
                                      "written or deleted there", path="/".join(parts),
                                      source="a path inside the table", base_path=self.base_uri)
        return posixpath.join(self.root, *parts) if parts else self.root

    def uri(self, *parts: str) -> str:
        """A URL another process (or the hudi-rs reader) can open."""
        p = self.path(*parts)
        if self.is_local:
            return p
        return f"{self.protocol}://{p.lstrip('/')}"

    # -- reads -------------------------------------------------------------------------------

    @_boundary
    def read(self, path: str) -> bytes:
        if self.is_local:
            with open(path, "rb") as f:
                return f.read()
        if self.objects is not None:
            return self.objects.get(path)
        if self.protocol in ("s3", "s3a"):
            # one GET: s3fs would first HEAD the object for its size (and, for a missing key,
            # LIST it as a folder) to split a large read; what is read whole here is small
            return self.fs.cat_file(path, max_concurrency=1)
        return self.fs.cat_file(path)

    @_boundary
    def read_tail(self, path: str, nbytes: int) -> bytes:
        """The last ``nbytes`` of a file (all of it when shorter) in one request: a suffix
        range (``Range: bytes=-N``) needs no size first, where opening the file would HEAD it
        (a parquet footer's read: ``base_file.read_footer``)."""
        if self.is_local:
            with open(path, "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - nbytes))
                return f.read()
        if self.objects is not None:
            return self.objects.get_tail(path, nbytes)
        if self.protocol in ("s3", "s3a"):
            return self.fs.cat_file(path, start=-nbytes, max_concurrency=1)
        return self.fs.cat_file(path, start=-nbytes)

    @_boundary
    def run(self, path: str, primitive, *args):
        """``primitive(self, path, *args)`` behind this store's error boundary: for the
        primitives other modules build on the store (``format/versioned``'s reads), so a store
        that does not answer is the same typed error there as here."""
        return primitive(self, path, *args)

    @_boundary
    def exists(self, path: str) -> bool:
        if self.is_local:
            return os.path.exists(path)
        if self.objects is not None:
            return self.objects.exists(path)
        return self.fs.exists(path)

    @_boundary
    def isdir(self, path: str) -> bool:
        if self.is_local:
            return os.path.isdir(path)
        if self.objects is not None:
            files, folders = self.objects.listing(path)
            return bool(files or folders)
        return self.fs.isdir(path)

    @_boundary
    def list_names(self, path: str) -> list[str]:
        """Names (not paths) directly under ``path``; a missing directory lists as empty."""
        if self.is_local:
            try:
                return os.listdir(path)
            except (FileNotFoundError, NotADirectoryError):
                return []
        if self.objects is not None:
            files, folders = self.objects.listing(path)
            return [*files, *folders]
        try:
            entries = self.fs.ls(path, detail=False, refresh=True) if self.protocol != "memory" \
                else self.fs.ls(path, detail=False)
        except FileNotFoundError:
            return []
        out = []
        for e in entries:
            name = posixpath.basename(e.rstrip("/"))
            if name:
                out.append(name)
        return out

    @_boundary
    def list_sizes(self, path: str) -> dict[str, int]:
        """The files directly under ``path`` by name, with their sizes, in one listing (an
        object store's listing carries them: no HEAD per file); a missing directory is empty."""
        return {name: int(e.get("size") or 0) for name, e in self._file_entries(path).items()}

    def _file_entries(self, path: str) -> dict[str, dict]:
        """The files directly under ``path`` by name, with what one listing says of each
        (``size``, a modification time; a local file: its ``stat``)."""
        if self.is_local:
            try:
                with os.scandir(path) as it:
                    return {e.name: {"size": st.st_size, "mtime": st.st_mtime}
                            for e in it if e.is_file() for st in (e.stat(),)}
            except (FileNotFoundError, NotADirectoryError):
                return {}
        if self.objects is not None:
            return self.objects.listing(path)[0]
        try:
            entries = self.fs.ls(path, detail=True, refresh=True) if self.protocol != "memory" \
                else self.fs.ls(path, detail=True)
        except FileNotFoundError:
            return {}
        out = {}
        for e in entries:
            name = posixpath.basename(e["name"].rstrip("/"))
            if name and e.get("type") != "directory":
                out[name] = e
        return out

    @_boundary
    def list_mtimes(self, path: str) -> dict[str, float]:
        """The files directly under ``path`` by name, with their modification times (epoch
        seconds), in one listing; a missing directory is empty."""
        out = {}
        for name, e in self._file_entries(path).items():
            for key in ("mtime", "LastModified", "last_modified", "created"):
                v = e.get(key)
                if v is not None:
                    out[name] = v.timestamp() if hasattr(v, "timestamp") else float(v)
                    break
        return out

    @_boundary
    def list_dirs(self, path: str) -> list[str]:
        if self.is_local:
            try:
                with os.scandir(path) as it:
                    return [e.name for e in it if e.is_dir()]
            except (FileNotFoundError, NotADirectoryError):
                return []
        if self.objects is not None:
            return self.objects.listing(path)[1]
        try:
            entries = self.fs.ls(path, detail=True)
        except FileNotFoundError:
            return []
        return [posixpath.basename(e["name"].rstrip("/")) for e in entries if e["type"] == "directory"]

    @_boundary
    def walk_files(self, path: str) -> list[str]:
        """Every file below ``path``, as paths relative to it."""
        if self.is_local:
            out = []
            for dirpath, _dirs, files in os.walk(path):
                rel = os.path.relpath(dirpath, path)
                for f in files:
                    out.append(f if rel == "." else posixpath.join(rel.replace(os.sep, "/"), f))
            return out
        if self.objects is not None:
            return self.objects.walk(path)
        try:
            found = self.fs.find(path)
        except FileNotFoundError:
            return []
        prefix = path.rstrip("/") + "/"
        return [f[len(prefix):] if f.startswith(prefix) else f for f in found]

    @_boundary
    def mtime(self, path: str) -> float:
        """Modification time in epoch seconds; FileNotFoundError if missing."""
        if self.is_local:
            return os.stat(path).st_mtime
        if self.objects is not None:
            return self.objects.head(path)["mtime"]
        info = self.fs.info(path)
        for key in ("mtime", "LastModified", "last_modified", "created"):
            if key in info and info[key] is not None:
                v = info[key]
                return v.timestamp() if hasattr(v, "timestamp") else float(v)
        raise StorageError(f"{self.protocol} gives no modification time for {path}",
                           protocol=self.protocol)

    @_boundary
    def size(self, path: str) -> int:
        if self.is_local:
            return os.stat(path).st_size
        if self.objects is not None:
            return self.objects.head(path)["size"]
        return int(self.fs.info(path)["size"])

    # -- writes ------------------------------------------------------------------------------

    @_boundary
    @_typed_full
    def makedirs(self, path: str) -> None:
        if self.is_local:
            os.makedirs(path, exist_ok=True)
        elif self.protocol in ("s3", "s3a") and "/" in path.strip("/"):
            return  # no folders inside an S3 bucket: s3fs would only ask whether the bucket is there
        else:
            self.fs.makedirs(path, exist_ok=True)

    @_boundary
    @_typed_full
    def write(self, path: str, data: bytes) -> None:
        """Write (or replace) a file whole: readers see the old or the new content."""
        if self.is_local:
            tmp = local_tmp_copy(path, data, fsync=False)
            os.replace(tmp, path)
        elif self.objects is not None:
            self.objects.put(path, data)
        else:
            self.fs.pipe_file(path, data)

    @_boundary
    @_typed_full
    def create_if_absent(self, path: str, data=b"", *, durable: bool = True) -> None:
        """Create ``path`` holding ``data`` atomically; ``FileExistsError`` if it exists.
        ``data`` may be a function writing into a binary file: locally it writes the hidden
        temporary file directly; elsewhere its output is buffered for the one conditional PUT.
        ``durable=False`` skips the local fsync, for files whose loss in a power cut is
        harmless (a lock file, an inflight instant's plan)."""
        if callable(data) and not self.is_local:
            buf = io.BytesIO()
            data(buf)
            data = buf.getvalue()
        if self.is_local:
            if isinstance(data, (bytes, bytearray)) and not data:
                # an empty file (a marker, a requested instant): O_EXCL is atomic on its own,
                # and there is no content whose half could be seen
                os.makedirs(os.path.dirname(path), exist_ok=True)
                os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
                return
            tmp = local_tmp_copy(path, data, fsync=durable)
            try:
                os.link(tmp, path)  # atomic, and refuses an existing name
            finally:
                os.unlink(tmp)
            return
        if self.protocol == "memory":
            with _MEMORY_LOCK:
                if self.fs.exists(path):
                    raise FileExistsError(path)
                self.fs.pipe_file(path, data)
            return
        if self.protocol in ("s3", "s3a") and not self._no_conditional_writes:
            try:
                if self.objects is not None:
                    self.objects.put(path, data, mode="create")
                else:
                    self.fs.pipe_file(path, data, mode="create")
                return
            except FileExistsError:
                raise
            except TypeError as e:  # an s3fs too old to know mode="create"
                raise StorageError(
                    "this s3fs cannot do conditional writes (If-None-Match)", protocol=self.protocol,
                    remedy="upgrade s3fs to 2024.12 or newer") from e
            except OSError as e:
                msg = str(e)
                # by the store's own words: a bare "412" may be the request's elapsed time
                # ("in 103.412756ms") or a partition's name
                if ("PreconditionFailed" in msg or "ConditionalRequestConflict" in msg
                        or answered_status(msg) == 412):
                    raise FileExistsError(path) from e
                if not (e.errno == errno.ENOSYS or "NotImplemented" in msg
                        or "not implemented" in msg):
                    raise
                if not self.assume_locked_creates:
                    raise StorageError(
                        f"the S3 store at {self.endpoint} does not support conditional writes: "
                        f"it answered the PUT with If-None-Match: * ({path}) with 501 "
                        "NotImplemented, so two writers could both create the same completed "
                        "instant", protocol=self.protocol, remedy=_NO_CONDITIONAL_REMEDY) from e
                self._no_conditional_writes = True  # declared: check-then-write under the lock
        if self.assume_locked_creates:
            # Safe only because the caller holds a lock around every create on this table.
            if self.fs.exists(path):
                raise FileExistsError(path)
            # a store with real directories (e.g. fsspec dir:// over files) needs the parent
            self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
            self.fs.pipe_file(path, data)
            return
        raise StorageError(
            f"storage '{self.protocol}' cannot create a file only if it is absent atomically, "
            "which the Hudi timeline needs for safe concurrent commits",
            protocol=self.protocol,
            remedy="use local storage or S3 (conditional writes), or lock every commit with the "
                   "zookeeper or inprocess lock provider and open the table with "
                   "assume_locked_creates=True (the storage option \"assume_locked_creates\": "
                   "true)")

    @_boundary
    @_typed_full
    def touch(self, path: str) -> None:
        """Create or refresh an empty file so that its modification time is now."""
        if self.is_local:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "ab"):
                pass
            os.utime(path, None)
        elif self.objects is not None:
            self.objects.put(path, b"")
        else:
            self.fs.pipe_file(path, b"")

    @_boundary
    def delete(self, path: str, *, missing_ok: bool = True) -> None:
        try:
            if self.is_local:
                os.unlink(path)
            elif self.objects is not None:
                self.objects.delete([path])
            else:
                self.fs.rm_file(path)
        except FileNotFoundError:
            if not missing_ok:
                raise

    @_boundary
    def delete_dir_if_empty(self, path: str) -> bool:
        """Remove the folder ``path`` if nothing is in it (a local store: an empty folder would
        otherwise stay behind after its last file went; object stores have no folders).
        Safe beside writers adding files: a folder that is not empty is left alone."""
        if not self.is_local:
            return False
        try:
            os.rmdir(path)
            return True
        except OSError:  # not empty, or gone
            return False

    @_boundary
    def delete_dir(self, path: str) -> None:
        if self.is_local:
            import shutil
            shutil.rmtree(path, ignore_errors=True)
            return
        if self.objects is not None:
            self.objects.delete([posixpath.join(path, rel) for rel in self.objects.walk(path)])
            return
        try:
            self.fs.rm(path, recursive=True)
        except FileNotFoundError:
            pass

    def delete_temp_copies(self, path: str) -> list[str]:
        """Delete the hidden temporary copies of ``path`` that a local create or write left
        when its process died before the final link/rename (object stores leave none).
        Returns the names deleted."""
        if not self.is_local:
            return []
        d, base = os.path.split(path)
        gone = []
        for name in self.list_names(d):
            if name.startswith(f".{base}.") and name.endswith(".tmp"):
                self.delete(os.path.join(d, name))
                gone.append(name)
        return gone

    @_boundary
    def delete_many(self, paths: Iterable[str]) -> None:
        """Delete files (a missing one counts as deleted); on S3 one batch request per 1,000."""
        paths = list(paths)
        if self.objects is not None:
            if paths:
                self.objects.delete(paths)
            return
        if self.protocol in ("s3", "s3a") and len(paths) > 1:
            try:
                self.fs.rm(paths)
            except FileNotFoundError:
                pass
            return
        for p in paths:
            self.delete(p)

    def concurrently(self, calls: Iterable) -> list:
        """``[call() for call in calls]``, the calls overlapping on an object store: each is a
        request or two that waits 20 to 50 ms on the network, and none needs another's answer
        (the staged logs of a commit, the clean-up after it). Every call runs whatever the
        others do; the first error is raised once all have finished. Locally one after the
        other (a local call does not wait on the network). A thread per call, not a pool: a
        call may itself run calls concurrently without waiting for a free worker."""
        calls = list(calls)
        overlap = not self.is_local and len(calls) > 1
        if not overlap:
            started = [Started(call, background=False) for call in calls]
        else:  # the first on this thread, once the others are under way
            started = [Started(call) for call in calls[1:]]
            started.insert(0, Started(calls[0], background=False))
        error = next((e for e in (s.error() for s in started) if e is not None), None)
        if error is not None:
            raise error
        return [s.result() for s in started]

    def ahead(self, call) -> "Started":
        """``call`` started now, its answer taken later (:meth:`Started.result`): a request
        whose answer is needed only after other work, sent before that work (on an object
        store, in a thread of its own; locally it runs here and now)."""
        return Started(call, background=not self.is_local)


class Started:
    """A call under way (:meth:`Storage.ahead`, :meth:`Storage.concurrently`): in a daemon
    thread of its own, begun by the time the constructor returns (so what the caller does next
    comes after it: a lock's release before the clean-up sent beside it), or already finished
    on the caller's thread (``background=False``)."""

    def __init__(self, call, *, background: bool = True):
        self._value = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        if background:
            begun = threading.Event()
            self._thread = threading.Thread(target=self._run, args=(call, begun), name="hudi-occ-io", daemon=True)
            self._thread.start()
            begun.wait()
        else:
            self._run(call)

    def _run(self, call, begun: threading.Event | None = None) -> None:
        if begun is not None:
            begun.set()
        try:
            self._value = call()
        except BaseException as e:  # noqa: BLE001 - raised by result(), in the caller's thread
            self._error = e

    def error(self) -> BaseException | None:
        """Wait for the call; what it raised, if anything."""
        if self._thread is not None:
            self._thread.join()
        return self._error

    def result(self):
        """Wait for the call; its answer, or what it raised."""
        error = self.error()
        if error is not None:
            raise error
        return self._value


def local_tmp_copy(path: str, data, *, fsync: bool) -> str:
    """``data`` in a hidden temporary file beside ``path`` (same directory: same file system,
    so the following link or rename is atomic). ``data`` is bytes, or a function that writes
    into the open file (a parquet writer streams straight to disk, with no copy in memory)."""
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data)
            if fsync:
                f.flush()
                # the data, before the link publishes it (the link itself is a metadata change)
                os.fdatasync(f.fileno())
    except BaseException:  # e.g. ENOSPC half-way: leave no partial copy behind
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return tmp


def delete_planned_files(storage, files_by_partition, *, with_temp_copies: bool = False,
                         on_error=None) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Delete a plan's files (relative paths by partition), as rollback and clean do: a missing
    file counts as deleted (a re-run), a file that cannot be deleted is reported, not raised.
    ``with_temp_copies`` also removes the hidden temp copy a writer killed mid-file leaves.
    Returns ``(deleted, failed)``, both by partition."""
    deleted: dict[str, list[str]] = {}
    failed: dict[str, list[str]] = {}
    for part, rels in files_by_partition.items():
        for rel in rels:
            try:
                storage.delete(storage.path(rel))
                if with_temp_copies:
                    storage.delete_temp_copies(storage.path(rel))
                deleted.setdefault(part, []).append(rel)
            except OSError as e:
                if on_error is not None:
                    on_error(rel, e)
                failed.setdefault(part, []).append(rel)
    return deleted, failed


__all__ = ["Storage", "Started", "fsspec_options", "open_fs", "with_s3_defaults", "ASSUME_LOCKED_CREATES", "S3_CLIENT_DEFAULTS",
           "S3FS_RETRIES"]
