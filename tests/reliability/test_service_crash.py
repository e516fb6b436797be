"""Kill points inside clean, clustering, archival and compaction: a service process SIGKILLed part-way is completed by
the next service run, and readers never see a half-done service.

The kill is real (the step's function is wrapped to do its work, or part of it, and then
``os.kill(getpid(), SIGKILL)``); the lock is ZooKeeper's, whose node goes with the dead
session as in production. The check is independent: hudi-rs reads exactly the committed rows
at every point (snapshot, and time travel to the instants the clean retains).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.services.clean import run_clean
from airflow_hudi_occ.core.services.clustering import execute_clustering, schedule_clustering
from airflow_hudi_occ.core.table.file_system_view import list_base_files
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import SETUP_HEARTBEAT, hudi_read, rows_by_key

BASE = {"hoodie.time.generator.max_expected_clock_skew_ms": "1",
        "hoodie.client.heartbeat.interval_in_ms": "300", "hoodie.client.heartbeat.tolerable.misses": "2",
        "hoodie.cleaner.commits.retained": "2"}


def seed_config(opts: dict) -> WriteConfig:
    """The setup's writers: only the killed service needs the 0.6 s expiry."""
    return WriteConfig.from_options({**opts, **SETUP_HEARTBEAT})


@pytest.fixture
def opts(zk_server):
    return {**BASE, "hoodie.write.lock.provider": "zookeeper",
            "hoodie.write.lock.zookeeper.url": zk_server.hosts,
            "hoodie.write.lock.zookeeper.base_path": f"/svc-{os.getpid()}-{time.time_ns()}",
            "hoodie.write.lock.zookeeper.session_timeout_ms": "2000"}


KILLER = textwrap.dedent("""
    import os, signal, sys
    from airflow_hudi_occ.core.table.table import Table
    service, step, base, opts = sys.argv[1], sys.argv[2], sys.argv[3], eval(sys.argv[4])

    def die(*a, **k):
        sys.stdout.write("KILLED " + step + "\\n"); sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    if service == "clean":
        from airflow_hudi_occ.core.services import clean as mod
        if step == "mid_delete":
            def delete_planned_files(storage, files_by_partition, **kw):
                part, rels = sorted(files_by_partition.items())[0]
                storage.delete(storage.path(rels[0]))  # one file really goes, then the process dies
                die()
            mod.delete_planned_files = delete_planned_files
        else:
            mod.complete = die
        mod.run_clean(Table.open(base), opts)
    elif service == "archive":
        from airflow_hudi_occ.core.commit import archival as mod
        from airflow_hudi_occ.core.table import history as hmod
        H = hmod.TimelineHistory
        if step == "after_data_file":  # the L0 file written, no snapshot names it
            orig = H._write_data
            def _write_data(self, *a, **k):
                orig(self, *a, **k)
                die()
            H._write_data = _write_data
        elif step == "after_manifest":  # manifest_<N+1> written, _version_ still says N
            def _publish(self, files):
                v = self.latest_version()
                new = 1 if v < 0 else v + 1
                import json
                self.storage.write(self._path(f"manifest_{new}"), json.dumps(
                    {"files": [{"fileName": f.name, "fileLen": f.length} for f in files]}).encode())
                die()
            H._publish = _publish
        elif step == "mid_delete":  # published; some archived instants deleted from the timeline
            orig_del = mod._delete_archived
            def _delete_archived(table, timeline, instants):
                orig_del(table, timeline, instants[: len(instants) // 2])
                die()
            mod._delete_archived = _delete_archived
        elif step == "mid_compaction":  # a compacted file written, the manifest not yet
            orig_compact_write = H._write_data
            def _write_data(self, name, rows):
                orig_compact_write(self, name, rows)
                if not name.endswith("_0.parquet"):
                    die()
            H._write_data = _write_data
        mod.run_archival(Table.open(base), opts)
    elif service == "compact":
        from airflow_hudi_occ.core.services import compaction as mod
        from airflow_hudi_occ.core.commit import transaction
        if step == "mid_file":  # the first new base file half written, under its final name
            def write_parquet(store, rel, table):
                import io
                import pyarrow.parquet as pq
                buf = io.BytesIO()
                pq.write_table(table, buf)
                store.write(store.path(rel), buf.getvalue()[: buf.tell() // 2])
                die()
            mod.write_parquet = write_parquet
        elif step == "after_first_file":
            orig = mod.write_parquet
            def write_parquet(*a, **k):
                orig(*a, **k)
                die()
            mod.write_parquet = write_parquet
        elif step == "after_base_files":  # every base file written, commit not started
            mod.CompactionTransaction.commit = die
        else:
            transaction.complete = die  # lock held, conflicts resolved, not completed
        mod.execute_compaction(Table.open(base), opts)
    else:
        from airflow_hudi_occ.core.services import clustering as mod
        from airflow_hudi_occ.core.commit import transaction
        if step == "after_first_file":
            orig = mod.write_parquet
            def write_parquet(*a, **k):
                orig(*a, **k)
                die()
            mod.write_parquet = write_parquet
        else:
            transaction.complete = die  # lock held, conflicts resolved, not completed
        mod.execute_clustering(Table.open(base), opts)
    sys.exit(3)  # not reached
""")


def kill_at(service: str, step: str, table: Table, opts: dict) -> None:
    p = subprocess.run([sys.executable, "-c", KILLER, service, step, table.base_uri, repr(opts)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == -9 and f"KILLED {step}" in p.stdout, p.stdout + p.stderr[-3000:]


def history(table: Table, opts: dict, n: int = 5) -> list[str]:
    w = ArrowTableWriter(table, seed_config(opts))
    w.write(pa.Table.from_pylist([{"id": 100, "p": "b", "ts": 0, "v": "once"}]))
    return [w.write(pa.Table.from_pylist([{"id": k, "p": "a", "ts": i, "v": f"v{i}"} for k in range(3)]))
            .instant.requested_time for i in range(n)]


def snapshot(table: Table) -> dict:
    return rows_by_key(hudi_read(table.base_uri))


@pytest.mark.parametrize("step", ["mid_delete", "before_complete"])
def test_clean_killed_part_way_is_completed_by_the_next_clean(tmp_path, opts, step):
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    insts = history(table, opts)
    before = snapshot(table)
    retained = {t: rows_by_key(hudi_read(table.base_uri, as_of=t)) for t in insts[-2:]}
    kill_at("clean", step, table, opts)

    tl = table.timeline()
    pending = [i for i in tl.pending() if i.action is Action.CLEAN]
    assert len(pending) == 1
    assert snapshot(table) == before  # 0 lost, 0 exposed: a clean only removes old versions
    for t, rows in retained.items():
        assert rows_by_key(hudi_read(table.base_uri, as_of=t)) == rows

    res = run_clean(table, opts)
    assert res.clean_instant == pending[0].requested_time  # the same plan, finished
    tl = table.timeline()
    assert tl.pending() == []
    assert snapshot(table) == before
    for t, rows in retained.items():
        assert rows_by_key(hudi_read(table.base_uri, as_of=t)) == rows
    assert len(list_base_files(table, "a")) == 3  # versions of the 2 retained commits + the one before


@pytest.mark.parametrize("step", ["after_first_file", "before_complete"])
def test_clustering_killed_part_way_is_redone_by_the_next_run(tmp_path, opts, step):
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"])
    w = ArrowTableWriter(table, seed_config(opts))
    for i in range(4):  # four small file groups in partition a
        w.write(pa.Table.from_pylist([{"id": 10 * i + k, "p": "a", "v": f"v{i}"} for k in range(3)]), "insert")
    before = snapshot(table)
    groups_before = {b.file_id for b in list_base_files(table, "a")}
    plan = schedule_clustering(table, opts)
    assert plan is not None
    kill_at("cluster", step, table, opts)

    inst = table.timeline().get(plan)
    assert inst is not None and inst.is_pending
    assert snapshot(table) == before  # the dead executor's files belong to a pending instant
    time.sleep(1.0)  # its heartbeat (300 ms x 2) expires

    res = execute_clustering(table, opts)
    assert res.instant == plan and table.timeline().get(plan).is_completed
    assert table.timeline().pending() == []
    assert snapshot(table) == before
    live = {b.file_id for b in list_base_files(table, "a")}
    replaced = set(res.replaced["a"])
    assert replaced == groups_before
    # only the re-run's files are in the completed instant: the dead executor's were removed
    meta = table.timeline().commit_metadata(table.timeline().get(plan))
    written = {s.path for s in meta.write_stats()}
    on_disk = {f"a/{b.name}" for b in list_base_files(table, "a") if b.instant_time == plan}
    assert on_disk == written and live


ARCHIVE = {"hoodie.keep.min.commits": "4", "hoodie.keep.max.commits": "6",
           "hoodie.timeline.compaction.batch.size": "2", "hoodie.archive.automatic": "false"}


@pytest.mark.parametrize("step", ["after_data_file", "after_manifest", "mid_delete", "mid_compaction"])
def test_archival_killed_part_way_is_finished_by_the_next_run(tmp_path, opts, step):
    """0 lost, 0 exposed at the kill and after the next run; every instant ends up exactly once,
    active or archived; nothing stays pending."""
    from airflow_hudi_occ.core.commit.archival import run_archival
    from airflow_hudi_occ.core.table.history import TimelineHistory
    opts = {**opts, **ARCHIVE}
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"])
    w = ArrowTableWriter(table, seed_config(opts))
    written = []
    if step == "mid_compaction":  # an archival already made one layer-0 file: the next compacts
        for i in range(8):
            written.append(w.write(pa.Table.from_pylist([{"id": i, "p": f"p{i % 3}", "v": "x"}])).instant.requested_time)
        run_archival(table, opts)
    for i in range(len(written), len(written) + 10):
        written.append(w.write(pa.Table.from_pylist([{"id": i, "p": f"p{i % 3}", "v": "x"}])).instant.requested_time)
    expected = {i: {"id": i, "p": f"p{i % 3}", "v": "x"} for i in range(len(written))}
    assert snapshot(table) == expected
    kill_at("archive", step, table, opts)
    assert snapshot(table) == expected  # readers see every row at the kill point
    assert rows_by_key(read_table(table)) == expected

    res = run_archival(table, opts)
    history = TimelineHistory(table)
    raw = history.read(["instantTime"]).column("instantTime").to_pylist()
    archived = set(raw)
    active = {i.requested_time for i in table.timeline().completed_writes()}
    assert archived | active == set(written) and not archived & active
    assert len(active) == 4, (step, res.to_json())
    assert table.timeline().pending() == []
    if step == "mid_delete":
        assert res.finished_interrupted
    # no history file holds an instant twice
    import pyarrow.parquet as pq
    for f in history.files():
        times = pq.read_table(os.path.join(history.folder, f.name)).column("instantTime").to_pylist()
        assert len(times) == len(set(times))
    assert snapshot(table) == expected
    assert rows_by_key(read_table(table)) == expected


def _hudi_read_optimised(base: str) -> dict:
    from hudi import HudiReadOptions, HudiTableBuilder
    t = HudiTableBuilder.from_base_uri(os.path.abspath(base)).build()
    batches = t.read(HudiReadOptions().with_hudi_option("hoodie.read.use.read_optimized.mode", "true"))
    return rows_by_key(pa.Table.from_batches(batches)) if batches else {}


COMPACTION_STEPS = ["mid_file", "after_first_file", "after_base_files", "before_complete"]


@pytest.mark.parametrize("step", [
    *(pytest.param(s, marks=pytest.mark.slow) for s in ("mid_file", "after_first_file")),
    "after_base_files", "before_complete"])
def test_compaction_killed_part_way_is_rerun_by_the_next_run(tmp_path, opts, step):
    """A dead compaction executor: readers see the old slices and their logs (0 lost, 0
    exposed); the next service run rolls it back to requested and runs the same plan; nothing
    stays pending; only the re-run's base files are in the commit."""
    from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
    from airflow_hudi_occ.core.services.compaction import run_compaction, schedule_compaction
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts", table_type="MERGE_ON_READ")
    w = MergeOnReadWriter(table, seed_config(opts))
    model = {}
    for i in range(3):  # inserts (base files in a and b), then two rounds of upserts (log files)
        rows = [{"id": k, "p": "ab"[k % 2], "ts": i, "v": f"v{i}"} for k in range(6)]
        w.write(pa.Table.from_pylist(rows))
        model.update({r["id"]: r for r in rows})
    w.write(pa.Table.from_pylist([{"id": 1, "p": "b"}]), "delete")
    model.pop(1)
    assert snapshot(table) == model
    ro_before = _hudi_read_optimised(table.base_uri)
    plan = schedule_compaction(table, opts, force=True)
    assert plan is not None
    kill_at("compact", step, table, opts)

    inst = table.timeline().get(plan)
    assert inst is not None and inst.is_pending
    assert snapshot(table) == model  # the dead executor's base files belong to a pending instant
    assert _hudi_read_optimised(table.base_uri) == ro_before
    time.sleep(1.0)  # its heartbeat (300 ms x 2) expires

    out = run_compaction(Table.open(table.base_uri), opts)  # the next service run, as scheduled
    assert out["executed"]["instant"] == plan, out
    tl = table.timeline()
    assert tl.get(plan).is_completed and tl.pending() == []
    assert snapshot(table) == model
    assert _hudi_read_optimised(table.base_uri) == model  # every log merged into the base files
    meta = tl.commit_metadata(tl.get(plan))
    written = {s.path for s in meta.write_stats()}
    on_disk = {f"{p}/{b.name}" for p in "ab" for b in list_base_files(table, p)
               if b.instant_time == plan}
    assert on_disk == written and len(written) == 2
    stray = [f for f in table.storage.walk_files(table.storage.root)
             if plan in f and f.endswith((".parquet", ".tmp")) and f not in written]
    assert stray == [], stray
