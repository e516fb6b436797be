"""Instant times without the skew wait: ordered by the timeline floor, across processes whose
wall clocks step back and forward.

Three writer processes commit concurrently on one table under the file-system lock with the
default ``hoodie.time.generator.type`` (TIMELINE_FLOOR: no wait). Each process shifts its
``time.time`` by a different offset before every commit (up to an hour back or forward: NTP
steps, VM migration, a badly set host). The check is independent of the wall clock: each
process records, inside the lock, the kernel's monotonic clock (one clock for all processes)
when it creates a requested instant and when it completes one. In that real order, every time
handed out (requested and completion) must be strictly larger than every time before it, and
all must be unique; hudi-rs must read every committed row.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from airflow_hudi_occ.core.table.history import TimelineHistory
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS


CHILD = textwrap.dedent("""
    import json, random, sys, time
    import pyarrow as pa
    from airflow_hudi_occ.core.commit import transaction
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.table.table import Table
    base, opts, worker, n = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    out = open(sys.argv[5], "w")
    from airflow_hudi_occ.core.format.instant_time import process_generator
    real, offset = time.time, [0.0]
    # the process's one generator (what every transaction here uses) reads a shifted clock
    process_generator(WriteConfig.from_options(opts).skew_wait_ms)._clock = lambda: real() + offset[0]
    orig_req, orig_done = transaction.create_requested, transaction.complete
    def create_requested(table, inst, data=b""):
        orig_req(table, inst, data)
        out.write(json.dumps(["requested", time.monotonic_ns(), inst.requested_time]) + "\\n")
    def complete(table, inst, completion_time, data, **kw):
        done = orig_done(table, inst, completion_time, data, **kw)
        out.write(json.dumps(["completed", time.monotonic_ns(), completion_time]) + "\\n")
        return done
    transaction.create_requested, transaction.complete = create_requested, complete
    import os
    rnd = random.Random(worker)
    w = ArrowTableWriter(Table.open(base), WriteConfig.from_options(opts), writer_id=f"w{worker}")
    barrier, workers = sys.argv[6], int(sys.argv[7])
    for i in range(n):
        # rounds in step (a file barrier), so that processes an hour apart interleave
        open(os.path.join(barrier, f"r{i}_{worker}"), "w").close()
        while len([f for f in os.listdir(barrier) if f.startswith(f"r{i}_")]) < workers:
            time.sleep(0.002)
        offset[0] = (3600.0 if (i + worker) % 2 else -3600.0) + rnd.choice([-5.0, -0.2, 0.0, 0.2, 5.0])
        w.write(pa.table({"id": [worker * 1000 + i], "p": ["p0"], "v": [str(i)]}), "insert")
    out.close()
""")


def test_times_follow_the_lock_order_whatever_the_wall_clocks(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"])
    opts = {k: v for k, v in FAST_WRITE_OPTIONS.items() if k != "hoodie.time.generator.max_expected_clock_skew_ms"}
    opts["hoodie.write.lock.wait_time_ms"] = "60000"
    workers, n = 3, 12
    (tmp_path / "barrier").mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, table.base_uri, json.dumps(opts), str(w), str(n),
                               str(tmp_path / f"log{w}.jsonl"), str(tmp_path / "barrier"), str(workers)],
                              stderr=subprocess.PIPE, text=True)
             for w in range(workers)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
    events = sorted((json.loads(line) for w in range(workers)
                     for line in (tmp_path / f"log{w}.jsonl").read_text().splitlines()),
                    key=lambda e: e[1])  # the kernel's monotonic clock: the real order
    assert len([e for e in events if e[0] == "requested"]) == workers * n
    handed_out = [t for _, _, t in events]
    assert len(set(handed_out)) == len(handed_out)
    assert all(a[2] < b[2] for a, b in zip(events, events[1:])), \
        [(e[0], e[2]) for e in events]
    tl = table.timeline()
    # automatic archival (keep 20-30 active) moved the oldest commits to the LSM history
    archived = [a for a in TimelineHistory(table).instants() if a.action == "commit"]
    assert len(tl.completed_writes()) + len(archived) == workers * n
    assert {i.requested_time for i in tl.completed_writes()}.isdisjoint(a.instant_time for a in archived)
    assert set(read_rows_ids(table)) == {w * 1000 + i for w in range(workers) for i in range(n)}


def read_rows_ids(table):
    from airflow_hudi_occ.testing.tables import hudi_read
    return hudi_read(table.base_uri).column("id").to_pylist()
