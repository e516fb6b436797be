"""A clock that goes backwards, and a disk that fills up.

Clock: instant times must stay unique and increasing whatever the wall clock does (NTP steps,
VM migration), both within one generator and across generators sharing a timeline (the floor).

Full disk: the storage layer fails with ENOSPC at the N-th data write (N swept over the whole
write path: requested, inflight, markers, base files, completed file...). Each time: a typed
error (no raw OSError), nothing committed is lost, the table stays readable by hudi-rs, no
half-written temporary file is left, and once space returns lazy rollback + the next write
succeed.
"""

from __future__ import annotations

import errno
import time

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_hudi_occ.core.format import storage as storage_mod
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import HudiOccError
from airflow_hudi_occ.core.format.instant_time import InstantTimeGenerator, parse_ms
from airflow_hudi_occ.core.commit.rollback import rollback_failed_writes
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter

from .conftest import all_files, assert_unique_times, lock_options, read_rows


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=-10**7, max_value=10**7), min_size=1, max_size=60),
       st.lists(st.booleans(), min_size=1, max_size=60))
def test_clock_going_backwards_keeps_times_unique_and_increasing(steps, use_floor):
    now = [1_700_000_000_000]

    def clock():
        return now[0] / 1000.0
    a = InstantTimeGenerator(0, clock=clock, sleep=lambda s: None)
    b = InstantTimeGenerator(0, clock=clock, sleep=lambda s: None)  # another process, same clock
    timeline: list[str] = []
    for i, step in enumerate(steps):
        now[0] = max(0, now[0] + step)
        gen = a if i % 2 else b
        floor = max(timeline) if timeline and use_floor[i % len(use_floor)] else None
        t = gen.new_time(floor=floor)
        assert len(t) == 17 and t.isdigit()
        parse_ms(t)
        if floor:
            assert t > floor
        timeline.append(t)
    for gen_times in (timeline[1::2], timeline[0::2]):
        assert gen_times == sorted(gen_times) and len(set(gen_times)) == len(gen_times)
    # With the floor (what the transaction passes under the lock) times are globally unique.
    if all(use_floor[i % len(use_floor)] for i in range(1, len(steps))):
        assert timeline == sorted(timeline) and len(set(timeline)) == len(timeline)


def test_clock_backwards_in_real_commits(table, monkeypatch):
    """Commit, step the wall clock back an hour, commit again: times still increase."""
    opts = lock_options("inprocess", **{"hoodie.write.concurrency.early.conflict.detection.enable": "false"})
    w = ArrowTableWriter(table, WriteConfig.from_options(opts))
    w.write(pa.table({"id": [1], "p": ["p0"], "value": ["a"], "ts": [0]}))
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() - 3600)
    w.write(pa.table({"id": [2], "p": ["p0"], "value": ["b"], "ts": [0]}))
    monkeypatch.setattr(time, "time", real)
    times = [i.requested_time for i in table.timeline().completed_writes()]
    assert times == sorted(times) and len(times) == 2
    assert_unique_times(table)
    assert set(read_rows(table)) == {1, 2}


class DiskFull:
    """Fail the N-th (and later) file write at the storage layer with ENOSPC, after part of the
    bytes reached the file, as a real full disk does (the storage module's ``open`` is wrapped;
    everything above it, including the atomic-create temp-file dance, is the real code)."""

    def __init__(self, monkeypatch, fail_at: int):
        self.calls = 0
        self.fail_at = fail_at
        self.full = True
        self.failed = 0
        disk = self

        class _File:
            def __init__(self, f):
                self._f = f

            def write(self, data):
                self._f.write(data[: len(data) // 2])
                self._f.flush()
                disk.failed += 1
                raise OSError(errno.ENOSPC, "No space left on device")

            def __getattr__(self, name):
                return getattr(self._f, name)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self._f.close()

        def fake_open(path, mode="r", *a, **kw):
            f = open(path, mode, *a, **kw)
            if "w" in mode:
                self.calls += 1
                if self.full and self.calls >= self.fail_at:
                    return _File(f)
            return f
        monkeypatch.setattr(storage_mod, "open", fake_open, raising=False)


def _count_writes(table, opts, rows, monkeypatch):
    probe = DiskFull(monkeypatch, 10**9)
    ArrowTableWriter(table, WriteConfig.from_options(opts)).write(pa.Table.from_pylist(rows))
    monkeypatch.undo()
    return probe.calls


SEED = [{"id": i, "p": f"p{i % 2}", "value": "seed", "ts": 0} for i in range(10)]
BATCH = [{"id": 0, "p": "p0", "value": "new", "ts": 1}, {"id": 1, "p": "p1", "value": "new", "ts": 1},
         {"id": 50, "p": "p0", "value": "new", "ts": 1}]


def test_disk_full_at_every_write(tmp_path, monkeypatch):
    opts = lock_options("filesystem", **{"hoodie.client.heartbeat.interval_in_ms": "200"})
    cfg = WriteConfig.from_options(opts)
    # how many storage writes one batch makes (on a scratch table)
    scratch = Table.create(str(tmp_path / "scratch"), "s", record_key_fields=["id"],
                           partition_fields=["p"], precombine_field="ts")
    ArrowTableWriter(scratch, cfg).write(pa.Table.from_pylist(SEED))
    n_writes = _count_writes(scratch, opts, BATCH, monkeypatch)
    assert n_writes >= 5
    outcomes = []
    for n in range(1, n_writes + 1):
        table = Table.create(str(tmp_path / f"t{n}"), "t", record_key_fields=["id"],
                             partition_fields=["p"], precombine_field="ts")
        ArrowTableWriter(table, cfg).write(pa.Table.from_pylist(SEED))
        committed = {r["id"]: {"value": r["value"], "p": r["p"]} for r in SEED}
        disk = DiskFull(monkeypatch, n)
        try:
            ArrowTableWriter(table, cfg).write(pa.Table.from_pylist(BATCH))
            outcome = "committed"
        except HudiOccError as e:  # typed; a raw OSError fails the test
            outcome = type(e).__name__
        disk.full = False
        monkeypatch.undo()
        outcomes.append((n, outcome))
        rows = read_rows(table)
        if outcome == "committed":  # the failed write came after completion (bookkeeping)
            committed |= {r["id"]: {"value": r["value"], "p": r["p"]} for r in BATCH}
        assert rows == committed, f"disk full at write {n}: rows lost or exposed"
        strays = [f for f in all_files(table) if f.endswith(".tmp")]
        assert strays == [], f"disk full at write {n} left partial temp files {strays}"
        # space is back: dead attempts are rolled back, the next write commits
        # no writer is alive now: judge the dead attempts' heartbeats as of just past expiry
        rollback_failed_writes(table, cfg, now=time.time() + cfg.heartbeat.expiry_ms / 1000 + 0.1)
        assert table.timeline().pending_writes() == []
        ArrowTableWriter(table, cfg).write(pa.Table.from_pylist(
            [{"id": 7, "p": "p1", "value": "after", "ts": 2}]))
        assert read_rows(table)[7]["value"] == "after"
        assert_unique_times(table)
    assert any(o != "committed" for _n, o in outcomes)
