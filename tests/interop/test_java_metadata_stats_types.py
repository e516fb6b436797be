"""Column stats of every column type Java indexes, kept by our commits on a table Java wrote at
its defaults with a date, a UTC timestamp, two decimals (one too wide for index version 1),
binary and an int column (issue 32, item 2).

What must hold: our records built from scratch for Java's own commit are Java's bytes (every
type, both index versions: 2 on table version 9, 1 on version 8); after our upsert, Java's
snapshot is exact and its reads with data skipping filtered on the timestamp and on the decimal
are exact (a control with our timestamp stats made wrong drops the row: the filter does prune
with them); Java's next writer adds one deltacommit; Java's metadata checks pass (each file's
records equal Java's stats of its footer, each partition's the aggregate in Java's order).
A filter on the binary column is not read: Java 1.2.0's data skipping fails on one
(``ClassCastException: HeapByteBuffer cannot be cast to [B``) on a table only Java wrote too.
"""

from __future__ import annotations

import datetime
import os
import shutil
from decimal import Decimal

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.java_hudi import MetadataCheck, Read, Write
from airflow_hudi_occ.testing.tables import rows_by_key
from tests.interop.test_java_metadata_stats import (MAINTAIN, SKIPPING, assert_java_metadata_agrees,
                                                    assert_ours_equal_javas, corrupt_our_column_stats)
from tests.interop.test_java_metadata_table import KEYS, metadata_partitions

UTC = datetime.timezone.utc
COLS = ["id", "p", "ts", "day", "at", "amt", "big", "raw", "small"]
META = ["_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key"]
#: Java's columns: every data column under index version 2; version 1 leaves out ``big``
#: (decimal(22, 4) does not fit DecimalWrapper's decimal(30, 15))
INDEXED = {9: META + COLS, 8: META + [c for c in COLS if c != "big"]}


def signed_hex(h: str) -> bytes:
    """Java's ``ByteBuffer`` order of a hex-rendered binary value: signed bytes."""
    return bytes(b ^ 0x80 for b in bytes.fromhex(h))


#: the checks' rendered values in Java's order: decimals by value, binary signed
ORDER = {"amt": Decimal, "big": Decimal, "raw": signed_hex}


def typed(rows) -> pa.Table:
    """``(id, partition, ordering value, n)`` rows, each typed column derived from ``n``
    (``None``: nulls in every typed column)."""
    def col(f, t):
        return pa.array([None if r[3] is None else f(r[3]) for r in rows], t)
    return pa.table({
        "id": pa.array([r[0] for r in rows], pa.int64()), "p": pa.array([r[1] for r in rows], pa.string()),
        "ts": pa.array([r[2] for r in rows], pa.int64()),
        "day": col(lambda n: datetime.date(2026, 1, 1) + datetime.timedelta(days=n), pa.date32()),
        "at": col(lambda n: datetime.datetime(2026, 1, 1, 0, 0, n, 1000 * n, tzinfo=UTC), pa.timestamp("us", tz="UTC")),
        "amt": col(lambda n: Decimal(f"{n - 2}.25"), pa.decimal128(10, 2)),
        "big": col(lambda n: Decimal(f"{n * 1000 - 3}.1234"), pa.decimal128(22, 4)),
        "raw": col(lambda n: bytes([n, 0x80 + n]), pa.binary()),
        "small": col(lambda n: n - 3, pa.int32())})


def _utc(v):
    """Timestamps compared as instants (a reader may hand them back naive, in UTC)."""
    if isinstance(v, datetime.datetime):
        return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)
    return v


def model_of(table: pa.Table) -> dict:
    return {r["id"]: {k: _utc(v) for k, v in r.items()} for r in table.to_pylist()}


def plain(rows: pa.Table) -> dict:
    return {k: {c: _utc(v) for c, v in r.items()} for k, r in rows_by_key(rows, columns=COLS).items()}


@pytest.mark.parametrize("version", [9, pytest.param(8, marks=pytest.mark.slow)])
def test_java_reads_and_filters_through_the_stats_of_every_type_we_keep(tmp_path, java_hudi, version):
    path = str(tmp_path / "t")
    first = typed([(i, "a" if i % 2 else "b", 1, i) for i in range(6)])
    java_hudi.run(Write(path, first, operation="insert", table_version=version, **KEYS))
    assert metadata_partitions(path) == ["column_stats", "files", "partition_stats"]
    assert_ours_equal_javas(path)  # every type, as Java wrote it for its own files

    # ours: an update in a, a new partition c (one row all null); Java's stats are what it
    # computes from our files' footers
    ours = typed([(1, "a", 2, 40), (9, "c", 2, 50), (10, "c", 2, None)])
    ArrowTableWriter(Table.open(path), WriteConfig.from_options(MAINTAIN)).write(ours, "upsert")
    upsert = Table.open(path).timeline().completed()[-1].requested_time
    model = {**model_of(first), **model_of(ours)}

    # the control: our timestamp stats moved a year on: a filter on it must then miss our row
    control = str(tmp_path / "control")
    shutil.copytree(path, control)
    far = 1_830_000_000_000_000  # 2027-12-28, in micros (both index versions wrap a long)
    assert corrupt_our_column_stats(control, upsert, "at", far, far + 1,
                                    wrapper="org.apache.hudi.avro.model.LongWrapper") == 2

    nine_at = "TIMESTAMP '2026-01-01 00:00:50.05'"
    more = typed([(3, "a", 4, 30), (11, "c", 4, 31)])
    snap, by_time, by_amount, wrong, written, after, check = java_hudi.run(
        Read(path), Read(path, options=SKIPPING, where=f"at = {nine_at}"),
        Read(path, options=SKIPPING, where="amt >= 38.00 and big > 39000"),
        Read(control, options=SKIPPING, where=f"at = {nine_at}"),
        Write(path, more, **KEYS), Read(path, options=SKIPPING, where="day >= DATE '2026-01-31' and small > 0"),
        MetadataCheck(path, INDEXED[version]))
    assert plain(snap.rows) == model
    assert plain(by_time.rows) == {9: model[9]}
    assert plain(by_amount.rows) == {1: model[1], 9: model[9]}
    assert wrong.rows.num_rows == 0  # the filter prunes with our stats
    model.update(model_of(more))
    assert plain(after.rows) == {k: model[k] for k in (1, 3, 9, 11)}
    assert plain(read_table(Table.open(path))) == model
    assert mdt_kinds(path, written) == ["deltacommit"]  # Java's next write: no rebuild
    assert_java_metadata_agrees(check.metadata_check(), path, INDEXED[version], ORDER)


def mdt_kinds(path: str, step) -> list[str]:
    """The metadata table's completed actions of Java's write ``step``'s instant."""
    timeline = os.path.join(path, ".hoodie", "metadata", ".hoodie", "timeline")
    names = [n for n in os.listdir(timeline) if n.startswith(step.instant + "_")]
    return sorted(n.rsplit(".", 1)[-1] for n in names)
