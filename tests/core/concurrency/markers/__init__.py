"""Tests of ``core/concurrency/markers/``, one file per module; the helpers they share."""

from __future__ import annotations

from airflow_hudi_occ.core.table.table import Table

T1 = "20250101000000001"


def make_table(tmp_path, partitioned=True) -> Table:
    return Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"],
                        partition_fields=["p"] if partitioned else [])


def fname(file_id: str, instant: str = T1, token: str = "0-0-0") -> str:
    """A base file name as writers spell it: ``<fileId>_<token>_<instant>.parquet``."""
    return f"{file_id}_{token}_{instant}.parquet"
