"""Java Hudi's table services on tables our writers wrote, then our writer again.

On a COW table (version 9) and a MOR table (version 8) of ours, each ending with a write of
ours killed (SIGKILL) after its data files, Java runs, in one JVM: the rollback of failed
writes (Hudi's default EAGER policy), compaction (MOR), clean, clustering and archival, each through Hudi's write client
with ``hoodie.metadata.enable=false``. Every service must have done its work (its instant on
the timeline, its files gone or written), every reader must then read the model (the dead
write's rows nowhere), our writer must write again on top, and Java must read that exactly.
"""

from __future__ import annotations

import pytest

from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.crash import run_writer
from airflow_hudi_occ.testing.java_hudi import Read, Service
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key
from tests.interop.rows import COLS, NO_MDT, assert_java_services_did_their_work, apply, batch, java_services

KINDS = [("COPY_ON_WRITE", 9), ("MERGE_ON_READ", 8)]
IDS = ["cow-v9", "mor-v8"]


def writer_for(table: Table):
    cls = MergeOnReadWriter if table.config.table_type == "MERGE_ON_READ" else ArrowTableWriter
    return cls(table, WriteConfig.from_options({**FAST_WRITE_OPTIONS, **NO_MDT}))


@pytest.fixture(scope="module")
def serviced(tmp_path_factory, java_hudi):
    root = tmp_path_factory.mktemp("serviced")
    tables, model = {}, {}
    history = [([(i, "a" if i % 2 else "b", 1, f"v{i}") for i in range(8)], "insert"),
               ([(8, "a", 1, "v8"), (9, "b", 1, "v9")], "insert")]
    history += [([(1, "a", 2 + k, f"one-{k}"), (2, "b", 2 + k, f"two-{k}")], "upsert") for k in range(3)]
    for rows, op in history:
        apply(model, rows, op)
    for kind in KINDS:
        table = Table.create(str(root / f"{kind[0].lower()}_v{kind[1]}"), "t", record_key_fields=["id"],
                             partition_fields=["p"], precombine_field="ts", table_type=kind[0],
                             version=kind[1])
        w = writer_for(table)
        for rows, op in history:
            w.write(batch(rows), op)
        dead = run_writer(table.base_uri, {**FAST_WRITE_OPTIONS, **NO_MDT},
                          [{"id": 3, "p": "a", "ts": 9, "v": "dead"}, {"id": 100, "p": "b", "ts": 9, "v": "dead"}],
                          crash_at="after_all_files")
        assert dead.killed, dead.stderr[-2000:]
        tables[kind] = table
    steps, where = [], {}
    for kind, table in tables.items():
        path = table.base_uri
        services = java_services(kind[0])
        for name, options in services:
            where[kind, name] = len(steps)
            steps.append(Service(path, name, options=options))
        where[kind, "read"] = len(steps)
        steps.append(Read(path))
    results = java_hudi.run(*steps)
    return tables, model, {k: results[i] for k, i in where.items()}


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_each_java_service_did_its_work_on_our_table(serviced, kind):
    tables, _, steps = serviced
    path = tables[kind].base_uri
    assert_java_services_did_their_work(path, kind[0], {name: r for (k, name), r in steps.items() if k == kind})


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_after_java_services_every_reader_reads_the_model(serviced, kind):
    tables, model, steps = serviced
    path = tables[kind].base_uri
    assert rows_by_key(steps[kind, "read"].rows, columns=COLS) == model
    assert rows_by_key(hudi_read(path), columns=COLS) == model
    assert rows_by_key(read_table(Table.open(path)), columns=COLS) == model


@pytest.fixture(scope="module")
def ours_again(serviced, java_hudi):
    tables, model, _ = serviced
    model = dict(model)
    writes = [([(4, "b", 5, "ours-four"), (11, "a", 5, "ours-eleven")], "upsert"), ([(5, "a", 5, "x")], "delete")]
    for rows, op in writes:
        apply(model, rows, op)
    for table in tables.values():
        w = writer_for(Table.open(table.base_uri))
        for rows, op in writes:
            w.write(batch(rows), op)
    results = java_hudi.run(*[Read(t.base_uri) for t in tables.values()])
    return tables, model, dict(zip(tables, results))


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_our_writes_after_java_services_read_exactly_by_every_reader(ours_again, kind):
    tables, model, reads = ours_again
    path = tables[kind].base_uri
    assert rows_by_key(reads[kind].rows, columns=COLS) == model
    assert rows_by_key(hudi_read(path), columns=COLS) == model
    assert rows_by_key(read_table(Table.open(path)), columns=COLS) == model
