"""The file lock's own risks: a writer killed while holding it (stale lock file), and a
takeover after expiry that the former holder must notice before it commits."""

from __future__ import annotations

import json
import os
import time

import pytest

from airflow_hudi_occ.core.config import LockConfig
from airflow_hudi_occ.core.errors import LockLostError
from airflow_hudi_occ.core.concurrency.locks import get_lock_provider
from airflow_hudi_occ.core.concurrency.locks.filesystem import FileSystemBasedLockProvider
from airflow_hudi_occ.core.format.storage import Storage


def _provider(tmp_path, expire_minutes=0, **kwargs) -> FileSystemBasedLockProvider:
    config = LockConfig(provider="filesystem", fs_expire_minutes=expire_minutes)
    return FileSystemBasedLockProvider(config, base_path=str(tmp_path / "table"), **kwargs)


def _plant_lock(path, *, owner="deadhost:4242:MainThread:0", age_s=0.0, content=None):
    """A lock file as a writer that died ``age_s`` seconds ago would have left it."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    then = time.time() - age_s
    if content is None:
        content = json.dumps({"owner": owner, "acquired_at_ms": int(then * 1000),
                              "expire_minutes": 1})
    with open(path, "w") as f:
        f.write(content)
    os.utime(path, (then, then))


def _owner_in(path):
    with open(path) as f:
        return json.load(f)["owner"]


def test_lock_file_location_and_content(tmp_path):
    lock = _provider(tmp_path, expire_minutes=3)
    assert lock.lock_path == str(tmp_path / "table" / ".hoodie" / "lock")
    assert lock.try_acquire(1)
    with open(lock.lock_path) as f:
        doc = json.load(f)
    assert doc["owner"] == lock.owner
    assert doc["expire_minutes"] == 3
    assert abs(doc["acquired_at_ms"] / 1000 - time.time()) < 600  # a plausible epoch-ms stamp
    lock.release()
    assert not os.path.exists(lock.lock_path)


def test_configured_directory_and_keyed_file_names(tmp_path):
    config = LockConfig(provider="filesystem", fs_path=str(tmp_path / "elsewhere"))
    table = get_lock_provider(config, base_path=str(tmp_path / "t"), table_name="t")
    keyed = get_lock_provider(config, base_path=str(tmp_path / "t"), table_name="t",
                              lock_key="dt=2024-01-01/fg-1")
    assert table.lock_path == str(tmp_path / "elsewhere" / "lock")
    assert keyed.lock_path == str(tmp_path / "elsewhere" / "lock.dt=2024-01-01%2Ffg-1")


def test_lock_uses_the_given_storage(tmp_path):
    storage = Storage(str(tmp_path / "table"))
    lock = FileSystemBasedLockProvider(LockConfig(), base_path="ignored-when-storage-given",
                                       storage=storage)
    assert lock.lock_path == storage.path(".hoodie", "lock")


def test_stale_lock_of_a_dead_writer_is_taken_over_after_expiry(tmp_path):
    lock = _provider(tmp_path, expire_minutes=1)
    _plant_lock(lock.lock_path, age_s=120)
    assert lock.try_acquire(2)
    assert _owner_in(lock.lock_path) == lock.owner
    assert lock.is_held()
    lock.release()


def test_stale_lock_is_kept_forever_when_expiry_is_off(tmp_path):
    lock = _provider(tmp_path, expire_minutes=0)
    _plant_lock(lock.lock_path, age_s=10 * 24 * 3600)
    assert lock.try_acquire(0.3) is False
    assert _owner_in(lock.lock_path) == "deadhost:4242:MainThread:0"
    assert lock.current_owner() == "deadhost:4242:MainThread:0"


def test_young_lock_is_not_taken_over(tmp_path):
    lock = _provider(tmp_path, expire_minutes=1)
    _plant_lock(lock.lock_path, age_s=20)
    assert lock.try_acquire(0.3) is False
    assert _owner_in(lock.lock_path) == "deadhost:4242:MainThread:0"


def test_both_clocks_must_call_a_lock_stale(tmp_path):
    """An old mtime with a recent acquired_at (or the reverse) is not yet stale: taking over a
    live writer's lock is worse than waiting a little longer."""
    lock = _provider(tmp_path, expire_minutes=1)
    recent = json.dumps({"owner": "live:1:T:0", "acquired_at_ms": int(time.time() * 1000)})
    _plant_lock(lock.lock_path, age_s=600, content=recent)
    assert lock.try_acquire(0.3) is False


def test_java_written_lock_file_expires_by_modification_time(tmp_path):
    lock = _provider(tmp_path, expire_minutes=1)
    _plant_lock(lock.lock_path, age_s=120, content='{"lockCreateTime":"x","lockThreadName":"main"}')
    assert lock.current_owner() == "unknown (lock file without owner)"
    assert lock.try_acquire(2)
    lock.release()


def test_release_deletes_only_our_own_lock(tmp_path):
    lock = _provider(tmp_path)
    assert lock.try_acquire(1)
    _plant_lock(lock.lock_path, owner="thief:1:T:0")  # replaced behind our back
    lock.release()  # must not raise, and must not delete the other writer's lock
    assert _owner_in(lock.lock_path) == "thief:1:T:0"


def test_takeover_after_expiry_is_noticed_by_the_former_holder(tmp_path):
    lost = []
    holder = _provider(tmp_path, expire_minutes=1)
    holder.add_lost_listener(lambda provider, reason: lost.append(reason))
    assert holder.try_acquire(1)
    assert holder.is_held()
    # A writer whose clock is two minutes ahead sees the holder's lock as expired.
    later = _provider(tmp_path, expire_minutes=1, wall_clock=lambda: time.time() + 120)
    assert later.try_acquire(2)
    assert _owner_in(holder.lock_path) == later.owner
    assert holder.is_held() is False
    with pytest.raises(LockLostError, match="belongs to"):
        holder.check_held()
    assert len(lost) == 1 and later.owner in lost[0]
    holder.release()  # quiet, and the new owner's lock stays
    assert later.is_held()
    later.release()


def test_own_lock_past_expiry_is_not_trusted(tmp_path):
    now = [1000.0]
    lock = _provider(tmp_path, expire_minutes=1, monotonic=lambda: now[0])
    assert lock.try_acquire(1)
    now[0] += 59
    assert lock.is_held()
    now[0] += 2
    assert lock.is_held() is False
    with pytest.raises(LockLostError, match="expire"):
        lock.check_held()
    lock.release()
    assert not os.path.exists(lock.lock_path), "still ours on disk, so release deletes it"


def test_deleted_lock_file_is_a_lost_lock(tmp_path):
    lock = _provider(tmp_path)
    assert lock.try_acquire(1)
    os.unlink(lock.lock_path)
    with pytest.raises(LockLostError, match="deleted"):
        lock.check_held()
    lock.release()
