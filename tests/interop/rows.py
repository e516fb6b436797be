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
