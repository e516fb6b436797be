"""Catalog sync through the operators, end to end (issue 41, docs/catalog-sync.md): a Hudi
user's ingestion and backfill DAGs (``tests/provider/dags/hudi_occ_sync_test_dags.py``:
HudiWriteOperator and its Spark job, ``hoodie.datasource.meta.sync.enable`` and the
``hive_sync`` keys pointing at a real Hive Metastore) run as two ``airflow dags test`` processes
at once, then an ``insert_overwrite`` run (copy-on-write; on merge-on-read the Spark engine
refuses it before any instant, and the test checks that) and a clean (HudiTableServiceOperator),
then both writers again with the metastore stopped. After each step Spark SQL with Hive support reads
the catalog's tables (merge-on-read: ``_ro``, ``_rt`` and the plain name) equal to the model;
``last_commit_time_sync`` is read every 50 ms throughout and never moves backwards; while the
metastore is down the commits land and each task fails its sync naming its committed instant,
and the Airflow retry of that task, once the metastore is back, syncs the catalog exact.

Slow (two JVMs besides Airflow's processes and their spark-submits: about 6 minutes a table
type). The default run keeps the same sync code on its own paths: tests/core/catalog/test_sync.py
(a real metastore: registration, incremental partitions, an outage, concurrent syncs) and
tests/provider/test_write_operator_sync.py / test_table_service_sync.py (the operators' sync)."""

from __future__ import annotations

import os
import re
import time

import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.catalog.changes import LAST_COMMIT_TIME_SYNC
from airflow_hudi_occ.core.catalog.hive import HiveMetastore
from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.commit.writer import read_table
from airflow_hudi_occ.core.table.mor_reader import read_optimized
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider.spark_jobs import APPLICATION_ENV
from airflow_hudi_occ.testing.spark_job import PATH as TEST_JOB
from tests.core.catalog.rows import SyncTimes, batch, rows_of, sql_rows

from .conftest import finish

pytestmark = [pytest.mark.slow, pytest.mark.zookeeper, pytest.mark.timeout(1500)]

DB = "e2e"
COLS = ["id", "p", "ts", "v"]
#: per step: the DAG and its batch, (id, p, ts, v) rows; the writers of a step run at once
STEPS = [
    ("both", [("ingestion", [(1, "a", 1, "i1"), (2, "b", 1, "i1"), (3, "a", 1, "i1"), (4, "b", 1, "i1")]),
              ("backfill", [(11, "c", 1, "b1"), (12, "d", 1, "b1")])]),
    ("overwrite", [("overwrite", [(2, "b", 2, "o"), (5, "b", 2, "o")])]),  # key 4 goes with the old b
    ("clean", [("clean", None)]),
    ("outage", [("ingestion", [(1, "a", 3, "i2"), (6, "e", 3, "i2")]),  # e and f: new partitions
                ("backfill", [(12, "d", 3, "b2"), (13, "f", 3, "b2")])]),
]


def apply(model: dict, operation: str, rows) -> None:
    """The model: upsert keeps the larger ts per key; insert_overwrite replaces its partitions."""
    if operation == "insert_overwrite":
        for p in {r[1] for r in rows}:
            for k in [k for k, r in model.items() if r[1] == p]:
                del model[k]
    for r in rows:
        if r[0] not in model or r[2] >= model[r[0]][2]:
            model[r[0]] = r


def catalog_state(uri: str, names) -> dict:
    with HiveMetastore(uri) as c:
        return {n: (sorted("/".join(p.values) for p in c.partitions(DB, n)),
                    c.get_table(DB, n).params.get(LAST_COMMIT_TIME_SYNC)) for n in names}


def completed_writes(path: str) -> list:
    return list(Table.open(path).timeline().completed_writes())


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_two_dag_runs_sync_through_the_operators_with_an_overwrite_a_clean_and_an_outage(
        airflow_env, hive_metastore, spark_sql, tmp_path, table_type):
    name = "cow" if table_type == "COPY_ON_WRITE" else "mor"
    names = [name] if table_type == "COPY_ON_WRITE" else [f"{name}_ro", f"{name}_rt", name]
    path = str(tmp_path / name)
    Table.create(path, name, record_key_fields=["id"], partition_fields=["p"], precombine_field="ts",
                 table_type=table_type)
    uri = hive_metastore.uri
    sources = tmp_path / "sources"
    sources.mkdir()
    env = {"HUDI_OCC_SYNC_TABLE": path, "HUDI_OCC_SYNC_TYPE": table_type, "HUDI_OCC_SYNC_URI": uri,
           "HUDI_OCC_SYNC_SOURCES": str(sources), APPLICATION_ENV: TEST_JOB}
    airflow_env.airflow("dags", "reserialize", env=env, timeout=300)
    model: dict[int, tuple] = {}
    seen: list[dict] = []  # what the test saw, step by step (printed at the end for the record)

    def run(step: str, runs):
        """Start the step's DAG runs at once; the writers commit only once both have begun."""
        procs = []
        for dag, rows in runs:
            e = dict(env)
            if rows is not None:
                pq.write_table(batch([r[:3] for r in rows], v=[r[3] for r in rows]), str(sources / f"{dag}.parquet"))
            if len(runs) > 1:
                e["HUDI_OCC_TEST_COMMIT_BARRIER"] = f"{tmp_path / ('barrier-' + step)}:{len(runs)}:begin"
            procs.append(airflow_env.dags_test(f"hudi_occ_test_sync_{dag}", f"sync-{name}-{step}-{dag}", env=e))
        return procs

    def judge(step: str):
        """Spark SQL through the metastore reads the model; the catalog's partitions are the
        model's; core's own read agrees."""
        t = Table.open(path)
        want = sorted(model.values())
        assert rows_of(read_table(t), COLS) == want, step
        for n in names:
            got = sql_rows(spark_sql, DB, n, COLS)
            if n.endswith("_ro"):
                assert got == rows_of(read_optimized(t), COLS), (step, n)
            else:
                assert got == want, (step, n)
        state = catalog_state(uri, names)
        last = completed_writes(path)[-1].requested_time
        for n, (parts, lcts) in state.items():
            assert parts == sorted({r[1] for r in model.values()}), (step, n, parts)
            assert lcts == last, (step, n, lcts, last)
        seen.append({"step": step, "catalog": state,
                     "commits": [(i.requested_time, i.action.value, i.completion_time)
                                 for i in Table.open(path).timeline().completed()]})

    with SyncTimes(uri, DB, names) as watch:
        for step, runs in STEPS[:3]:
            if step == "overwrite" and table_type == "MERGE_ON_READ":
                # the Spark engine writes no insert_overwrite to merge-on-read tables yet: a
                # refusal before any instant, the table and the catalog untouched
                before = Table.open(path).timeline().instants
                [p] = run(step, runs)
                log = finish(p)
                assert p.returncode != 0 and "ConfigError: operation 'insert_overwrite' is not written to " \
                    "merge-on-read tables yet" in log, log[-4000:]
                assert Table.open(path).timeline().instants == before
                judge("overwrite refused")
                continue
            procs = run(step, runs)
            logs = [finish(p) for p in procs]
            for p, log in zip(procs, logs):
                assert p.returncode == 0 and "state=success" in log, log[-4000:]
            for dag, rows in runs:
                if rows is not None:
                    apply(model, "insert_overwrite" if dag == "overwrite" else "upsert", rows)
            judge(step)

        # the metastore stops; both writers commit, each task's sync fails naming its instant;
        # the metastore comes back before Airflow's retry, which finds the batch committed and syncs
        step, runs = STEPS[3]
        before = {i.requested_time for i in completed_writes(path)}
        hive_metastore.stop()
        try:
            procs = run(step, runs)
            deadline = time.monotonic() + 600
            failed: dict[int, str] = {}
            while time.monotonic() < deadline and len(failed) < len(procs):
                for k, p in enumerate(procs):
                    p.log.seek(0)
                    m = re.search(r"core\.errors\.CatalogUnavailableError: [^\n]*", p.log.read())
                    if m:
                        failed[k] = m.group(0)
                    assert p.poll() is None or k in failed, finish(p)[-4000:]
                time.sleep(0.5)
            assert len(failed) == len(procs), "the syncs did not fail while the metastore was down"
            landed = sorted({i.requested_time for i in completed_writes(path)} - before)
            assert len(landed) == 2, landed  # both commits landed with the metastore down
            down_state = {n: watch.seen[n][-1] for n in names}
        finally:
            hive_metastore.start()
        back = time.monotonic()
        logs = [finish(p) for p in procs]
        for p, log in zip(procs, logs):
            assert p.returncode == 0 and "state=success" in log, log[-4000:]
            assert "is already committed as instant" in log, log[-4000:]  # the retry's sync
        for dag, rows in runs:
            apply(model, "upsert", rows)
        judge(step)
        # each failure named its committed instant (the commit stands, nothing to rewrite)
        for msg in failed.values():
            assert any(i in msg for i in landed), msg
        records = {r.instant: r for r in attempt_log.read_records(Table.open(path))}
        outage = {i: (records[i].outcome, records[i].labels.get("dag_id"), records[i].labels.get("try_number"))
                  for i in landed if i in records}
    assert not watch.moved_back(), watch.moved_back()
    seen.append({"outage": {"failures": failed, "landed": landed, "catalog_while_down": down_state,
                            "retries_done_s_after_back": round(time.monotonic() - back, 1),
                            "attempt_records": outage},
                 "sync_times_read": {n: sorted(set(s)) for n, s in watch.seen.items()}})
    for entry in seen:
        print(entry)
    assert all(v[0] == "committed" for v in outage.values()), outage
    assert all(down_state[n] < min(landed) for n in names), down_state  # the catalog lagged while down
    assert os.path.exists(path)
