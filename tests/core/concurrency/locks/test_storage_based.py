"""The storage lock's own risks: Hudi's file, fields and place; a lease that lapses; a takeover
the former holder must notice; a lease file Java wrote; settings Hudi refuses.

(The shared contract is in test_lock_conformance.py; N processes on the loopback S3 server,
the lock file's history and a SIGKILLed holder are in tests/reliability/test_storage_lock_s3.py.)
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time

import pytest

from airflow_hudi_occ.core.config import LockConfig
from airflow_hudi_occ.core.errors import ConfigError, LockAcquireTimeoutError, LockLostError
from airflow_hudi_occ.core.concurrency.locks import get_lock_provider, resolve_provider_class
from airflow_hudi_occ.core.concurrency.locks.base import LockManager
from airflow_hudi_occ.core.concurrency.locks.storage_based import (
    AGED_POLL_S,
    CLOCK_DRIFT_MS,
    FRONT_POLL_S,
    JITTER,
    MIN_POLL_S,
    NEAR_POLL_S,
    READERS_AHEAD,
    StorageBasedLockProvider,
)
from airflow_hudi_occ.core.concurrency.locks.waiting_line import HANDOFF_S, LISTING_S, STALE_S, WaitingLine, ticket_token
from airflow_hudi_occ.core.format.storage import Storage
from airflow_hudi_occ.core.format.versioned import VersionConflictError, put_if_version, read_versioned

JAVA = "org.apache.hudi.client.transaction.lock.StorageBasedLockProvider"


def _config(validity=10, renew=1, **kw) -> LockConfig:
    return LockConfig(provider="storage", storage_validity_s=validity, storage_renew_s=renew, **kw)


def _provider(tmp_path, config=None, **kw) -> StorageBasedLockProvider:
    return StorageBasedLockProvider(config or _config(), base_path=str(tmp_path / "table"), **kw)


def _lock_file(tmp_path, name="table_lock.json"):
    return tmp_path / "table" / ".hoodie" / ".locks" / name


def _lease(tmp_path, name="table_lock.json"):
    return json.loads(_lock_file(tmp_path, name).read_text())


def _plant(tmp_path, *, owner="java-3f2a", valid_until_ms, expired=False):
    path = _lock_file(tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # exactly what Jackson writes for Hudi's StorageLockData
    path.write_text(f'{{"expired":{str(expired).lower()},"validUntil":{valid_until_ms},"owner":"{owner}"}}')


def test_hudi_names_select_it_with_hudi_defaults():
    assert resolve_provider_class(JAVA) is StorageBasedLockProvider
    assert resolve_provider_class("storage") is StorageBasedLockProvider
    cfg = LockConfig.from_options({"hoodie.write.lock.provider": JAVA})
    assert (cfg.storage_validity_s, cfg.storage_renew_s) == (300, 30)
    cfg = LockConfig.from_options({"hoodie.write.lock.storage.validity.timeout.secs": "60",
                                   "hoodie.write.lock.storage.heartbeat.poll.secs": "5"})
    assert (cfg.storage_validity_s, cfg.storage_renew_s) == (60, 5)  # the deprecated alias too


def test_lease_file_place_and_fields_are_hudis(tmp_path):
    lock = _provider(tmp_path)
    before = int(time.time() * 1000)
    assert lock.try_acquire(1)
    lease = _lease(tmp_path)
    assert list(lease) == ["expired", "validUntil", "owner"]
    assert lease["expired"] is False and lease["owner"] == lock.owner
    assert before + 10_000 <= lease["validUntil"] <= int(time.time() * 1000) + 10_000
    lock.release()
    released = _lease(tmp_path)
    # released by marking it expired (the file stays, as Hudi leaves it)
    assert released == {**lease, "expired": True}


def test_per_key_leases_are_separate_files(tmp_path):
    a, b = _provider(tmp_path, lock_key="p=1/fg-1"), _provider(tmp_path, lock_key="p=1/fg-2")
    assert a.try_acquire(0) and b.try_acquire(0)
    assert _lease(tmp_path, "table_lock.p=1%2Ffg-1.json")["owner"] == a.owner
    assert _lease(tmp_path, "table_lock.p=1%2Ffg-2.json")["owner"] == b.owner
    a.release()
    b.release()


def test_holder_renews_before_the_lease_runs_out(tmp_path):
    lock = _provider(tmp_path)
    assert lock.try_acquire(0)
    first = _lease(tmp_path)["validUntil"]
    time.sleep(2.5)  # two renewal intervals of one second
    assert _lease(tmp_path)["validUntil"] >= first + 1500
    lock.check_held()
    lock.release()


def test_a_live_java_lease_excludes_us_and_a_lapsed_one_is_taken_over(tmp_path):
    now = int(time.time() * 1000)
    _plant(tmp_path, valid_until_ms=now + 60_000)
    lock = _provider(tmp_path)
    assert not lock.try_acquire(0.2)
    assert lock.current_owner() == "java-3f2a"
    # lapsed, but still within the clock-drift buffer: not yet
    _plant(tmp_path, valid_until_ms=int(time.time() * 1000) - CLOCK_DRIFT_MS // 2)
    assert not lock.try_acquire(0)
    _plant(tmp_path, valid_until_ms=int(time.time() * 1000) - CLOCK_DRIFT_MS - 50)
    assert lock.try_acquire(0)
    assert _lease(tmp_path)["owner"] == lock.owner
    lock.release()


def test_a_released_java_lease_is_free_at_once(tmp_path):
    _plant(tmp_path, valid_until_ms=int(time.time() * 1000) + 60_000, expired=True)
    lock = _provider(tmp_path)
    assert lock.try_acquire(0)
    lock.release()


def test_takeover_is_noticed_by_the_former_holder_before_it_commits(tmp_path):
    """A holder that stalls (no renewal) past the validity is taken over; its check_held must
    fail, and its release must not expire the new holder's lease."""
    clock, ticks = [time.time()], [time.monotonic()]
    # its wall clock frozen, as a VM's is stepped back after a pause: only the monotonic
    # clock (the time it really stalled) tells the holder its lease is gone
    stalled = _provider(tmp_path, wall_clock=lambda: clock[0], monotonic=lambda: ticks[0])
    assert stalled.try_acquire(0)
    stalled._stop.set()  # the renewer is stalled (a long GC pause, a frozen VM)
    lost = []
    stalled.add_lost_listener(lambda p, reason: lost.append(reason))
    _plant(tmp_path, valid_until_ms=int(time.time() * 1000) - 1000,
           owner=json.loads(_lock_file(tmp_path).read_text())["owner"])  # its lease ran out
    other = _provider(tmp_path)
    assert other.try_acquire(0)
    ticks[0] += 10  # the stall: the validity (10 s) passed
    with pytest.raises(LockLostError) as e:
        stalled.check_held()
    assert other.owner in str(e.value)
    assert lost and other.owner in lost[0]
    stalled.release()
    assert _lease(tmp_path) == {**_lease(tmp_path), "owner": other.owner, "expired": False}
    other.check_held()
    other.release()


def test_own_lease_is_not_trusted_past_its_end_even_if_nobody_took_it(tmp_path):
    clock = [time.time()]
    lock = _provider(tmp_path, wall_clock=lambda: clock[0])
    assert lock.try_acquire(0)
    lock._stop.set()
    clock[0] += 10 - CLOCK_DRIFT_MS / 1000 + 0.1  # inside the drift margin before validUntil
    with pytest.raises(LockLostError, match="ran out"):
        lock.check_held()
    lock.release()


def test_check_held_reads_nothing_while_both_clocks_say_the_lease_is_ours(tmp_path, monkeypatch):
    """Hudi's isLockStillValid: the holder's own lease, no request under the table lock."""
    lock = _provider(tmp_path)
    assert lock.try_acquire(0)
    reads = []
    monkeypatch.setattr(lock, "_read", lambda: reads.append(1) or (None, None, None))
    lock.check_held()
    assert reads == []
    monkeypatch.undo()
    lock.release()


def test_acquire_after_own_release_is_one_write_and_reads_only_when_someone_wrote(tmp_path, monkeypatch):
    lock = _provider(tmp_path)
    assert lock.try_acquire(0)
    lock.release()
    reads = []
    raw_read = lock._read
    monkeypatch.setattr(lock, "_read", lambda: reads.append(1) or raw_read())
    assert lock.try_acquire(0)
    assert reads == []  # the version of its own release was still current
    lock.release()
    # another process (Java, say) took it and released it since: the remembered version is stale
    _plant(tmp_path, valid_until_ms=int(time.time() * 1000) + 60_000, expired=True)
    assert lock.try_acquire(0)  # one failed conditional write, a read, then it is taken
    assert reads == [1] and _lease(tmp_path)["owner"] == lock.owner
    lock.release()


def test_deleted_lease_is_a_lost_lock_at_the_next_renewal(tmp_path):
    lock = _provider(tmp_path)  # renews every second
    assert lock.try_acquire(0)
    os.unlink(_lock_file(tmp_path))
    deadline = time.monotonic() + 5
    while lock.is_held() and time.monotonic() < deadline:
        time.sleep(0.1)
    with pytest.raises(LockLostError, match="rewritten"):
        lock.check_held()
    lock.release()  # must not raise


def test_a_file_that_is_not_a_lease_is_not_taken_and_the_reason_is_given(tmp_path):
    path = _lock_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("garbage")
    lock = _provider(tmp_path)
    assert not lock.try_acquire(0)
    assert "table_lock.json" in lock.last_failure and "delete it" in lock.last_failure
    assert path.read_text() == "garbage"


@pytest.mark.parametrize("validity,renew,why", [(9, 0, "under 1 second"), (9, 1, "under 10 seconds"),
                                                (100, 11, "ten times")])
def test_settings_hudi_refuses_are_refused(tmp_path, validity, renew, why):
    with pytest.raises(ConfigError, match=why) as e:
        _provider(tmp_path, _config(validity, renew))
    assert "300 and 30" in e.value.remedy
    assert not _lock_file(tmp_path).exists()


def test_a_store_without_conditional_overwrite_is_refused(tmp_path):
    store = Storage("dir://tbl", {"path": str(tmp_path), "target_protocol": "file"},
                    assume_locked_creates=True)
    with pytest.raises(ConfigError, match="conditional overwrites") as e:
        get_lock_provider(_config(), base_path=store.base_uri, table_name="t", storage=store)
    assert "zookeeper" in e.value.remedy


def test_local_compare_and_swap_lets_exactly_one_of_many_threads_win(tmp_path):
    """The local primitive under the lease: N threads replace the same version, one wins."""
    store = Storage(str(tmp_path))
    path = store.path("f.json")
    put_if_version(store, path, b"v0", None)
    _data, version = read_versioned(store, path)
    wins, barrier = [], threading.Barrier(8)

    def contend(i):
        barrier.wait()
        try:
            put_if_version(store, path, f"v{i}".encode(), version)
            wins.append(i)
        except VersionConflictError:
            pass

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and store.read(path) == f"v{wins[0]}".encode()
    with pytest.raises(VersionConflictError):
        put_if_version(store, path, b"late", None)


class _Clock:
    """A monotonic clock that only the provider's sleeps move, and the pauses they asked for."""

    def __init__(self):
        self.now = 1000.0
        self.pauses: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.pauses.append(s)
        self.now += s


def _held_by_java(tmp_path):
    _plant(tmp_path, valid_until_ms=int(time.time() * 1000) + 600_000)


def _line_folder(tmp_path):
    return _lock_file(tmp_path).parent / "table_lock.json.line"


def _counting_reads(lock) -> list[int]:
    count = [0]
    read = lock._read

    def counted():
        count[0] += 1
        return read()
    lock._read = counted
    return count


def test_a_lone_waiter_takes_a_ticket_and_reads_the_lease_every_200_ms_at_most(tmp_path):
    """The first in the line takes the lease next: its pauses grow from 10 ms to FRONT_POLL_S
    (each pause is a gap in which nobody holds the lock). Its ticket is a file of the line
    beside the lease, gone once it has released the lock."""
    _held_by_java(tmp_path)
    clock = _Clock()
    lock = _provider(tmp_path, monotonic=clock.monotonic, sleep=clock.sleep)
    assert not lock.try_acquire(5.0)
    assert MIN_POLL_S * JITTER[0] <= clock.pauses[0] <= MIN_POLL_S * JITTER[1]
    assert max(clock.pauses) <= FRONT_POLL_S * JITTER[1]
    assert 20 <= len(clock.pauses) <= 45, clock.pauses
    tickets = os.listdir(_line_folder(tmp_path))
    assert len(tickets) == 1 and tickets[0].endswith("-" + ticket_token(lock.owner)), tickets
    _plant(tmp_path, valid_until_ms=int(time.time() * 1000) + 60_000, expired=True)
    assert lock.try_acquire(1.0)
    lock.release()
    _wait_until(lambda: not os.listdir(_line_folder(tmp_path)))


def _wait_until(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_the_waiters_near_the_front_read_the_lease_the_rest_the_line_and_they_take_it_in_order(tmp_path):
    """Issue 43: at 32 writers the waiters' reads of the lease were most of the store's load.
    In the line the first two read the lease every FRONT_POLL_S at most, the next ones up to
    READERS_AHEAD waiters back every NEAR_POLL_S (so each learns from the lease's owner that
    one ahead took the lock, and moves up without listing: with only two readers the line ran
    dry between turns, and the lock lay free a third of the time at 8 writers), the rest read
    nothing but the line every LISTING_S. A free lease is the first waiter's; the next takes
    it only if the first leaves it free for HANDOFF_S; nobody further back takes it."""
    _held_by_java(tmp_path)
    n = READERS_AHEAD + 2
    clocks = [_Clock() for _ in range(n)]
    waiters = [_provider(tmp_path, monotonic=k.monotonic, sleep=k.sleep) for k in clocks]
    reads = [_counting_reads(x) for x in waiters]
    for x in waiters:  # they join in this order
        assert not x.try_acquire(0.05)
        time.sleep(0.002)
    for k in clocks:
        k.pauses.clear()
    before = [r[0] for r in reads]
    for x in waiters[:-1]:
        assert not x.try_acquire(4.0)
    assert not waiters[-1].try_acquire(10.0)
    got = [r[0] - b for r, b in zip(reads, before)]
    assert got[0] >= 15 and got[1] >= 15, got  # the first two: every 200 ms at most
    for near in got[2:-1]:  # every 500 ms, jittered: 6.4 to 10.7 pauses in 4 s
        assert 5 <= near <= 12, got
    assert got[-1] == 0, got  # the last: only the line
    assert max(clocks[-1].pauses) >= LISTING_S * JITTER[0]
    assert max(clocks[2].pauses) <= NEAR_POLL_S * JITTER[1]
    a, b, c = waiters[:3]
    _plant(tmp_path, valid_until_ms=int(time.time() * 1000) + 60_000, expired=True)  # Java let go
    assert not c.try_acquire(HANDOFF_S * 1.5)  # free, but two are ahead: its turn after two handoffs
    assert not b.try_acquire(HANDOFF_S / 2)  # free, the first's turn
    assert a.try_acquire(1.0)
    assert not b.try_acquire(0.5)  # it reads the lease: held by the one that was ahead
    assert b._line.ahead == 0  # so it is first now
    assert not c.try_acquire(0.6)  # and the third, two back, moved up the same way
    assert c._line.ahead == 1
    assert len(os.listdir(_line_folder(tmp_path))) == n  # a's ticket goes when it releases
    a.release()
    _wait_until(lambda: len(os.listdir(_line_folder(tmp_path))) == n - 1)
    for x in waiters[1:]:  # each in its turn
        assert x.try_acquire(3.0 if x is not waiters[-1] else 6.0)
        x.release()
    _wait_until(lambda: not os.listdir(_line_folder(tmp_path)))


def test_a_free_lease_the_first_waiter_leaves_untaken_goes_to_the_next_after_the_handoff(tmp_path):
    _held_by_java(tmp_path)
    clocks = [_Clock(), _Clock()]
    a, b = (_provider(tmp_path, monotonic=k.monotonic, sleep=k.sleep) for k in clocks)
    assert not a.try_acquire(0.05)
    time.sleep(0.002)
    assert not b.try_acquire(0.05)
    _plant(tmp_path, valid_until_ms=int(time.time() * 1000) + 60_000, expired=True)
    # a stalls (its ticket alive, it reads nothing): b waits HANDOFF_S, then takes it
    since = clocks[1].now
    assert b.try_acquire(HANDOFF_S + 2.0)
    assert HANDOFF_S <= clocks[1].now - since <= HANDOFF_S + 1.5
    b.release()
    a.end_wait()


def test_a_stale_ticket_does_not_hold_up_the_line_and_is_deleted(tmp_path):
    """A waiter that died without leaving: its ticket is not refreshed, and after STALE_S it is
    no one's (the next waiter to list the line deletes it)."""
    _held_by_java(tmp_path)
    folder = _line_folder(tmp_path)
    folder.mkdir(parents=True)
    dead = folder / f"{int(time.time() * 1000) - 120_000:013d}-{ticket_token('dead-writer')}"
    dead.write_bytes(b"")
    old = time.time() - STALE_S - 5
    os.utime(dead, (old, old))
    clock = _Clock()
    lock = _provider(tmp_path, monotonic=clock.monotonic, sleep=clock.sleep)
    assert not lock.try_acquire(1.0)
    assert lock._line.ahead == 0
    assert not dead.exists()
    lock.end_wait()
    assert not os.listdir(folder)  # the manager gave up: it left the line


def test_a_manager_that_gives_up_leaves_the_line(tmp_path):
    _held_by_java(tmp_path)
    lock = _provider(tmp_path)
    manager = LockManager(lock, dataclasses.replace(_config(), wait_time_ms=300, client_num_retries=1,
                                                    client_wait_time_ms_between_retry=100))
    with pytest.raises(LockAcquireTimeoutError):
        manager.acquire()
    assert not os.listdir(_line_folder(tmp_path))


def test_without_a_line_the_longer_a_waiter_has_waited_the_more_often_it_reads(tmp_path, monkeypatch):
    """When the store refuses a ticket a waiter waits as Hudi's provider does, pauses growing
    from 10 ms to Hudi's 1 s (``hoodie.write.lock.wait_time_ms_between_retry``), and, the lease
    having no queue, more often the longer it has waited, so the writer that has waited longest
    is the likeliest to find it free first. The wait counts across the manager's attempts."""
    def refuse(self):
        raise PermissionError("no writes here")
    monkeypatch.setattr(WaitingLine, "join", refuse)
    _held_by_java(tmp_path)
    clock = _Clock()
    lock = _provider(tmp_path, monotonic=clock.monotonic, sleep=clock.sleep)
    assert lock.poll_cap_s == 1.0
    assert not lock.try_acquire(5.0)
    assert max(clock.pauses) <= 1.0 * JITTER[1]
    assert 0.45 < max(clock.pauses[:-1])  # it did reach the cap's range in 5 s
    assert 8 <= len(clock.pauses) <= 16, clock.pauses
    assert lock.poll_cap(0) == 1.0
    assert lock.poll_cap(10) == pytest.approx(0.5)
    assert lock.poll_cap(1_000) == AGED_POLL_S
    assert not lock.try_acquire(15.0)
    clock.pauses.clear()
    assert not lock.try_acquire(10.0)  # the manager's next attempt: 20 s into the wait
    assert max(clock.pauses[:-1]) <= lock.poll_cap(20.0) * JITTER[1]
    assert len(clock.pauses) >= 25  # about three reads a second, not one
    # taken: the next wait starts afresh
    _plant(tmp_path, valid_until_ms=int(time.time() * 1000) + 60_000, expired=True)
    assert lock.try_acquire(0)
    lock.release()
    _held_by_java(tmp_path)
    clock.pauses.clear()
    assert not lock.try_acquire(3.0)
    assert max(clock.pauses[:-1]) > lock.poll_cap(20.0) * JITTER[1]  # young again: up to 1 s


def test_the_cap_is_hudis_setting(tmp_path):
    lock = _provider(tmp_path, _config(wait_time_ms_between_retry=200))
    assert lock.poll_cap_s == 0.2
    assert lock.poll_cap(1_000) == AGED_POLL_S
    fast = _provider(tmp_path, _config(wait_time_ms_between_retry=50))
    assert fast.poll_cap(1_000) == 0.05  # never slower than asked
