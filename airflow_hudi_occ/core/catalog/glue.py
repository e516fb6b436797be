"""AWS Glue Data Catalog as the sync's second target (``hoodie.datasource.hive_sync.mode=glue``
or ``hoodie.meta.sync.client.tool.class=org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool``).

The same tables, columns, formats, serde and table properties as the Hive Metastore sync
(``core/catalog/sync`` writes :class:`~airflow_hudi_occ.core.catalog.table_def.TableDef`), through
boto3's ``glue`` client (the ``glue`` extra; imported only when a Glue sync runs). Region,
credentials and endpoint come from boto3's usual sources (``AWS_REGION``, ``AWS_PROFILE``,
``AWS_ENDPOINT_URL_GLUE``...). Every call is bounded by ``hoodie.occ.meta.sync.timeout.ms``
(connect and read) with botocore's standard retries (3 attempts).

Glue differs from the metastore where the sync notices: ``update_table`` takes a ``TableInput``
(the read-only fields of a read table are dropped), partitions are added 100 and dropped 25 per
call, and an existing partition comes back as an error entry, which ``ifNotExists`` semantics
ignore. docs/catalog-sync.md says what the tests (moto's Glue, no AWS) can and cannot prove.
"""

from __future__ import annotations

from airflow_hudi_occ.core.catalog.table_def import TableDef
from airflow_hudi_occ.core.config import MetaSyncConfig
from airflow_hudi_occ.core.errors import CatalogClientMissingError, CatalogSyncError, CatalogUnavailableError

EXTRA = "glue"
#: the fields of a TableInput (get_table returns more, which update_table refuses)
_TABLE_INPUT = ("Name", "Description", "Owner", "LastAccessTime", "LastAnalyzedTime", "Retention",
                "StorageDescriptor", "PartitionKeys", "ViewOriginalText", "ViewExpandedText", "TableType",
                "Parameters", "TargetTable")


def _boto():
    try:
        import boto3
        import botocore.config
        import botocore.exceptions
    except ImportError as e:
        raise CatalogClientMissingError(f"a Glue sync needs boto3 (the '{EXTRA}' extra), which is not "
                                        f"installed here ({e})", extra=EXTRA,
                                        key="hoodie.datasource.hive_sync.mode") from e
    return boto3, botocore.config, botocore.exceptions


class GlueCatalog:
    """The Glue Data Catalog of the account and region boto3 resolves."""

    def __init__(self, cfg: MetaSyncConfig, *, client=None):
        boto3, config, self._exc = _boto()
        secs = cfg.timeout_ms / 1000
        self._client = client or boto3.client("glue", config=config.Config(
            connect_timeout=secs, read_timeout=secs, retries={"max_attempts": 3, "mode": "standard"}))
        self.calls = 0

    @staticmethod
    def check_client() -> None:
        """Raise :class:`CatalogClientMissingError` when boto3 is not installed."""
        _boto()

    def __enter__(self) -> "GlueCatalog":
        return self

    def __exit__(self, *exc) -> None:
        pass

    def _call(self, name: str, **kw):
        self.calls += 1
        try:
            return getattr(self._client, name)(**kw)
        except (self._exc.EndpointConnectionError, self._exc.ConnectTimeoutError,
                self._exc.ReadTimeoutError, self._exc.ConnectionClosedError) as e:
            raise CatalogUnavailableError(f"AWS Glue did not answer during {name} ({e})", catalog="glue",
                                          cause=f"{type(e).__name__}: {e}") from e
        except self._exc.NoCredentialsError as e:
            raise CatalogSyncError(f"AWS Glue: no credentials ({e})", catalog="glue", cause=str(e),
                                   remedy="give the writers AWS credentials (environment, profile or "
                                          "instance role) with glue:GetTable/CreateTable/UpdateTable/"
                                          "BatchCreatePartition/BatchDeletePartition") from e

    def _code(self, e) -> str:
        return e.response.get("Error", {}).get("Code", "") if hasattr(e, "response") else ""

    # -- what core/catalog/sync calls ---------------------------------------------------------

    def ensure_database(self, db: str) -> None:
        try:
            self._call("get_database", Name=db)
            return
        except self._exc.ClientError as e:
            if self._code(e) != "EntityNotFoundException":
                raise
        try:
            self._call("create_database", DatabaseInput={"Name": db, "Description": "automatically created by hoodie"})
        except self._exc.ClientError as e:
            if self._code(e) != "AlreadyExistsException":
                raise

    def get_table(self, db: str, name: str) -> TableDef | None:
        try:
            t = self._call("get_table", DatabaseName=db, Name=name)["Table"]
        except self._exc.ClientError as e:
            if self._code(e) == "EntityNotFoundException":
                return None
            raise
        sd = t.get("StorageDescriptor") or {}
        serde = sd.get("SerdeInfo") or {}
        return TableDef(t["Name"], [(c["Name"], c["Type"]) for c in sd.get("Columns") or []],
                        [(c["Name"], c["Type"]) for c in t.get("PartitionKeys") or []], sd.get("Location", ""),
                        sd.get("InputFormat", ""), sd.get("OutputFormat", ""), serde.get("SerializationLibrary", ""),
                        dict(serde.get("Parameters") or {}), dict(t.get("Parameters") or {}),
                        t.get("TableType", ""), raw=t)

    def _sd(self, d: TableDef, location: str) -> dict:
        return {"Columns": [{"Name": n, "Type": ty} for n, ty in d.columns], "Location": location,
                "InputFormat": d.input_format, "OutputFormat": d.output_format, "Compressed": False,
                "NumberOfBuckets": -1, "SerdeInfo": {"SerializationLibrary": d.serde_lib,
                                                     "Parameters": dict(d.serde_params)},
                "BucketColumns": [], "SortColumns": [], "Parameters": {}}

    def _input(self, d: TableDef) -> dict:
        base = {k: v for k, v in (d.raw or {}).items() if k in _TABLE_INPUT}
        base.update({"Name": d.name, "StorageDescriptor": self._sd(d, d.location),
                     "PartitionKeys": [{"Name": n, "Type": ty} for n, ty in d.partition_keys],
                     "TableType": d.table_type, "Parameters": dict(d.params)})
        return base

    def create_table(self, db: str, d: TableDef) -> bool:
        try:
            self._call("create_table", DatabaseName=db, TableInput=self._input(d))
            return True
        except self._exc.ClientError as e:
            if self._code(e) == "AlreadyExistsException":
                return False
            raise

    def alter_table(self, db: str, d: TableDef, *, cascade: bool = False) -> None:
        # Glue keeps each partition's own storage descriptor; like Java's Glue sync, the
        # partitions keep theirs (new partitions take the table's columns).
        self._call("update_table", DatabaseName=db, TableInput=self._input(d))

    def partition_values(self, db: str, table: str) -> list[tuple[str, ...]]:
        out, token = [], None
        while True:
            kw = {"DatabaseName": db, "TableName": table}
            if token:
                kw["NextToken"] = token
            page = self._call("get_partitions", **kw)
            out += [tuple(p["Values"]) for p in page.get("Partitions") or []]
            token = page.get("NextToken")
            if not token:
                return out

    def add_partitions(self, db: str, d: TableDef, parts: list[tuple[list[str], str]]) -> None:
        for i in range(0, len(parts), 100):
            res = self._call("batch_create_partition", DatabaseName=db, TableName=d.name, PartitionInputList=[
                {"Values": values, "StorageDescriptor": self._sd(d, location)} for values, location in parts[i:i + 100]])
            bad = [e for e in res.get("Errors") or []
                   if (e.get("ErrorDetail") or {}).get("ErrorCode") != "AlreadyExistsException"]
            if bad:
                raise CatalogSyncError(f"AWS Glue refused partitions of {db}.{d.name}: {bad[:3]}", catalog="glue",
                                       cause=str(bad[0]))

    def drop_partitions(self, db: str, table: str, values_list: list[list[str]]) -> list[list[str]]:
        dropped = []
        for i in range(0, len(values_list), 25):
            chunk = values_list[i:i + 25]
            res = self._call("batch_delete_partition", DatabaseName=db, TableName=table,
                             PartitionsToDelete=[{"Values": v} for v in chunk])
            failed = {tuple(e["PartitionValues"]) for e in res.get("Errors") or []}
            dropped += [v for v in chunk if tuple(v) not in failed]
        return dropped


__all__ = ["GlueCatalog", "EXTRA"]
