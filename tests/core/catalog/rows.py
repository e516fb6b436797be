"""The rows the catalog-sync tests write: ``(id, p, ts)`` tuples, with an optional column ``v``
(the schema's evolution)."""

import pyarrow as pa


def batch(rows, v=None) -> pa.Table:
    cols = {"id": pa.array([r[0] for r in rows], pa.int64()), "p": [r[1] for r in rows],
            "ts": pa.array([r[2] for r in rows], pa.int64())}
    if v is not None:
        cols["v"] = pa.array(v, pa.string())
    return pa.table(cols)
