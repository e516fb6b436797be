"""create-if-absent, implemented truthfully per backend (or refused)."""

import multiprocessing as mp
import os

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from airflow_hudi_occ.core.errors import StorageError
from airflow_hudi_occ.core.format.storage import Storage


class NoConditionalWritesFS(MemoryFileSystem):
    """A backend with no atomic create-if-absent (like plain HTTP or an old object store)."""
    protocol = "nocas"
    store = {}
    pseudo_dirs = [""]


fsspec.register_implementation("nocas", NoConditionalWritesFS, clobber=True)


def test_local_create_if_absent_is_exclusive_and_whole(tmp_path):
    s = Storage(str(tmp_path))
    p = s.path("a", "b.commit")
    s.create_if_absent(p, b"one")
    with pytest.raises(FileExistsError):
        s.create_if_absent(p, b"two")
    assert open(p, "rb").read() == b"one"
    assert [n for n in os.listdir(os.path.dirname(p)) if n.endswith(".tmp")] == []


def _race(path, data, q):
    s = Storage(os.path.dirname(path))
    try:
        s.create_if_absent(path, data)
        q.put(data)
    except FileExistsError:
        q.put(None)


def test_local_create_if_absent_between_processes(tmp_path):
    ctx = mp.get_context("spawn")
    for round_ in range(2):
        path = str(tmp_path / f"x{round_}")
        q = ctx.Queue()
        procs = [ctx.Process(target=_race, args=(path, f"p{i}".encode() * 1000, q)) for i in range(4)]
        for p in procs:
            p.start()
        outcomes = [q.get(timeout=60) for _ in procs]
        for p in procs:
            p.join()
        winners = [o for o in outcomes if o is not None]
        assert len(winners) == 1
        assert open(path, "rb").read() == winners[0]


def test_memory_backend(tmp_path):
    s = Storage("memory://tbl-test")
    s.create_if_absent(s.path("f"), b"1")
    with pytest.raises(FileExistsError):
        s.create_if_absent(s.path("f"), b"2")
    assert s.read(s.path("f")) == b"1"


def test_backend_without_conditional_writes_is_refused():
    s = Storage("nocas://tbl")
    with pytest.raises(StorageError) as e:
        s.create_if_absent(s.path("x.commit"), b"data")
    assert e.value.protocol == "nocas" and "lock provider" in e.value.remedy
    assert not s.fs.exists(s.path("x.commit"))
    # ...unless the caller declares that a lock serialises every create
    locked = Storage("nocas://tbl", assume_locked_creates=True)
    locked.create_if_absent(locked.path("x.commit"), b"data")
    with pytest.raises(FileExistsError):
        locked.create_if_absent(locked.path("x.commit"), b"again")
