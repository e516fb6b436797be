"""The rows the interop tests write: ``(id, partition, ordering value, payload)`` tuples as
the Arrow batch both writers take (Java's harness and ours), typed as Java's datasource types
them (ids and ordering values as longs)."""

from __future__ import annotations

import pyarrow as pa


def batch(rows) -> pa.Table:
    return pa.table({"id": pa.array([r[0] for r in rows], pa.int64()),
                     "p": pa.array([r[1] for r in rows], pa.string()),
                     "ts": pa.array([r[2] for r in rows], pa.int64()),
                     "v": pa.array([r[3] for r in rows], pa.string())})
