"""A waiting line beside the storage lock's lease: one ticket per waiter, oldest first.

Why: RFC-91's lease has no queue. Every waiter reads the lease and whoever reads it free first
takes it, so at 32 writers the unlucky ones waited past the lock's bound (lock timeouts), and
making long waiters read more often to favour them (aging) made every waiter read several
times a second: at 32 writers on the scale bench about 185 of a commit's 351 requests were
waiters reading the lease, and every request costs the store and the writer's CPU what the holder then
waits for (docs/benchmarks.md, "Scale"). With a line only the first two waiters read the lease;
the others list the line every :data:`LISTING_S` to learn when they move up.

The protocol, on top of the lease (which alone keeps the lock exclusive: a ticket only says
who *tries*):

- A writer that finds the lease held joins the line: it creates
  ``<lease file>.line/<wall ms, 13 digits>-<hash of its owner id>`` (no content). Tickets sort
  by their name: arrival order, ties broken by the hash.
- A waiter may take a free lease when no live ticket is ahead of its own. The ticket of the
  lease's current owner does not count (it holds the lock; its ticket is on its way out).
- A ticket is live while its waiter refreshes it (every :data:`TOUCH_S`); one older than
  :data:`STALE_S` belongs to a waiter that died or gave up without leaving and is deleted by
  whoever sees it. A waiter whose ticket vanished (deleted as stale after a stall) makes it
  again under its old name: its place is its arrival time.
- A waiter that saw the lease free for :data:`HANDOFF_S` without the one ahead taking it takes
  it anyway (the one ahead is stalled or reads slowly): the line orders, it never blocks.
- Writers that know nothing of the line (Java's provider, older versions of ours) still take a
  free lease when they read it free: they jump the line, nothing more.

A waiter leaves the line when it releases the lock it got (not when it gets it: that would be
one more request inside every contended hold; the others know the holder's ticket by the
lease's owner) or when it gives up; a provider that cannot write its ticket waits as before,
reading the lease (``storage_based``'s "Waiting").
"""

from __future__ import annotations

import hashlib
import logging
import posixpath
import time
from typing import Callable

from airflow_hudi_occ.core.format.storage import Storage

log = logging.getLogger(__name__)

LINE_SUFFIX = ".line"
#: a waiter refreshes its ticket this often
TOUCH_S = 5.0
#: a ticket not refreshed for this long belongs to no waiter (and clocks may disagree by 500 ms)
STALE_S = 20.0
#: a waiter further back than second lists the line this often
LISTING_S = 2.0
#: the first and second waiters list the line this often (to learn the one ahead got the lock)
FRONT_LISTING_S = 1.0
#: a free lease left untaken this long by the waiter ahead is taken by the next one
HANDOFF_S = 2.0


def ticket_token(owner: str) -> str:
    """What a ticket's name says of its waiter: a hash of the owner id the lease will carry."""
    return hashlib.sha1(owner.encode("utf-8")).hexdigest()[:12]


class WaitingLine:
    """One waiter's place in the line of one lease file."""

    def __init__(self, storage: Storage, lease_path: str, owner: str, *,
                 wall_clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic):
        self.storage = storage
        self.folder = lease_path + LINE_SUFFIX
        self.token = ticket_token(owner)
        self._wall = wall_clock
        self._monotonic = monotonic
        self.ticket: str | None = None
        self._touched_at = 0.0
        self._listed_at: float | None = None
        #: the tokens of the live waiters ahead at the last listing, nearest first
        self.ahead_tokens: list[str] = []

    @property
    def ahead(self) -> int:
        """How many live waiters are ahead (as of the last listing and holder seen)."""
        return len(self.ahead_tokens)

    @property
    def path(self) -> str | None:
        return None if self.ticket is None else posixpath.join(self.folder, self.ticket)

    def join(self) -> None:
        """Take a ticket (one create). Raises OSError when the store refuses it."""
        self.ticket = f"{int(self._wall() * 1000):013d}-{self.token}"
        self.storage.create_if_absent(self.path, b"", durable=False)
        self._touched_at = self._monotonic()
        self._listed_at = None

    def due(self) -> bool:
        """Is it time to list the line again (more often near its front)?"""
        if self._listed_at is None:
            return True
        every = FRONT_LISTING_S if self.ahead <= 1 else LISTING_S
        return self._monotonic() - self._listed_at >= every

    def refresh(self, holder: str | None) -> int:
        """List the line (one request) and count the live tickets ahead of ours, leaving out the
        one of ``holder`` (the lease's owner); stale tickets seen are deleted. Returns the count."""
        assert self.ticket is not None, "join() first"
        tickets = self.storage.list_mtimes(self.folder)
        now = self._wall()
        skip = ticket_token(holder) if holder else None
        ahead = []
        for name in sorted(tickets, reverse=True):
            if name >= self.ticket:
                continue
            if now - tickets[name] > STALE_S:
                self._drop(name)
            elif skip is None or not name.endswith("-" + skip):
                ahead.append(name.rsplit("-", 1)[-1])
        if self.ticket not in tickets:  # deleted as stale while we stalled: back, same place
            self.storage.create_if_absent(self.path, b"", durable=False)
            self._touched_at = self._monotonic()
        self._listed_at = self._monotonic()
        self.ahead_tokens = ahead
        return self.ahead

    def holder_seen(self, holder: str) -> None:
        """The lease is held by ``holder``: if that is a waiter ahead of us, it got the lock and
        we have moved up, known without listing the line (the waiters near the front read the
        lease: this is how each learns it moved up as soon as one ahead takes the lock)."""
        token = ticket_token(holder)
        self.ahead_tokens = [t for t in self.ahead_tokens if t != token]

    def keep_alive(self) -> None:
        if self.ticket is not None and self._monotonic() - self._touched_at >= TOUCH_S:
            self.storage.touch(self.path)
            self._touched_at = self._monotonic()

    def leave(self) -> None:
        """Delete our ticket (best effort: a ticket left behind goes stale)."""
        path, self.ticket = self.path, None
        if path is not None:
            try:
                self.storage.delete(path)
            except OSError as e:
                log.debug("could not delete ticket %s (it goes stale in %.0fs): %s", path, STALE_S, e)

    def _drop(self, name: str) -> None:
        try:
            self.storage.delete(posixpath.join(self.folder, name))
        except OSError:
            pass


def waiters(storage: Storage, lease_path: str, owner: str, *, now: float | None = None) -> int:
    """How many live tickets other than ``owner``'s are in the line of ``lease_path`` (one
    listing): the holder asks, to put off work while others wait. A waiter that has not taken
    a ticket yet (its first attempt) is not counted."""
    now = time.time() if now is None else now
    mine = "-" + ticket_token(owner)
    tickets = storage.list_mtimes(lease_path + LINE_SUFFIX)
    return sum(1 for name, mtime in tickets.items() if not name.endswith(mine) and now - mtime <= STALE_S)


__all__ = ["WaitingLine", "waiters", "ticket_token", "LINE_SUFFIX", "TOUCH_S", "STALE_S", "LISTING_S", "FRONT_LISTING_S",
           "HANDOFF_S"]
