"""Which table version a write produces, and the upgrade from version 8 to 9.

Versions 8 (Hudi 1.0.x) and 9 (Hudi 1.1+) share the timeline layout, the Avro commit metadata
and the file names; Hudi's ``EightToNineUpgradeHandler`` only changes ``hoodie.properties``:
the precombine field becomes ``hoodie.table.ordering.fields`` and a built-in payload class moves
to ``hoodie.table.legacy.payload.class`` (with the merge mode it implies). So a writer of
either version writes the same files, and the upgrade is one properties change under the lock.

Hudi 1.1 defaults ``hoodie.write.table.version`` to 9 and upgrades every older table it writes
(``hoodie.write.auto.upgrade``=true). This project leaves a table at its version unless the
writer asks for a higher one: a silent upgrade locks out Hudi 1.0.x readers and writers of a
shared table, which a writer of ours should not decide alone. Downgrades are Hudi's tool's job.
"""

from __future__ import annotations

import logging

from airflow_hudi_occ.core.errors import UnsupportedTableVersionError

log = logging.getLogger(__name__)

PRECOMBINE_KEY = "hoodie.table.precombine.field"
ORDERING_KEY = "hoodie.table.ordering.fields"
PAYLOAD_KEY = "hoodie.compaction.payload.class"
LEGACY_PAYLOAD_KEY = "hoodie.table.legacy.payload.class"
MERGE_MODE_KEY = "hoodie.record.merge.mode"
MERGE_STRATEGY_KEY = "hoodie.record.merge.strategy.id"

_HUDI = "org.apache.hudi.common.model."
#: payload classes whose meaning v9 carries as a merge mode (Hudi's PAYLOAD_CLASSES_TO_HANDLE)
BUILTIN_PAYLOADS = {_HUDI + n for n in (
    "AWSDmsAvroPayload", "DefaultHoodieRecordPayload", "EventTimeAvroPayload",
    "debezium.MySqlDebeziumAvroPayload", "OverwriteNonDefaultsWithLatestAvroPayload",
    "OverwriteWithLatestAvroPayload", "PartialUpdateAvroPayload",
    "debezium.PostgresDebeziumAvroPayload")}
EVENT_TIME_STRATEGY = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
COMMIT_TIME_STRATEGY = "ce9acb64-bde0-424c-9b91-f6ebba25356d"
#: the payloads this project's merge (latest by ordering field, or by commit) stands for;
#: any other payload or a custom merger carries semantics this writer does not apply
_UPGRADABLE_PAYLOADS = {_HUDI + "DefaultHoodieRecordPayload", _HUDI + "EventTimeAvroPayload",
                        _HUDI + "OverwriteWithLatestAvroPayload"}


def nine_properties(props: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """(updates, removals) that make version 8 properties version 9, as Hudi's handler does
    for the payloads this writer supports."""
    updates = {"hoodie.table.version": "9"}
    removals: list[str] = []
    payload = props.get(PAYLOAD_KEY, "")
    if payload:
        if payload not in _UPGRADABLE_PAYLOADS:
            raise UnsupportedTableVersionError(
                f"the table's payload class {payload} has merge semantics this writer does not "
                "apply, so it cannot upgrade the table to version 9",
                version=8, remedy="upgrade it with Java Hudi (any write with Hudi 1.1+), or write "
                                  "it as version 8 (leave hoodie.write.table.version unset)")
        updates[LEGACY_PAYLOAD_KEY] = payload
        removals.append(PAYLOAD_KEY)
        if payload == _HUDI + "EventTimeAvroPayload":
            updates[MERGE_MODE_KEY] = "EVENT_TIME_ORDERING"
            updates[MERGE_STRATEGY_KEY] = EVENT_TIME_STRATEGY
    ordering = props.get(PRECOMBINE_KEY)
    if ordering:
        updates[ORDERING_KEY] = ordering
        removals.append(PRECOMBINE_KEY)
    return updates, removals


def ensure_write_version(table, wanted: int | None, auto_upgrade: bool) -> int:
    """Bring the table to the version the writer asks for (``None``: keep it); the caller holds
    the table lock and has reloaded the properties. Returns the version written."""
    have = table.config.version
    if wanted is None or wanted == have:
        return have
    if wanted < have:
        raise UnsupportedTableVersionError(
            f"table {table.name} is version {have}; hoodie.write.table.version={wanted} asks for "
            "a downgrade, which this writer does not do", base_path=table.base_uri, version=have,
            remedy=f"leave hoodie.write.table.version unset (writes stay version {have}), or "
                   "downgrade the table with Hudi's CLI first")
    if not auto_upgrade:
        raise UnsupportedTableVersionError(
            f"table {table.name} is version {have} and hoodie.write.table.version={wanted}, but "
            "hoodie.write.auto.upgrade=false", base_path=table.base_uri, version=have,
            remedy="set hoodie.write.auto.upgrade=true to upgrade the table, or leave "
                   "hoodie.write.table.version unset")
    updates, removals = nine_properties(table.config.properties)
    table.update_properties(updates, removals)
    log.warning("upgraded table %s at %s from version %d to %d (hoodie.write.table.version); "
                "Hudi 1.0.x can no longer read or write it", table.name, table.base_uri, have, wanted)
    return wanted


__all__ = ["ensure_write_version", "nine_properties"]
