"""Java writers at Hudi's defaults and ours at ours, on one table with Java's metadata table
(issue 32, "What must be shown"): no option about the metadata table on either side.

Java 1.2 at its defaults builds ``files``, ``column_stats`` and ``partition_stats`` at its first
write; our writer at its defaults (``hoodie.occ.metadata.files.maintain=true`` since issue 32
item 6) keeps all three in its copy-on-write commits. Taking turns (Java insert, ours upsert,
Java upsert, ours delete, Java upsert, ours upsert) and racing under one ZooKeeper lock (Java
in partition b while ours is in a: both commit; then both in one file group: exactly one
wins by Hudi's rule), after every commit:

- Java's snapshot read (through the metadata table) and a read with data skipping (pruning
  files by ``column_stats``) are exact against the model; hudi-rs and our reader too;
- Java's own metadata reader agrees with the files (:class:`MetadataCheck`, the equivalent of
  ``HoodieMetadataTableValidator``: listing, column stats, partition stats), and our reading of
  the ``files`` partition equals the storage;
- the metadata table was never initialised again: its initial instants are unchanged and each
  commit, Java's or ours, added exactly one deltacommit to it, at the commit's instant time.

One JVM session answers the turns' Java steps (the ``java_hudi`` fixture); the race starts one
JVM of its own, once, for both of Java's racing writes. The default run takes the copy-on-write
version 9 turns (about 50 s besides the session's JVM); version 8, merge-on-read (versions 9
and 8) and the race (copy-on-write v9, merge-on-read v9 and v8) are slow.
"""

from __future__ import annotations

import os
import time

import pytest

from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.commit.rollback import rollback_failed_writes
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import WriteConflictError
from airflow_hudi_occ.core.format.log_file import LogFileName
from airflow_hudi_occ.core.services.clean import run_clean
from airflow_hudi_occ.core.table.metadata_listing import read_metadata_listing
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.java_hudi import WRITE_CONFLICT, MetadataCheck, Read, Service, Write
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key
from tests.interop.rows import ONE_VERSION, apply, batch
from tests.interop.test_java_metadata_every_action import data_files, mdt_instants
from tests.interop.test_java_metadata_stats import (INDEXED, SKIPPING, assert_file_stats_recorded,
                                                     assert_java_metadata_agrees)
from tests.interop.test_java_metadata_table import COLS, KEYS, metadata_partitions, model_of
from tests.interop.test_java_races import inflight, instants, lock_options, wait_until_java_is_inflight

#: what Java 1.2 builds at its defaults, and what ours keeps at its own
JAVA_DEFAULT_PARTITIONS = ["column_stats", "files", "partition_stats"]
#: Java's heartbeat as ours (1 s), so that a losing Java writer's instant expires in seconds
HEARTBEAT = {"hoodie.client.heartbeat.interval_in_ms": FAST_WRITE_OPTIONS["hoodie.client.heartbeat.interval_in_ms"]}
EXPIRY_S = int(HEARTBEAT["hoodie.client.heartbeat.interval_in_ms"]) / 1000 * 2 + 1.5


def initial_instants(path: str) -> list[str]:
    """The metadata table's initialisation: the instant files of its ``0000000000000000xx``
    instants (one per partition Java built from a listing; a completed one's name carries its
    completion time, which a rebuild would change) and the ``files`` partition's first file."""
    names = [n for t, files in mdt_instants(path).items() if t.startswith("0000000000000000") for n in files]
    folder = os.path.join(path, ".hoodie", "metadata", "files")
    first = min((n for n in os.listdir(folder) if not n.endswith(".crc") and "files-" in n),
                key=lambda n: n.rsplit("_", 1)[-1] if n.endswith(".hfile") else n.split("_", 1)[1])
    return sorted(names) + [first]


def log_files_of(path: str, instant: str) -> dict[str, list[str]]:
    """The data table's log files written at ``instant``, by partition."""
    return {p: sorted(n for n in files if LogFileName.parse(n) is not None and f"_{instant}.log." in n)
            for p, files in data_files(path).items()}


class Shared:
    """One table, its model and the metadata table's timeline as last seen; :meth:`check`
    after every commit."""

    def __init__(self, java_hudi, path: str):
        self.java, self.path, self.model = java_hudi, path, {}
        self.initial: list[str] = []
        self.seen: set[str] = set()

    def java_write(self, rows, op: str = "upsert", **kw):
        (written,) = self.java.run(Write(self.path, batch(rows), operation=op, **KEYS, **kw))
        apply(self.model, rows, op)
        return written.instant

    def ours(self, rows, op: str = "upsert", options: dict | None = None, writer=ArrowTableWriter) -> str:
        result = writer(Table.open(self.path), WriteConfig.from_options(options or FAST_WRITE_OPTIONS)) \
            .write(batch(rows), op)
        apply(self.model, rows, op)
        return result.instant.requested_time

    def check(self, step: str, commits: list[str], probe: str, also: tuple[str, ...] = ()) -> None:
        """Every reader exact, the metadata table agrees with the files and grew by one
        deltacommit per commit in ``commits``; ``probe``: a value of v for the filtered read;
        ``also``: other actions allowed on the metadata table's timeline besides its own
        compaction and clean (a rollback of a loser's deltacommit)."""
        path, model = self.path, self.model
        if not self.initial:
            self.initial = initial_instants(path)
            assert self.initial, "Java built no metadata table"
            self.seen = {t for t in mdt_instants(path) if t.startswith("0000000000000000")}
        assert metadata_partitions(path) == JAVA_DEFAULT_PARTITIONS, step
        timeline = mdt_instants(path)
        assert initial_instants(path) == self.initial, f"{step}: the metadata table was initialised again"
        new = set(timeline) - self.seen
        deltacommits = {t for t in new if timeline[t][-1].endswith(".deltacommit")}
        assert deltacommits == set(commits), (step, sorted(new))
        # anything else new is the metadata table's own compaction or clean, never a rebuild
        assert all(timeline[t][-1].rsplit(".", 1)[-1] in ("commit", "clean", *also)
                   for t in new - deltacommits), (step, sorted(new))
        self.seen = set(timeline)
        on_storage = {p: f for p, f in data_files(path).items() if f}  # base and log files
        listing = read_metadata_listing(Table.open(path)).files
        assert {p: f for p, f in listing.items() if f} == on_storage, step
        snap, hit, found = self.java.run(Read(path), Read(path, options=SKIPPING, where=f"v = '{probe}'"),
                                         MetadataCheck(path, INDEXED))
        assert rows_by_key(snap.rows, columns=COLS) == model, step
        expected_hit = {k: r for k, r in model.items() if r["v"] == probe}
        assert expected_hit, f"{step}: the probe {probe!r} selects nothing"
        assert rows_by_key(hit.rows, columns=COLS) == expected_hit, step
        javas = found.metadata_check()
        assert javas["files"] == on_storage, step  # Java's metadata reader: base and log files
        # the validator's stats checks are over base files (their footers)
        base = {p: {n: size for n, size in f.items() if n.endswith(".parquet")} for p, f in javas["files"].items()}
        if base == on_storage:
            assert_java_metadata_agrees(javas, path)
        else:
            assert_base_file_stats_agree({**javas, "files": base})
        assert rows_by_key(hudi_read(path), columns=COLS) == model, step
        assert rows_by_key(read_table(Table.open(path)), columns=COLS) == model, step


def assert_base_file_stats_agree(check: dict) -> None:
    """With log files (merge-on-read), the part of the validator's checks the files' footers
    decide: every base file's column stats as Java computes them from its footer, and a
    partition stats record per partition and column. Java's partition stats also cover the
    log files' records, which no footer holds, so their values are not recomputed here."""
    col_stats = {(s["name"], s["column"]): s for s in check["column_stats"] if not s["deleted"]}
    part_stats = {(s["name"], s["column"]) for s in check["partition_stats"]}
    assert sorted(check["file_stats"]) == sorted(p for p, f in check["files"].items() if f)
    for partition, files in check["file_stats"].items():
        assert sorted(files) == sorted(check["files"][partition])
        for name, stats in files.items():
            assert_file_stats_recorded(col_stats, partition, name, stats, INDEXED)
        assert {(partition, c) for c in INDEXED} <= part_stats, partition


@pytest.mark.parametrize("version", [9, pytest.param(8, marks=pytest.mark.slow)])
def test_java_at_its_defaults_and_ours_take_turns(tmp_path, java_hudi, version):
    t = Shared(java_hudi, str(tmp_path / "t"))
    first = [(i, "a" if i % 2 else "b", 1, f"java{i}") for i in range(6)]
    t.check("java insert", [t.java_write(first, "insert", table_version=version)], "java3")
    assert Table.open(t.path).version == version

    turns = [
        ("ours upsert", "ours", [(1, "a", 2, "ours-one"), (9, "c", 2, "ours-nine"), (10, "c", 2, None)], "upsert",
         "ours-nine"),
        ("java upsert", "java", [(2, "b", 3, "java-two"), (11, "d", 3, "java-eleven")], "upsert", "java-two"),
        ("ours delete", "ours", [(4, "b", 4, ""), (9, "c", 4, "")], "delete", "java-two"),
        ("java upsert", "java", [(9, "c", 5, "java-nine"), (3, "a", 5, "java-three")], "upsert", "java-nine"),
        ("ours upsert", "ours", [(5, "a", 6, "ours-five"), (11, "d", 6, "ours-eleven")], "upsert", "ours-eleven"),
    ]
    for step, who, rows, op, probe in turns:
        instant = t.ours(rows, op) if who == "ours" else t.java_write(rows, op)
        t.check(step, [instant], probe)


@pytest.mark.slow
@pytest.mark.parametrize("version", [9, 8])
def test_merge_on_read_java_and_ours_take_turns(tmp_path, java_hudi, version):
    """Merge-on-read at Java's defaults (``files``, ``column_stats``, ``partition_stats``), at
    table versions 9 and 8 (Java's log format and index version 1 there): our deltacommits
    (upserts and deletes as log files, their stats over their records) and Java's upserts and
    its compaction of our logs take turns, and our clean (tombstones for the deleted files) keeps the metadata table, after
    which Java's next write adds one deltacommit; every reader exact after every commit."""
    t = Shared(java_hudi, str(tmp_path / "t"))
    first = [(i, "a" if i % 2 else "b", 1, f"java{i}") for i in range(6)]
    t.check("java insert", [t.java_write(first, "insert", table_type="MERGE_ON_READ", table_version=version)], "java3")
    assert Table.open(t.path).version == version
    ours = t.ours([(1, "a", 2, "ours-one"), (4, "b", 2, "ours-four")], writer=MergeOnReadWriter)
    assert all(log_files_of(t.path, ours)[p] for p in "ab"), log_files_of(t.path, ours)
    t.check("ours upsert (log files)", [ours], "ours-one")
    gone = t.ours([(3, "a", 3, ""), (4, "b", 3, "")], "delete", writer=MergeOnReadWriter)
    assert all(log_files_of(t.path, gone)[p] for p in "ab"), log_files_of(t.path, gone)
    t.check("ours delete (log files of deletes)", [gone], "ours-one")
    t.check("java upsert", [t.java_write([(1, "a", 3, "java-one"), (2, "b", 3, "java-two")])], "java-one")
    (compacted,) = java_hudi.run(Service(t.path, "compact", options={"hoodie.compact.inline.max.delta.commits": "1"}))
    assert [c["action"] for c in compacted.completed] == ["commit"], compacted.completed
    t.check("java compaction", [compacted.instant], "java-two")
    cleaned = run_clean(Table.open(t.path), {**FAST_WRITE_OPTIONS, **ONE_VERSION})
    assert cleaned.clean_instant is not None and cleaned.deleted_files
    t.check("ours clean", [cleaned.clean_instant], "java-two")
    t.check("java upsert", [t.java_write([(3, "a", 4, "java-three")])], "java-three")


@pytest.mark.slow  # a JVM of its own and a heartbeat's expiry: about 50 s; the turns are the default slice
@pytest.mark.parametrize("table_type,version", [("COPY_ON_WRITE", 9), ("MERGE_ON_READ", 9), ("MERGE_ON_READ", 8)],
                         ids=["cow-v9", "mor-v9", "mor-v8"])
def test_java_at_its_defaults_and_ours_race_under_one_lock(tmp_path, java_hudi, request, table_type, version):
    """Java upserts partition b while ours upserts a (both commit), then both write one file
    group of a (the first to commit wins; a losing Java writer's instant is rolled back by our
    LAZY rollback once its heartbeat expired); then every reader equals the serial replay of
    the commits that completed, in completion order, and the metadata table checks pass.
    Merge-on-read: both sides' upserts are log files in the same file groups, ours by
    :class:`MergeOnReadWriter`."""
    ours_options, java_options = lock_options("zookeeper", request)
    ours_options = {k: v for k, v in ours_options.items() if not k.startswith("hoodie.metadata.")}
    java_options = {**{k: v for k, v in java_options.items() if not k.startswith("hoodie.metadata.")}, **HEARTBEAT}
    t = Shared(java_hudi, str(tmp_path / "t"))
    path = t.path
    first = [(i, "a" if i % 2 else "b", 1, f"java{i}") for i in range(6)]
    t.check("java insert", [t.java_write(first, "insert", table_type=table_type, table_version=version,
                                         options=java_options)], "java1")
    assert Table.open(path).version == version
    writer = MergeOnReadWriter if table_type == "MERGE_ON_READ" else ArrowTableWriter

    java_b, java_a = [(0, "b", 2, "java-zero")], [(1, "a", 3, "java-one")]
    ours_a, ours_same = [(3, "a", 2, "ours-three")], [(5, "a", 3, "ours-five")]
    writes: dict[str, tuple[list, str]] = {}  # instant -> (rows, who)
    run = java_hudi.start(Write(path, batch(java_b), operation="upsert", options=java_options, **KEYS),
                          Write(path, batch(java_a), operation="upsert", options=java_options, **KEYS),
                          continue_on_error=True)
    try:
        # 1. disjoint: ours in a while Java's first write (b) is inflight
        wait_until_java_is_inflight(run, path)
        java_first = next(iter(pending_inflight(path)))
        writes[t.ours(ours_a, options=ours_options, writer=writer)] = (ours_a, "ours")
        # 2. one file group: ours in a while Java's second write (a) is inflight
        deadline = time.monotonic() + 120
        while not (pending_inflight(path) - {java_first}):
            assert run.proc.poll() is None, f"Java ended before its second write was inflight:\n{run.log_tail()}"
            assert time.monotonic() < deadline, f"Java's second write never went inflight:\n{run.log_tail()}"
            time.sleep(0.02)
        java_second = next(iter(pending_inflight(path) - {java_first}))
        before = set(instants(path))
        try:
            writes[t.ours(ours_same, options=ours_options, writer=writer)] = (ours_same, "ours")
            ours_error = None
        except WriteConflictError as e:
            ours_error = e
            assert set(instants(path)) - before == set(), "our losing attempt was not rolled back"
        first_write, second_write = run.wait(check=False)
    finally:
        run.kill()
    # the model so far holds Java's insert and ours' writes as applied; rebuild it by replay
    assert first_write.ok, first_write.error  # disjoint: no conflict
    writes[java_first] = (java_b, "java")
    completed = instants(path)
    if second_write.ok:
        writes[java_second] = (java_a, "java")
    if second_write.ok and ours_error is None:
        # both committed: legal only if one read the other's file version (Java's transaction
        # started after our commit); a lost update would show in the reads below
        print("race: both committed one after the other")
    else:
        assert (ours_error is None) != second_write.ok, "exactly one side must lose"
        if ours_error is None:  # ours committed first: Java's commit saw it and failed
            assert second_write.error.java_class == WRITE_CONFLICT, second_write.error
            assert completed[java_second] is None
            time.sleep(EXPIRY_S)  # Java's heartbeat expires; our LAZY rollback takes its instant back
            rolled = rollback_failed_writes(Table.open(path), WriteConfig.from_options(ours_options))
            assert [r.rolled_back for r in rolled] == [java_second], rolled
        print(f"race outcome: java {'committed' if second_write.ok else second_write.error.java_class}, "
              f"ours {'committed' if ours_error is None else type(ours_error).__name__}")
    completed = instants(path)
    assert all(c is not None for c in completed.values()), completed
    if table_type == "MERGE_ON_READ":  # every committed upsert of the race went to a log file
        assert all(log_files_of(path, i)[writes[i][0][0][1]] for i in writes), \
            {i: log_files_of(path, i) for i in writes}
    # the serial replay: Java's insert, then every commit that completed, in completion order
    t.model = model_of(first)
    for instant in sorted(writes, key=lambda i: completed[i]):
        apply(t.model, writes[instant][0], "upsert")
    # the metadata table: one deltacommit per commit of the race, none for the loser
    t.check("race", list(writes), "java-zero", also=("rollback",))


def pending_inflight(path: str) -> set[str]:
    """Commits and deltacommits pending with their inflight file on the timeline: a writer
    past its tagging."""
    return set(inflight(path))
