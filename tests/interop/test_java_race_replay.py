"""A multi-round race of Java Hudi and ours on one table equals a serial replay (issue 30 item 6,
fifth case).

One JVM runs four Java OCC upserts in a row (LAZY, Hudi's ``ZookeeperBasedLockProvider``) while
our core writer upserts once per Java round, as soon as Java's instant is inflight (our
``zookeeper`` provider, same server, base path and lock key; the heartbeat interval shared).
Java's rounds write partitions a+b, a, b, a; ours always a, committing at once (Java's
overlapping round must then fail) except in round 2, where ours holds at its commit until
Java's round ended (ours must then fail). All rows carry one ordering value, so the final rows
depend on the order of the commits. Then:

- every conflict is Hudi's (``HoodieWriteConflictException`` / ``WriteConflictError``), and
  nothing else fails;
- the committed batches, replayed through our core writer in completion order into a fresh
  table, give the race's final table: Java, hudi-rs and ours read both tables the same.

The counts (commits and conflicts per side, rows) are printed. Slow (two JVMs, ~1 min).
"""

from __future__ import annotations

import os
import time

import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import WriteConflictError
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.java_hudi import WRITE_CONFLICT, Read, Write
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key
from tests.interop.test_java_races import OURS, batch, inflight, lock_options

pytestmark = pytest.mark.slow

ROUNDS = 4
HEARTBEAT = {"hoodie.client.heartbeat.interval_in_ms": FAST_WRITE_OPTIONS["hoodie.client.heartbeat.interval_in_ms"]}
INITIAL = [(i, "a" if i % 2 else "b", 2, "x") for i in range(6)]


#: Java's rounds: a and b, a, b, a
JAVA_PARTITIONS = ["ab", "a", "b", "a"]
#: ours always writes a: at once when Java is inflight (ours commits first, Java's overlapping
#: round must fail), or held at its commit until Java's round ended (Java first, ours fails)
OURS_HOLDS = [False, True, False, False]


def java_batch(k: int):
    rows = []
    if "a" in JAVA_PARTITIONS[k]:
        rows += [(1 + 2 * (k % 2), "a", 2, f"java{k}"), (11 + 2 * k, "a", 2, f"java{k}")]
    if "b" in JAVA_PARTITIONS[k]:
        rows += [(0, "b", 2, f"java{k}"), (10 + 2 * k, "b", 2, f"java{k}")]
    return rows


def ours_batch(j: int):
    return [(1 + 2 * (j % 2), "a", 2, f"ours{j}"), (21 + 2 * j, "a", 2, f"ours{j}")]


def completed(path: str) -> dict[str, tuple[str, str]]:
    """requested time -> (completion time, action) of every completed instant."""
    out = {}
    for n in os.listdir(os.path.join(path, ".hoodie", "timeline")):
        head, _, action = n.partition(".")
        if n[:1].isdigit() and "_" in head:
            req, comp = head.split("_")
            out[req] = (comp, action)
    return out


def new_table(path: str) -> str:
    table = Table.create(path, "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts", version=9)
    return ArrowTableWriter(table, WriteConfig.from_options(OURS)).write(
        batch(INITIAL), "insert").instant.requested_time


def test_multi_round_race_equals_serial_replay(tmp_path, java_hudi, request):
    ours_options, java_options = lock_options("zookeeper", request)
    ours_options, java_options = {**ours_options, **HEARTBEAT}, {**java_options, **HEARTBEAT}
    path = str(tmp_path / "race")
    first = new_table(path)

    run = java_hudi.start(*[Write(path, batch(java_batch(k)), operation="upsert", options=java_options)
                            for k in range(ROUNDS)], continue_on_error=True)
    deadline = time.monotonic() + 300
    seen = {first}
    ours_committed: dict[str, list] = {}
    ours_errors: list[str] = []
    for j in range(ROUNDS):
        java_now = None
        while java_now is None and run.proc.poll() is None:  # Java's next round is inflight
            assert time.monotonic() < deadline, run.log_tail()
            fresh = sorted(set(inflight(path)) - seen)
            java_now = fresh[-1] if fresh else None
            time.sleep(0.01)
        if java_now is None:
            break  # Java is done
        seen.add(java_now)
        done_steps = len(run.results())

        def hold(tx, java_now=java_now, done_steps=done_steps):
            seen.add(tx.instant_time)
            while (OURS_HOLDS[j] and completed(path).get(java_now) is None
                   and len(run.results()) == done_steps and run.proc.poll() is None):
                assert time.monotonic() < deadline, run.log_tail()
                time.sleep(0.01)

        try:
            res = ArrowTableWriter(Table.open(path), WriteConfig.from_options(ours_options)).write(
                batch(ours_batch(j)), "upsert", before_commit=hold)
            ours_committed[res.instant.requested_time] = ours_batch(j)
        except WriteConflictError as e:
            ours_errors.append(type(e).__name__)
    steps = run.wait(check=False)

    java_committed: dict[str, list] = {}
    java_errors: list[str] = []
    for k, step in enumerate(steps):
        if not step.ok:
            assert step.error.java_class == WRITE_CONFLICT or step.error.has("HoodieWriteConflictException"), \
                step.error
            java_errors.append(step.error.java_class.rsplit(".", 1)[-1])
            continue
        mine = [c["requested"] for c in step.completed
                if c["action"] == "commit" and c["requested"] not in ours_committed and c["requested"] != first]
        assert len(mine) == 1, (k, step.completed, ours_committed)
        java_committed[mine[0]] = java_batch(k)

    timeline = completed(path)
    commits = {r: v for r, v in timeline.items() if v[1] == "commit" and r != first}
    assert set(commits) == set(ours_committed) | set(java_committed), (commits, ours_committed, java_committed)
    order = sorted(commits, key=lambda r: commits[r][0])
    assert java_committed and ours_committed and java_errors and ours_errors, (java_errors, ours_errors)

    replay_path = str(tmp_path / "replay")
    new_table(replay_path)
    replay_writer = ArrowTableWriter(Table.open(replay_path), WriteConfig.from_options(OURS))
    for r in order:
        replay_writer.write(batch(ours_committed.get(r) or java_committed[r]), "upsert")

    java_race, java_replay = java_hudi.run(Read(path), Read(replay_path))
    expected = rows_by_key(read_table(Table.open(replay_path)), columns=["id", "v"])
    for name, read in (("java replay", java_replay.rows), ("hudi-rs replay", hudi_read(replay_path)),
                       ("java race", java_race.rows), ("hudi-rs race", hudi_read(path)),
                       ("ours race", read_table(Table.open(path)))):
        assert rows_by_key(read, columns=["id", "v"]) == expected, name
    print(f"race counts: java {len(java_committed)} commits, conflicts {java_errors}; "
          f"ours {len(ours_committed)} commits, conflicts {ours_errors}; "
          f"completion order {['ours' if r in ours_committed else 'java' for r in order]}; rows {len(expected)}")
