"""Early conflict detection (ECD, Hudi RFC-56): stop a doomed write before it writes data.

Commit-time conflict resolution finds an overlap only after all the data is written. ECD
looks at the *markers* of other, still running writers just before this writer creates each
of its own markers, and aborts at once if one of them is writing the same file group.

Where this sits in a write (see ``core/commit/transaction.py``)::

    begin -> inflight -> for each data file: detector.create_marker(...) -> write the file
          -> commit (conflict resolution under the table lock still runs: ECD only saves work)

Candidates (section 3 of the design): marker folders under ``.hoodie/.temp/`` of instants
strictly EARLIER than this one (of two overlapping writers only the later one fails, the same
rule as commit-time resolution), that are pending on the timeline (completed or rolled-back
instants leave only leftovers), not a compaction or clustering, and whose heartbeat is alive.

Strategies, named as Hudi names them (and by short names):

- ``simple`` (:class:`SimpleDirectMarkerBasedDetectionStrategy`): list
  ``<candidate>/<partition>`` only and look for the fileId. Two writers checking the same file
  group at the same moment can both pass (then the commit-time check catches it).
- ``transactional`` (:class:`SimpleTransactionDirectMarkerBasedDetectionStrategy`): the same,
  with check and marker creation under a lock keyed ``partition/fileId``, which closes that race.
- ``async`` (:class:`AsyncTimelineServerBasedDetectionStrategy`): for batched markers. A
  background thread periodically compares this writer's file groups with the candidates' and
  raises a sticky flag; marker creation only reads the flag, so it costs nothing.
- ``bloom-direct`` / ``bloom-async``: as above, and every writer also keeps a bloom filter of
  its file groups (``.hoodie/.temp/<t>/BLOOM``); the checker reads it first and skips candidates
  that cannot hold the file group. A missing or unreadable bloom means "may contain".

Optionally (``...early.conflict.check.commit.conflict``) an instant that *completed* after this
write began and touched the file group is a conflict as well: its markers are gone by then.

Beyond Hudi, deliberately: every strategy reads both marker layouts (a direct-marker writer
sees a batched-marker writer and vice versa), and a pending insert-overwrite replacecommit is a
candidate (Hudi skips every pending replacecommit; only clustering yields here).

Errors: :class:`EarlyConflictError` (retryable: retry with a fresh instant time); once raised,
the detector keeps raising it (the write is doomed). :class:`UnknownStrategyError` for a
strategy name that does not exist. Storage errors pass through.

Beyond Hudi: earlier live writers' *declared* file groups (their footprint, declared at begin
and refined at inflight: core/concurrency/footprint.py) count as markers to come, in the
Spark driver's checks before tagging and before the write job (``declared``); a shared
partition alone is never a conflict.

Modules: ``marker_view`` (the other writers: candidates, heartbeats, their markers, cached),
``declared`` (their declared footprints),
``bloom`` (the bloom files), ``strategies`` (the checks before each marker), ``async_checker``
(the background checker) and ``detector`` (a strategy by name). Import a name from the
module that defines it (``tests/test_layers.py`` checks it).
"""
