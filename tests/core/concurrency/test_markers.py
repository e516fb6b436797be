"""Write markers: the codec, both on-disk layouts, concurrent writers in real processes, and
tolerant reading of batched files that are cut or being replaced."""

from __future__ import annotations

import multiprocessing
import os
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_hudi_occ.core.config import MarkerType
from airflow_hudi_occ.core.errors import CorruptMetadataError
from airflow_hudi_occ.core.concurrency.markers import (BatchedWriteMarkers, DirectWriteMarkers, IOType, Marker,
                                           MarkerFileContent, group_key, list_marker_instants,
                                           marker_dir, markers_for, parse_marker, read_marker_file)
from airflow_hudi_occ.core.table.table import Table

T1 = "20250101000000001"
T2 = "20250101000000002"

KINDS = [DirectWriteMarkers, BatchedWriteMarkers]


def make_table(tmp_path, partitioned=True) -> Table:
    return Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"],
                        partition_fields=["p"] if partitioned else [])


def fname(file_id: str, instant: str = T1, token: str = "0-0-0") -> str:
    return f"{file_id}_{token}_{instant}.parquet"


# --- codec --------------------------------------------------------------------------------------

_part = st.lists(st.from_regex(r"[a-z0-9=\-]{1,8}", fullmatch=True), min_size=0, max_size=3).map("/".join)
_fid = st.from_regex(r"[a-z0-9\-]{1,12}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(_part, _fid, st.sampled_from(list(IOType)), st.booleans())
def test_marker_path_round_trip(partition, file_id, io_type, log_file):
    name = f".{file_id}_20250101000000001.log.1_0-1-2" if log_file else fname(file_id)
    m = Marker(partition, name, io_type)
    assert m.relative_path.endswith(f".marker.{io_type.value}")
    assert m.relative_path.startswith(f"{partition}/") == bool(partition)
    back = parse_marker(m.relative_path)
    assert back == m
    assert back.file_id == file_id
    assert back.data_file_path == (f"{partition}/{name}" if partition else name)


def test_marker_name_and_file_id():
    m = Marker("2022/07/01", "ff26cb9e-0_1-0-1_20220701000000000.parquet", IOType.MERGE)
    assert m.name == "ff26cb9e-0_1-0-1_20220701000000000.parquet.marker.MERGE"
    assert m.relative_path == "2022/07/01/" + m.name
    assert m.file_id == "ff26cb9e-0"
    assert Marker("", "abc_1_2.parquet", IOType.CREATE).relative_path == "abc_1_2.parquet.marker.CREATE"


@pytest.mark.parametrize("garbage", [
    "", "   ", "p/file.parquet", "p/file.parquet.marker.", "p/file.parquet.marker.DELETE",
    "/abs/f_1_2.parquet.marker.CREATE", "p//f_1_2.parquet.marker.CREATE",
    "p/../f_1_2.parquet.marker.CREATE", "p/.marker.CREATE", "p/_x.marker.CREATE",
])
def test_parse_marker_rejects_garbage(garbage):
    with pytest.raises(CorruptMetadataError):
        parse_marker(garbage)


# --- both layouts -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_round_trip_and_queries(tmp_path, kind):
    table = make_table(tmp_path)
    markers = kind(table, T1)
    assert not markers.exists() and markers.all_markers() == []
    made = [markers.create("2022/07/01", fname("a"), IOType.CREATE),
            markers.create("2022/07/01", fname("b"), "MERGE"),
            markers.create("2022/07/02/", fname("a", token="1-0-1"), IOType.CREATE)]
    # idempotent: the same marker again is returned, not duplicated
    assert markers.create("2022/07/01", fname("a"), IOType.CREATE) == made[0]
    assert markers.exists()

    again = markers_for(table, T1)  # type detected from the folder
    assert type(again) is kind
    assert sorted(again.all_markers(), key=str) == sorted(made, key=str)
    assert len(again.all_markers()) == 3
    assert {m.io_type for m in again.markers_in_partition("2022/07/01")} == {IOType.CREATE, IOType.MERGE}
    assert again.file_ids_in_partition("2022/07/01") == {"a", "b"}
    assert again.file_ids_in_partition("2022/07/02") == {"a"}
    assert again.file_ids_in_partition("2022/07") == set()
    assert again.file_groups() == {("2022/07/01", "a"), ("2022/07/01", "b"), ("2022/07/02", "a")}
    assert sorted(again.data_files()) == sorted(m.data_file_path for m in made)
    assert list_marker_instants(table) == [T1]

    again.delete_all()
    assert not markers.exists() and markers_for(table, T1).all_markers() == []
    assert list_marker_instants(table) == []


@pytest.mark.parametrize("kind", KINDS)
def test_unpartitioned_table(tmp_path, kind):
    table = make_table(tmp_path, partitioned=False)
    markers = kind(table, T1)
    m = markers.create("", fname("x"), IOType.CREATE)
    assert m.relative_path == fname("x") + ".marker.CREATE"
    assert markers_for(table, T1).file_groups() == {("", "x")}
    assert markers.data_files() == [fname("x")]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("partition", ["..", "a/../..", "2022/./07", "a//b"])
def test_a_marker_never_leaves_its_instant_folder(tmp_path, kind, partition):
    """Markers stay under .hoodie/.temp/<instant>/: a partition that would leave it is
    refused by the partition rule (core/format/partition_path) before anything is created."""
    from airflow_hudi_occ.core.errors import UnsafePathError
    from airflow_hudi_occ.testing.tables import tree_snapshot
    table = make_table(tmp_path)
    before = tree_snapshot(tmp_path)
    with pytest.raises(UnsafePathError):
        kind(table, T1).create(partition, fname("a"), IOType.CREATE)
    assert tree_snapshot(tmp_path) == before


def test_direct_layout_on_disk(tmp_path):
    table = make_table(tmp_path)
    DirectWriteMarkers(table, T1).create("p1", fname("f"), IOType.APPEND)
    path = os.path.join(marker_dir(table, T1), "p1", fname("f") + ".marker.APPEND")
    assert os.path.isfile(path) and os.path.getsize(path) == 0
    assert not os.path.exists(os.path.join(marker_dir(table, T1), "MARKERS.type"))


def test_batched_layout_on_disk(tmp_path):
    table = make_table(tmp_path)
    markers = BatchedWriteMarkers(table, T1)
    markers.create("p1", fname("f"), IOType.CREATE)
    markers.create("p2", fname("g"), IOType.MERGE)
    d = marker_dir(table, T1)
    assert sorted(os.listdir(d)) == ["MARKERS.type", "MARKERS0"]
    with open(os.path.join(d, "MARKERS.type")) as f:
        assert f.read() == "TIMELINE_SERVER_BASED"
    with open(os.path.join(d, "MARKERS0")) as f:
        assert f.read() == (f"p1/{fname('f')}.marker.CREATE\np2/{fname('g')}.marker.MERGE\n")


def test_explicit_type_wins_and_bad_type_file_is_corrupt(tmp_path):
    table = make_table(tmp_path)
    BatchedWriteMarkers(table, T1).create("p", fname("f"), IOType.CREATE)
    assert isinstance(markers_for(table, T1, MarkerType.DIRECT), DirectWriteMarkers)
    with open(os.path.join(marker_dir(table, T1), "MARKERS.type"), "w") as f:
        f.write("SOMETHING_ELSE")
    with pytest.raises(CorruptMetadataError):
        markers_for(table, T1)


def test_batched_writers_claim_their_own_files(tmp_path):
    table = make_table(tmp_path)
    a, b = BatchedWriteMarkers(table, T1), BatchedWriteMarkers(table, T1)
    for i in range(5):
        a.create("p", fname(f"a{i}"), IOType.CREATE)
        b.create("p", fname(f"b{i}"), IOType.CREATE)
    assert a.claimed_files == ["MARKERS0"] and b.claimed_files == ["MARKERS1"]
    assert BatchedWriteMarkers(table, T1).file_ids_in_partition("p") == {f"{w}{i}" for w in "ab" for i in range(5)}
    # a third object dedupes against what is already there, and writes nothing new
    c = BatchedWriteMarkers(table, T1)
    c.create("p", fname("a3"), IOType.CREATE)
    assert c.claimed_files == []


def test_batched_rolls_over_to_a_new_file(tmp_path):
    table = make_table(tmp_path)
    markers = BatchedWriteMarkers(table, T1, max_lines_per_file=3)
    markers.create_many([("p", fname(f"f{i}"), IOType.CREATE) for i in range(7)])
    markers.create("p", fname("g"), IOType.CREATE)
    assert markers.claimed_files == ["MARKERS0", "MARKERS1", "MARKERS2"]
    assert markers_for(table, T1).file_ids_in_partition("p") == {f"f{i}" for i in range(7)} | {"g"}


def test_failed_write_is_not_remembered(tmp_path, monkeypatch):
    table = make_table(tmp_path)
    markers = BatchedWriteMarkers(table, T1)
    markers.create("p", fname("a"), IOType.CREATE)
    real = table.storage.write

    def broken(path, data):
        raise OSError("disk full")

    monkeypatch.setattr(table.storage, "write", broken)
    with pytest.raises(OSError):
        markers.create("p", fname("b"), IOType.CREATE)
    monkeypatch.setattr(table.storage, "write", real)
    markers.create("p", fname("b"), IOType.CREATE)  # not skipped as "already there"
    assert markers_for(table, T1).file_ids_in_partition("p") == {"a", "b"}


# --- tolerant reading ---------------------------------------------------------------------------


def _write(table, name: str, data: bytes) -> None:
    d = marker_dir(table, T1)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def test_cut_and_garbage_marker_files_are_tolerated(tmp_path):
    table = make_table(tmp_path)
    _write(table, "MARKERS.type", b"TIMELINE_SERVER_BASED")
    full = "".join(f"p/{fname(f'f{i}')}.marker.CREATE\n" for i in range(3))
    _write(table, "MARKERS0", (full + f"p/{fname('cut')}.marker.CRE").encode())  # cut mid-line
    _write(table, "MARKERS1", b"")                                             # just claimed
    _write(table, "MARKERS2", b"\x00\xff\xfe garbage \n\x80")                  # not text at all
    _write(table, "MARKERS3", f"p/{fname('whole')}.marker.MERGE".encode())     # cut right at the end
    _write(table, "MARKERS4", f"p/{fname('half')}_0-0".encode())              # cut inside the name
    _write(table, "MARKERSX", f"p/{fname('nope')}.marker.CREATE\n".encode())   # not a MARKERS<n>
    markers = markers_for(table, T1)
    assert isinstance(markers, BatchedWriteMarkers)
    assert markers.file_ids_in_partition("p") == {"f0", "f1", "f2", "whole"}
    assert {m.file_id for m in markers.all_markers()} == {"f0", "f1", "f2", "whole"}


def test_a_growing_file_is_reread(tmp_path):
    """The per-file cache must never hide a marker appended later."""
    table = make_table(tmp_path)
    path = os.path.join(marker_dir(table, T1), "MARKERS0")
    lines = ""
    for i in range(20):
        lines += f"p/{fname(f'f{i}')}.marker.CREATE\n"
        _write(table, "MARKERS0", lines.encode())
        assert len(read_marker_file(table.storage, path).lines) == i + 1


_odd_part = st.lists(st.from_regex(r"[a-z0-9_.=\-]{1,8}", fullmatch=True).filter(lambda c: c not in (".", "..")),
                     min_size=0, max_size=3).map("/".join)
_odd_name = st.one_of(
    st.builds(lambda f, t: f"{f}_{t}_20250101000000001.parquet", _fid, st.from_regex(r"[0-9\-]{1,6}", fullmatch=True)),
    st.builds(lambda f: f".{f}_20250101000000001.log.1_0-1-2", _fid),   # log file
    st.builds(lambda f: f"{f}.parquet", _fid),                            # no "_" at all
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_odd_part, _odd_name, st.sampled_from(list(IOType))), max_size=12),
       st.booleans())
def test_bulk_file_group_keys_match_the_exact_parser(items, crlf):
    """The batched checker's fast key extraction must agree with parse_marker on every shape."""
    markers = [Marker(p, n, t) for p, n, t in items]
    sep = "\r\n" if crlf else "\n"
    content = MarkerFileContent("".join(m.relative_path + sep for m in markers))
    assert set(content.keys) == {group_key(*m.file_group) for m in markers}
    assert content.file_groups == {m.file_group for m in markers}
    assert set(content.markers) == set(markers)


# --- concurrent writers in real processes -------------------------------------------------------


def _batched_writer(base: str, writer: int, count: int, barrier) -> None:
    table = Table.open(base)
    markers = BatchedWriteMarkers(table, T1)
    barrier.wait()
    for i in range(count):
        markers.create(f"p{i % 3}", fname(f"w{writer}-{i}"), IOType.CREATE)


def _direct_writer(base: str, writer: int, count: int, barrier) -> None:
    table = Table.open(base)
    markers = DirectWriteMarkers(table, T1)
    barrier.wait()
    for i in range(count):
        # every writer creates the same shared markers too: create-if-absent must make that fine
        markers.create("p", fname(f"shared-{i}"), IOType.CREATE)
        markers.create("p", fname(f"w{writer}-{i}"), IOType.CREATE)


@pytest.mark.parametrize("writer_fn", [_batched_writer, _direct_writer])
def test_concurrent_writers_in_processes_lose_nothing(tmp_path, writer_fn):
    table = make_table(tmp_path)
    ctx = multiprocessing.get_context("spawn")
    writers, count = 4, 120
    barrier = ctx.Barrier(writers + 1)
    procs = [ctx.Process(target=writer_fn, args=(table.base_uri, w, count, barrier))
             for w in range(writers)]
    for p in procs:
        p.start()

    # A reader racing the writers: it must never fail, and what it sees may only grow (every
    # MARKERS file is append-only and replaced atomically).
    seen_counts: list[int] = []
    reader_errors: list[BaseException] = []
    done = threading.Event()

    def reader():
        while not done.is_set():
            try:
                seen_counts.append(len(markers_for(table, T1).file_groups()))
            except BaseException as e:  # noqa: BLE001 - the test reports it
                reader_errors.append(e)
                return

    rt = threading.Thread(target=reader, daemon=True)
    barrier.wait()
    rt.start()
    for p in procs:
        p.join(timeout=120)
    done.set()
    rt.join(timeout=30)
    assert [p.exitcode for p in procs] == [0] * writers
    assert reader_errors == []
    assert seen_counts == sorted(seen_counts)

    markers = markers_for(table, T1)
    expected = {f"w{w}-{i}" for w in range(writers) for i in range(count)}
    if writer_fn is _direct_writer:
        expected |= {f"shared-{i}" for i in range(count)}
        assert markers.file_ids_in_partition("p") == expected
    else:
        assert {f for _, f in markers.file_groups()} == expected
        assert len(markers.all_markers()) == writers * count
        # one file per writer, each holding only that writer's markers
        files = sorted(n for n in os.listdir(marker_dir(table, T1)) if n.startswith("MARKERS") and n[7:].isdigit())
        assert files == [f"MARKERS{i}" for i in range(writers)]
        owners = []
        for name in files:
            content = read_marker_file(table.storage, os.path.join(marker_dir(table, T1), name))
            owners.append({line.split("/")[1].split("-")[0] for line in content.lines})
        assert all(len(o) == 1 for o in owners) and len(set().union(*owners)) == writers
