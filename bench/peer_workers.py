"""Worker processes of ``bench/peers.py``: one engine, one process, N small commits.

``python -m bench.peer_workers ENGINE MODE TABLE WORKER N START_FILE`` imports its engine,
creates ``START_FILE.ready.WORKER``, waits for ``START_FILE`` to exist (so that every process
starts together), then commits ``N`` batches
and prints one JSON line: the conflicts it retried and its tags. ``ENGINE`` is ``ours`` (the
core writer, default settings, file-system lock) or ``delta`` (deltalake); ``MODE`` is
``disjoint`` (each commit appends its own keys) or ``overlapping`` (each commit also upserts
the shared keys 0..9 to its own tag; a conflicted commit is retried with the same batch, as a
scheduler retries a task). Each batch carries its tag, so the final table can be checked
exactly: every own key with its value, and the shared keys all holding the tag of the commit
that landed last.
"""

from __future__ import annotations

import json
import os
import sys
import time

import pyarrow as pa

SHARED = 10


def batch(mode: str, worker: int, i: int) -> tuple[pa.Table, str]:
    tag = f"w{worker}-c{i}"
    ids = [100_000 + worker * 1000 + i]
    if mode == "overlapping":
        ids = list(range(SHARED)) + ids
    return pa.table({"id": pa.array(ids, pa.int64()), "p": pa.array(["p0"] * len(ids)),
                     "v": pa.array([tag] * len(ids))}), tag


def run_ours(table_path: str, mode: str, worker: int, n: int) -> dict:
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.errors import RetryableError
    from airflow_hudi_occ.core.table.table import Table
    w = ArrowTableWriter(Table.open(table_path), WriteConfig(), writer_id=f"bench-{worker}")
    retries = 0
    for i in range(n):
        data, tag = batch(mode, worker, i)
        while True:
            try:
                w.write(data, "upsert", checkpoint=tag)
                break
            except RetryableError:
                retries += 1
    return {"retries": retries}


def run_delta(table_path: str, mode: str, worker: int, n: int) -> dict:
    from deltalake import CommitProperties, DeltaTable, write_deltalake
    from deltalake.exceptions import CommitFailedError
    retries = 0
    for i in range(n):
        data, tag = batch(mode, worker, i)
        while True:
            try:
                if mode == "disjoint":
                    write_deltalake(table_path, data, mode="append",
                                    commit_properties=CommitProperties(custom_metadata={"tag": tag}))
                else:
                    (DeltaTable(table_path).merge(data, predicate="t.id = s.id", source_alias="s",
                                                   target_alias="t",
                                                   commit_properties=CommitProperties(custom_metadata={"tag": tag}))
                     .when_matched_update_all().when_not_matched_insert_all().execute())
                break
            except CommitFailedError:
                retries += 1
    return {"retries": retries}


def warm_up(engine: str) -> None:
    """Imports before the start line, for both engines: the figure is commits, not start-up
    (pyarrow imports pandas on its first ``pa.table``; the engines' modules take seconds on a
    busy machine)."""
    batch("overlapping", 0, 0)
    if engine == "ours":
        import airflow_hudi_occ.core.commit.writer  # noqa: F401
        import airflow_hudi_occ.core.config  # noqa: F401
        import airflow_hudi_occ.core.errors  # noqa: F401
    else:
        import deltalake  # noqa: F401


def main(argv: list[str]) -> int:
    engine, mode, table_path, worker, n, start = argv[0], argv[1], argv[2], int(argv[3]), int(argv[4]), argv[5]
    warm_up(engine)
    open(f"{start}.ready.{worker}", "w").close()
    while not os.path.exists(start):
        time.sleep(0.001)
    out = (run_ours if engine == "ours" else run_delta)(table_path, mode, worker, n)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover - runs in the worker process
    sys.exit(main(sys.argv[1:]))
