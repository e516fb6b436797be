"""Archival: what it moves, what it never moves, and that every reader still reads the same rows.

Independent checks: hudi-rs reads exactly the rows written (its view of files whose instant
left the active timeline), each history row holds the bytes the active timeline held, and the
history's layout is Hudi's (manifest JSON, file names, Avro schema in the parquet footer).
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.cli import main as cli_main
from airflow_hudi_occ.core.commit.archival import plan_archival, run_archival
from airflow_hudi_occ.core.commit.transaction import WriteTransaction, last_checkpoint
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import ArchivalConfig, WriteConfig
from airflow_hudi_occ.core.errors import ArchivedInstantError, ConfigError
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.services.clean import run_clean
from airflow_hudi_occ.core.services.clustering import execute_clustering, schedule_clustering
from airflow_hudi_occ.core.table.history import AVRO_SCHEMA, TimelineHistory
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.table.time_travel import check_as_of_readable, check_not_archived
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key

#: small bounds so that a test needs a dozen commits, not thirty
SMALL = {**FAST_WRITE_OPTIONS, "hoodie.keep.min.commits": "4", "hoodie.keep.max.commits": "6",
         "hoodie.clean.commits.retained": "2", "hoodie.timeline.compaction.batch.size": "3"}


def _table(tmp_path, name="t"):
    return Table.create(str(tmp_path / name), name, record_key_fields=["id"], partition_fields=["p"])


def _write(table, opts, i, *, part=None, op="upsert", **kw):
    w = ArrowTableWriter(table, WriteConfig.from_options(opts))
    rows = [{"id": i, "p": part or f"p{i % 5}", "v": f"v{i}"}]
    return w.write(pa.Table.from_pylist(rows), op, **kw)


def _completed_bytes(table):
    """requested time -> bytes of each completed instant file on the active timeline."""
    tl = table.timeline()
    return {i.requested_time: table.storage.read(tl.file_path(i)) for i in tl.completed()}


def test_automatic_archival_keeps_bounds_and_every_reader_reads_every_row(tmp_path):
    t = _table(tmp_path)
    seen: dict[str, bytes] = {}
    expected = {}
    for i in range(16):
        seen.update(_completed_bytes(t))
        _write(t, SMALL, i)
        expected[i] = {"id": i, "p": f"p{i % 5}", "v": f"v{i}"}
    tl = t.timeline()
    active = [i.requested_time for i in tl.completed_writes()]
    assert 4 <= len(active) <= 7
    history = TimelineHistory(t)
    archived = history.instants()
    # every write is either active or archived, exactly once
    assert sorted([a.instant_time for a in archived] + active) == sorted(seen.keys() | set(active))
    assert len({a.instant_time for a in archived}) == len(archived) >= 9
    # a history row holds the bytes the completed file held, and its completion time
    rows = history.read()
    for r in rows.to_pylist():
        assert r["metadata"] == seen[r["instantTime"]]
        assert r["action"] == "commit" and r["completionTime"] and r["version"] == 1
    # partitions p0..p4 hold files written by archived commits only (keys 0..4 never rewritten
    # in place: upserts of new keys create new files): both readers still read all 16 rows
    assert rows_by_key(hudi_read(str(tmp_path / "t")), columns=["id", "p", "v"]) == expected
    assert rows_by_key(read_table(t), columns=["id", "p", "v"]) == expected


def test_marker_folders_left_by_archived_instants_go_and_the_others_stay(tmp_path):
    """A writer that died leaves its markers (``.hoodie/.temp/<instant>``); archival deletes
    those of the instants it archives, found by one listing, and leaves the rest."""
    t = _table(tmp_path)
    opts = {**SMALL, "hoodie.archive.automatic": "false"}
    for i in range(8):
        _write(t, opts, i)
    times = [i.requested_time for i in t.timeline().completed_writes()]
    temp = tmp_path / "t" / ".hoodie" / ".temp"
    for when in (times[0], times[1], times[-1]):
        (temp / when).mkdir(parents=True, exist_ok=True)
        (temp / when / f"p0/f_{when}.parquet.marker.CREATE").parent.mkdir(parents=True)
        (temp / when / f"p0/f_{when}.parquet.marker.CREATE").write_text("")
    result = run_archival(t, opts)
    assert times[0] in result.archived and times[1] in result.archived and times[-1] not in result.archived
    assert sorted(os.listdir(temp)) == [times[-1]]


def test_history_layout_is_hudis(tmp_path):
    t = _table(tmp_path)
    for i in range(9):
        _write(t, SMALL, i)
    history = TimelineHistory(t)
    names = sorted(os.listdir(history.folder))
    version = int(open(os.path.join(history.folder, "_version_")).read())
    assert f"manifest_{version}" in names
    doc = json.load(open(os.path.join(history.folder, f"manifest_{version}")))
    assert set(doc) == {"files"} and doc["files"]
    for entry in doc["files"]:
        assert set(entry) == {"fileName", "fileLen"}
        path = os.path.join(history.folder, entry["fileName"])
        assert os.path.getsize(path) == entry["fileLen"]
        lo, hi, layer = entry["fileName"][:-len(".parquet")].split("_")
        f = pq.ParquetFile(path)
        times = f.read().column("instantTime").to_pylist()
        assert (min(times), max(times), layer) == (lo, hi, "0")
        assert json.loads(f.metadata.metadata[b"parquet.avro.schema"]) == AVRO_SCHEMA
        assert [c.name for c in f.schema_arrow] == [x["name"] for x in AVRO_SCHEMA["fields"]]


def test_history_compacts_into_the_next_layer_and_keeps_three_snapshots(tmp_path):
    opts = {**SMALL, "hoodie.keep.min.commits": "3", "hoodie.keep.max.commits": "4",
            "hoodie.timeline.compaction.batch.size": "2"}
    t = _table(tmp_path)
    for i in range(14):
        _write(t, opts, i)
    history = TimelineHistory(t)
    layers = sorted({f.layer for f in history.files()})
    assert max(layers) >= 1, history.files()
    # no layer holds a full batch after compaction; nothing archived twice, nothing lost
    for layer in layers:
        assert sum(1 for f in history.files() if f.layer == layer) < 2 or layer == max(layers)
    archived = [a.instant_time for a in history.instants()]
    active = [i.requested_time for i in t.timeline().completed_writes()]
    assert len(archived) + len(active) == 14 and not set(archived) & set(active)
    assert len(history.manifest_versions()) <= 3 + max(layers)
    listed = {n for n in os.listdir(history.folder) if n.endswith(".parquet")}
    needed = set()
    for v in history.manifest_versions():
        needed |= {f.name for f in history.files(v)}
    assert listed == needed  # files of dropped snapshots are deleted
    assert rows_by_key(hudi_read(str(tmp_path / "t")), columns=["id"]) == {i: {"id": i} for i in range(14)}


def test_never_past_a_pending_instant_nor_the_commit_before_it(tmp_path):
    t = _table(tmp_path)
    for i in range(2):
        _write(t, SMALL, i)
    base = t.timeline().completed_writes()[-1].requested_time
    tx = WriteTransaction(t, WriteConfig.from_options(SMALL))
    pending = tx.begin()
    try:
        for i in range(2, 14):
            _write(t, SMALL, i)
        res = run_archival(t, SMALL)
        assert res.archived == [] and res.boundary == base
        assert "pending commit " + pending in res.boundary_reason
        archived = TimelineHistory(t).instant_times()
        assert archived and max(archived) < base
    finally:
        tx.abort(reason="test done")
    # once the pending write is gone, archival catches up to the bounds
    res = run_archival(t, SMALL)
    assert res.archived and len(t.timeline().completed_writes()) == 4


def test_replacecommit_stays_until_clean_removed_what_it_replaced(tmp_path):
    opts = {**SMALL, "hoodie.clustering.plan.strategy.small.file.limit": str(10 ** 9)}
    t = _table(tmp_path)
    for i in range(6):
        _write(t, opts, 100 + i, part="a")
    plan = schedule_clustering(t, opts)
    assert plan is not None
    execute_clustering(t, opts, plan)
    for i in range(8):
        _write(t, opts, i, part="b")
    res = run_archival(t, opts)
    assert plan not in TimelineHistory(t).instant_times()
    assert res.boundary is not None and res.boundary <= plan and "replacecommit" in res.boundary_reason
    expected = {k: {"id": k} for k in [*range(100, 106), *range(8)]}
    assert rows_by_key(hudi_read(str(tmp_path / "t")), columns=["id"]) == expected
    # the clean deletes the replaced file groups: now the replacecommit may go
    run_clean(t, opts)
    for i in range(8, 12):
        _write(t, opts, i, part="b")
    run_archival(t, opts)
    assert plan in TimelineHistory(t).instant_times()
    expected.update({k: {"id": k} for k in range(8, 12)})
    assert rows_by_key(hudi_read(str(tmp_path / "t")), columns=["id"]) == expected
    assert rows_by_key(read_table(t), columns=["id"]) == expected


def test_reads_into_archived_instants_fail_clearly(tmp_path):
    t = _table(tmp_path)
    times = [_write(t, SMALL, i).instant for i in range(12)]
    earliest = t.timeline().earliest().requested_time
    old = times[0].requested_time
    with pytest.raises(ArchivedInstantError) as e:
        check_as_of_readable(t, old)
    assert e.value.earliest_active == earliest and earliest in str(e.value.remedy)
    with pytest.raises(ArchivedInstantError) as e:
        check_not_archived(t, start=times[1].completion_time)
    assert e.value.start == times[1].completion_time
    # at or after the earliest active instant, and from the last archived completion: fine
    check_as_of_readable(t, earliest)
    check_not_archived(t, start=TimelineHistory(t).max_completion_time())


def test_checkpoint_survives_archival(tmp_path):
    t = _table(tmp_path)
    _write(t, SMALL, 0, checkpoint="kafka:offset=41")
    for i in range(1, 14):
        _write(t, SMALL, i)
    assert TimelineHistory(t).instant_times()  # the checkpoint's commit is archived
    assert last_checkpoint(t) == "kafka:offset=41"


def test_a_batch_committed_before_archival_is_still_not_written_twice(tmp_path):
    """Idempotent batches: a re-run (an Airflow retry days later) of a batch whose commit has
    been archived finds it in the history and writes nothing."""
    t = _table(tmp_path)
    first = _write(t, SMALL, 0, batch_key="dag=ingest/run=1")
    for i in range(1, 14):
        _write(t, SMALL, i)
    assert first.instant.requested_time in TimelineHistory(t).instant_times()
    assert t.timeline().get(first.instant.requested_time) is None
    before = sorted(i.requested_time for i in t.timeline().completed())
    again = _write(t, SMALL, 99, batch_key="dag=ingest/run=1")
    assert again.outcome == "already_committed"
    assert again.instant.requested_time == first.instant.requested_time
    assert again.metadata.extra_metadata == first.metadata.extra_metadata
    assert sorted(i.requested_time for i in t.timeline().completed()) == before  # nothing written
    assert 99 not in rows_by_key(hudi_read(t.base_uri))


def test_configuration_errors_name_the_keys_and_change_nothing(tmp_path):
    with pytest.raises(ConfigError) as e:
        ArchivalConfig.from_options({"hoodie.keep.min.commits": "10", "hoodie.keep.max.commits": "12",
                                     "hoodie.clean.commits.retained": "10"})
    assert e.value.key == "hoodie.keep.min.commits" and "hoodie.clean.commits.retained" in str(e.value)
    with pytest.raises(ConfigError):
        ArchivalConfig.from_options({"hoodie.keep.min.commits": "30", "hoodie.keep.max.commits": "20"})
    assert ArchivalConfig.from_options({}).min_commits == 20
    assert ArchivalConfig.from_options({}).max_commits == 30
    t = _table(tmp_path)
    for i in range(8):
        _write(t, {**SMALL, "hoodie.archive.automatic": "false"}, i)
    before = sorted(os.listdir(t.storage.path(".hoodie", "timeline")))
    with pytest.raises(ConfigError):
        run_archival(t, {**SMALL, "hoodie.keep.min.commits": "2"})
    assert sorted(os.listdir(t.storage.path(".hoodie", "timeline"))) == before


def test_automatic_off_then_cli_archive(tmp_path, capsys):
    opts = {**SMALL, "hoodie.archive.automatic": "false"}
    t = _table(tmp_path)
    for i in range(10):
        _write(t, opts, i)
    assert TimelineHistory(t).is_empty()
    planned, _, _ = plan_archival(t, t.timeline(), ArchivalConfig.from_options(opts))
    assert len([i for i in planned if i.action is Action.COMMIT]) == 6
    args = [f"--option={k}={v}" for k, v in opts.items()]
    assert cli_main(["archive", str(tmp_path / "t"), "--dry-run", "--json", *args]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["dry_run"] and len(doc["archived"]) == 6 and TimelineHistory(t).is_empty()
    assert cli_main(["archive", str(tmp_path / "t"), "--json", *args]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["archived"]) == 6 and doc["history_file"]
    assert cli_main(["show", str(tmp_path / "t"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["history"]["instants"] == 6
    assert rows_by_key(hudi_read(str(tmp_path / "t")), columns=["id"]) == {i: {"id": i} for i in range(10)}


#: another writer, in its own process (so this one has read none of its commit metadata):
#: ``argv``: table path, options (JSON), first id, how many commits, then whether to archive
OTHER_WRITER = """
import json, sys
import pyarrow as pa
from airflow_hudi_occ.core.commit.archival import run_archival
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.table import Table
path, opts, first, n, archive = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
table = Table.open(path)
w = ArrowTableWriter(table, WriteConfig.from_options(opts))
for i in range(first, first + n):
    w.write(pa.Table.from_pylist([{"id": i, "p": f"p{i % 5}", "v": f"v{i}"}]), "upsert", batch_key=f"batch-{i}")
if archive == "archive":
    assert run_archival(table, WriteConfig.from_options(opts)).archived
"""


def _other_writer(tmp_path, opts, first, n, archive):
    import subprocess
    import sys
    subprocess.run([sys.executable, "-c", OTHER_WRITER, str(tmp_path / "t"), json.dumps(opts), str(first), str(n),
                    archive], check=True, timeout=300)


def test_a_timeline_listed_before_another_writers_archival_still_reads_what_it_archived(tmp_path):
    """A reader outside the lock lists the active timeline; another writer's archival then moves
    the oldest instants to the history and deletes their files; the reader asks for the metadata
    of one of them. That is archival, not corruption: the metadata comes from the history. (A
    90-day scale backfill's mapped tasks met it in their already-committed check and failed
    with "completed instant ... vanished from the timeline".)"""
    from airflow_hudi_occ.core.commit.transaction import find_committed_batch
    from airflow_hudi_occ.core.format.metadata import EXTRA_BATCH_KEY
    _table(tmp_path)
    manual = {**SMALL, "hoodie.archive.automatic": "false"}
    _other_writer(tmp_path, manual, 0, 10, "no")
    table = Table.open(str(tmp_path / "t"))
    listed = table.timeline()
    first = listed.completed_writes()[0]
    _other_writer(tmp_path, manual, 10, 1, "archive")
    assert first.requested_time in TimelineHistory(table).instant_times()
    assert not os.path.exists(listed.file_path(first))  # gone from the active timeline
    meta = listed.commit_metadata(first)
    assert meta.extra_metadata.get(EXTRA_BATCH_KEY) == "batch-0"
    assert [s.partition_path for s in meta.write_stats()] == ["p0"]
    # the already-committed check over that listing finds the archived batch
    found = find_committed_batch(table, "batch-0", timeline=listed)
    assert found is not None and found.requested_time == first.requested_time
