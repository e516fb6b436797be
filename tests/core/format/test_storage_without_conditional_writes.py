"""A real fsspec store without atomic create-if-absent is refused, and why it must be.

The store: fsspec's ``dir`` protocol (``DirFileSystem``) over local files. Its
``pipe_file(mode="create")`` is fsspec's generic one (``AbstractFileSystem.pipe_file``:
``if self.exists(path): raise FileExistsError`` and then a plain write), a check-then-write, as
for every fsspec backend that does not override it (FTP, SFTP, WebDAV, ...).
"""

from __future__ import annotations

import threading

import pytest

from airflow_hudi_occ.core.config import LockConfig
from airflow_hudi_occ.core.errors import ConfigError, StorageError
from airflow_hudi_occ.core.concurrency.locks import get_lock_provider
from airflow_hudi_occ.core.format.storage import Storage


def _dir_store(tmp_path, **kw) -> Storage:
    return Storage("dir://tbl", {"path": str(tmp_path), "target_protocol": "file"}, **kw)


def test_the_dir_store_really_lacks_atomic_create(tmp_path, monkeypatch):
    """Two creators that both check before either writes both 'win' through fsspec's own
    mode="create" on this store: the race the refusal below prevents (the interleaving is
    forced with a barrier in the existence check; the writes are real)."""
    s = _dir_store(tmp_path)
    target = s.path(".hoodie", "1.commit")
    s.makedirs(s.path(".hoodie"))
    barrier = threading.Barrier(2)
    real_exists = s.fs.fs.exists  # the local file system under the dir:// prefix

    def exists_then_wait(path, **kw):
        found = real_exists(path, **kw)
        barrier.wait(timeout=10)
        return found
    monkeypatch.setattr(s.fs.fs, "exists", exists_then_wait)  # fsspec caches the instance
    wins, errors = [], []

    def create(i):
        try:
            s.fs.pipe_file(target, f"writer {i}".encode(), mode="create")
            wins.append(i)
        except FileExistsError:
            pass
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=create, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(wins) == [0, 1], "both creates succeeded: the second silently replaced the first"


def test_store_without_conditional_writes_is_refused(tmp_path):
    s = _dir_store(tmp_path)
    assert s.protocol == "dir" and not s.atomic_creates
    with pytest.raises(StorageError) as e:
        s.create_if_absent(s.path(".hoodie", "1.commit"), b"{}")
    assert e.value.protocol == "dir"
    assert "atomic" in str(e.value) and "zookeeper" in e.value.remedy
    assert not (tmp_path / "tbl" / ".hoodie" / "1.commit").exists()  # nothing was written


def test_refused_store_is_usable_when_a_lock_covers_every_create(tmp_path):
    s = _dir_store(tmp_path, assume_locked_creates=True)
    p = s.path(".hoodie", "1.commit")
    s.create_if_absent(p, b"one")
    with pytest.raises(FileExistsError):
        s.create_if_absent(p, b"two")
    assert (tmp_path / "tbl" / ".hoodie" / "1.commit").read_bytes() == b"one"


@pytest.mark.parametrize("assume_locked_creates", [True, False])
def test_file_lock_on_such_a_store_is_refused(tmp_path, assume_locked_creates):
    """The lock that is supposed to make creates safe cannot itself be a check-then-write."""
    s = _dir_store(tmp_path, assume_locked_creates=assume_locked_creates)
    cfg = LockConfig.from_options({"hoodie.write.lock.provider": "filesystem"})
    with pytest.raises(ConfigError) as e:
        get_lock_provider(cfg, base_path=s.base_uri, table_name="t", storage=s)
    assert e.value.key == "hoodie.write.lock.provider" and e.value.value == "filesystem"
    assert "check-then-write" in str(e.value)
    assert "zookeeper" in e.value.remedy and "inprocess" in e.value.remedy
    assert not (tmp_path / "tbl" / ".hoodie" / "lock").exists()


def test_file_lock_may_live_elsewhere_on_an_atomic_store(tmp_path):
    """hoodie.write.lock.filesystem.path on local storage is a sound lock for such a table."""
    s = _dir_store(tmp_path, assume_locked_creates=True)
    cfg = LockConfig.from_options({"hoodie.write.lock.provider": "filesystem",
                                   "hoodie.write.lock.filesystem.path": str(tmp_path / "locks")})
    a = get_lock_provider(cfg, base_path=s.base_uri, table_name="t", storage=s)
    b = get_lock_provider(cfg, base_path=s.base_uri, table_name="t", storage=s)
    assert a.try_acquire(1) and not b.try_acquire(0)
    a.release()
    assert b.try_acquire(1)
    b.release()


def test_other_providers_are_accepted_on_such_a_store(tmp_path):
    s = _dir_store(tmp_path, assume_locked_creates=True)
    cfg = LockConfig.from_options({"hoodie.write.lock.provider": "inprocess"})
    lock = get_lock_provider(cfg, base_path=s.base_uri, table_name="t", storage=s)
    assert lock.try_acquire(1)
    lock.release()
