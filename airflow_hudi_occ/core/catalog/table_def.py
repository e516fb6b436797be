"""A catalog table as every catalog client hands it to the sync (``core/catalog/sync``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TableDef:
    """A catalog table as both catalogs (the metastore's thrift ``Table``, Glue's ``TableInput``)
    hold it: what a sync compares and writes. ``raw``: the catalog's own object, kept so an
    update changes only these fields and leaves the rest (owner, statistics) as they were."""

    name: str
    columns: list[tuple[str, str]]
    partition_keys: list[tuple[str, str]]
    location: str
    input_format: str
    output_format: str
    serde_lib: str
    serde_params: dict[str, str]
    params: dict[str, str]
    table_type: str = "EXTERNAL_TABLE"
    raw: object = None


__all__ = ["TableDef"]
