"""A table's record merge mode, as a write's options ask for it and as the table records it.

Hudi keeps how a table's records merge in ``hoodie.properties`` (``hoodie.record.merge.mode``,
written when the table is created; older tables by their payload class): EVENT_TIME_ORDERING,
the larger ordering (precombine) value wins, or COMMIT_TIME_ORDERING, the later write wins.
The merge reads it through ``TableConfig.ordering_field`` (core/commit/merge.py).

What Java Hudi 1.2 does with a write's options (measured, tests/core/table/test_merge_mode.py):
the write key ``hoodie.write.record.merge.mode`` and the payload class set a new table's mode;
on an existing table of another mode Java takes the write key without a word (and merges by the
table's mode) and a payload class of the other mode (and merges that write by it, so the
table's declared mode no longer says how its records merged). The table key
``hoodie.record.merge.mode`` Java ignores when it creates the table, and refuses on a later
write whose value differs ("Config conflict"). Here every spelling sets a new table's mode, and
every spelling that differs from an existing table's mode is refused before any instant exists
(``write_guard``): a write must not merge one way while the table says another.
"""

from __future__ import annotations

from airflow_hudi_occ.core.config import RECORD_MERGE_MODE, RecordMergeMode
from airflow_hudi_occ.core.errors import ConfigError


def creation_properties(mode: RecordMergeMode | None) -> dict[str, str]:
    """The ``hoodie.properties`` entries a new table takes from the mode a write asks for
    (nothing when it asks for none: ``TableConfig.for_new_table`` infers it from the ordering
    field, as Hudi does). EVENT_TIME_ORDERING without an ordering field is recorded as asked,
    as Java records it (every record then orders alike, so the later write wins)."""
    return {} if mode is None else {RECORD_MERGE_MODE.key: mode.value}


def require_implemented(table) -> RecordMergeMode:
    """The table's merge mode; a mode this project does not implement (CUSTOM, a Java merger)
    raises ``ConfigError`` naming the table. Writers call it before their instant exists."""
    return table.config.merge_mode


def check_merge_mode(table, config) -> None:
    """Refuse a write whose options ask for a merge mode other than the table's (``config``: a
    WriteConfig; ``merge_mode`` None asks for nothing: a clean or an archival need not know)."""
    wanted = config.merge_mode
    if wanted is None:
        return
    have = table.config.merge_mode
    if wanted is not have:
        raise ConfigError(
            f"the write asks for {wanted.value} but table {table.name} merges its records by "
            f"{have.value} (hoodie.record.merge.mode in its hoodie.properties); every writer of a "
            "table must merge alike, so nothing was written",
            key=RECORD_MERGE_MODE.key, value=wanted.value,
            remedy=f"drop hoodie.record.merge.mode / hoodie.datasource.write.payload.class from the "
                   f"options (the table's {have.value} applies), or write to a new table")


__all__ = ["creation_properties", "check_merge_mode", "require_implemented"]
