"""Our Spark engine racing Java Hudi on one table (issue 30 item 6, the Spark engine's row; the
core writer's are test_java_races and test_java_race_replay).

Java: Spark datasource upserts with ``optimistic_concurrency_control``, LAZY failed-writes
policy, Hudi's ``ZookeeperBasedLockProvider``. Ours: ``SparkHudiWriter`` upserts with our
``zookeeper`` provider on the same real server, base path and lock key, the heartbeat interval
shared. A COW v9 table the Spark engine inserted goes through three rounds, each side held at a
known point so that the order of the commits is the one the round is about:

1. ours first, one file group: our upsert holds at its commit (files written) until a Java
   upsert of the same file group, started then, is inflight; ours commits at once, Java's
   commit must fail with ``HoodieWriteConflictException``;
2. Java first, one file group: our upsert begins (its instant requested), then a Java upsert
   of that file group starts, and ours holds at its commit until Java's round ended; ours
   must fail with ``WriteConflictError`` (had Java committed before ours began, Java's commit
   would be in our snapshot and no conflict: the Spark engine takes seconds to begin);
3. disjoint: Java upserts partition b while ours upserts a: both commit.

All rows carry one ordering value, so the rows depend on the order of the commits. The
committed batches, replayed through our core writer in completion order into a fresh table,
must read as the race's table, by Java, hudi-rs and ours. Counts are printed. Slow (a Spark
session, three JVMs).
"""

from __future__ import annotations

import time

import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import WriteConflictError
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.java_hudi import WRITE_CONFLICT, Read, Write
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key
from tests.interop.rows import SPARK_SCHEMA, batch
from tests.interop.test_java_race_replay import completed
from tests.interop.test_java_races import OURS, inflight, lock_options

pytestmark = pytest.mark.slow

HEARTBEAT = {"hoodie.client.heartbeat.interval_in_ms": FAST_WRITE_OPTIONS["hoodie.client.heartbeat.interval_in_ms"]}
INITIAL = [(i, "a" if i % 2 else "b", 2, "x") for i in range(6)]
#: round -> (Java's rows, ours); ids 1 and 3 share partition a's one file group
ROUNDS = {"ours_first": ([(1, "a", 2, "java1"), (11, "a", 2, "java1")], [(1, "a", 2, "ours1"), (21, "a", 2, "ours1")]),
          "java_first": ([(3, "a", 2, "java2"), (13, "a", 2, "java2")], [(3, "a", 2, "ours2"), (23, "a", 2, "ours2")]),
          "disjoint": ([(0, "b", 2, "java3"), (10, "b", 2, "java3")], [(5, "a", 2, "ours3"), (25, "a", 2, "ours3")])}
WAIT_S = 300


def engine_options(ours_options: dict) -> dict:
    return {**ours_options, **HEARTBEAT, "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "p",
            "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.table.name": "t", "hoodie.write.table.version": "9"}


def wait_for(what: str, ok, run=None, timeout_s: float = WAIT_S) -> None:
    """Wait (bounded) until ``ok()``; says what it waited for, with Java's log, on timeout."""
    deadline = time.monotonic() + timeout_s
    while not ok():
        assert time.monotonic() < deadline, f"waited {timeout_s} s for {what}" + (
            f"\n{run.log_tail()}" if run is not None else "")
        time.sleep(0.01)


def test_the_spark_engine_racing_java_follows_hudis_rule_and_equals_the_serial_replay(
        tmp_path, java_hudi, spark, request):
    from airflow_hudi_occ.spark.writer import SparkHudiWriter
    ours_options, java_options = lock_options("zookeeper", request)
    java_options = {**java_options, **HEARTBEAT}
    path = str(tmp_path / "race")
    writer = SparkHudiWriter(spark, path, engine_options(ours_options))
    first = writer.write(spark.createDataFrame(INITIAL, SPARK_SCHEMA), "insert").instant
    committed: dict[str, tuple[str, list]] = {}  # requested time -> (side, rows)
    errors = {"java": [], "ours": []}

    def java_write(rows):
        return Write(path, batch(rows), operation="upsert", options=java_options)

    def java_now(seen: set) -> str | None:
        fresh = sorted(set(inflight(path)) - seen)
        return fresh[-1] if fresh else None

    # 1. ours first: ours holds at its commit until Java's upsert of that file group is inflight
    java_rows, our_rows = ROUNDS["ours_first"]
    runs = {}

    def start_java_then_commit(tx):
        runs["one"] = run = java_hudi.start(java_write(java_rows), continue_on_error=True)
        wait_for("Java's round 1 inflight", lambda: java_now({first, tx.instant_time}) is not None, run)
    res = writer.write(spark.createDataFrame(our_rows, SPARK_SCHEMA), "upsert", before_commit=start_java_then_commit)
    committed[res.instant] = ("ours", our_rows)
    (step,) = runs["one"].wait(check=False)
    assert not step.ok and (step.error.java_class == WRITE_CONFLICT or step.error.has("HoodieWriteConflictException")), \
        step.error
    errors["java"].append(step.error.java_class.rsplit(".", 1)[-1])

    # 2. Java first: ours begins, then Java's rounds 2 and 3 start (one JVM); ours holds at its
    # commit until Java's round 2 ended. 3. disjoint: Java's round 3 beside ours.
    def start_java(tx):
        runs["two"] = java_hudi.start(java_write(ROUNDS["java_first"][0]), java_write(ROUNDS["disjoint"][0]),
                                      continue_on_error=True)

    def hold_until_java_ended(tx):
        run = runs["two"]
        wait_for("Java's round 2 to end", lambda: len(run.results()) >= 1 or run.proc.poll() is not None, run)
    second = SparkHudiWriter(spark, path, engine_options(ours_options), on_begin=start_java)
    with pytest.raises(WriteConflictError) as lost:
        second.write(spark.createDataFrame(ROUNDS["java_first"][1], SPARK_SCHEMA), "upsert",
                     before_commit=hold_until_java_ended)
    errors["ours"].append(type(lost.value).__name__)
    run = runs["two"]
    seen = set(completed(path)) | {lost.value.instant}  # Java's round 3 may be inflight already

    def java_three_begun(tx):  # ours has its files; Java's round 3 inflight (or done) beside it
        seen.add(tx.instant_time)
        wait_for("Java's round 3 to begin", lambda: java_now(seen) is not None or len(run.results()) >= 2
                 or run.proc.poll() is not None, run)
    res = writer.write(spark.createDataFrame(ROUNDS["disjoint"][1], SPARK_SCHEMA), "upsert",
                       before_commit=java_three_begun)
    committed[res.instant] = ("ours", ROUNDS["disjoint"][1])
    steps = run.wait(check=False)
    for step, name in zip(steps, ("java_first", "disjoint")):
        assert step.ok, step.error  # Java's round 2 won, and round 3 touched nothing of ours
        mine = [c["requested"] for c in step.completed if c["action"] == "commit" and c["requested"] not in committed]
        assert len(mine) == 1, (name, step.completed, committed)
        committed[mine[0]] = ("java", ROUNDS[name][0])

    timeline = completed(path)
    commits = {r: v for r, v in timeline.items() if v[1] == "commit" and r != first}
    assert set(commits) == set(committed), (commits, committed)
    order = sorted(commits, key=lambda r: commits[r][0])
    assert [committed[r][0] for r in order] == ["ours", "java", "ours", "java"] or \
        [committed[r][0] for r in order] == ["ours", "java", "java", "ours"], order

    replay_path = str(tmp_path / "replay")
    table = Table.create(replay_path, "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts", version=9)
    replay = ArrowTableWriter(table, WriteConfig.from_options(OURS))
    replay.write(batch(INITIAL), "insert")
    for r in order:
        replay.write(batch(committed[r][1]), "upsert")
    java_race, java_replay = java_hudi.run(Read(path), Read(replay_path))
    expected = rows_by_key(read_table(Table.open(replay_path)), columns=["id", "v"])
    for name, read in (("java replay", java_replay.rows), ("hudi-rs replay", hudi_read(replay_path)),
                       ("java race", java_race.rows), ("hudi-rs race", hudi_read(path)),
                       ("ours race", read_table(Table.open(path)))):
        assert rows_by_key(read, columns=["id", "v"]) == expected, name
    assert expected[1]["v"] == "ours1" and expected[3]["v"] == "java2" and 21 in expected and 23 not in expected
    sides = [committed[r][0] for r in order]
    print(f"spark-engine race counts: java {sides.count('java')} commits, conflicts {errors['java']}; "
          f"ours {sides.count('ours')} commits, conflicts {errors['ours']}; completion order {sides}; "
          f"rows {len(expected)}")
