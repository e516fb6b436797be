"""The rows the interop tests write: ``(id, partition, ordering value, payload)`` tuples as
the Arrow batch both writers take (Java's harness and ours), typed as Java's datasource types
them (ids and ordering values as longs); the model those writes leave; the completed actions
of a table's active timeline. Shared by the modules on the core writer and on the Spark
engine, so that both are judged against one model."""

from __future__ import annotations

import os

import pyarrow as pa

COLS = ["id", "p", "ts", "v"]
#: the same rows as a Spark DDL schema (the Spark engine's DataFrames)
SPARK_SCHEMA = "id long, p string, ts long, v string"


def batch(rows) -> pa.Table:
    return pa.table({"id": pa.array([r[0] for r in rows], pa.int64()),
                     "p": pa.array([r[1] for r in rows], pa.string()),
                     "ts": pa.array([r[2] for r in rows], pa.int64()),
                     "v": pa.array([r[3] for r in rows], pa.string())})


def apply(model: dict, rows, op: str) -> dict:
    """``model`` (id -> row) after the write ``op`` of ``rows``: a delete drops the keys, an
    insert_overwrite first empties the partitions it writes, every other write sets them."""
    if op == "insert_overwrite":
        parts = {r[1] for r in rows}
        for k in [k for k, v in model.items() if v["p"] in parts]:
            del model[k]
    for r in rows:
        if op == "delete":
            model.pop(r[0], None)
        else:
            model[r[0]] = dict(zip(COLS, r))
    return model


def completed_actions(path: str) -> list[str]:
    """The actions of the completed instants on the active timeline, in file-name order."""
    return [n.rsplit(".", 1)[1] for n in sorted(os.listdir(os.path.join(path, ".hoodie", "timeline")))
            if "_" in n and n[:1].isdigit()]


NO_MDT = {"hoodie.metadata.enable": "false"}
RETAIN_1 = {"hoodie.clean.commits.retained": "1"}
#: on MOR a file group has one slice until compaction writes the second, and the commit
#: policy keeps the newest slice older than the earliest retained commit: only a file-version
#: policy has something to clean right after the compaction
ONE_VERSION = {"hoodie.clean.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.clean.fileversions.retained": "1"}
ARCHIVE = {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3", **RETAIN_1}


def java_services(table_type: str) -> list[tuple[str, dict]]:
    """Java's services on one of our tables, in the order the tests run them: the dead write's
    rollback, compaction (MOR), clean, clustering, archival. Clean comes before clustering:
    the file groups clustering replaces leave the cleaner's view, and their old versions wait
    until the replacecommit is itself old."""
    services = [("rollback_failed_writes", NO_MDT)]
    if table_type == "MERGE_ON_READ":
        services.append(("compact", {**NO_MDT, "hoodie.compact.inline.max.delta.commits": "1"}))
    clean = ONE_VERSION if table_type == "MERGE_ON_READ" else RETAIN_1
    return services + [("clean", {**NO_MDT, **clean}), ("cluster", NO_MDT), ("archive", {**NO_MDT, **ARCHIVE})]


def assert_java_services_did_their_work(path: str, table_type: str, steps: dict) -> None:
    """Each of :func:`java_services` completed its own instant (``steps[name]``: Java's step
    results), and archival moved the oldest instants to the LSM history: of the writes, the
    rollback and the services, at most ``hoodie.keep.max.commits`` writes remain active."""
    assert [c["action"] for c in steps["rollback_failed_writes"].completed] == ["rollback"]
    if table_type == "MERGE_ON_READ":
        assert [c["action"] for c in steps["compact"].completed] == ["commit"]
    assert [c["action"] for c in steps["clean"].completed] == ["clean"]
    assert [c["action"] for c in steps["cluster"].completed] == ["replacecommit"]
    remaining = [a for a in completed_actions(path) if a in ("commit", "deltacommit", "replacecommit")]
    assert len(remaining) <= 3
    assert any(n.endswith(".parquet") for n in os.listdir(os.path.join(path, ".hoodie", "timeline", "history")))
