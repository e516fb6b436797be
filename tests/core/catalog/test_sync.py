"""Catalog sync against a real Hive Metastore (started by the tests, no mock): what a commit's
sync registers, how it follows the table incrementally, and what a metastore outage does.

Java's own sync and Spark SQL reading through the metastore are the judges of
``tests/interop/test_java_catalog_sync.py`` (slow: JVMs); here the catalog is read back over
thrift and compared with what Java's HiveSyncTool writes (the definitions that test found equal).
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from airflow_hudi_occ.core.catalog.changes import LAST_COMMIT_COMPLETION_TIME_SYNC, LAST_COMMIT_TIME_SYNC
from airflow_hudi_occ.core.catalog.hive import HiveMetastore
from airflow_hudi_occ.core.catalog.sync import INPUT_FORMAT, REALTIME_INPUT_FORMAT, same_path, sync_table
from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.commit.transaction import WriteTransaction
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import CatalogSyncError, CatalogUnavailableError
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS
from airflow_hudi_occ.testing.unreachable import refusing_port, silent_listener
from tests.core.catalog.rows import batch



def sync_options(uri: str, db: str, **more) -> dict:
    return {**FAST_WRITE_OPTIONS, "hoodie.datasource.hive_sync.enable": "true",
            "hoodie.datasource.hive_sync.mode": "hms", "hoodie.datasource.hive_sync.metastore.uris": uri,
            "hoodie.datasource.hive_sync.database": db, "hoodie.occ.meta.sync.timeout.ms": "5000", **more}


def catalog(uri: str, db: str, name: str) -> dict:
    """The catalog table as the metastore holds it, with its partitions."""
    with HiveMetastore(uri) as c:
        t = c.get_table(db, name)
        if t is None:
            return {}
        parts = sorted(("/".join(p.values), p.sd.location) for p in c.partitions(db, name))
    return {"cols": t.columns, "keys": t.partition_keys, "input": t.input_format, "location": t.location,
            "serde": t.serde_params, "params": t.params, "type": t.table_type, "partitions": parts}


def completed_commits(table):
    tl = table.timeline()
    return [i for i in tl.completed() if i.action in (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)]


def test_cow_table_registered_then_followed_incrementally(hive_metastore, tmp_path):
    """Register on the first commit as Java does; the next commits add only their partitions,
    evolve the columns, and move last_commit_time_sync to the newest commit."""
    uri = hive_metastore.uri
    table = Table.create(str(tmp_path / "t1"), "t1", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    w = ArrowTableWriter(table, WriteConfig.from_options(sync_options(uri, "cow_db")))
    r1 = w.write(batch([(1, "a", 1), (2, "b", 1)]), "upsert")
    rep = r1.catalog_sync
    assert rep.created == ["t1"] and rep.full_listing
    got = catalog(uri, "cow_db", "t1")
    assert got["type"] == "EXTERNAL_TABLE" and got["params"]["EXTERNAL"] == "TRUE"
    assert got["input"] == INPUT_FORMAT and same_path(got["location"], table.base_uri)
    assert got["cols"] == [("_hoodie_commit_time", "string"), ("_hoodie_commit_seqno", "string"),
                           ("_hoodie_record_key", "string"), ("_hoodie_partition_path", "string"),
                           ("_hoodie_file_name", "string"), ("id", "bigint"), ("ts", "bigint")]
    assert got["keys"] == [("p", "string")]
    assert got["serde"]["path"] == table.base_uri.rstrip("/")
    assert got["serde"]["hoodie.query.as.ro.table"] == "false"
    assert got["params"]["spark.sql.sources.provider"] == "hudi"
    spark_schema = json.loads(got["params"]["spark.sql.sources.schema.part.0"])
    assert [f["name"] for f in spark_schema["fields"]][-1] == "p"  # partition columns last
    assert got["params"]["spark.sql.sources.schema.partCol.0"] == "p"
    assert [p for p, _ in got["partitions"]] == ["a", "b"]
    assert all(same_path(loc, f"{table.base_uri.rstrip('/')}/{p}") for p, loc in got["partitions"])
    c1 = completed_commits(table)[-1]
    assert got["params"][LAST_COMMIT_TIME_SYNC] == c1.requested_time
    assert got["params"][LAST_COMMIT_COMPLETION_TIME_SYNC] == c1.completion_time

    # a new partition and a new column: only this commit's metadata is read
    r2 = w.write(batch([(3, "c", 2)], v=["x"]), "upsert")
    rep = r2.catalog_sync
    assert not rep.full_listing and rep.instants_read == 1 and rep.added == {"t1": ["c"]}
    assert rep.schema_changed == ["t1"]
    got = catalog(uri, "cow_db", "t1")
    assert got["cols"][-1] == ("v", "string")
    assert [p for p, _ in got["partitions"]] == ["a", "b", "c"]
    c2 = completed_commits(table)[-1]
    assert got["params"][LAST_COMMIT_TIME_SYNC] == c2.requested_time > c1.requested_time
    # an upsert into an existing partition changes nothing but the sync times
    r3 = w.write(batch([(1, "a", 3)], v=["y"]), "upsert")
    assert r3.catalog_sync.schema_changed == [] and r3.catalog_sync.added == {"t1": ["a"]}
    assert [p for p, _ in catalog(uri, "cow_db", "t1")["partitions"]] == ["a", "b", "c"]


def test_mor_table_registered_as_ro_rt_and_its_name(hive_metastore, tmp_path):
    uri = hive_metastore.uri
    table = Table.create(str(tmp_path / "m1"), "m1", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts", table_type="MERGE_ON_READ")
    w = MergeOnReadWriter(table, WriteConfig.from_options(sync_options(uri, "mor_db")))
    w.write(batch([(1, "a", 1)]), "upsert")
    rep = w.write(batch([(1, "a", 2), (2, "b", 2)]), "upsert").catalog_sync  # a log file and a new partition
    assert rep.tables == ["m1_ro", "m1_rt", "m1"]
    ro, rt, plain = (catalog(uri, "mor_db", n) for n in ("m1_ro", "m1_rt", "m1"))
    assert ro["input"] == INPUT_FORMAT and ro["serde"]["hoodie.query.as.ro.table"] == "true"
    assert rt["input"] == REALTIME_INPUT_FORMAT and rt["serde"]["hoodie.query.as.ro.table"] == "false"
    assert plain["input"] == REALTIME_INPUT_FORMAT
    for t in (ro, rt, plain):
        assert [p for p, _ in t["partitions"]] == ["a", "b"]
    # Java's skip_ro_suffix: the read-optimised table takes the plain name
    table2 = Table.create(str(tmp_path / "m2"), "m2", record_key_fields=["id"], partition_fields=["p"],
                          precombine_field="ts", table_type="MERGE_ON_READ")
    w2 = MergeOnReadWriter(table2, WriteConfig.from_options(
        sync_options(uri, "mor_db", **{"hoodie.datasource.hive_sync.skip_ro_suffix": "true"})))
    assert w2.write(batch([(1, "a", 1)]), "upsert").catalog_sync.tables == ["m2", "m2_rt"]
    assert catalog(uri, "mor_db", "m2")["input"] == INPUT_FORMAT


def test_partition_dropped_after_delete_partition_and_stays_after_clean(hive_metastore, tmp_path):
    """A replacecommit that replaced every file group of a partition (Java's delete_partition)
    empties it: the next sync drops it, and a clean after it drops nothing more."""
    uri = hive_metastore.uri
    opts = sync_options(uri, "drop_db", **{"hoodie.clean.commits.retained": "1"})
    table = Table.create(str(tmp_path / "d1"), "d1", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    config = WriteConfig.from_options(opts)
    w = ArrowTableWriter(table, config)
    w.write(batch([(1, "a", 1), (2, "b", 1)]), "upsert")
    fids = sorted(completed_commits_groups(table, "a"))
    tx = WriteTransaction(table, config, action=Action.REPLACE_COMMIT, operation_type="DELETE_PARTITION")
    tx.begin()
    tx.start_inflight()
    res = tx.commit([], replaced={"a": fids})
    rep = sync_table(table, config, committed_instant=res.instant.requested_time)
    assert rep.dropped == {"d1": ["a"]}
    assert [p for p, _ in catalog(uri, "drop_db", "d1")["partitions"]] == ["b"]
    # writing "a" again brings it back
    w.write(batch([(3, "a", 2)]), "upsert")
    assert [p for p, _ in catalog(uri, "drop_db", "d1")["partitions"]] == ["a", "b"]


def completed_commits_groups(table, partition):
    tl = table.timeline()
    out = set()
    for inst in completed_commits(table):
        out |= {fid for part, fid in tl.commit_metadata(inst).written_file_groups() if part == partition}
    return out


def test_metastore_down_fails_the_sync_not_the_commit(hive_metastore, tmp_path):
    """Nothing listens: the commit completes, the sync raises CatalogSyncError naming the
    instant within the timeout; the next sync against a live metastore is exact."""
    dead = f"thrift://127.0.0.1:{refusing_port()}"
    table = Table.create(str(tmp_path / "x1"), "x1", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    w = ArrowTableWriter(table, WriteConfig.from_options(sync_options(dead, "down_db")))
    t0 = time.monotonic()
    with pytest.raises(CatalogUnavailableError) as exc:
        w.write(batch([(1, "a", 1)]), "upsert")
    assert time.monotonic() - t0 < 10
    done = completed_commits(table)
    assert len(done) == 1 and exc.value.committed_instant == done[0].requested_time
    assert "is in the table" in exc.value.remedy and "hudi-occ sync" in exc.value.remedy
    # a metastore that accepts and never answers: bounded by the timeout
    with silent_listener() as port:
        w2 = ArrowTableWriter(table, WriteConfig.from_options(sync_options(
            f"thrift://127.0.0.1:{port}", "down_db", **{"hoodie.occ.meta.sync.timeout.ms": "1500"})))
        t0 = time.monotonic()
        with pytest.raises(CatalogSyncError):
            w2.write(batch([(2, "b", 2)]), "upsert")
        waited = time.monotonic() - t0
    assert waited < 1.5 * 2 + 3  # connect + one read timeout, plus the write itself
    assert len(completed_commits(table)) == 2
    # back: one sync catches up both commits
    rep = sync_table(table, WriteConfig.from_options(sync_options(hive_metastore.uri, "down_db")))
    got = catalog(hive_metastore.uri, "down_db", "x1")
    assert [p for p, _ in got["partitions"]] == ["a", "b"]
    assert got["params"][LAST_COMMIT_TIME_SYNC] == completed_commits(table)[-1].requested_time
    assert rep.created == ["x1"]
    # ignore_exceptions: the write returns, the report carries the error
    w3 = ArrowTableWriter(table, WriteConfig.from_options(sync_options(
        dead, "down_db", **{"hoodie.datasource.hive_sync.ignore_exceptions": "true"})))
    r = w3.write(batch([(3, "c", 3)]), "upsert")
    assert r.catalog_sync.error is not None and r.outcome == "committed"


def test_concurrent_syncs_never_move_last_commit_time_sync_back(hive_metastore, tmp_path):
    """Writers in threads, each syncing after its commit: every partition ends in the catalog
    and last_commit_time_sync read between commits never decreases (the sync lock serializes
    syncs; each writes only forward). Processes: tests/interop/test_java_catalog_sync.py."""
    uri = hive_metastore.uri
    table = Table.create(str(tmp_path / "c1"), "c1", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    config = WriteConfig.from_options(sync_options(uri, "conc_db"))
    seen, errors = [], []
    stop = threading.Event()

    def watch():
        with HiveMetastore(uri) as c:
            while not stop.is_set():
                t = c.get_table("conc_db", "c1")
                if t is not None and LAST_COMMIT_TIME_SYNC in t.params:
                    seen.append(t.params[LAST_COMMIT_TIME_SYNC])
                time.sleep(0.02)

    def writer(n):
        try:
            w = ArrowTableWriter(Table.open(table.base_uri), config)
            for i in range(4):
                w.write(batch([(n * 100 + i, f"w{n}_{i}", i)]), "insert")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    watcher = threading.Thread(target=watch)
    watcher.start()
    threads = [threading.Thread(target=writer, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    watcher.join()
    assert not errors, errors
    got = catalog(uri, "conc_db", "c1")
    assert sorted(p for p, _ in got["partitions"]) == sorted(f"w{n}_{i}" for n in range(2) for i in range(4))
    assert seen == sorted(seen) and seen
    assert got["params"][LAST_COMMIT_TIME_SYNC] == completed_commits(table)[-1].requested_time
