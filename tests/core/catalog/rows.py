"""The rows the catalog-sync tests write: ``(id, p, ts)`` tuples, with an optional column ``v``
(the schema's evolution); and the judge's rows, Spark SQL through the metastore, in the same
shape as the model's."""

import pyarrow as pa


def batch(rows, v=None) -> pa.Table:
    cols = {"id": pa.array([r[0] for r in rows], pa.int64()), "p": [r[1] for r in rows],
            "ts": pa.array([r[2] for r in rows], pa.int64())}
    if v is not None:
        cols["v"] = pa.array(v, pa.string())
    return pa.table(cols)


def rows_of(t: pa.Table, cols) -> list[tuple]:
    """``cols`` of each row of ``t``, sorted: comparable with another reader's."""
    return sorted(tuple(r[c] for c in cols) for r in t.select(cols).to_pylist())


def sql_rows(java, db: str, name: str, cols) -> list[tuple]:
    """``db.name`` as Spark SQL reads it through the catalog (``java``: the ``spark_sql``
    fixture's Java Hudi with Hive support), its cached metadata dropped first."""
    from airflow_hudi_occ.testing.java_hudi import Sql
    [res] = java.run(Sql(f"select {', '.join(cols)} from {db}.{name}", refresh=[f"{db}.{name}"]))
    return rows_of(res.rows, cols)


class SyncTimes:
    """A thread that reads ``last_commit_time_sync`` of catalog tables every 50 ms for as long
    as it runs (a stopped metastore is skipped over): ``seen[name]`` lists every value read, in
    order, so a test can say the sync time never moved backwards while writers synced at once."""

    def __init__(self, uri: str, db: str, names):
        import threading
        self.uri, self.db, self.names = uri, db, list(names)
        self.seen: dict[str, list[str]] = {n: [] for n in self.names}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import time

        from airflow_hudi_occ.core.catalog.changes import LAST_COMMIT_TIME_SYNC
        from airflow_hudi_occ.core.catalog.hive import HiveMetastore
        from airflow_hudi_occ.core.errors import CatalogSyncError
        while not self._stop.is_set():
            pause = 0.05
            try:
                with HiveMetastore(self.uri, timeout_ms=1000) as c:
                    for n in self.names:
                        t = c.get_table(self.db, n)
                        if t is not None and LAST_COMMIT_TIME_SYNC in t.params:
                            self.seen[n].append(t.params[LAST_COMMIT_TIME_SYNC])
            except CatalogSyncError:
                pause = 0.5  # the metastore is stopped (each refused connect is logged)
            time.sleep(pause)

    def __enter__(self) -> "SyncTimes":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def moved_back(self) -> dict[str, list[str]]:
        """The tables whose sync time was ever read lower than before (with what was read)."""
        return {n: s for n, s in self.seen.items() if s != sorted(s)}
