"""Write markers (``markers/write_markers``): both on-disk layouts, the layout read back from
the folder, and concurrent writers in real processes. The codec is in ``test_names``, tolerant
reading of batched files in ``test_files``."""

from __future__ import annotations

import multiprocessing
import os
import threading

import pytest

from airflow_hudi_occ.core.config import MarkerType
from airflow_hudi_occ.core.errors import CorruptMetadataError
from airflow_hudi_occ.core.concurrency.markers.write_markers import (BatchedWriteMarkers,
                                                                     DirectWriteMarkers, markers_for)
from airflow_hudi_occ.core.concurrency.markers.names import IOType
from airflow_hudi_occ.core.concurrency.markers.folder import list_marker_instants, marker_dir
from airflow_hudi_occ.core.concurrency.markers.files import read_marker_file
from airflow_hudi_occ.core.table.table import Table

from tests.core.concurrency.markers import T1, fname, make_table

KINDS = [DirectWriteMarkers, BatchedWriteMarkers]


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
