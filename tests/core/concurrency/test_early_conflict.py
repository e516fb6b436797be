"""Early conflict detection: who is a candidate, what each strategy sees, the transactional
strategy racing in real processes, the async checker's sticky flag, and bloom variants giving
the plain strategies' answers."""

from __future__ import annotations

import multiprocessing
import os
import random
import tempfile
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_hudi_occ.core.config import (ECD_STRATEGY, EarlyConflictConfig, HeartbeatConfig, IndexConfig,
                                          LockConfig, MarkerType, WriteConfig)
from airflow_hudi_occ.core.concurrency.early_conflict.async_checker import (AsyncTimelineServerBasedDetectionStrategy,
                                                                            BloomAsyncTimelineServerBasedDetectionStrategy)
from airflow_hudi_occ.core.concurrency.early_conflict.strategies import (BloomDirectMarkerBasedDetectionStrategy,
                                                                         EarlyConflictDetectionStrategy,
                                                                         SimpleDirectMarkerBasedDetectionStrategy,
                                                                         SimpleTransactionDirectMarkerBasedDetectionStrategy)
from airflow_hudi_occ.core.concurrency.early_conflict.bloom import BloomFilter, bloom_key
from airflow_hudi_occ.core.concurrency.early_conflict.detector import create_detector, get_detection_strategy
from airflow_hudi_occ.core.errors import EarlyConflictError, UnknownStrategyError
from airflow_hudi_occ.core.concurrency.heartbeat import Heartbeat
from airflow_hudi_occ.core.format.instant import Action, Instant, State
from airflow_hudi_occ.core.concurrency.markers.write_markers import (BatchedWriteMarkers,
                                                                     DirectWriteMarkers, markers_for)
from airflow_hudi_occ.core.concurrency.markers.names import IOType
from airflow_hudi_occ.core.concurrency.markers.folder import marker_dir
from airflow_hudi_occ.core.format.metadata import (ClusteringGroup, CommitMetadata, RequestedReplaceMetadata,
                                            WriteStat)
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.table.timeline import complete, create_requested, delete_pending_files

DIRECT = MarkerType.DIRECT
BATCHED = MarkerType.TIMELINE_SERVER_BASED
HB = HeartbeatConfig(interval_ms=60_000, tolerable_misses=2)


def T(i: int) -> str:
    return f"20250101{i:09d}"


def make_table(root) -> Table:
    return Table.create(os.path.join(str(root), "t"), "t", record_key_fields=["id"],
                        partition_fields=["p"])


def config(strategy: str = "", marker_type: MarkerType = DIRECT, lock_provider: str = "filesystem",
           **ecd) -> WriteConfig:
    return WriteConfig(
        heartbeat=HB, marker_type=marker_type,
        early_conflict=EarlyConflictConfig(enabled=True, strategy=strategy, **ecd),
        lock=LockConfig(provider=lock_provider, wait_time_ms=20_000, client_num_retries=3,
                        client_wait_time_ms_between_retry=10))


def fname(file_id: str, t: str, token: str = "0-0-0") -> str:
    return f"{file_id}_{token}_{t}.parquet"


def pending(table, t: str, *, action: Action = Action.COMMIT, data: bytes = b"", beat: bool = True) -> None:
    create_requested(table, Instant(t, action, State.REQUESTED), data)
    if beat:
        Heartbeat(table, t, HB).beat()


def write_markers(table, t: str, marker_type: MarkerType, *groups) -> None:
    m = markers_for(table, t, marker_type)
    for p, f in groups:
        m.create(p, fname(f, t), IOType.CREATE)


def complete_with(table, t: str, completion: str, *groups) -> None:
    stats = [WriteStat(file_id=f, path=f"{p}/{fname(f, t)}", partition_path=p) for p, f in groups]
    complete(table, Instant(t, Action.COMMIT, State.INFLIGHT), completion,
             CommitMetadata.from_stats(stats, operation_type="UPSERT").encode())


# (strategy, layout of this writer's markers)
CASES = [("simple", DIRECT), ("transactional", DIRECT), ("bloom-direct", DIRECT),
         ("async", BATCHED), ("bloom-async", BATCHED)]
CASE_IDS = [c[0] for c in CASES]


def outcome(table, t: str, group, strategy: str, marker_type: MarkerType, **kw) -> str | None:
    """The instant this writer conflicts with when about to write ``group``, or None.

    Synchronous strategies: ``create_marker`` (so the transactional lock is exercised).
    Async: the group is announced as pending and one checker round runs."""
    det = get_detection_strategy(strategy)(table, t, config(strategy, marker_type), **kw)
    if isinstance(det, AsyncTimelineServerBasedDetectionStrategy):
        det.add_pending(*group)
        err = det.run_check_once()
        return None if err is None else err.other_instant
    try:
        det.create_marker(markers_for(table, t, marker_type), group[0], fname(group[1], t), IOType.CREATE)
    except EarlyConflictError as e:
        assert e.instant == t and e.file_groups == ["/".join(x for x in group if x)]
        assert e.strategy == det.name
        return e.other_instant
    return None


# --- candidates -------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy,marker_type", CASES, ids=CASE_IDS)
def test_only_the_later_of_two_overlapping_writers_fails(tmp_path, strategy, marker_type):
    table = make_table(tmp_path)
    pending(table, T(1))
    pending(table, T(2))
    write_markers(table, T(1), marker_type, ("p1", "f"))
    write_markers(table, T(2), marker_type, ("p1", "f"))
    assert outcome(table, T(2), ("p1", "f"), strategy, marker_type) == T(1)
    # the earlier one never treats the later one as a candidate, whatever the later one holds
    assert outcome(table, T(1), ("p1", "f"), strategy, marker_type) is None
    det = get_detection_strategy(strategy)(table, T(1), config(strategy, marker_type))
    assert det.view.candidates() == []


@pytest.mark.parametrize("strategy,marker_type", CASES, ids=CASE_IDS)
def test_disjoint_file_groups_pass(tmp_path, strategy, marker_type):
    table = make_table(tmp_path)
    pending(table, T(1))
    pending(table, T(3))
    write_markers(table, T(1), marker_type, ("p1", "f"), ("p1", "g"), ("p2", "h"))
    assert outcome(table, T(3), ("p1", "h"), strategy, marker_type) is None   # other fileId
    assert outcome(table, T(3), ("p2", "f"), strategy, marker_type) is None   # other partition
    assert outcome(table, T(3), ("p1", "f-0"), strategy, marker_type) is None  # a longer fileId
    assert outcome(table, T(3), ("p2", "h"), strategy, marker_type) == T(1)   # control


@pytest.mark.parametrize("strategy,marker_type", CASES, ids=CASE_IDS)
def test_expired_or_missing_heartbeat_is_ignored(tmp_path, strategy, marker_type):
    table = make_table(tmp_path)
    pending(table, T(1))               # beats now
    pending(table, T(2), beat=False)   # never beat: dead
    write_markers(table, T(1), marker_type, ("p", "f"))
    write_markers(table, T(2), marker_type, ("p", "g"))
    assert outcome(table, T(5), ("p", "g"), strategy, marker_type) is None
    assert outcome(table, T(5), ("p", "f"), strategy, marker_type) == T(1)
    later = time.time() + HB.expiry_ms / 1000.0 + 5  # T(1)'s beat is older than the expiry
    assert outcome(table, T(5), ("p", "f"), strategy, marker_type, clock=lambda: later) is None


@pytest.mark.parametrize("strategy,marker_type", CASES, ids=CASE_IDS)
def test_table_services_are_not_candidates(tmp_path, strategy, marker_type):
    table = make_table(tmp_path)
    plan = RequestedReplaceMetadata("CLUSTER", [ClusteringGroup([("p", "f1", None)])])
    pending(table, T(1), action=Action.CLUSTERING, data=plan.encode())
    pending(table, T(2), action=Action.REPLACE_COMMIT, data=plan.encode())  # clustering as a replacecommit
    pending(table, T(3), action=Action.COMPACTION)
    pending(table, T(4), action=Action.REPLACE_COMMIT,
            data=RequestedReplaceMetadata("INSERT_OVERWRITE").encode())
    for i, f in ((1, "f1"), (2, "f2"), (3, "f3"), (4, "f4")):
        write_markers(table, T(i), marker_type, ("p", f))
    for f in ("f1", "f2", "f3"):
        assert outcome(table, T(9), ("p", f), strategy, marker_type) is None
    # an insert-overwrite is a writer, not a table service (beyond Hudi: it is a candidate)
    assert outcome(table, T(9), ("p", "f4"), strategy, marker_type) == T(4)


@pytest.mark.parametrize("strategy,marker_type", CASES, ids=CASE_IDS)
def test_an_unreadable_replace_plan_counts_as_a_writer(tmp_path, strategy, marker_type):
    """Missing a conflict wastes the whole write, a false one only a retry: when the plan of a
    pending replacecommit cannot be read, the instant stays a candidate."""
    table = make_table(tmp_path)
    pending(table, T(1), action=Action.REPLACE_COMMIT, data=b"\x00 not a plan")
    write_markers(table, T(1), marker_type, ("p", "f"))
    assert outcome(table, T(2), ("p", "f"), strategy, marker_type) == T(1)


@pytest.mark.parametrize("strategy,marker_type", CASES, ids=CASE_IDS)
def test_completed_and_rolled_back_instants_leave_only_leftovers(tmp_path, strategy, marker_type):
    table = make_table(tmp_path)
    pending(table, T(1))
    pending(table, T(2))
    pending(table, T(3))
    for i in (1, 2, 3):
        write_markers(table, T(i), marker_type, ("p", f"f{i}"))
    complete_with(table, T(1), T(4), ("p", "other"))
    delete_pending_files(table, T(2), table.timeline().files_of(T(2)))  # rolled back
    assert table.timeline().get(T(2)) is None
    assert outcome(table, T(9), ("p", "f1"), strategy, marker_type) is None
    assert outcome(table, T(9), ("p", "f2"), strategy, marker_type) is None
    assert outcome(table, T(9), ("p", "f3"), strategy, marker_type) == T(3)  # control


@pytest.mark.parametrize("strategy,marker_type", [("simple", BATCHED), ("async", DIRECT)])
def test_strategies_read_the_other_marker_layout(tmp_path, strategy, marker_type):
    table = make_table(tmp_path)
    pending(table, T(1))
    other = DIRECT if marker_type is BATCHED else BATCHED
    write_markers(table, T(1), other, ("a/b", "f"))
    assert outcome(table, T(2), ("a/b", "f"), strategy, marker_type) == T(1)
    assert outcome(table, T(2), ("a", "f"), strategy, marker_type) is None


def test_unpartitioned_table(tmp_path):
    table = Table.create(str(tmp_path / "u"), "u", record_key_fields=["id"])
    pending(table, T(1))
    for mt in (DIRECT, BATCHED):
        markers_for(table, T(1), mt).delete_all()
        write_markers(table, T(1), mt, ("", "f"))
        for strategy in ("simple", "async", "bloom-direct"):
            assert outcome(table, T(2), ("", "f"), strategy, mt) == T(1)
            assert outcome(table, T(2), ("", "g"), strategy, mt) is None


def test_simple_lists_only_the_partition_folder(tmp_path, monkeypatch):
    """RFC-56: list <candidate>/<partition>, never all of .temp, never a later instant."""
    table = make_table(tmp_path)
    for i in (1, 2, 3, 7):
        pending(table, T(i))
        write_markers(table, T(i), DIRECT, *[(f"p{j}", f"f{i}-{j}") for j in range(5)])
    det = SimpleDirectMarkerBasedDetectionStrategy(table, T(5), config("simple"))
    listed = []
    real_list = table.storage.list_names

    def recording(path):
        listed.append(path)
        return real_list(path)

    def walk_forbidden(path):
        raise AssertionError(f"walked {path}")

    monkeypatch.setattr(table.storage, "list_names", recording)
    monkeypatch.setattr(table.storage, "walk_files", walk_forbidden)
    monkeypatch.setattr(table.storage, "list_dirs", walk_forbidden)
    for _ in range(3):
        det.check("p3", "nope")
    with pytest.raises(EarlyConflictError):
        det.check("p3", "f2-3")
    allowed = {table.temp_dir, table.timeline_dir} | {os.path.join(table.temp_dir, T(i), "p3") for i in (1, 2, 3)}
    assert set(listed) <= allowed
    assert os.path.join(table.temp_dir, T(1), "p3") in listed
    # the timeline is read once: what a candidate is does not change
    assert listed.count(table.timeline_dir) == 1


# --- sticky conflicts and marker creation ---------------------------------------------------------


@pytest.mark.parametrize("strategy,marker_type", CASES, ids=CASE_IDS)
def test_conflict_is_sticky_and_blocks_marker_creation(tmp_path, strategy, marker_type):
    table = make_table(tmp_path)
    pending(table, T(1))
    pending(table, T(2))
    write_markers(table, T(1), marker_type, ("p", "f"))
    det = get_detection_strategy(strategy)(table, T(2), config(strategy, marker_type))
    mine = markers_for(table, T(2), marker_type)
    det.create_marker(mine, "p", fname("g", T(2)), IOType.CREATE)  # no conflict yet
    assert not det.has_conflict and det.conflict is None
    if isinstance(det, AsyncTimelineServerBasedDetectionStrategy):
        det.add_pending("p", "f")
        assert det.run_check_once() is not None
    else:
        with pytest.raises(EarlyConflictError):
            det.create_marker(mine, "p", fname("f", T(2)), IOType.CREATE)
    assert det.has_conflict and det.conflict.other_instant == T(1)
    with pytest.raises(EarlyConflictError) as ei:
        det.create_marker(mine, "p", fname("h", T(2)), IOType.CREATE)  # disjoint, still doomed
    assert ei.value.other_instant == T(1) and ei.value.file_groups == ["p/f"]
    with pytest.raises(EarlyConflictError):
        det.check_sticky()
    assert {m.file_id for m in markers_for(table, T(2)).all_markers()} == {"g"}


def test_markers_of_another_instant_are_refused(tmp_path):
    table = make_table(tmp_path)
    det = SimpleDirectMarkerBasedDetectionStrategy(table, T(2), config())
    with pytest.raises(ValueError):
        det.create_marker(DirectWriteMarkers(table, T(1)), "p", fname("f", T(1)), IOType.CREATE)


# --- commit conflicts -----------------------------------------------------------------------------


@pytest.mark.parametrize("strategy,marker_type", CASES, ids=CASE_IDS)
def test_commit_conflict_catches_an_instant_completed_after_the_write_began(tmp_path, strategy, marker_type):
    table = make_table(tmp_path)
    pending(table, T(1))
    complete_with(table, T(1), T(2), ("p", "before"))
    pending(table, T(3))
    pending(table, T(5))
    cfg = config(strategy, marker_type, check_commit_conflict=True)
    cls = get_detection_strategy(strategy)
    det = cls(table, T(5), cfg)  # the write begins: T(1) completed, T(3) pending
    complete_with(table, T(3), T(6), ("p", "during"))  # no markers left behind

    def conflict(d, group):
        if isinstance(d, AsyncTimelineServerBasedDetectionStrategy):
            d.add_pending(*group)
            return d.run_check_once()
        try:
            d.check(*group)
        except EarlyConflictError as e:
            return e
        return None

    assert conflict(det, ("p", "before")) is None
    err = conflict(det, ("p", "during"))
    assert err is not None and err.other_instant == T(3) and err.other_action == "commit"
    assert "completed after" in err.message
    # off by default; and an explicit snapshot decides what "began" means
    assert conflict(cls(table, T(5), config(strategy, marker_type)), ("p", "during")) is None
    assert conflict(cls(table, T(5), cfg, completed_at_start={T(1), T(3)}), ("p", "during")) is None


# --- the transactional strategy -------------------------------------------------------------------


class _LoggedMarkers(DirectWriteMarkers):
    """Appends ``tag`` to a shared log, dawdles, then creates the marker: the log entry is made
    inside the caller's critical section, before the marker becomes visible to others."""

    def __init__(self, table, instant_time, log_path, tag, pause=None):
        super().__init__(table, instant_time)
        self.log_path, self.tag, self.pause = log_path, tag, pause

    def create(self, partition, data_file_name, io_type):
        fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{self.tag}\n".encode())
        finally:
            os.close(fd)
        if self.pause is not None:
            self.pause()
        return super().create(partition, data_file_name, io_type)


def race_violations(log_lines: list[str], passed: dict[tuple[int, str], bool]) -> list[str]:
    """Rounds that break "the later writer fails whenever the earlier one got there first".

    ``log_lines`` are ``"<round> <role>"`` in the order writers entered marker creation (after
    passing their check); ``passed[(round, role)]`` is what each writer was told. With check and
    creation atomic per file group, a later writer that passed must have entered first.
    """
    bad = []
    rounds = {int(line.split()[0]) for line in log_lines} | {r for r, _ in passed}
    for r in sorted(rounds):
        order = [line.split()[1] for line in log_lines if int(line.split()[0]) == r]
        if not passed.get((r, "earlier"), False):
            bad.append(f"round {r}: the earlier writer failed")
        if passed.get((r, "later")) != ("later" in order) or passed.get((r, "earlier")) != ("earlier" in order):
            bad.append(f"round {r}: outcomes {passed} disagree with the log {order}")
        if "later" in order and "earlier" in order and order.index("earlier") < order.index("later"):
            bad.append(f"round {r}: the later writer passed after the earlier one created its marker")
    return bad


def test_race_violations_can_fail():
    ok = {(0, "earlier"): True, (0, "later"): True, (1, "earlier"): True, (1, "later"): False}
    assert race_violations(["0 later", "0 earlier", "1 earlier"], ok) == []
    assert race_violations(["0 earlier", "0 later", "1 earlier"], ok)  # later entered second
    assert race_violations(["0 later", "0 earlier"], ok)               # round 1 missing


def _race_worker(base, role, instants, strategy, barrier, log_path, results) -> None:
    table = Table.open(base)
    cfg = config(strategy)
    rng = random.Random(f"{role}-{os.getpid()}")
    out = {}
    for r, t in enumerate(instants):
        det = get_detection_strategy(strategy)(table, t, cfg)
        markers = _LoggedMarkers(table, t, log_path, f"{r} {role}",
                                 pause=lambda: time.sleep(rng.random() * 0.003))
        barrier.wait()
        time.sleep(rng.random() * 0.003)  # vary who gets there first
        try:
            det.create_marker(markers, "p", fname(f"fg{r}", t), IOType.CREATE)
            out[(r, role)] = True
        except EarlyConflictError as e:
            assert e.other_instant == instants[r] if role == "earlier" else True
            out[(r, role)] = False
    results.put(out)


def test_transactional_processes_racing_on_one_file_group(tmp_path):
    table = make_table(tmp_path)
    rounds = 25
    earlier = [T(10 + 2 * r) for r in range(rounds)]
    later = [T(11 + 2 * r) for r in range(rounds)]
    for t in earlier + later:
        pending(table, t)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    results = ctx.Queue()
    log_path = str(tmp_path / "race.log")
    procs = [ctx.Process(target=_race_worker,
                         args=(table.base_uri, role, insts, "transactional", barrier, log_path, results))
             for role, insts in (("earlier", earlier), ("later", later))]
    for p in procs:
        p.start()
    passed = {}
    for _ in procs:
        passed.update(results.get(timeout=300))
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0, 0]
    with open(log_path) as f:
        log_lines = f.read().splitlines()
    assert race_violations(log_lines, passed) == []
    # the markers on storage agree: wherever the later writer was refused, it created nothing
    for r in range(rounds):
        later_has = bool(markers_for(table, later[r]).file_ids_in_partition("p"))
        assert later_has == passed[(r, "later")]
        assert markers_for(table, earlier[r]).file_ids_in_partition("p") == {f"fg{r}"}


def _held_race(tmp_path, strategy: str, cfg: WriteConfig):
    """The earlier writer is held inside marker creation (after its check passed) while the
    later one tries the same file group. Returns (outcomes, race violations, whether the later
    writer was still waiting while the earlier one was held)."""
    table = make_table(tmp_path)
    pending(table, T(1))
    pending(table, T(2))
    log_path = str(tmp_path / "log")
    inside, release = threading.Event(), threading.Event()

    def hold():
        inside.set()
        assert release.wait(60)

    cls = get_detection_strategy(strategy)
    passed: dict = {}

    def run(role, t, pause):
        det = cls(table, t, cfg)
        try:
            det.create_marker(_LoggedMarkers(table, t, log_path, f"0 {role}", pause), "p",
                              fname("fg", t), IOType.CREATE)
            passed[(0, role)] = True
        except EarlyConflictError:
            passed[(0, role)] = False

    first = threading.Thread(target=run, args=("earlier", T(1), hold))
    first.start()
    assert inside.wait(30)
    second = threading.Thread(target=run, args=("later", T(2), None))
    try:
        second.start()
        second.join(timeout=0.5)
        was_waiting = second.is_alive()
    finally:
        release.set()
    first.join(30)
    second.join(30)
    assert not first.is_alive() and not second.is_alive()
    with open(log_path) as f:
        return passed, race_violations(f.read().splitlines(), passed), was_waiting


@pytest.mark.parametrize("lock_provider", ["inprocess", "filesystem"])
def test_transactional_check_and_create_are_atomic(tmp_path, lock_provider):
    passed, violations, was_waiting = _held_race(
        tmp_path, "transactional", config("transactional", lock_provider=lock_provider))
    assert was_waiting  # on the earlier writer's file-group lock
    assert passed == {(0, "earlier"): True, (0, "later"): False}
    assert violations == []


def test_simple_has_hudis_documented_race(tmp_path):
    """Without the lock the later writer checks in the gap and passes (Hudi's documented
    race, left to the commit-time check); the race assertion must report it."""
    passed, violations, _ = _held_race(tmp_path, "simple", config("simple", lock_provider="inprocess"))
    assert passed == {(0, "earlier"): True, (0, "later"): True}
    assert violations and "after the earlier one" in violations[0]


@pytest.mark.zookeeper
def test_transactional_with_a_zookeeper_lock(tmp_path, zk_server):
    """Hudi's own setting: the file-group lock is a ZooKeeper node ``<base>/<partition/fileId>``."""
    cfg = config("transactional").replace(lock=LockConfig(
        provider="zookeeper", zk_url=zk_server.hosts, zk_base_path=f"/ecd-{os.getpid()}-{time.time_ns()}",
        wait_time_ms=20_000, client_num_retries=3, client_wait_time_ms_between_retry=10,
        zk_session_timeout_ms=10_000, zk_connection_timeout_ms=10_000))
    passed, violations, was_waiting = _held_race(tmp_path, "transactional", cfg)
    assert was_waiting
    assert passed == {(0, "earlier"): True, (0, "later"): False}
    assert violations == []


# --- the async checker ----------------------------------------------------------------------------


def test_async_sets_the_flag_within_a_bounded_number_of_rounds(tmp_path):
    table = make_table(tmp_path)
    pending(table, T(1))
    pending(table, T(2))
    det = AsyncTimelineServerBasedDetectionStrategy(table, T(2), config("async", BATCHED))
    mine = BatchedWriteMarkers(table, T(2))
    det.create_marker(mine, "p", fname("f", T(2)), IOType.CREATE)
    assert det.run_check_once() is None
    other = BatchedWriteMarkers(table, T(1))
    other.create("p", fname("x", T(1)), IOType.CREATE)
    assert det.run_check_once() is None
    other.create("p", fname("f", T(1)), IOType.CREATE)  # now overlapping
    rounds = 0
    while not det.has_conflict and rounds < 2:
        det.run_check_once()
        rounds += 1
    assert det.has_conflict and rounds == 1
    with pytest.raises(EarlyConflictError) as ei:
        det.create_marker(mine, "p", fname("g", T(2)), IOType.CREATE)
    assert ei.value.other_instant == T(1) and ei.value.file_groups == ["p/f"]
    assert ei.value.strategy == "async"


def test_async_tolerates_a_cut_marker_file_then_catches_up(tmp_path):
    table = make_table(tmp_path)
    pending(table, T(1))
    pending(table, T(2))
    d = marker_dir(table, T(1))
    os.makedirs(d)
    with open(os.path.join(d, "MARKERS.type"), "w") as f:
        f.write("TIMELINE_SERVER_BASED")
    line = f"p/{fname('f', T(1))}.marker.CREATE\n"
    with open(os.path.join(d, "MARKERS0"), "w") as f:
        f.write(f"p/{fname('x', T(1))}.marker.CREATE\n" + line[:25])  # being rewritten
    det = AsyncTimelineServerBasedDetectionStrategy(table, T(2), config("async", BATCHED))
    det.add_pending("p", "f")
    assert det.run_check_once() is None
    with open(os.path.join(d, "MARKERS0"), "w") as f:
        f.write(f"p/{fname('x', T(1))}.marker.CREATE\n" + line)
    err = det.run_check_once()
    assert err is not None and err.other_instant == T(1)


def test_async_sees_markers_other_processes_wrote_for_this_instant(tmp_path):
    table = make_table(tmp_path)
    pending(table, T(1))
    pending(table, T(2))
    write_markers(table, T(1), BATCHED, ("p", "f"))
    det = AsyncTimelineServerBasedDetectionStrategy(table, T(2), config("async", BATCHED))
    assert det.run_check_once() is None  # nothing of its own yet
    BatchedWriteMarkers(table, T(2)).create("p", fname("f", T(2)), IOType.CREATE)  # an "executor"
    assert det.run_check_once() is not None


def test_async_background_thread_raises_the_flag(tmp_path):
    table = make_table(tmp_path)
    pending(table, T(1))
    pending(table, T(2))
    det = create_detector(table, T(2), config("", BATCHED, async_period_ms=20))
    assert type(det) is AsyncTimelineServerBasedDetectionStrategy
    with det:
        assert det.running
        det.create_marker(BatchedWriteMarkers(table, T(2)), "p", fname("f", T(2)), IOType.CREATE)
        write_markers(table, T(1), BATCHED, ("p", "f"))
        deadline = time.monotonic() + 60
        while not det.has_conflict and time.monotonic() < deadline:
            time.sleep(0.01)
        assert det.has_conflict and det.rounds >= 1 and det.errors == 0
    assert not det.running
    with pytest.raises(EarlyConflictError):
        det.check("p", "anything")


# --- bloom filters --------------------------------------------------------------------------------


def test_bloom_filter_round_trip_and_no_false_negatives():
    flt = BloomFilter.for_capacity(2000)
    keys = [bloom_key(f"p{i % 7}", f"f{i}") for i in range(2000)]
    for k in keys:
        flt.add(k)
    back = BloomFilter.from_bytes(flt.to_bytes())
    assert all(back.might_contain(k) for k in keys)
    false_pos = sum(back.might_contain(bloom_key("q", f"g{i}")) for i in range(5000))
    assert false_pos < 250  # sized for 1%; 5% leaves room for chance
    data = flt.to_bytes()
    for bad in (data[:-1], data[:10], b"", b"garbage" * 10, data[:-5] + b"\x00" * 5):
        with pytest.raises(ValueError):
            BloomFilter.from_bytes(bad)


def test_each_bloom_writer_keeps_its_own_file(tmp_path):
    table = make_table(tmp_path)
    pending(table, T(1))
    pending(table, T(2))
    for f in ("a", "b"):  # two "executors" of T(1), each with its own detector and bloom
        det = BloomDirectMarkerBasedDetectionStrategy(table, T(1), config("bloom-direct"))
        det.create_marker(DirectWriteMarkers(table, T(1)), "p", fname(f, T(1)), IOType.CREATE)
    names = sorted(n for n in os.listdir(marker_dir(table, T(1))) if n.startswith("BLOOM"))
    assert names == ["BLOOM", "BLOOM1"]
    for f in ("a", "b"):
        assert outcome(table, T(2), ("p", f), "bloom-direct", DIRECT) == T(1)


@pytest.mark.parametrize("strategy,marker_type", [("bloom-direct", DIRECT), ("bloom-async", BATCHED)])
def test_bloom_is_read_first_and_a_bad_one_means_may_contain(tmp_path, strategy, marker_type):
    table = make_table(tmp_path)
    pending(table, T(1))
    write_markers(table, T(1), marker_type, ("p", "f"))
    bloom_path = os.path.join(marker_dir(table, T(1)), "BLOOM")
    assert outcome(table, T(2), ("p", "f"), strategy, marker_type) == T(1)  # no bloom: markers
    with open(bloom_path, "wb") as f:
        f.write(b"not a bloom filter")
    assert outcome(table, T(2), ("p", "f"), strategy, marker_type) == T(1)  # corrupt: markers
    flt = BloomFilter.for_capacity(16)
    flt.add(bloom_key("p", "other"))
    with open(bloom_path, "wb") as f:
        f.write(flt.to_bytes())
    # a (deliberately inconsistent) bloom without the file group: its markers are not read
    assert outcome(table, T(2), ("p", "f"), strategy, marker_type) is None
    plain = "simple" if strategy == "bloom-direct" else "async"
    assert outcome(table, T(2), ("p", "f"), plain, marker_type) == T(1)


_STATES = ["alive", "alive", "alive", "dead", "clustering", "completed", "rolled_back"]
_GROUPS = [(p, f) for p in ("p0", "p1", "a/b") for f in ("f0", "f1", "f2")]
_candidate = st.fixed_dictionaries({
    "state": st.sampled_from(_STATES),
    "groups": st.sets(st.sampled_from(_GROUPS), max_size=4),
    "bloom": st.booleans(),
    "layout": st.sampled_from([DIRECT, BATCHED]),
})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_candidate, min_size=1, max_size=4), st.sampled_from(_GROUPS))
def test_bloom_variants_answer_as_the_plain_ones(candidates, query):
    with tempfile.TemporaryDirectory() as root:
        table = make_table(root)
        times = [T(10 + i) for i in range(len(candidates))]
        for t, c in zip(times, candidates):
            if c["state"] == "clustering":
                plan = RequestedReplaceMetadata("CLUSTER", [ClusteringGroup([("p0", "f0", None)])])
                pending(table, t, action=Action.CLUSTERING, data=plan.encode())
            elif c["state"] != "rolled_back":
                pending(table, t, beat=c["state"] != "dead")
        # Written latest first, so that no candidate's own bloom detector can object.
        for t, c in reversed(list(zip(times, candidates))):
            markers = markers_for(table, t, c["layout"])
            writer = BloomDirectMarkerBasedDetectionStrategy(table, t, config("bloom-direct")) if c["bloom"] else None
            for p, f in sorted(c["groups"]):
                if writer is not None:
                    writer.create_marker(markers, p, fname(f, t), IOType.CREATE)
                else:
                    markers.create(p, fname(f, t), IOType.CREATE)
        for t, c in zip(times, candidates):
            if c["state"] == "completed":
                complete_with(table, t, T(90 + times.index(t)))
        expected = next((t for t, c in zip(times, candidates)
                         if c["state"] == "alive" and query in c["groups"]), None)
        current = T(50)
        answers = {s: outcome(table, current, query, s, mt)
                   for s, mt in (("simple", DIRECT), ("bloom-direct", DIRECT),
                                 ("async", BATCHED), ("bloom-async", BATCHED))}
        assert answers == dict.fromkeys(answers, expected)


# --- choosing a strategy --------------------------------------------------------------------------


class MyStrategy(SimpleDirectMarkerBasedDetectionStrategy):
    name = "mine"


@pytest.mark.parametrize("value,expected", [
    ("simple", SimpleDirectMarkerBasedDetectionStrategy),
    ("org.apache.hudi.table.marker.SimpleDirectMarkerBasedDetectionStrategy",
     SimpleDirectMarkerBasedDetectionStrategy),
    ("SimpleDirectMarkerBasedDetectionStrategy", SimpleDirectMarkerBasedDetectionStrategy),
    ("transactional", SimpleTransactionDirectMarkerBasedDetectionStrategy),
    ("org.apache.hudi.table.marker.SimpleTransactionDirectMarkerBasedDetectionStrategy",
     SimpleTransactionDirectMarkerBasedDetectionStrategy),
    ("ASYNC", AsyncTimelineServerBasedDetectionStrategy),
    ("org.apache.hudi.timeline.service.handlers.marker.AsyncTimelineServerBasedDetectionStrategy",
     AsyncTimelineServerBasedDetectionStrategy),
    ("bloom-direct", BloomDirectMarkerBasedDetectionStrategy),
    ("BloomDirectMarkerBasedDetectionStrategy", BloomDirectMarkerBasedDetectionStrategy),
    ("bloom-async", BloomAsyncTimelineServerBasedDetectionStrategy),
    ("BloomAsyncTimelineServerBasedDetectionStrategy", BloomAsyncTimelineServerBasedDetectionStrategy),
    (f"{__name__}:MyStrategy", MyStrategy),
])
def test_strategy_names(value, expected):
    assert get_detection_strategy(value, WriteConfig()) is expected


def test_default_strategy_follows_the_marker_type():
    assert get_detection_strategy("", WriteConfig(marker_type=DIRECT)) is SimpleDirectMarkerBasedDetectionStrategy
    assert get_detection_strategy(None, WriteConfig(marker_type=BATCHED)) is AsyncTimelineServerBasedDetectionStrategy
    cfg = WriteConfig.from_options({ECD_STRATEGY.key: "bloom-async"})
    assert get_detection_strategy(cfg.early_conflict.strategy, cfg) is BloomAsyncTimelineServerBasedDetectionStrategy


@pytest.mark.parametrize("value", ["nope", "org.apache.hudi.table.marker.NoSuchStrategy",
                                   "no.such.module:Thing", "os.path:join",
                                   f"{__name__}:test_strategy_names"])
def test_unknown_strategy(value):
    with pytest.raises(UnknownStrategyError) as ei:
        get_detection_strategy(value, WriteConfig())
    msg = str(ei.value)
    assert value in msg and ei.value.key == ECD_STRATEGY.key
    for valid in ("simple", "transactional", "async", "bloom-direct", "bloom-async",
                  "org.apache.hudi.table.marker.SimpleDirectMarkerBasedDetectionStrategy"):
        assert valid in msg


def test_create_detector_uses_the_configured_strategy(tmp_path):
    table = make_table(tmp_path)
    det = create_detector(table, T(1), config("transactional"), completed_at_start=set())
    assert isinstance(det, SimpleTransactionDirectMarkerBasedDetectionStrategy)
    assert isinstance(det, EarlyConflictDetectionStrategy) and det.instant_time == T(1)


#: the bucket index, as its options give it
BUCKET = IndexConfig.from_options({"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2"})


@pytest.mark.parametrize("strategy, marker_type", [("simple", DIRECT), ("transactional", DIRECT),
                                                   ("async", BATCHED), ("simple", BATCHED)])
def test_bucket_index_two_first_writers_of_a_bucket_conflict_early(tmp_path, strategy, marker_type):
    # Two writers creating bucket 1 of a new partition each pick their own fileId; they must
    # meet before writing, as the bucket strategy would make them meet at commit.
    t = make_table(tmp_path)
    pending(t, T(1))
    write_markers(t, T(1), marker_type, ("p", "00000001-aaaa-0"))
    pending(t, T(2))
    cfg = config(strategy, marker_type).replace(index=BUCKET)
    det = create_detector(t, T(2), cfg).start()
    try:
        with pytest.raises(EarlyConflictError) as e:
            if strategy == "async":
                det.add_pending("p", "00000001-bbbb-0")
                det.run_check_once()  # one round of the checker thread, now
                det.check_sticky()
            else:
                det.create_marker(markers_for(t, T(2), marker_type), "p", fname("00000001-bbbb-0", T(2)),
                                  IOType.CREATE)
        assert e.value.other_instant == T(1)
        # another bucket, or the same bucket elsewhere, is not a conflict
        if strategy != "async":
            det2 = create_detector(t, T(3), cfg)
            pending(t, T(3))
            det2.check("p", "00000000-cccc-0")
            det2.check("q", "00000001-dddd-0")
    finally:
        det.stop()
    # without the bucket index, the same two fileIds are two file groups: no conflict
    pending(t, T(4))
    create_detector(t, T(4), config(strategy if strategy != "async" else "simple", marker_type)).check(
        "p", "00000001-bbbb-0")


def test_bucket_index_commit_conflict_check_sees_the_bucket_a_finished_writer_created(tmp_path):
    t = make_table(tmp_path)
    pending(t, T(1))
    pending(t, T(2))
    cfg = config("simple", DIRECT, check_commit_conflict=True).replace(index=BUCKET)
    det = create_detector(t, T(2), cfg)  # began while T(1) was still running
    complete_with(t, T(1), T(3), ("p", "00000001-aaaa-0"))  # T(1) created bucket 1, committed
    with pytest.raises(EarlyConflictError, match=r"completed after .* wrote file group\(s\) \[p/00000001-aaaa-0\]"):
        det.check("p", "00000001-bbbb-0")
    create_detector(t, T(2), cfg, completed_at_start=set()).check("p", "00000000-cccc-0")


def test_check_all_counts_an_earlier_live_writers_declared_file_groups(tmp_path):
    """Declared footprints (concurrency/early_conflict/declared.py): an earlier live writer's
    declared file group stops the later writer before any marker exists; a shared partition
    alone does not; a later writer's declaration does not (the later of two stops)."""
    from airflow_hudi_occ.core.commit.transaction import WriteTransaction
    table = make_table(tmp_path)
    early = WriteTransaction(table, config(), footprint=["a", "b"])
    early.begin()
    me = WriteTransaction(table, config(), footprint=["a"])
    me.begin()
    late = WriteTransaction(table, config(), footprint=["a"])
    late.begin()
    try:
        late.start_inflight(planned_file_groups=[("a", "f-late")])
        det = me.detector
        det.check_all([("a", "f-late"), ("a", "f-1")])  # partition shared, groups not declared
        early.start_inflight(planned_file_groups=[("a", "f-1"), ("b", "f-2")])
        assert [w.requested_time for w, shared in det.rivals(me.footprint)] == [early.instant_time]
        det.check_all([("a", "f-3")])  # another file group of the same partition: no conflict
        with pytest.raises(EarlyConflictError, match="declared file group") as e:
            det.check_all([("a", "f-1")])
        assert e.value.other_instant == early.instant_time
        assert [str(g) for g in e.value.file_groups] == ["a/f-1"]
        with pytest.raises(EarlyConflictError):
            det.check_all([("c", "f-9")])  # sticky: the write is doomed
    finally:
        for tx in (late, me, early):
            tx.abort()
