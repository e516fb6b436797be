"""Java Hudi's table services on tables our Spark engine wrote, then our Spark engine again
(issue 30 item 5, the Spark engine's row; the core writer's is test_java_services_on_ours).

On a COW table (version 9) and a MOR table (version 8) written by ``SparkHudiWriter``, each
ending with a Spark-engine upsert that died after its data files (see :func:`die_after_files`),
Java runs, in one JVM: the rollback of failed writes (Hudi's default EAGER policy), compaction
(MOR), clean, clustering and archival, through Hudi's write client with
``hoodie.metadata.enable=false``. Every service must have done its work, every reader must
then read the model (the dead write's rows nowhere), the Spark engine must write again on top
(an upsert and a delete), and Java, hudi-rs and ours must read that exactly.

Slow: a PySpark 4.2 session (one for the module) beside two Java JVM calls.
"""

from __future__ import annotations

import os

import pytest

from airflow_hudi_occ.core.commit.writer import read_table
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.table.timeline import Timeline
from airflow_hudi_occ.testing.java_hudi import Read, Service
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key
from tests.interop.rows import COLS, NO_MDT, assert_java_services_did_their_work, SPARK_SCHEMA, apply, java_services

pytestmark = pytest.mark.slow

KINDS = [("COPY_ON_WRITE", 9), ("MERGE_ON_READ", 8)]
IDS = ["cow-v9", "mor-v8"]
HISTORY = [([(i, "a" if i % 2 else "b", 1, f"v{i}") for i in range(8)], "insert"),
           # new file groups beside the first (the engine tops small files up on insert)
           ([(8, "a", 1, "v8"), (9, "b", 1, "v9")], "bulk_insert")]
HISTORY += [([(1, "a", 2 + k, f"one-{k}"), (2, "b", 2 + k, f"two-{k}")], "upsert") for k in range(3)]
AGAIN = [([(4, "b", 5, "spark-four"), (11, "a", 5, "spark-eleven")], "upsert"), ([(5, "a", 5, "x")], "delete")]


class Died(Exception):
    """The driver of a Spark-engine write 'dies' here (see :func:`die_after_files`)."""


def engine_options(table_type: str, version: int) -> dict:
    return {**FAST_WRITE_OPTIONS, **NO_MDT, "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "p",
            "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.table.name": "t",
            "hoodie.datasource.write.table.type": table_type,
            "hoodie.write.table.version": str(version)}


def die_after_files(writer, df, monkeypatch) -> str:
    """A Spark-engine upsert whose driver stops after every data file and marker is written:
    its heartbeat stops beating (the file stays, as a killed process leaves it) and nothing
    rolls it back, leaving what a SIGKILL there leaves (inflight instant, markers, data
    files). In-process: killing a Spark driver would cost a second Spark start."""
    from airflow_hudi_occ.core.commit.transaction import WriteTransaction
    from airflow_hudi_occ.spark.errors import SparkWriteError
    from airflow_hudi_occ.spark.writer import SparkWriteEngine
    seen = {}

    def stop(tx):
        seen["instant"] = tx.instant_time
        tx.heartbeat.stop(delete=False)
        raise Died(tx.instant_time)
    with monkeypatch.context() as m:
        m.setattr(WriteTransaction, "abort", lambda self, **kw: None)  # no rollback
        m.setattr(SparkWriteEngine, "after_abort", lambda self, tx, failure: None)  # no sweep
        with pytest.raises(SparkWriteError) as e:  # the engine's translation of a foreign error
            writer.write(df, "upsert", before_commit=stop)
    assert isinstance(e.value.__cause__, Died)
    return seen["instant"]


@pytest.fixture(scope="module")
def serviced(tmp_path_factory, java_hudi, spark):
    from airflow_hudi_occ.spark.writer import SparkHudiWriter
    root = tmp_path_factory.mktemp("spark-serviced")
    paths, model, dead = {}, {}, {}
    for rows, op in HISTORY:
        apply(model, rows, op)
    with pytest.MonkeyPatch.context() as monkeypatch:
        for kind in KINDS:
            path = str(root / f"{kind[0][:3].lower()}_v{kind[1]}")
            w = SparkHudiWriter(spark, path, engine_options(*kind))
            for rows, op in HISTORY:
                w.write(spark.createDataFrame(rows, SPARK_SCHEMA), op)
            dead[kind] = die_after_files(w, spark.createDataFrame(
                [(3, "a", 9, "dead"), (100, "b", 9, "dead")], SPARK_SCHEMA), monkeypatch)
            paths[kind] = path
    steps, where = [], {}
    for kind, path in paths.items():
        timeline = Timeline.load(Table.open(path))
        assert dead[kind] in {i.requested_time for i in timeline.pending()}  # left for Java
        services = java_services(kind[0])
        for name, options in services:
            where[kind, name] = len(steps)
            steps.append(Service(path, name, options=options))
        where[kind, "read"] = len(steps)
        steps.append(Read(path))
    results = java_hudi.run(*steps)
    return paths, model, dead, {k: results[i] for k, i in where.items()}


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_each_java_service_did_its_work_on_a_spark_engine_table(serviced, kind):
    paths, _, dead, steps = serviced
    path = paths[kind]
    assert_java_services_did_their_work(path, kind[0], {name: r for (k, name), r in steps.items() if k == kind})
    # the dead write: no pending instant, no file of it left
    table = Table.open(path)
    assert not Timeline.load(table).pending()
    for root, _, files in os.walk(path):
        if "/.hoodie" not in root:
            assert not [f for f in files if dead[kind] in f], (root, files)


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_after_java_services_every_reader_reads_the_spark_engine_model(serviced, kind):
    paths, model, _, steps = serviced
    assert rows_by_key(steps[kind, "read"].rows, columns=COLS) == model
    assert rows_by_key(hudi_read(paths[kind]), columns=COLS) == model
    assert rows_by_key(read_table(Table.open(paths[kind])), columns=COLS) == model


@pytest.fixture(scope="module")
def spark_again(serviced, java_hudi, spark):
    from airflow_hudi_occ.spark.writer import SparkHudiWriter
    paths, model, _, _ = serviced
    model = dict(model)
    for rows, op in AGAIN:
        apply(model, rows, op)
    for kind, path in paths.items():
        w = SparkHudiWriter(spark, path, engine_options(*kind))
        for rows, op in AGAIN:
            w.write(spark.createDataFrame(rows, SPARK_SCHEMA), op)
    results = java_hudi.run(*[Read(p) for p in paths.values()])
    return paths, model, dict(zip(paths, results))


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_the_spark_engine_after_java_services_is_read_exactly_by_every_reader(spark_again, kind):
    paths, model, reads = spark_again
    assert rows_by_key(reads[kind].rows, columns=COLS) == model
    assert rows_by_key(hudi_read(paths[kind]), columns=COLS) == model
    assert rows_by_key(read_table(Table.open(paths[kind])), columns=COLS) == model
