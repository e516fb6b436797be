"""A folder of requests beside the timeline: one JSON file per request of a dataclass, named by
a request id that sorts by creation time.

Two protocols coordinate writers this way before any instant exists, where the timeline cannot
hold them: write windows (``provider/write_window.py``: fairness between backfill and
ingestion) and admission (``core/concurrency/admission.py``: wait while a live writer shares
partitions). Both need the same four things, written once here: a fresh id, save, load (a torn
or foreign file reads as absent, never as an error), the list of requests, and withdrawal that
leaves no empty folder behind (a refused write leaves the table byte-for-byte as it was).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict
from typing import Generic, TypeVar

R = TypeVar("R")


class RequestFolder(Generic[R]):
    """The requests of one protocol: ``.hoodie/.aux/occ/<name>/<request id>.json``."""

    def __init__(self, name: str, request_type: type[R]):
        self.parts = (".hoodie", ".aux", "occ", name)
        self.request_type = request_type

    @staticmethod
    def new_id(now: float | None = None) -> str:
        """Microseconds since the epoch, then 8 random hex digits: ids sort by creation time."""
        now = time.time() if now is None else now
        return f"{int(now * 1e6):017d}-{uuid.uuid4().hex[:8]}"

    def path(self, table, request_id: str) -> str:
        return table.storage.path(*self.parts, f"{request_id}.json")

    def save(self, table, req: R) -> None:
        data = json.dumps(asdict(req), sort_keys=True).encode()
        for attempt in range(3):
            try:
                table.storage.write(self.path(table, req.request_id), data)
                return
            except FileNotFoundError:
                # another writer's withdrawal removed the (then empty) folder between our
                # makedirs and our file: make it again
                if attempt == 2:
                    raise

    def load(self, table, request_id: str) -> R | None:
        try:
            return self.request_type(**json.loads(table.storage.read(self.path(table, request_id))))
        except (FileNotFoundError, ValueError, TypeError):
            return None

    def all(self, table, *, known: R | None = None) -> list[R]:
        """Every readable request, in id order. ``known``: the caller's own request, as it last
        saved it, is taken as it is rather than read back. The others are read concurrently
        (on an object store a read is a request of 20 to 50 ms, and dozens of writers wait)."""
        try:
            names = sorted(n for n in table.storage.list_names(table.storage.path(*self.parts))
                           if n.endswith(".json"))
        except FileNotFoundError:
            return []
        ids = [n[:-len(".json")] for n in names]
        mine = getattr(known, "request_id", None)
        loaded = table.storage.concurrently([(lambda: known) if i == mine else (lambda i=i: self.load(table, i))
                                             for i in ids])
        return [r for r in loaded if r is not None]

    def withdraw(self, table, request_id: str) -> None:
        """Delete the request; the folder too once it is empty (a concurrent ``save`` that
        loses its folder this way makes it again)."""
        try:
            table.storage.delete(self.path(table, request_id))
        except FileNotFoundError:
            pass
        table.storage.delete_dir_if_empty(table.storage.path(*self.parts))
