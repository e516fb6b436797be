"""Generated batches through the core writers (issue 40's second round), held to one oracle.

A generated table (copy-on-write or merge-on-read, keyed by one column or two, partitioned or
not, with or without an ordering field) receives a sequence of batches (insert or upsert,
then upserts and deletes, so that merges with stored rows happen). Each batch must either

- commit exactly the model: one record per key as Java Hudi spells it (``String.valueOf``:
  ``NaN``, ``Infinity``, ``-Infinity``, ``-0.0`` apart from ``0.0``, ``1.0E20``; a decimal
  as ``BigDecimal.toString``, a date as ``LocalDate.toString``; a timestamp as the library
  spells it, which is not Java's: reported), the winner of each key chosen as Hudi's
  ``EVENT_TIME_ORDERING`` does (:class:`Model`: copy-on-write merges, merge-on-read folds
  its log records as Java's file-group reader), read back by hudi-rs (the independent
  reader, ``testing/tables.hudi_read``) with every column's value; or
- be refused with a ``HudiOccError``, leaving the table's parent folder byte-identical
  (``tree_snapshot``: every file's bytes and every folder);

never a raw exception, never a duplicate key. Whether a batch is refused is not left to the
writer: the generator knows which inputs must be refused (a partition value that would leave
or break the table, a column name Avro cannot hold, two columns of one name, a table path
with invisible characters at its ends, a date no key text can spell, a null ordering value in
an insert or upsert) and every other batch
must commit, so a writer that refused everything would fail too.

What is generated: key columns of type string, int64, double and float (with NaN,
infinities and signed zeros), decimal, date and timestamp with and without a zone; non-key
columns of binary, nested and null structs, decimals, dates, timestamps; unicode,
duplicate and ``_hoodie_*`` column names; empty, unicode, nested (``a/b``), huge (a 255-byte
segment; 3,000 characters of segments) and hostile partition values; table paths with
whitespace and control characters.

The default run executes a bounded number of examples (:data:`DEFAULT_EXAMPLES`, derandomized:
the same examples every run) and the explicit :data:`EXAMPLES` (issue 40's cases 1, 4, 5 and
6, fixed on their own branches, and what this test found); ``HUDI_OCC_SLOW=1`` runs
:data:`SLOW_EXAMPLES` random ones and reads a sample of the finished tables with Java Hudi's
own reader too, printing how many examples ran. docs/hostile-input.md ("Generated batches")
lists what it found.
"""

from __future__ import annotations

import datetime
import decimal
import math
import os
import re
import shutil
import tempfile
import unicodedata
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, event, example, given, note, settings
from hypothesis import strategies as st

from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import HudiOccError
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, tree_snapshot

DEFAULT_EXAMPLES = 250
SLOW_EXAMPLES = 2500
#: tables of the slow run read again by Java Hudi (one JVM reads them all at the end)
JAVA_SAMPLE = 6

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
UTC = datetime.timezone.utc
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)


# -- Java's spelling of a key --------------------------------------------------------------

def java_floating(x: float, *, single: bool = False) -> str:
    """``Double.toString`` (``Float.toString`` with ``single``): the shortest digits that
    identify the value (Python's ``repr``, numpy's for float32), plain between 10^-3 and 10^7,
    else ``d.dddE<n>``; at least one digit after the point."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    shortest = str(np.float32(x)) if single else repr(x)
    if len(decimal.Decimal(shortest).normalize().as_tuple().digits) == 1:
        # one digit would do: Java prints the two-digit decimal closest to the value
        # (Double.MIN_VALUE is 4.9E-324, not 5.0E-324)
        shortest = format(decimal.Decimal(float(np.float32(x)) if single else x), ".1e")
    sign, digits, exp = decimal.Decimal(shortest).as_tuple()
    text = "".join(map(str, digits))
    point = len(text) - 1 + exp  # the decimal exponent of the first digit
    text = text.rstrip("0") or "0"
    s = "-" if sign else ""
    if 1e-3 <= abs(x) < 1e7:
        if point >= 0:
            whole, frac = text[:point + 1].ljust(point + 1, "0"), text[point + 1:]
        else:
            whole, frac = "0", "0" * (-point - 1) + text
        return f"{s}{whole}.{frac or '0'}"
    return f"{s}{text[0]}.{text[1:] or '0'}E{point}"


def test_java_floating_spells_as_java():
    """The oracle's own spelling, against values Java 17 printed (``Double.toString``,
    ``Float.toString``)."""
    cases = [(math.nan, "NaN"), (math.inf, "Infinity"), (-math.inf, "-Infinity"), (-0.0, "-0.0"),
             (0.0, "0.0"), (1e20, "1.0E20"), (1e-5, "1.0E-5"), (1e7, "1.0E7"), (9999999.0, "9999999.0"),
             (0.001, "0.001"), (1.0, "1.0"), (-1.5, "-1.5"), (123456.789, "123456.789"),
             (1.2345e-4, "1.2345E-4"), (5e-324, "4.9E-324"), (100.0, "100.0"), (1e23, "1.0E23"),
             (1.7976931348623157e308, "1.7976931348623157E308")]
    assert [(x, java_floating(x)) for x, _ in cases] == cases
    single = [(0.1, "0.1"), (1e20, "1.0E20"), (3.4028234663852886e38, "3.4028235E38"),
              (1.401298464324817e-45, "1.4E-45"), (-0.0, "-0.0"), (16777216.0, "1.6777216E7")]
    assert [(x, java_floating(x, single=True)) for x, _ in single] == single


# -- what a batch is made of ---------------------------------------------------------------

@dataclass(frozen=True)
class KeyType:
    name: str
    arrow: pa.DataType
    values: st.SearchStrategy
    #: Java's key text of one value (None: no text exists: the batch must be refused)
    spell: object


def _date_text(v) -> str | None:
    return v.isoformat() if isinstance(v, datetime.date) else None


def _timestamp_identity(v: datetime.datetime) -> str:
    """Java's key text of a timestamp (the Avro route of Hudi's key generators, without
    ``consistent.logical.timestamp``): the microseconds since the epoch."""
    aware = v if v.tzinfo is not None else v.replace(tzinfo=UTC)
    return str((aware - EPOCH) // datetime.timedelta(microseconds=1))


def _library_text(arrow_type: pa.DataType):
    """The library's key text of a value of ``arrow_type``: ``str()`` of the value pyarrow
    hands back. Used for timestamps only, whose Java spelling (:func:`_timestamp_identity`)
    the library does not follow (reported in docs/hostile-input.md; strict xfail
    :func:`test_timestamp_keys_are_spelled_as_java_does`): both name the same records (one text
    per instant in a column of one zone), so the merges are checked all the same."""
    def spell(v):
        return str(pa.array([v], arrow_type).to_pylist()[0])
    return spell


def _decimal_text(arrow_type: pa.DataType):
    """``BigDecimal.toString`` of the column's value (its scale is the column's): Python's
    ``str(Decimal)`` follows the same rule (plain unless the exponent is positive or the
    adjusted exponent is below -6)."""
    def spell(v):
        return str(pa.array([v], arrow_type).to_pylist()[0])
    return spell


FLOATS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e20, -1e20, 1e-5, 1e7, 0.001, 1.0, 0.1, -2.5]
#: days since the epoch of dates past 9999-12-31 (and before year 1): a date32 holds them,
#: Python's ``date`` does not
FAR_DAYS = [2932897, 3000000, -719163, -800000]
#: microseconds since the epoch past 9999-12-31 and before year 1
FAR_MICROS = [253402300800000000, 300000000000000000, -62135596800000001, -70000000000000000]

KEY_TYPES = [
    KeyType("string", pa.string(), st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]),
                                           min_size=1, max_size=5), str),
    KeyType("int64", pa.int64(), st.integers(-2 ** 63, 2 ** 63 - 1) | st.integers(-3, 3), str),
    KeyType("double", pa.float64(), st.sampled_from(FLOATS) | st.floats(), java_floating),
    KeyType("float", pa.float32(), st.sampled_from(FLOATS) | st.floats(width=32),
            lambda v: java_floating(v, single=True)),
    KeyType("decimal", pa.decimal128(20, 4),
            st.decimals(min_value=-10 ** 12, max_value=10 ** 12, places=4, allow_nan=False),
            _decimal_text(pa.decimal128(20, 4))),
    KeyType("date", pa.date32(), st.dates(), _date_text),
    KeyType("timestamp", pa.timestamp("us"),
            st.datetimes(datetime.datetime(1900, 1, 1), datetime.datetime(2200, 1, 1)),
            _library_text(pa.timestamp("us"))),
    KeyType("timestamp_tz", pa.timestamp("us", tz="UTC"),
            st.datetimes(datetime.datetime(1900, 1, 1), datetime.datetime(2200, 1, 1), timezones=st.just(UTC)),
            _library_text(pa.timestamp("us", tz="UTC"))),
]
KEY_TYPES_BY_NAME = {k.name: k for k in KEY_TYPES}

#: partition values and their partition paths; then values whose batch must be refused
GOOD_PARTS = [("d1", "d1"), ("", DEFAULT_PARTITION), (None, DEFAULT_PARTITION),
              ("2024/01/02", "2024/01/02"), ("é 中文 🙂", "é 中文 🙂"), ("a=b%c:d*?", "a=b%c:d*?"),
              (" sp ace ", " sp ace "), (DEFAULT_PARTITION, DEFAULT_PARTITION),
              ("x" * 255, "x" * 255), ("/".join(["p" * 199] * 15), "/".join(["p" * 199] * 15))]
BAD_PARTS = ["..", "../../escaped", "a//b", "/etc", "tab\there", "line\nbreak", "nul\x00",
             "back\\slash", "y" * 300, "é" * 128]
#: issue 40 case 4 (fixed on another branch): a value far over the path limit holding '/'
LONG_SLASHED = "ab/" * 3400 + "ab"

#: extra (non-key) columns: a name and an Arrow type with a value strategy
STRUCT = pa.struct([("x", pa.int64()), ("y", pa.string()),
                    ("inner", pa.struct([("z", pa.float64()), ("w", pa.binary())]))])


def _extra_values(kind: str, far: bool) -> st.SearchStrategy:
    values = EXTRA_COLUMNS[kind][1]
    if far and kind == "date":
        return values | st.sampled_from(FAR_DAYS)
    if far and kind == "timestamp":
        return values | st.sampled_from(FAR_MICROS)
    return values


def _struct_values():
    inner = st.none() | st.fixed_dictionaries({"z": st.none() | st.floats(), "w": st.none() | st.binary(max_size=4)})
    return st.none() | st.fixed_dictionaries({"x": st.none() | st.integers(-2 ** 63, 2 ** 63 - 1),
                                              "y": st.none() | st.text(max_size=4), "inner": inner})


EXTRA_COLUMNS = {
    "binary": (pa.binary(), st.none() | st.binary(max_size=6)),
    "struct": (STRUCT, _struct_values()),
    "list": (pa.list_(pa.struct([("a", pa.int32())])),
             st.none() | st.lists(st.none() | st.fixed_dictionaries({"a": st.none() | st.integers(-2 ** 31, 2 ** 31 - 1)}),
                                  max_size=3)),
    "decimal": (pa.decimal128(38, 10), st.none() | st.decimals(min_value=-10 ** 20, max_value=10 ** 20, places=10,
                                                               allow_nan=False)),
    "date": (pa.date32(), st.none() | st.dates()),
    "timestamp": (pa.timestamp("us"), st.none() | st.datetimes()),
    "timestamp_tz": (pa.timestamp("us", tz="Asia/Kolkata"),
                     st.none() | st.datetimes(datetime.datetime(1, 1, 2), datetime.datetime(9999, 12, 30),
                                              timezones=st.just(UTC))),
    "double": (pa.float64(), st.none() | st.floats()),
}

#: column names Avro takes (the specification's rule, which hudi-rs holds to)
GOOD_NAMES = ["c", "_x1", "Upper_9", "x" * 100]
#: names Avro refuses: refused before the instant with issue 40 case 6 (fixed on another
#: branch; before, a space or a dot was committed and hudi-rs could not read the table, "Invalid
#: field name"; Java Hudi refuses "a b" itself and takes unicode letters, hudi-rs does not)
BAD_NAMES = ["a b", "x.y", "1abc", "a-b", "🙂", "tab\tname", "", "é", "中文", "naïve_ts"]
#: case 6 too: a name twice ("v" is the batch's own), or a Hudi meta column's (dropped from a
#: batch as Java Hudi drops it, or refused: either leaves the table right)
CLASHING_NAMES = ["v", "_hoodie_record_key", "_hoodie_commit_time"]
AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: table folder names: fine ones, and issue 40 case 5's (refused on another branch)
GOOD_TABLE_NAMES = ["t", "t b", "é中文", "t%20x", "t=1"]
INVISIBLE_TABLE_NAMES = ["t ", " t", "t\t", "t\n", "t\x01x", "\tt"]


@dataclass
class Scenario:
    kind: str  # "cow" or "mor"
    table_name: str
    key: KeyType
    composite: bool
    partitioned: bool
    precombine: bool
    extra: list[tuple[str, str]]  # (column name, EXTRA_COLUMNS kind)
    keys: list  # the key pool: (value, second key part or None)
    parts: list  # per key: its partition value
    batches: list  # (operation, [rows]); a row: (key index, ts, {extra name: value})

    # -- what must be refused --------------------------------------------------------------

    def column_names(self) -> list[str]:
        names = list(self.key_fields) + (["day"] if self.partitioned else []) + ["ts", "v"]
        return names + [n for n, _ in self.extra]

    @property
    def key_fields(self) -> list[str]:
        return ["k", "k2"] if self.composite else ["k"]

    def refused_table(self) -> str | None:
        n = self.table_name
        if n != n.strip() or any(unicodedata.category(c) == "Cc" for c in n):
            return "table path with invisible characters"
        return None

    def refused_schema(self) -> str | None:
        names = self.column_names()
        if len(set(names)) != len(names):
            return "a column name twice"
        bad = [n for n in names if not n.startswith("_hoodie_") and not AVRO_NAME.fullmatch(n)]
        return f"column names Avro cannot hold: {bad!r}" if bad else None

    def may_be_refused(self) -> bool:
        """A batch holding a meta column (once) may be refused, or committed without it."""
        return any(n.startswith("_hoodie_") for n in self.column_names())

    def refused_batch(self, op: str, rows) -> str | None:
        why = self.refused_schema()
        if why:
            return why
        temporal = [n for n, kind in self.extra if kind in ("date", "timestamp")]
        if self.kind == "mor" and op != "delete" and any(_far(r[2].get(n)) for r in rows for n in temporal):
            return "a date past year 9999 in a merge-on-read log record"
        if self.precombine and op != "delete" and any(ts is None for _, ts, _ in rows):
            # InvalidOrderingValueError: every write that combines compares ordering values
            return "a null ordering value"
        for i, _, _ in rows:
            if self.spelled(i) is None:
                return f"key {self.keys[i][0]!r} has no key text"
            if self.partitioned and self.part_path(i) is None:
                return f"partition value {self.parts[i]!r}"
        return None

    # -- the model ---------------------------------------------------------------------------

    def identity(self, i: int) -> tuple[str, str]:
        """A record's identity: its partition path and Java's record key (the simple index is
        per partition)."""
        return (self.part_path(i) if self.partitioned else "", self.spelled(i))

    def spelled(self, i: int) -> str | None:
        """Java's record key of key ``i``."""
        value, second = self.keys[i]
        text = self.key.spell(value)
        if text is None or not self.composite:
            return text
        return f"k:{text},k2:{second}"

    def part_path(self, i: int) -> str | None:
        value = self.parts[i]
        return dict((v, p) for v, p in GOOD_PARTS).get(value) if value not in BAD_PARTS + [LONG_SLASHED] else None

    def known_issue(self) -> str | None:
        """Issue 40's cases fixed on other branches. ``HUDI_OCC_PROP_SKIP_KNOWN=1`` (off by
        default) leaves them out, to look for new failures on a checkout without those fixes."""
        if self.key.name in ("double", "float"):
            return "case 1: float keys"
        if self.partitioned and LONG_SLASHED in self.parts:
            return "case 4: a long partition value with '/'"
        if self.refused_table():
            return "case 5: invisible characters in the table path"
        if self.refused_schema():
            return "case 6: a column name twice or one Avro cannot hold"
        return None


@st.composite
def scenarios(draw) -> Scenario:
    key = draw(st.sampled_from(KEY_TYPES))
    kind = draw(st.sampled_from(["cow", "mor"]))
    composite = draw(st.booleans())
    n_keys = draw(st.integers(1, 6))
    # now and then (one example in four) a date Python cannot hold, as stored integers
    far = draw(st.integers(0, 3)) == 0
    key_values = key.values | st.sampled_from(FAR_DAYS) if far and key.name == "date" else key.values
    values = draw(st.lists(key_values, min_size=n_keys, max_size=n_keys))
    seconds = draw(st.lists(st.sampled_from(["a", "b,c", "中", " "]), min_size=n_keys, max_size=n_keys))
    keys = list(zip(values, seconds if composite else [None] * n_keys))
    partitioned = draw(st.booleans())
    # a key keeps its partition (the simple index is per partition: one key, one record)
    part_pool = ([v for v, _ in GOOD_PARTS] + BAD_PARTS + [LONG_SLASHED]) if partitioned else [None]
    bad_weight = draw(st.integers(0, 3))  # how often a hostile value is drawn
    part_st = st.sampled_from([v for v, _ in GOOD_PARTS]) if bad_weight else st.sampled_from(part_pool)
    parts = draw(st.lists(part_st, min_size=n_keys, max_size=n_keys))
    extra_kinds = draw(st.lists(st.sampled_from(sorted(EXTRA_COLUMNS)), max_size=3, unique=True))
    names = draw(st.lists(st.sampled_from(GOOD_NAMES), min_size=len(extra_kinds), max_size=len(extra_kinds),
                          unique=True))
    if names and not draw(st.integers(0, 3)):  # now and then a name that must be refused
        names[-1] = draw(st.sampled_from(BAD_NAMES + CLASHING_NAMES + names[:1]))
    extra = list(zip(names, extra_kinds))
    if len(extra) > 1 and extra[-1][0] == extra[0][0]:
        # a name twice keeps one kind: the rows hold one value per name, so a second kind would
        # make the batch unbuildable here instead of a batch the writer must refuse (case 6)
        extra[-1] = (extra[0][0], extra[0][1])
    precombine = draw(st.booleans())
    ops = [draw(st.sampled_from(["insert", "upsert"]))]
    ops += draw(st.lists(st.sampled_from(["upsert", "upsert", "delete"]), min_size=1, max_size=3))
    batches = []
    for op in ops:
        n_rows = draw(st.integers(1, 8))
        # now and then (a batch in four) null ordering values, on both table types: refused
        # in an insert or upsert, so rarely enough that most batches merge
        nulls = precombine and draw(st.integers(0, 3)) == 0
        rows = []
        for _ in range(n_rows):
            i = draw(st.integers(0, n_keys - 1))
            ts = draw(st.none() | st.integers(-1, 3)) if nulls else draw(st.integers(-1, 3))
            rows.append((i, ts, {n: draw(_extra_values(kind, far)) for n, kind in extra}))
        batches.append((op, rows))
    table_name = draw(st.sampled_from(GOOD_TABLE_NAMES) if draw(st.integers(0, 4))
                      else st.sampled_from(GOOD_TABLE_NAMES + INVISIBLE_TABLE_NAMES))
    return Scenario(kind=kind, table_name=table_name, key=key,
                    composite=composite, partitioned=partitioned, precombine=precombine, extra=extra,
                    keys=keys, parts=parts, batches=batches)


def _array(values, arrow_type: pa.DataType) -> pa.Array:
    """``values`` as an array of ``arrow_type``; a date or timestamp Python cannot hold is
    given as its stored integer (days, microseconds since the epoch)."""
    if any(isinstance(v, int) for v in values) and (pa.types.is_date32(arrow_type) or pa.types.is_timestamp(arrow_type)):
        raw = [None if v is None else v if isinstance(v, int) else _plain_value(v) for v in values]
        return pa.array(raw, pa.int32() if pa.types.is_date32(arrow_type) else pa.int64()).cast(arrow_type)
    return pa.array(values, arrow_type)


def _plain_value(v):
    """A date as days and a timestamp as microseconds since the epoch (naive: UTC)."""
    if isinstance(v, datetime.datetime):
        return int(_timestamp_identity(v))
    if isinstance(v, datetime.date):
        return (v - datetime.date(1970, 1, 1)).days
    return v


def _plain_columns(t: pa.Table) -> pa.Table:
    """Dates and timestamps as their integers (:func:`_plain_value`), so that values Python
    cannot hold are compared too; a timestamp's zone is dropped (hudi-rs reads a naive
    column as UTC, the instant is what is stored)."""
    cols = []
    for f, col in zip(t.schema, t.columns):
        if pa.types.is_date32(f.type):
            col = col.cast(pa.int32())
        elif pa.types.is_timestamp(f.type):
            col = col.cast(pa.timestamp("us", tz=f.type.tz)).cast(pa.int64())
        cols.append(col)
    return pa.Table.from_arrays(cols, names=t.column_names)


def _far(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def batch_table(sc: Scenario, rows, n: int) -> pa.Table:
    """The batch as the user hands it over (columns in the scenario's order, duplicates kept)."""
    arrays, names = [_array([sc.keys[i][0] for i, _, _ in rows], sc.key.arrow)], ["k"]
    if sc.composite:
        arrays.append(pa.array([sc.keys[i][1] for i, _, _ in rows], pa.string()))
        names.append("k2")
    if sc.partitioned:
        arrays.append(pa.array([sc.parts[i] for i, _, _ in rows], pa.string()))
        names.append("day")
    arrays.append(pa.array([ts for _, ts, _ in rows], pa.int64()))
    names.append("ts")
    arrays.append(pa.array([f"b{n}r{j}" for j in range(len(rows))], pa.string()))
    names.append("v")
    for n, kind in sc.extra:
        arrays.append(_array([r[2].get(n) for r in rows], EXTRA_COLUMNS[kind][0]))
        names.append(n)
    return pa.Table.from_arrays(arrays, names=names)


@dataclass
class Model:
    """Per record (partition path, Java's key): what a snapshot read returns.

    Copy-on-write: the stored record, replaced by an upsert unless the incoming ordering value
    is smaller (both non-null), removed by a delete. Merge-on-read, as Java's file-group reader
    merges a slice (the rule ``core/table/mor_reader`` documents, checked against Java in
    ``tests/interop/test_java_merge_semantics.py``): a key's first write is its base-file
    record; later writes are log records, folded in write order (a record replaces the one
    before it unless its ordering value is smaller; a delete, written with the natural zero,
    removes whatever came before it, and a record after it replaces it), and the folded log
    record then meets the base record (a delete removes it; a record replaces it unless the
    base record's ordering value is larger). So a delete followed by an upsert with an
    ordering value smaller than the base record's reads the base record, as Java does."""

    precombine: bool
    mor: bool = False
    #: copy-on-write: the stored records; merge-on-read: the base-file records
    base: dict = field(default_factory=dict)
    #: merge-on-read: the folded log record per key, ("row", ts, row) or ("del",)
    log: dict = field(default_factory=dict)

    @staticmethod
    def dedupe(keyed: list[tuple[tuple, int | None, dict]], precombine: bool) -> dict:
        """One row per key within a batch: the largest ordering value, the later row on a tie,
        a null loses to any value (all null: the first row); without an ordering field the
        last row (merge.py's rules, Hudi's EVENT_TIME_ORDERING)."""
        out: dict = {}
        for key, ts, row in keyed:
            if key not in out or not precombine:
                out[key] = (ts, row)
                continue
            have = out[key][0]
            if ts is not None and (have is None or ts >= have):
                out[key] = (ts, row)
        return out

    def _older(self, new, old) -> bool:
        """Whether ``new`` loses to ``old``: strictly smaller, both non-null."""
        return self.precombine and new is not None and old is not None and new < old

    def apply(self, op: str, keyed) -> None:
        for key, (ts, row) in self.dedupe(keyed, self.precombine).items():
            if not self.mor:
                if op == "delete":
                    self.base.pop(key, None)
                elif key not in self.base or not self._older(ts, self.base[key][0]):
                    self.base[key] = (ts, row)
            elif op == "delete":
                if key in self.base:  # a key in no file group is not deleted: nothing to tag
                    self.log[key] = ("del",)
            elif key not in self.base:
                self.base[key] = (ts, row)  # a new key: a new file group's base file
            else:
                cur = self.log.get(key)
                if cur is None or cur[0] == "del" or not self._older(ts, cur[1]):
                    self.log[key] = ("row", ts, row)

    @property
    def rows(self) -> dict:
        if not self.mor:
            return self.base
        out = {}
        for key, (ts, row) in self.base.items():
            cur = self.log.get(key)
            if cur is None:
                out[key] = (ts, row)
            elif cur[0] == "row":
                out[key] = (ts, row) if self._older(cur[1], ts) else (cur[1], cur[2])
        return out


# -- comparing what was read with the model ------------------------------------------------

def _norm(v):
    """One spelling of a value for comparison: NaN equal to itself; timestamps as microseconds
    since the epoch (hudi-rs reads a naive column as UTC); nested values recursively."""
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, float):
        return ("float", v, math.copysign(1.0, v))
    if isinstance(v, (datetime.date, datetime.datetime)):
        return _plain_value(v)
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_norm(x) for x in v]
    return v


def check_table(sc: Scenario, base_uri: str, model: Model, read=None, *, java: bool = False) -> None:
    """The table read back (by hudi-rs, or by ``read``) holds exactly the model's records.
    ``java``: Java's reader takes a partition column's value of the Hive default partition
    from the path, so ``''``, null and the literal ``__HIVE_DEFAULT_PARTITION__`` all read as
    null there (hudi-rs reads the value the file holds)."""
    got = read(sc, base_uri) if read else hudi_read(base_uri)
    recs = _plain_columns(got).to_pylist()
    keys = [(r["_hoodie_partition_path"], r["_hoodie_record_key"]) for r in recs]
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    assert not dupes, f"duplicate record keys {dupes!r}"
    want_rows = model.rows
    assert sorted(keys) == sorted(want_rows), "the records differ from the model (keys as Java spells them)"
    user = [n for n in sc.column_names() if n not in ("k", "k2") and not n.startswith("_hoodie_")]
    for rec, key in zip(recs, keys):
        ts, row = want_rows[key]
        want = {"ts": ts, **row}
        if java and sc.partitioned:
            rec, want = ({**r, "day": None if r.get("day") in ("", DEFAULT_PARTITION) else r.get("day")}
                         for r in (rec, want))
        assert {c: _norm(rec.get(c)) for c in user} == {c: _norm(want.get(c)) for c in user}, key


# -- the property --------------------------------------------------------------------------

def writer_of(sc: Scenario, table: Table):
    cls = ArrowTableWriter if sc.kind == "cow" else MergeOnReadWriter
    return cls(table, WriteConfig.from_options(FAST_WRITE_OPTIONS))


def run_scenario(sc: Scenario, root: str) -> tuple[str, Model] | None:
    """Every batch of ``sc`` against the oracle; the table's path and final model (None when
    the table itself was refused)."""
    if os.environ.get("HUDI_OCC_PROP_SKIP_KNOWN") == "1":
        assume(sc.known_issue() is None)
    event(f"{sc.kind} key {sc.key.name}{' composite' if sc.composite else ''}")
    parent = tempfile.mkdtemp(dir=root)
    path = os.path.join(parent, sc.table_name)
    before = tree_snapshot(parent)
    try:
        table = Table.create(path, "t", record_key_fields=sc.key_fields,
                             partition_fields=["day"] if sc.partitioned else [],
                             precombine_field="ts" if sc.precombine else None,
                             table_type="MERGE_ON_READ" if sc.kind == "mor" else "COPY_ON_WRITE")
    except HudiOccError as e:
        assert sc.refused_table(), f"a table at {path!r} was refused: {e}"
        assert tree_snapshot(parent) == before, "a refused table left files behind"
        event("refused: table path")
        return None
    assert not sc.refused_table(), f"a table at {path!r} was created"
    model = Model(sc.precombine, mor=sc.kind == "mor")
    for n, (op, rows) in enumerate(sc.batches):
        data = batch_table(sc, rows, n)
        note(f"batch {n}: {op} {data.to_string(preview_cols=20)}")
        expect_refusal = sc.refused_batch(op, rows)
        before = tree_snapshot(parent)
        try:
            writer_of(sc, Table.open(path)).write(data, op)
        except HudiOccError as e:
            assert expect_refusal or sc.may_be_refused(), f"batch {n} ({op}) was refused: {type(e).__name__}: {e}"
            assert tree_snapshot(parent) == before, f"the refused batch {n} changed the table"
            event(f"refused: {expect_refusal.split(':')[0]}")
            continue
        assert not expect_refusal, f"batch {n} ({op}) was committed, not refused ({expect_refusal})"
        rows_v = data.column("v").to_pylist()
        model.apply(op, [(sc.identity(i), ts, {"v": rows_v[j],
                                              **({"day": sc.parts[i]} if sc.partitioned else {}), **ex})
                         for j, (i, ts, ex) in enumerate(rows)])
        check_table(sc, path, model)
        event("committed")
    return path, model


def java_reads(sc: Scenario) -> bool:
    """Whether Java Hudi 1.2 (Spark 3.5) reads the scenario's table, as far as is known: not a
    timestamp column without a zone (``UnsupportedOperationException: Datatype not supported``:
    the file holds a local timestamp, the commit's schema an instant), not a date before
    1582-10-15 or a timestamp before 1900 (``SparkUpgradeException: READ_ANCIENT_DATETIME``:
    Spark reads such values of files it did not write only with
    ``spark.sql.parquet.datetimeRebaseModeInRead=CORRECTED``), not a partition value with a
    ``:`` (``URISyntaxException: Illegal character in scheme name``: Hadoop's ``Path`` takes
    what precedes it for a scheme). All reported in docs/hostile-input.md; the slow run's Java
    sample leaves such tables out."""
    if sc.key.name == "timestamp" or any(kind == "timestamp" for _, kind in sc.extra):
        return False
    if sc.partitioned and any(":" in (v or "") for v in sc.parts):
        return False
    temporal = [n for n, kind in sc.extra if kind in ("date", "timestamp_tz")]
    values = [v for v, _ in sc.keys] if sc.key.name in ("date", "timestamp_tz") else []
    values += [r[2].get(n) for _, rows in sc.batches for r in rows for n in temporal]
    for v in values:
        if _far(v):  # a date past 9999 or before year 1, as its integer
            return False
        if isinstance(v, datetime.datetime) and v.replace(tzinfo=None) < datetime.datetime(1900, 1, 2):
            return False
        if type(v) is datetime.date and v < datetime.date(1582, 10, 16):
            return False
    return True


SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                      HealthCheck.too_slow, HealthCheck.filter_too_much,
                                                      HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def root():
    d = tempfile.mkdtemp(prefix="writer-props-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _scenario(key="string", keys=(("a", None),), batches=(("upsert", ((0, 1, {}),)),), **kw) -> Scenario:
    base = dict(kind="cow", table_name="t", key=KEY_TYPES_BY_NAME[key], composite=False, partitioned=False,
                precombine=True, extra=[], keys=list(keys), parts=[None] * len(keys), batches=list(batches))
    return Scenario(**{**base, **kw})


#: the cases issue 40 names and the ones this test found, run in every default run
EXAMPLES = [
    # case 1: NaN twice in one upsert, then an upsert onto the NaN row with a larger ordering
    # value; Java's NaN, Infinity, -0.0 and 0.0 are four keys
    _scenario("double", keys=[(math.nan, None), (math.inf, None), (-0.0, None), (0.0, None), (1e20, None)],
              batches=[("upsert", [(0, 2, {}), (0, 3, {}), (1, 1, {}), (2, 1, {}), (3, 1, {}), (4, 1, {})]),
                       ("upsert", [(0, 5, {}), (2, 0, {})]), ("delete", [(1, 9, {})])]),
    _scenario("float", keys=[(math.nan, None), (0.1, None), (-0.0, None)], kind="mor",
              batches=[("insert", [(0, 1, {}), (1, 1, {}), (2, 1, {})]), ("upsert", [(0, 2, {}), (1, 0, {})])]),
    # case 4: a 10,200-character partition value holding '/'
    _scenario(partitioned=True, keys=[("a", None), ("b", None)], parts=["d1", LONG_SLASHED],
              batches=[("upsert", [(0, 1, {})]), ("upsert", [(1, 1, {}), (0, 2, {})])]),
    # case 5: a table path ending in a space, or holding a newline
    _scenario(table_name="t "), _scenario(table_name="t\n"),
    # case 6: a column twice; names Avro cannot hold; a column named as a meta column
    _scenario(extra=[("v", "binary")]), _scenario(extra=[("a b", "binary")]), _scenario(extra=[("é", "date")]),
    _scenario(extra=[("_hoodie_record_key", "date")]),
    # found here: a date key past 9999; such a date in a merge-on-read upsert
    _scenario("date", keys=[(datetime.date(2024, 1, 2), None), (3000000, None)],
              batches=[("upsert", [(0, 1, {})]), ("upsert", [(1, 1, {}), (0, 2, {})])]),
    _scenario(kind="mor", extra=[("d", "date")],
              batches=[("insert", [(0, 1, {"d": datetime.date(2024, 1, 2)})]), ("upsert", [(0, 2, {"d": 3000000})])]),
]


def _with_examples(test):
    for sc in reversed(EXAMPLES):
        test = example(sc=sc)(test)
    return test


@settings(max_examples=DEFAULT_EXAMPLES, derandomize=True, database=None, **SETTINGS)
@given(sc=scenarios())
@_with_examples
def test_generated_batches_commit_the_model_or_are_refused_unchanged(sc, root):
    run_scenario(sc, root)


@pytest.mark.slow
def test_generated_batches_long_run_with_a_java_sample(root, java_hudi, record_property):
    """:data:`SLOW_EXAMPLES` random examples; the first :data:`JAVA_SAMPLE` finished tables
    holding rows are read again by Java Hudi's reader (one JVM, after the examples) and held
    to the same model."""
    from airflow_hudi_occ.testing.java_hudi import Read
    ran, sample = [0], []

    @settings(max_examples=SLOW_EXAMPLES, database=None, **SETTINGS)
    @given(sc=scenarios())
    def prop(sc):
        done = run_scenario(sc, root)
        ran[0] += 1  # an example that ran (one left out by an assume() never gets here)
        if done is not None and len(sample) < JAVA_SAMPLE and done[1].rows and java_reads(sc):
            keep = tempfile.mkdtemp(dir=root, prefix="java-")
            dest = os.path.join(keep, "t")
            shutil.copytree(done[0], dest)
            sample.append((sc, dest, done[1]))

    prop()
    print(f"\nwriter properties: {ran[0]} examples ran; Java reads {len(sample)} tables")
    record_property("examples", ran[0])
    assert sample, "no table for Java to read"
    results = java_hudi.run(*[Read(p) for _, p, _ in sample], check=False, continue_on_error=True)
    for (sc, p, model), res in zip(sample, results):
        assert res.ok, f"Java Hudi could not read the table of {sc!r}: {res.error}"
        check_table(sc, p, model, read=lambda _sc, _p, rows=res.rows: rows, java=True)
