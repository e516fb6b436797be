"""Column stats of merge-on-read LOG files with dates, timestamps, decimals and binary, and
Java's string order (issue 32: the log-file types and the UTF-16 order).

A log file's ``column_stats`` record is computed over its records (Java's append handle:
``collectColumnRangeMetadata``), not from a footer: before this, our writers refused a log
file with a logical type among the indexed columns. What must hold, on a merge-on-read table
Java made at its defaults with a date, a UTC timestamp, two decimals (one too wide for index
version 1), binary, an int and a string column:

- our records built from scratch for Java's own deltacommit with log files are Java's bytes
  (index version 2 on table version 9; version 1 on version 8, slow), including the partition
  stats that aggregate a base file and a log file;
- strings: within one log file Java orders by code point (Avro's ``Utf8`` compare), across
  files (a partition's stats) and a footer's row groups by UTF-16 code units
  (``String.compareTo``): the rows mix
  characters beyond the BMP (a surrogate pair, 0xD83D...) with U+E000, where the two orders
  disagree, and the test checks that they do disagree on these values;
- after OUR merge-on-read upsert (log files in two partitions, a base file in a third):
  Java's snapshot and its data-skipping reads filtered on the timestamp, the decimal, the date
  and the string (in a partition where Java's own reads are exact: below) are exact; a control with our timestamp stats made wrong loses the row (the
  filter prunes with our log files' stats); Java's metadata checks pass: every base file's
  record equals Java's stats of its footer, every log file's equals the stats Java computes
  from its records (``getLogFileColumnRangeMetadata``), every partition's the aggregate of its
  latest slices in Java's order; Java's next write adds one deltacommit (no rebuild).

What Java's order costs its own reads: the partition stats' UTF-16 bounds are evaluated by
Spark in code point order, so an equality filter on a string of a partition that mixes U+E000
to U+FFFF with characters beyond the BMP can prune the partition that holds the row, on a
table only Java wrote (the slow test below shows Java dropping it). Our records are Java's
bytes, so the same holds after ours; the default test filters strings where Java is exact.

A local timestamp (Spark's ``TIMESTAMP_NTZ``, ``local-timestamp-micros`` in the log) is proven
on Java's own commit in the slow variant (our writers cannot write into such a table yet).
"""

from __future__ import annotations

import datetime
import os
import shutil
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.format.log_file import LogFileName
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.java_hudi import MetadataCheck, Read, Write
from tests.interop.test_java_metadata_every_action import data_files
from tests.interop.test_java_metadata_stats import (MAINTAIN, SKIPPING, STAT_FIELDS, aggregate,
                                                    assert_file_stats_recorded, assert_ours_equal_javas,
                                                    corrupt_our_column_stats)
from tests.interop.test_java_metadata_stats_actions import latest_slices
from airflow_hudi_occ.testing.tables import rows_by_key
from tests.interop.rows import batch
from tests.interop.test_java_metadata_stats_types import META, mdt_kinds, signed_hex
from tests.interop.test_java_metadata_table import KEYS, metadata_partitions

UTC = datetime.timezone.utc
#: a private-use character (U+E000: UTF-16 0xE000) and one beyond the BMP (U+1F600: UTF-16
#: 0xD83D 0xDE00): code point order puts U+E000 first, UTF-16 order the other
PRIVATE, BEYOND = "\ue000", "\U0001F600"
COLS = ["id", "p", "ts", "v", "day", "at", "amt", "big", "raw", "small"]
#: Java's columns: every data column under index version 2; version 1 leaves out ``big``
INDEXED = {9: META + COLS, 8: META + [c for c in COLS if c != "big"]}


def utf16(s: str) -> bytes:
    return s.encode("utf-16-be")


#: Java's order of the rendered values: strings by UTF-16 units, decimals by value, binary signed
ORDER = {"amt": Decimal, "big": Decimal, "raw": signed_hex, "v": utf16, "p": utf16,
         **{c: utf16 for c in META}}


def as_instant(v):
    """A timestamp compared as an instant (a reader may hand it back naive, in UTC)."""
    if isinstance(v, datetime.datetime):
        return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)
    return v


def plain(table: pa.Table) -> dict:
    """Rows by key, the data columns only, timestamps compared as instants."""
    return {k: {c: as_instant(v) for c, v in r.items()} for k, r in rows_by_key(table, columns=COLS).items()}


def rows(spec, *, local: bool = False) -> pa.Table:
    """``(id, partition, ordering value, n)`` rows, each typed column derived from ``n``
    (``None``: nulls in every typed column); ``local``: a local timestamp column too."""
    def col(f, t):
        return pa.array([None if r[3] is None else f(r[3]) for r in spec], t)
    out = {
        "id": pa.array([r[0] for r in spec], pa.int64()), "p": pa.array([r[1] for r in spec], pa.string()),
        "ts": pa.array([r[2] for r in spec], pa.int64()),
        "v": col(lambda n: (BEYOND if n % 2 else PRIVATE) + str(n), pa.string()),
        "day": col(lambda n: datetime.date(2026, 1, 1) + datetime.timedelta(days=n), pa.date32()),
        "at": col(lambda n: datetime.datetime(2026, 1, 1, 0, 0, n, 1000 * n, tzinfo=UTC), pa.timestamp("us", tz="UTC")),
        "amt": col(lambda n: Decimal(f"{n - 20}.25"), pa.decimal128(10, 2)),
        "big": col(lambda n: Decimal(f"{n * 1000 - 3}.1234"), pa.decimal128(22, 4)),
        # first bytes on both sides of 0x80: Java compares binary signed
        "raw": col(lambda n: bytes([(n * 0x51) & 0xFF, n]), pa.binary()),
        "small": col(lambda n: n - 30, pa.int32())}
    if local:
        out["ntz"] = col(lambda n: datetime.datetime(2026, 2, 1, 0, 0, n, 1000 * n), pa.timestamp("us"))
    return pa.table(out)


#: Java's insert (partition a: ids 1, 3, 5; b: 0, 2, 4) and its upsert, a log file in each
#: partition (a's log: U+E000 and U+1F600 strings, binary from both sides of 0x80, a null row)
FIRST = [(i, "a" if i % 2 else "b", 1, i) for i in range(6)]
JAVA_UPSERT = [(1, "a", 2, 40), (3, "a", 2, 7), (5, "a", 2, None), (2, "b", 2, 12), (4, "b", 2, None)]


def java_merge_on_read_table(java_hudi, path: str, version: int, *, local: bool = False):
    """Java's insert and upsert: base files, then one log file per partition."""
    java_hudi.run(Write(path, rows(FIRST, local=local), operation="insert", table_type="MERGE_ON_READ",
                        table_version=version, **KEYS),
                  Write(path, rows(JAVA_UPSERT, local=local), **KEYS))
    assert metadata_partitions(path) == ["column_stats", "files", "partition_stats"]
    for partition in ("a", "b"):
        assert any(LogFileName.parse(n) for n in os.listdir(os.path.join(path, partition))), partition


def assert_java_metadata_agrees(check: dict, path: str, indexed: list[str]) -> None:
    """Java's metadata reader against Java's own computation from the files: the listing is
    the storage; every base file's records are its footer's stats, every log file's the stats
    Java computes from its records; every partition's the aggregate over its latest slices
    (base files and committed logs) in Java's order (:data:`ORDER`)."""
    table = Table.open(path)
    assert check["files"] == {p: f for p, f in data_files(path).items() if f}
    col_stats = {(s["name"], s["column"]): s for s in check["column_stats"] if not s["deleted"]}
    part_stats = {(s["name"], s["column"]): s for s in check["partition_stats"]}
    for partition, files in check["files"].items():
        computed = {**check["file_stats"].get(partition, {}), **check["log_stats"].get(partition, {})}
        assert sorted(computed) == sorted(files), partition  # Java computed every file's stats
        for name, stats in computed.items():
            assert_file_stats_recorded(col_stats, partition, name, stats, indexed)
        latest = latest_slices(table, files)
        for column in indexed:
            expected = aggregate([s for n in latest for s in computed[n] if s["column"] == column], ORDER.get(column))
            recorded = part_stats.get((partition, column))
            assert recorded is not None, f"no partition_stats record for {partition} {column}"
            assert {k: recorded[k] for k in STAT_FIELDS} == expected, (partition, column)


def assert_the_orders_disagree(check: dict, partition: str) -> None:
    """The string values of ``partition``'s latest files: code point and UTF-16 order give a
    different min (so a record built in the wrong order would not pass)."""
    values = [s[k] for files in (check["file_stats"], check["log_stats"])
              for stats in files.get(partition, {}).values() for s in stats if s["column"] == "v"
              for k in ("min", "max") if s[k] is not None]
    assert min(values) != min(values, key=utf16) and max(values) != max(values, key=utf16), values
    [recorded] = [s for s in check["partition_stats"] if s["name"] == partition and s["column"] == "v"]
    assert recorded["min"] == min(values, key=utf16) and recorded["max"] == max(values, key=utf16)


@pytest.mark.parametrize("version", [9, pytest.param(8, marks=pytest.mark.slow)])
def test_log_files_with_logical_types_keep_javas_stats(tmp_path, java_hudi, version):
    path = str(tmp_path / "t")
    java_merge_on_read_table(java_hudi, path, version)
    # Java's deltacommit with log files: our records for it, from scratch (log files read
    # over their records, partition stats over base + log in UTF-16 order), are Java's bytes
    assert_ours_equal_javas(path)
    model = plain(rows(FIRST))
    model.update(plain(rows(JAVA_UPSERT)))

    # ours: log files in a and b (a timestamp, a decimal, a date and a string to filter on),
    # a base file in a new partition c (one row all null)
    ours = [(1, "a", 3, 50), (2, "b", 3, 33), (9, "c", 3, 45), (10, "c", 3, None)]
    res = MergeOnReadWriter(Table.open(path), WriteConfig.from_options(MAINTAIN)).write(rows(ours), "upsert")
    assert res.instant.action is Action.DELTA_COMMIT
    for partition in ("a", "b"):
        assert any(f"_{res.instant.requested_time}.log." in n for n in os.listdir(os.path.join(path, partition)))
    model.update(plain(rows(ours)))

    # the control: our timestamp stats moved a year on: the filter on it must then miss
    control = str(tmp_path / "control")
    shutil.copytree(path, control)
    far = 1_830_000_000_000_000  # 2027-12-28, in micros (both index versions wrap a long)
    assert corrupt_our_column_stats(control, res.instant.requested_time, "at", far, far + 1,
                                    wrapper="org.apache.hudi.avro.model.LongWrapper") == 3

    at_fifty = "TIMESTAMP '2026-01-01 00:00:50.05'"
    more = rows([(3, "a", 4, 31), (11, "c", 4, 32)])
    snap, by_time, by_amount, by_day_or_text, wrong, check = java_hudi.run(
        Read(path), Read(path, options=SKIPPING, where=f"at = {at_fifty}"),
        Read(path, options=SKIPPING, where="amt = 13.25"),
        Read(path, options=SKIPPING, where=f"day = DATE '2026-02-03' or v = '{BEYOND}45'"),
        Read(control, options=SKIPPING, where=f"at = {at_fifty}"),
        MetadataCheck(path, INDEXED[version]))
    assert plain(snap.rows) == model
    assert plain(by_time.rows) == {1: model[1]}
    assert plain(by_amount.rows) == {2: model[2]}
    assert plain(by_day_or_text.rows) == {2: model[2], 9: model[9]}
    assert wrong.rows.num_rows == 0  # the filter prunes with our log files' stats
    found = check.metadata_check()
    assert_java_metadata_agrees(found, path, INDEXED[version])
    assert_the_orders_disagree(found, "a")

    # Java's next write: one deltacommit on the metadata table, its filtered read exact
    written, after = java_hudi.run(Write(path, more, **KEYS),
                                   Read(path, options=SKIPPING, where="small > 0 and raw is not null"))
    model.update(plain(more))
    assert plain(after.rows) == {k: r for k, r in model.items() if r["small"] is not None and r["small"] > 0}
    assert mdt_kinds(path, written) == ["deltacommit"]  # Java's next write: no rebuild


@pytest.mark.slow
@pytest.mark.parametrize("version", [9, 8])
def test_a_local_timestamp_in_javas_log_files(tmp_path, java_hudi, version):
    """Spark's ``TIMESTAMP_NTZ`` (``local-timestamp-micros`` in the log block): our records for
    Java's deltacommit are Java's bytes (``LOCAL_TIMESTAMP_MICROS`` under version 2, a raw long
    under version 1)."""
    path = str(tmp_path / "t")
    java_merge_on_read_table(java_hudi, path, version, local=True)
    assert_ours_equal_javas(path)


@pytest.mark.slow
def test_javas_own_utf16_partition_bound_prunes_a_string_row(tmp_path, java_hudi):
    """On a table only Java wrote: partition a's files hold U+1F600 1, 3, 5 (the base file) and
    U+E000 40, U+1F600 7 (the log file: its own min and max in code point order); Java's
    partition stats merge them in UTF-16 order to [U+1F600 1, U+1F600 7], which leaves out
    U+E000 40 in either order: Java's read of ``v = U+E000 40`` misses row 1, with data
    skipping asked for and at the reader's defaults, while a filter Java cannot prune with finds
    it. Ours keep Java's bytes (the test above): what Java reads wrongly on its own table, it
    reads wrongly on ours alike."""
    path = str(tmp_path / "t")
    java_merge_on_read_table(java_hudi, path, 9)
    [check] = java_hudi.run(MetadataCheck(path, ["v"]))
    [bound] = [s for s in check.metadata_check()["partition_stats"] if s["name"] == "a"]
    assert (bound["min"], bound["max"]) == (BEYOND + "1", BEYOND + "7")
    skipping, defaults, unpruned = java_hudi.run(
        Read(path, options=SKIPPING, where=f"v = '{PRIVATE}40'"), Read(path, where=f"v = '{PRIVATE}40'"),
        Read(path, where="v like '%40'"))
    assert skipping.rows.num_rows == 0 and defaults.rows.num_rows == 0
    assert plain(unpruned.rows) == {1: plain(rows(JAVA_UPSERT))[1]}


def test_a_footers_row_groups_merge_in_utf16_order_as_javas(tmp_path, java_hudi):
    """A base file of three row groups (Java's writer with a 1 KB parquet block: a row group
    per hundred rows), U+E000 strings in the first, both kinds in the second, U+1F600 ones in
    the third: each row group's min and max are parquet's (code points); Java merges them as
    ``String``s (UTF-16 units), and so do ours: our record for Java's file is Java's bytes,
    and Java's own footer reading gives the same bounds."""
    path = str(tmp_path / "t")
    data = [(i, "a", 1, (PRIVATE if i < 150 else BEYOND) + f"{i:04d}") for i in range(300)]
    small_groups = {"hoodie.parquet.block.size": "1024", "hoodie.parquet.page.size": "1024"}
    _, check = java_hudi.run(Write(path, batch(data), operation="insert", options=small_groups, **KEYS),
                             MetadataCheck(path, ["v"]))
    [name] = [n for n in os.listdir(os.path.join(path, "a")) if n.endswith(".parquet")]
    footer = pq.read_metadata(os.path.join(path, "a", name))
    v = [footer.schema.column(i).path for i in range(len(footer.schema))].index("v")
    groups = [footer.row_group(g).column(v).statistics for g in range(footer.num_row_groups)]
    assert len(groups) >= 2
    lows, highs = [g.min for g in groups], [g.max for g in groups]
    assert min(lows) != min(lows, key=utf16) and max(highs) != max(highs, key=utf16)  # the orders disagree
    [java_reads] = [s for s in check.metadata_check()["file_stats"]["a"][name]]
    assert (java_reads["min"], java_reads["max"]) == (min(lows, key=utf16), max(highs, key=utf16))
    assert_ours_equal_javas(path)
