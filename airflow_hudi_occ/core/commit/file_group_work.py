"""The work of one write, file group by file group: what each file group gets
(:class:`FileGroupWork`) and how the items run (:func:`map_bounded`: in order, at most a few
at a time, on one thread pool per process).

Shared by the copy-on-write writer (``writer``: a base file per item) and the merge-on-read
writer (``mor_writer``: a base file or a log file per item), which plan their items
differently and write them the same way.

Errors: :func:`map_bounded` raises the first error of an item only after the items already
running have finished, so no file is still being written when the caller aborts the instant;
items not yet started never run.
"""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass

import pyarrow as pa

#: the mode of a work item that starts a new file group (the others are ``merge``'s modes)
CREATE = "create"
#: the most file groups written at once by one process
MAX_THREADS = 4


@dataclass
class FileGroupWork:
    """One file group this write produces a file for (a base file; in merge-on-read also a log
    file): which batch rows go into it and how. The rows are taken, merged and written only
    when its turn comes (the writer's ``write_base_file`` or ``write_log``), so memory holds one
    file group's data at a time besides the batch."""

    partition: str
    file_id: str
    prev: object | None  # FileSlice
    indices: pa.Array  # rows of the batch (deduped, in batch order) for this file group
    mode: str = CREATE  # CREATE (a new file group) or a merge mode: UPSERT, DELETE, APPEND


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """One pool per process, reused by every write (starting threads per commit costs more
    than a small commit's whole parquet work)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=MAX_THREADS, thread_name_prefix="hudi-occ-write")
        return _POOL


def map_bounded(fn, items: list, threads: int) -> list:
    """``[fn(x) for x in items]`` on up to ``threads`` threads, in order; at most ``threads``
    items are in memory at once. The first error is raised after the running ones finish."""
    if threads <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    out: list = [None] * len(items)
    pending: dict = {}
    error: BaseException | None = None
    pool = _pool()
    it = iter(enumerate(items))
    while True:
        while error is None and len(pending) < threads:
            nxt = next(it, None)
            if nxt is None:
                break
            pending[pool.submit(fn, nxt[1])] = nxt[0]
        if not pending:
            break
        done, _ = wait(pending, return_when=FIRST_COMPLETED)
        for f in done:
            i = pending.pop(f)
            try:
                out[i] = f.result()
            except BaseException as e:  # noqa: BLE001 - re-raised below, after the others
                error = error or e
    if error is not None:
        raise error
    return out
