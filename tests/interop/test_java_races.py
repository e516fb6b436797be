"""A Java Hudi writer and ours on one file group at once (issue 30 item 6, first case).

Java (Spark datasource, ``optimistic_concurrency_control``, LAZY failed-writes policy, and
Hudi's ``ZookeeperBasedLockProvider`` with our ``zookeeper`` provider on the same server, base
path and lock key, or Hudi's ``FileSystemBasedLockProvider`` with our ``filesystem`` one, which
take the same ``.hoodie/lock`` file) upserts one key of a file group; as soon as its instant is inflight (Java has tagged its
records and started writing), our writer upserts another key of the same file group. Hudi's rule: the first to commit wins
and the other must fail, with ``HoodieWriteConflictException`` (Java) or ``WriteConflictError``
(ours). Which side commits first depends on timing, so the test checks the rule for whichever
order happened, and the readers (Java, hudi-rs, ours) see the winner's row and not the loser's.
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
from tests.interop.rows import batch

OURS = {**FAST_WRITE_OPTIONS, "hoodie.metadata.enable": "false"}
JAVA_OCC = {"hoodie.metadata.enable": "false",
            "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
            "hoodie.cleaner.policy.failed.writes": "LAZY",
            "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider"}


def instants(path: str) -> dict[str, str | None]:
    """requested time -> completion time (None while pending) of every commit and deltacommit
    (merge-on-read) on the timeline."""
    out: dict[str, str | None] = {}
    for n in os.listdir(os.path.join(path, ".hoodie", "timeline")):
        head, _, action = n.partition(".")
        if not n[:1].isdigit():
            continue
        if "_" in head and action in ("commit", "deltacommit"):
            req, comp = head.split("_")
            out[req] = comp
        elif action in ("commit.requested", "inflight", "deltacommit.requested", "deltacommit.inflight"):
            out.setdefault(head, None)
    return out


def inflight(path: str) -> list[str]:
    """Instants whose ``<t>.inflight`` exists and that are not completed: past Java's tagging
    (the datasource writes it once it knows which file groups it writes)."""
    folder = os.path.join(path, ".hoodie", "timeline")
    return [t for t, c in instants(path).items() if c is None and any(
        os.path.exists(os.path.join(folder, f"{t}.{action}")) for action in ("inflight", "deltacommit.inflight"))]


def wait_until_java_is_inflight(run, path: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not inflight(path):
        assert run.proc.poll() is None, f"Java ended before its instant was inflight:\n{run.log_tail()}"
        assert time.monotonic() < deadline, f"Java's instant never went inflight:\n{run.log_tail()}"
        time.sleep(0.02)


def lock_options(lock: str, request) -> tuple[dict, dict]:
    """Ours and Java's options for one lock both take: Hudi's file-system lock (the file
    ``.hoodie/lock``) or the ZooKeeper lock (Curator's mutex nodes under the same base path and
    lock key, on the session's real server)."""
    if lock == "filesystem":
        return OURS, JAVA_OCC
    zk = request.getfixturevalue("zk_server")
    # the port inside the url: Java 1.2's provider reads only the url (Curator's connect
    # string) and ignores hoodie.write.lock.zookeeper.port, so with host alone Java would go
    # to port 2181 (docs/java-interop.md)
    zk_opts = {"hoodie.write.lock.zookeeper.url": zk.hosts, "hoodie.write.lock.zookeeper.port": str(zk.port),
               "hoodie.write.lock.zookeeper.base_path": "/hudi/locks",
               "hoodie.write.lock.zookeeper.lock_key": f"race-{request.node.name[-12:]}"}
    ours = {**OURS, **zk_opts, "hoodie.write.lock.provider": "zookeeper"}
    java = {**JAVA_OCC, **zk_opts,
            "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider"}
    return ours, java


@pytest.mark.parametrize("lock", ["zookeeper", pytest.param("filesystem", marks=pytest.mark.slow)])
def test_overlapping_upserts_of_java_and_ours_one_wins_by_hudis_rule(tmp_path, java_hudi, lock, request):
    ours_options, java_options = lock_options(lock, request)
    path = str(tmp_path / "t")
    table = Table.create(path, "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts", version=9)
    first = ArrowTableWriter(table, WriteConfig.from_options(ours_options)).write(
        batch([(i, "a", 1, "x") for i in range(4)]), "insert").instant.requested_time

    run = java_hudi.start(Write(path, batch([(1, "a", 2, "java")]), operation="upsert", options=java_options),
                          Read(path), continue_on_error=True)
    wait_until_java_is_inflight(run, path)
    before = set(instants(path))
    try:
        ours = ArrowTableWriter(Table.open(path), WriteConfig.from_options(ours_options)).write(
            batch([(2, "a", 2, "ours")]), "upsert").instant.requested_time
        ours_error = None
    except WriteConflictError as e:
        ours_error = e
        ours = next(t for t in set(instants(path)) - before)
    java_write, java_read = run.wait(check=False)

    timeline = instants(path)
    java_instant = next(t for t in timeline if t not in (first, ours))
    expected = {i: {"id": i, "v": "x"} for i in range(4)}
    if java_write.ok and ours_error is None:
        # Both committed: legal only if one read the other's file version (Java takes its
        # transaction's start after our commit); a lost update shows in the reads below.
        expected[1], expected[2] = {"id": 1, "v": "java"}, {"id": 2, "v": "ours"}
    else:
        assert (ours_error is None) != java_write.ok, "exactly one side must lose"
        if ours_error is None:  # ours committed first: Java's commit saw it and failed
            assert java_write.error.java_class == WRITE_CONFLICT, java_write.error
            assert timeline[java_instant] is None and timeline[ours] is not None
            assert java_instant < ours  # Java started first and still lost: first to commit wins
            expected[2] = {"id": 2, "v": "ours"}
        else:  # Java committed first: ours saw it at commit and aborted
            assert timeline[java_instant] is not None
            expected[1] = {"id": 1, "v": "java"}
    assert java_read.ok, java_read.error
    for read in (java_read.rows, hudi_read(path), read_table(Table.open(path))):
        assert rows_by_key(read, columns=["id", "v"]) == expected
    print(f"race outcome: java {'committed' if java_write.ok else java_write.error.java_class}, "
          f"ours {'committed' if ours_error is None else type(ours_error).__name__}")


@pytest.mark.slow
def test_disjoint_upserts_of_java_and_ours_both_commit(tmp_path, java_hudi):
    """Java upserts partition b while ours upserts partition a (other file groups): no
    conflict on either side, and every reader sees both."""
    path = str(tmp_path / "t")
    table = Table.create(path, "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts", version=9)
    ArrowTableWriter(table, WriteConfig.from_options(OURS)).write(
        batch([(i, "a" if i % 2 else "b", 1, "x") for i in range(6)]), "insert")
    run = java_hudi.start(Write(path, batch([(0, "b", 2, "java")]), operation="upsert", options=JAVA_OCC),
                          Read(path), continue_on_error=True)
    wait_until_java_is_inflight(run, path)
    ArrowTableWriter(Table.open(path), WriteConfig.from_options(OURS)).write(batch([(1, "a", 2, "ours")]), "upsert")
    java_write, java_read = run.wait()
    assert java_write.ok and all(c is not None for c in instants(path).values())
    expected = {i: {"id": i, "v": "x"} for i in range(6)}
    expected[0], expected[1] = {"id": 0, "v": "java"}, {"id": 1, "v": "ours"}
    for read in (java_read.rows, hudi_read(path), read_table(Table.open(path))):
        assert rows_by_key(read, columns=["id", "v"]) == expected
