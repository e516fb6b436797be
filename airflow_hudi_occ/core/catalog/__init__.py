"""Catalog sync: the table registered in a Hive Metastore (thrift) or AWS Glue after each commit,
as Java Hudi's HiveSyncTool registers it (docs/catalog-sync.md)."""
