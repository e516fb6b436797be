"""The Hive Metastore's thrift API, as the catalog sync uses it.

The client is the thrift code that ``pymetastore`` generates from Hive's IDL (the optional
extra ``airflow-hudi-occ[hive]``), imported when a sync first needs it, never when this module
is: a writer without the extra runs as before and a sync asked for names the extra
(:class:`~airflow_hudi_occ.core.errors.CatalogClientMissingError`).

Every call is bounded: the socket's connect and read timeouts are
``hoodie.occ.meta.sync.timeout.ms`` (Java waits HiveConf's 600 s), and a metastore that refuses,
resets or never answers is :class:`~airflow_hudi_occ.core.errors.CatalogUnavailableError`
naming it. Each URI of ``hoodie.datasource.hive_sync.metastore.uris`` is tried in turn, as
Hive's client does. ``calls`` counts the calls made (the bench reports it).
"""

from __future__ import annotations

import getpass
import socket
import time
from typing import Any
from urllib.parse import urlparse

from airflow_hudi_occ.core.catalog.table_def import TableDef
from airflow_hudi_occ.core.errors import CatalogClientMissingError, CatalogSyncError, CatalogUnavailableError

EXTRA = "hive"


def thrift_api():
    """``(ThriftHiveMetastore, ttypes, TSocket, TTransport, TBinaryProtocol)`` of the extra."""
    try:
        from pymetastore.hive_metastore import ThriftHiveMetastore, ttypes
        from thrift.protocol import TBinaryProtocol
        from thrift.transport import TSocket, TTransport
    except ImportError as e:
        raise CatalogClientMissingError(
            f"a Hive Metastore sync needs the thrift client of the '{EXTRA}' extra, which is not "
            f"installed here ({e})", extra=EXTRA, key="hoodie.datasource.hive_sync.enable") from e
    return ThriftHiveMetastore, ttypes, TSocket, TTransport, TBinaryProtocol


def _user() -> str | None:
    """The table's owner, as Java's sync sets it: the user this process runs as."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def _endpoints(uris: str) -> list[tuple[str, int]]:
    out = []
    for uri in [u.strip() for u in uris.split(",") if u.strip()]:
        u = urlparse(uri if "://" in uri else f"thrift://{uri}")
        if not u.hostname:
            raise CatalogSyncError(f"metastore URI {uri!r} names no host", catalog=uri,
                                   remedy="set hoodie.datasource.hive_sync.metastore.uris to "
                                          "thrift://HOST:PORT[,thrift://HOST2:PORT]")
        out.append((u.hostname, u.port or 9083))
    if not out:
        raise CatalogSyncError("no metastore URI is set", catalog="",
                               remedy="set hoodie.datasource.hive_sync.metastore.uris")
    return out


class HiveMetastore:
    """One connection to a Hive Metastore (the first of ``uris`` that answers)."""

    def __init__(self, uris: str, *, timeout_ms: int = 20_000):
        self.uris = uris
        self.timeout_ms = timeout_ms
        self.calls = 0
        self._api = thrift_api()
        self.ttypes = self._api[1]
        self._client = None
        self._transport = None

    def connect(self) -> "HiveMetastore":
        service, _, tsocket, ttransport, tbinary = self._api
        errors = []
        for host, port in _endpoints(self.uris):
            sock = tsocket.TSocket(host, port)
            sock.setTimeout(self.timeout_ms)
            transport = ttransport.TBufferedTransport(sock)
            try:
                transport.open()
            except (ttransport.TTransportException, OSError) as e:
                errors.append(f"{host}:{port}: {e}")
                continue
            self._transport = transport
            self._client = service.Client(tbinary.TBinaryProtocol(transport))
            return self
        raise CatalogUnavailableError(
            f"no Hive Metastore answered at {self.uris} within {self.timeout_ms} ms",
            catalog=self.uris, cause="; ".join(errors))

    def close(self) -> None:
        if self._transport is not None:
            try:
                self._transport.close()
            finally:
                self._transport = None
                self._client = None

    def __enter__(self) -> "HiveMetastore":
        return self.connect()

    def __exit__(self, *exc) -> None:
        self.close()

    def call(self, name: str, *args) -> Any:
        """``name(*args)`` on the metastore; its own exceptions (``NoSuchObjectException``,
        ``AlreadyExistsException``, ``MetaException``...) come through as they are, a transport
        failure or timeout as :class:`CatalogUnavailableError`."""
        if self._client is None:
            self.connect()
        _, _, _, ttransport, _ = self._api
        self.calls += 1
        try:
            return getattr(self._client, name)(*args)
        except (ttransport.TTransportException, socket.timeout, OSError, EOFError) as e:
            self.close()
            raise CatalogUnavailableError(
                f"the Hive Metastore at {self.uris} failed during {name} ({type(e).__name__}: {e})",
                catalog=self.uris, cause=f"{type(e).__name__}: {e}") from e

    # -- the calls a sync makes (core/catalog/sync speaks TableDef) ------------------------

    def _raw_table(self, db: str, name: str):
        try:
            return self.call("get_table", db, name)
        except self.ttypes.NoSuchObjectException:
            return None

    def get_table(self, db: str, name: str) -> TableDef | None:
        """The table, or None when it does not exist."""
        t = self._raw_table(db, name)
        if t is None:
            return None
        sd = t.sd
        return TableDef(t.tableName, [(c.name, c.type) for c in sd.cols or []],
                        [(k.name, k.type) for k in t.partitionKeys or []], sd.location,
                        sd.inputFormat, sd.outputFormat, sd.serdeInfo.serializationLib,
                        dict(sd.serdeInfo.parameters or {}), dict(t.parameters or {}), t.tableType, raw=t)

    def _fields(self, cols):
        return [self.ttypes.FieldSchema(name=n, type=ty, comment="") for n, ty in cols]

    def _sd(self, d: TableDef, location: str, cols):
        tt = self.ttypes
        return tt.StorageDescriptor(
            cols=self._fields(cols), location=location, inputFormat=d.input_format,
            outputFormat=d.output_format, compressed=False, numBuckets=0,
            serdeInfo=tt.SerDeInfo(name=None, serializationLib=d.serde_lib, parameters=dict(d.serde_params)),
            bucketCols=[], sortCols=[], parameters={})

    def create_table(self, db: str, d: TableDef) -> bool:
        """Create ``d``; False when it exists already (another sync made it meanwhile)."""
        now = int(time.time())
        t = self.ttypes.Table(tableName=d.name, dbName=db, owner=_user(), createTime=now, lastAccessTime=now,
                              retention=0, sd=self._sd(d, d.location, d.columns),
                              partitionKeys=self._fields(d.partition_keys), parameters=dict(d.params),
                              tableType=d.table_type)
        try:
            self.call("create_table", t)
            return True
        except self.ttypes.AlreadyExistsException:
            return False

    def alter_table(self, db: str, d: TableDef, *, cascade: bool = False) -> None:
        """Write ``d``'s fields over the table it was read from (``alter_table``: the whole
        table, last writer wins; ``cascade``: the partitions' columns too)."""
        t = d.raw
        t.sd.cols = self._fields(d.columns)
        t.sd.location, t.sd.inputFormat, t.sd.outputFormat = d.location, d.input_format, d.output_format
        t.sd.serdeInfo.serializationLib = d.serde_lib
        t.sd.serdeInfo.parameters = dict(d.serde_params)
        t.parameters = dict(d.params)
        if cascade:
            self.call("alter_table_with_environment_context", db, d.name, t,
                      self.ttypes.EnvironmentContext(properties={"CASCADE": "true"}))
        else:
            self.call("alter_table", db, d.name, t)

    def ensure_database(self, db: str, location: str | None = None) -> None:
        try:
            self.call("get_database", db)
            return
        except self.ttypes.NoSuchObjectException:
            pass
        try:
            self.call("create_database", self.ttypes.Database(
                name=db, description="automatically created by hoodie", locationUri=location,
                parameters={}))
        except self.ttypes.AlreadyExistsException:
            pass  # another writer's sync made it meanwhile

    def partitions(self, db: str, table: str) -> list:
        """The metastore's own partition objects (tests read their locations)."""
        return list(self.call("get_partitions", db, table, -1))

    def partition_values(self, db: str, table: str) -> list[tuple[str, ...]]:
        return [tuple(p.values) for p in self.partitions(db, table)]

    def add_partitions(self, db: str, d: TableDef, parts: list[tuple[list[str], str]]) -> None:
        """Add ``(values, location)`` partitions; those that exist already are left as they are
        (idempotent: ``ifNotExists``)."""
        if not parts:
            return
        now = int(time.time())
        objs = [self.ttypes.Partition(values=values, dbName=db, tableName=d.name, createTime=now,
                                      lastAccessTime=now, sd=self._sd(d, location, d.columns), parameters={})
                for values, location in parts]
        self.call("add_partitions_req", self.ttypes.AddPartitionsRequest(
            dbName=db, tblName=d.name, parts=objs, ifNotExists=True, needResult=False))

    def drop_partitions(self, db: str, table: str, values_list: list[list[str]]) -> list[list[str]]:
        """Drop partitions (their files stay: the table is external); those dropped."""
        out = []
        for values in values_list:
            try:
                if self.call("drop_partition", db, table, values, False):
                    out.append(values)
            except self.ttypes.NoSuchObjectException:
                pass
        return out


__all__ = ["HiveMetastore", "thrift_api", "EXTRA"]
