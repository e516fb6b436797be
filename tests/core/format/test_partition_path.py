"""The partition path rule (core/format/partition_path.py), and every core writer held to it.

The property test writes generated hostile partition values through the copy-on-write and the
merge-on-read writer and checks, for each value, one of two outcomes: the write commits and
every file it created is inside the table, under a partition folder the rule accepts; or it is
refused with InvalidPartitionPathError and the table's folder (and its parent) is byte-for-byte
as it was. Anything else (another error, a file outside the table) fails.
"""

from __future__ import annotations

import os
import tempfile
import time

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, partition_groups, partition_path_of
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import InvalidPartitionPathError, InvalidRecordKeyError, UnsafePathError
from airflow_hudi_occ.core.format import partition_path as pp
from airflow_hudi_occ.core.format.storage import Storage
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, tree_snapshot

#: values a careless or hostile source hands over
HOSTILE = ["../../escaped", "..", ".", "/etc", "a/../../b", "a//b", "a/", "a\\..\\b", "x\x00y",
           "line\nbreak", "tab\t", "\x7f", "é/ü", "2024/01/02", " ", "  spaced  ", "%2F", "a=b",
           "*", "?x#y", "x" * 256, "é" * 128, "__HIVE_DEFAULT_PARTITION__", ""]


# -- the rule ---------------------------------------------------------------------------------

@pytest.mark.parametrize("value,encoded", [
    # as Hudi's escapePathName (PartitionPathEncodeUtils): %XX upper-case for its set only
    ("2024/01/02", "2024%2F01%2F02"), ("a:b=c", "a%3Ab%3Dc"), ("100%", "100%25"),
    ("x\ny", "x%0Ay"), ("q?#*'\"", "q%3F%23%2A%27%22"), ("{[^]}\\", "%7B%5B%5E%5D}%5C"),
    ("\x7f", "%7F"), ("é ü.-_~", "é ü.-_~"), ("..", ".."),
])
def test_escape_is_hudis_escape_path_name(value, encoded):
    assert pp.escape_path_name(value) == encoded


@pytest.mark.parametrize("value", [None, ""])
@pytest.mark.parametrize("hive", [False, True])
def test_null_and_empty_values_are_the_hive_default_as_in_hudi(value, hive):
    # KeyGenUtils.getRecordPartitionPath: __HIVE_DEFAULT_PARTITION__ for both, hive-style or not
    want = "p=__HIVE_DEFAULT_PARTITION__" if hive else "__HIVE_DEFAULT_PARTITION__"
    assert pp.field_text("p", value, hive_style=hive, url_encode=False) == want
    assert pp.field_text("p", value, hive_style=hive, url_encode=True) == want


@pytest.mark.parametrize("value,reason", [
    ("..", "'..'"), ("../../escaped", "'..'"), ("a/..", "'..'"), (".", "'.'"), ("/etc", "empty"),
    ("a//b", "empty"), ("a/", "empty"), ("a\\b", "backslash"), ("x\x00y", "control"),
    ("l\nb", "control"), ("x" * 256, "255 bytes"), ("é" * 128, "255 bytes"),
])
def test_hostile_values_are_refused_naming_the_column_and_the_value(value, reason):
    with pytest.raises(InvalidPartitionPathError) as e:
        pp.field_text("day", value, hive_style=False, url_encode=False)
    assert e.value.column == "day" and e.value.value == repr(value)  # whole, in the field
    assert repr(value)[:100] in str(e.value) and reason in str(e.value) and e.value.remedy


def test_url_encoding_saves_what_it_escapes_but_never_traversal():
    assert pp.field_text("d", "a/../b", hive_style=False, url_encode=True) == "a%2F..%2Fb"
    assert pp.field_text("d", "x\x00/y", hive_style=True, url_encode=True) == "d=x%00%2Fy"
    with pytest.raises(InvalidPartitionPathError) as e:
        pp.field_text("d", "..", hive_style=False, url_encode=True)
    assert "urlencode" not in e.value.remedy  # encoding does not help: not suggested
    with pytest.raises(InvalidPartitionPathError) as e:
        pp.field_text("d", "a\\b", hive_style=False, url_encode=False)
    assert "urlencode=true" in e.value.remedy and "'a%5Cb'" in e.value.remedy


def test_slashes_that_make_valid_folders_are_nested_folders_as_in_hudi():
    assert pp.field_text("d", "2024/01/02", hive_style=False, url_encode=False) == "2024/01/02"
    assert pp.field_text("d", "2024/01", hive_style=True, url_encode=False) == "d=2024/01"
    # hive-style: 'd=..' is a name, not traversal; a following '..' segment is
    assert pp.field_text("d", "..", hive_style=True, url_encode=False) == "d=.."
    with pytest.raises(InvalidPartitionPathError):
        pp.field_text("d", "../..", hive_style=True, url_encode=False)


@pytest.mark.parametrize("path", ["..", "a/../..", "/abs", "a//b", "..\\x", "."])
def test_paths_read_from_the_timeline_are_checked_naming_their_source(path):
    with pytest.raises(UnsafePathError) as e:
        pp.check_partition_path(path, source="clustering plan 20240101000000000")
    assert "clustering plan 20240101000000000" in str(e.value) and e.value.remedy
    with pytest.raises(UnsafePathError):
        pp.check_relative_path(f"{path}/f.parquet", source="commit")
    assert pp.check_relative_path("p=1/2024/f.parquet", source="commit") == "p=1/2024/f.parquet"


def test_storage_refuses_any_path_that_leaves_the_base(tmp_path):
    s = Storage(str(tmp_path / "t"))
    for bad in (("..", "x"), ("a/../../x",), ("p", "../../x.parquet")):
        with pytest.raises(UnsafePathError):
            s.path(*bad)
    assert s.path("a..b", "..c") == str(tmp_path / "t" / "a..b" / "..c")  # names, not segments


# -- every core writer ------------------------------------------------------------------------

WRITERS = {"cow": (ArrowTableWriter, "COPY_ON_WRITE"), "mor": (MergeOnReadWriter, "MERGE_ON_READ")}


def _table(root: str, kind: str, *, hive: bool = False, encode: bool = False) -> Table:
    return Table.create(os.path.join(root, "t"), "t", record_key_fields=["id"],
                        partition_fields=["day"], precombine_field="ts", hive_style_partitioning=hive,
                        table_type=WRITERS[kind][1], url_encode_partitions=encode)


def _write_one(kind: str, hive: bool, encode: bool, value) -> None:
    with tempfile.TemporaryDirectory() as outer:
        # the table sits two folders down so that '../..' lands in a folder we watch
        root = os.path.join(outer, "a", "b")
        table = _table(root, kind, hive=hive, encode=encode)
        writer = WRITERS[kind][0](table, WriteConfig.from_options(FAST_WRITE_OPTIONS))
        before_all, before_table = tree_snapshot(outer), tree_snapshot(table.base_uri)
        try:
            res = writer.write(pa.table({"id": ["k1", "k2"], "day": [value, "fine"], "ts": [1, 1]}), "upsert")
        except InvalidPartitionPathError as e:
            assert e.column == "day" and e.value == repr(value)
            assert tree_snapshot(outer) == before_all  # nothing anywhere, not even a requested file
            assert tree_snapshot(table.base_uri) == before_table
            return
        after = tree_snapshot(outer)
        assert [p for p in after if before_all.get(p) != after[p]
                and not os.path.join(outer, p).startswith(table.base_uri + os.sep)] == []
        stats = [w for ws in res.metadata.partition_to_write_stats.values() for w in ws]
        assert stats
        for stat in stats:
            assert pp.path_problem(stat.partition_path) is None
            assert os.path.realpath(os.path.join(table.base_uri, stat.path)).startswith(
                os.path.realpath(table.base_uri) + os.sep)
        # the row is back where the rule put it, and Java's reader (hudi-rs) finds it too
        want = pp.field_text("day", value, hive_style=hive, url_encode=encode)
        assert {r["_hoodie_partition_path"] for r in hudi_read(table.base_uri).to_pylist()
                if r["id"] == "k1"} == {want}


@pytest.mark.parametrize("kind", sorted(WRITERS))
@pytest.mark.parametrize("encode", [False, True])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hive=st.booleans(),
       value=st.one_of(st.sampled_from(HOSTILE),
                       st.text(alphabet=st.sampled_from(list("./\\ aé\x00\n\t\x7f%=:*?中")), max_size=12),
                       st.text(max_size=20),
                       st.text(alphabet="ab/.", min_size=250, max_size=300)))
@example(hive=False, value="../../escaped")
@example(hive=False, value="..")
@example(hive=True, value="../../escaped")
def test_every_core_writer_keeps_every_file_inside_the_table(kind, encode, hive, value):
    _write_one(kind, hive, encode, value)


def test_the_issues_case_is_refused_before_an_instant_exists(tmp_path):
    table = _table(str(tmp_path / "x" / "y"), "cow")
    before = tree_snapshot(tmp_path)
    with pytest.raises(InvalidPartitionPathError) as e:
        ArrowTableWriter(Table.open(table.base_uri), WriteConfig.from_options({})).write(
            pa.table({"id": [1], "day": ["../../escaped"], "ts": [2]}), "upsert")
    assert "'day'" in str(e.value) and "'../../escaped'" in str(e.value)
    assert tree_snapshot(tmp_path) == before


def test_row_and_batch_spelling_agree_on_hostile_but_valid_values(tmp_path):
    table = _table(str(tmp_path), "cow", encode=True)
    values = ["a/b", "", None, "x:y", "é", "__HIVE_DEFAULT_PARTITION__"]
    groups = partition_groups(table, pa.table({"day": values}))
    assert {p: idx.to_pylist() for p, idx in groups.items()} == {
        "a%2Fb": [0], "__HIVE_DEFAULT_PARTITION__": [1, 2, 5], "x%3Ay": [3], "é": [4]}
    assert [partition_path_of(table, {"day": v}) for v in values] == [
        "a%2Fb", "__HIVE_DEFAULT_PARTITION__", "__HIVE_DEFAULT_PARTITION__", "x%3Ay", "é",
        "__HIVE_DEFAULT_PARTITION__"]


# -- record keys (core/format/base_file.check_record_keys, in every core writer) -------------

@pytest.mark.parametrize("kind", sorted(WRITERS))
@pytest.mark.parametrize("ids,bad", [(["1", None, "3"], 1), (["", None, "x"], 2), ([1, None, None], 2)])
def test_null_or_empty_keys_are_refused_with_the_column_and_count(tmp_path, kind, ids, bad):
    table = _table(str(tmp_path), kind)
    before = tree_snapshot(tmp_path)
    with pytest.raises(InvalidRecordKeyError) as e:
        WRITERS[kind][0](table, WriteConfig.from_options(FAST_WRITE_OPTIONS)).write(
            pa.table({"id": ids, "day": ["d"] * 3, "ts": [1, 1, 1]}), "upsert")
    assert e.value.column == "id" and e.value.rows == bad and f"{bad} row(s)" in str(e.value)
    assert tree_snapshot(tmp_path) == before


def test_a_composite_key_is_refused_only_when_every_part_is_missing(tmp_path):
    table = Table.create(str(tmp_path / "c"), "c", record_key_fields=["a", "b"], partition_fields=[])
    w = ArrowTableWriter(table, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    with pytest.raises(InvalidRecordKeyError) as e:
        w.write(pa.table({"a": ["x", None, ""], "b": [None, None, None]}), "insert")
    assert e.value.rows == 2 and e.value.column == "a,b"
    # Hudi's ComplexKeyGenerator accepts a key with one part present
    assert w.write(pa.table({"a": ["x"], "b": pa.array([None], pa.string())}), "insert").outcome == "committed"


# -- a whole partition path too long for the store (issue 40) ---------------------------------------

def _long_value(size: int) -> str:
    """``size`` characters of 200-character segments joined by '/': every segment valid."""
    out = "/".join(["x" * 200] * (size // 201 + 1))[:size]
    return out if not out.endswith("/") else out[:-1] + "y"


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_a_value_whose_whole_path_is_too_long_is_refused_before_an_instant(tmp_path, kind):
    """A 10,000-character value holding '/' (each segment under 255 bytes) raised a raw
    ``OSError: [Errno 36] File name too long`` (a 10,065-character message) after its instant
    existed, leaving a rollback and an attempt record. Now refused before the instant, the
    value cut in the message; a path at the limit is written (its markers and their temporary
    copies included), one byte more is refused."""
    table = _table(str(tmp_path), kind)
    writer = WRITERS[kind][0](table, WriteConfig.from_options(FAST_WRITE_OPTIONS))
    limit = pp.max_partition_path_bytes(table.storage.root, table.storage.protocol)
    before = tree_snapshot(table.base_uri)
    for value in (_long_value(10_000), _long_value(limit + 1)):
        t0 = time.monotonic()
        with pytest.raises(InvalidPartitionPathError) as e:
            writer.write(pa.table({"id": ["k1", "k2"], "day": [value, "fine"], "ts": [1, 1]}), "upsert")
        print(f"refused in {time.monotonic() - t0:.3f} s")
        assert e.value.column == "day" and e.value.value == repr(value)
        assert len(str(e.value)) < 1000 and f"({len(value)} characters)" in str(e.value)
        assert "keep partition paths under" in e.value.remedy
        assert tree_snapshot(table.base_uri) == before  # no instant, no rollback, no attempt record
    at_limit = _long_value(limit)
    for ts in (1, 2):  # an insert, then an update (a merge, or a log file)
        writer.write(pa.table({"id": ["k1"], "day": [at_limit], "ts": [ts]}), "upsert")
    assert [(r["day"], r["ts"]) for r in hudi_read(table.base_uri).to_pylist()] == [(at_limit, 2)]
