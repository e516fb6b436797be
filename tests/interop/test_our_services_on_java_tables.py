"""Our table services on tables Java Hudi wrote (issue 30 item 5, second half).

Java writes a COW and a MOR table (version 9, its defaults but ``hoodie.metadata.enable=false``):
two bulk_inserts (several small files per partition) and three upserts. Our compaction (MOR),
clustering, clean and archival then run on them, and every reader must read the model; then
Java writes on top of our services' instants and reads exactly. Slow (two JVMs, about 40 s):
the default run has Java's services on our tables (test_java_services_on_ours.py).
"""

from __future__ import annotations

import os

import pytest

from airflow_hudi_occ.core.commit.archival import run_archival
from airflow_hudi_occ.core.commit.writer import read_table
from airflow_hudi_occ.core.services.clean import run_clean
from airflow_hudi_occ.core.services.clustering import execute_clustering, schedule_clustering
from airflow_hudi_occ.core.services.compaction import run_compaction
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.java_hudi import Read, Write
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key
from tests.interop.rows import batch

pytestmark = pytest.mark.slow

COLS = ["id", "p", "ts", "v"]
KINDS = ["COPY_ON_WRITE", "MERGE_ON_READ"]
NO_MDT = {"hoodie.metadata.enable": "false"}
OURS = {**FAST_WRITE_OPTIONS, **NO_MDT, "hoodie.compact.inline.max.delta.commits": "1",
        "hoodie.clean.commits.retained": "1", "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3"}


JAVA_WRITES = [([(i, "a" if i % 2 else "b", 1, f"v{i}") for i in range(6)], "bulk_insert"),
               ([(i, "a" if i % 2 else "b", 1, f"v{i}") for i in range(6, 10)], "bulk_insert")]
JAVA_WRITES += [([(1, "a", 2 + k, f"one-{k}"), (2, "b", 2 + k, f"two-{k}")], "upsert") for k in range(3)]
JAVA_AFTER = [(3, "a", 9, "java-after"), (20, "b", 9, "java-new")]


def model_after(writes) -> dict:
    model: dict = {}
    for rows, _ in writes:
        model.update({r[0]: dict(zip(COLS, r)) for r in rows})
    return model


def completed(path: str) -> list[str]:
    return sorted(n for n in os.listdir(os.path.join(path, ".hoodie", "timeline")) if "_" in n and n[:1].isdigit())


@pytest.fixture(scope="module")
def serviced(tmp_path_factory, java_hudi):
    root = tmp_path_factory.mktemp("java-for-ours")
    paths = {kind: str(root / kind.lower()) for kind in KINDS}
    steps = []
    for kind, path in paths.items():
        for n, (rows, op) in enumerate(JAVA_WRITES):
            first = dict(table_type=kind, table_version=9, record_key="id", partition_fields="p",
                         ordering_field="ts") if n == 0 else {}
            steps.append(Write(path, batch(rows), operation=op, options=NO_MDT, **first))
    java_hudi.run(*steps)
    done: dict = {}
    for kind, path in paths.items():
        table = Table.open(path)
        before = set(completed(path))
        if kind == "MERGE_ON_READ":
            run_compaction(table, OURS)
        assert schedule_clustering(table, OURS) is not None
        execute_clustering(table, OURS)
        run_clean(table, OURS)
        run_archival(table, OURS)
        done[kind] = (before, set(completed(path)))
    # hudi-rs and ours first; then one JVM: Java reads, writes on top, reads again
    others = {kind: (hudi_read(p), read_table(Table.open(p))) for kind, p in paths.items()}
    results = java_hudi.run(*[s for p in paths.values()
                              for s in (Read(p), Write(p, batch(JAVA_AFTER), operation="upsert", options=NO_MDT),
                                        Read(p))])
    reads = {k: results[3 * i] for i, k in enumerate(KINDS)}
    after = {k: results[3 * i + 2] for i, k in enumerate(KINDS)}
    return paths, done, (reads, others), after


@pytest.mark.parametrize("kind", KINDS)
def test_our_services_left_their_instants_on_javas_table(serviced, kind):
    paths, done, _, _ = serviced
    before, after = done[kind]
    actions = {n.rsplit(".", 1)[1] for n in after - before}
    assert {"replacecommit", "clean"} <= actions
    if kind == "MERGE_ON_READ":
        assert "commit" in actions  # the compaction
    assert len(after) < len(before | after)  # archival moved instants out of the active timeline


@pytest.mark.parametrize("kind", KINDS)
def test_every_reader_reads_javas_rows_after_our_services(serviced, kind):
    _, _, (reads, others), _ = serviced
    model = model_after(JAVA_WRITES)
    assert rows_by_key(reads[kind].rows, columns=COLS) == model
    rs, ours = others[kind]
    assert rows_by_key(rs, columns=COLS) == model
    assert rows_by_key(ours, columns=COLS) == model


@pytest.mark.parametrize("kind", KINDS)
def test_java_writes_on_top_of_our_services(serviced, kind):
    paths, _, _, after = serviced
    model = model_after(JAVA_WRITES + [(JAVA_AFTER, "upsert")])
    assert rows_by_key(after[kind].rows, columns=COLS) == model
    assert rows_by_key(hudi_read(paths[kind]), columns=COLS) == model
    assert rows_by_key(read_table(Table.open(paths[kind])), columns=COLS) == model
