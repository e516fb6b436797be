"""A writer's footprint: the partitions (and file groups, where known) an attempt will touch,
declared on the timeline when it begins, so that every other writer can see it cheaply.

Why: a doomed write is predictable long before it writes its first marker. An upsert whose
rival began on the same partitions a moment earlier used to spend its Spark start, its source
read and its tagging (31-44 s in the demo) before the first check could see the rival. With
the footprint declared at ``begin``, a rival is visible from the first instant of its life:
admission (``core/concurrency/admission.py``) waits on it before spark-submit, and the
early check right after begin sees it at the partition level.

Where it lives (Java readers stay happy): Hudi's own *workload profile* shape, a
``HoodieCommitMetadata`` whose ``partitionToWriteStats`` hold one stat per partition with an
empty ``fileId`` (what Hudi's ``saveWorkloadProfileMetadataToInflight`` writes for inserts)
and one stat per known file group. At ``begin`` it is written into the requested file of a
``commit`` / ``deltacommit`` (Hudi leaves that file empty and never reads it for these
actions; its archiver reads plans only of replace and table-service instants); once tagging
knows the file groups, ``start_inflight`` writes the refined footprint into the inflight file,
as before. Who wrote it (``dag.task``) and its kind (ingestion, backfill) go in the
metadata's ``extraMetadata`` under :data:`EXTRA_FOOTPRINT`. A replacecommit's requested file
is Hudi's replace plan and is left alone (its footprint is its plan's input file groups).

The rule (docs/concurrency.md, "Footprints and admission"): a shared *partition* is never a
conflict: Hudi's commit-time rule compares file groups and stays as it is. Admission waits only
where two writers *may* touch a common file group (:func:`meeting`): each side's file groups
in a shared partition are known when it is refined (``exact``: the groups its plan writes) or
when its admission request *reaches* them (the file groups its batch can touch, computed
before spark-submit: bucket ids, or keys looked up in the committed file groups); a partition
where either side's groups are unknown counts as met. Declared file groups feed the early
checks, which stop a writer only where Hudi's rules say it loses; a reach never does (it is a
prediction, wider than what the write will touch). An unknown footprint (a Java writer's
requested instant, an operator that cannot read its source's partitions) overlaps
everything: the conservative answer for a wait, never a reason to stop. A writer may also
declare itself with its partitions unknown (``"partitions": "*"`` in the extra): the Spark
engine's bulk_insert written by its input tasks learns its partitions only in its write job
(spark/pair_write.py), and writes new file groups only, which no other writer's conflict check
can meet; it is named (owner, kind) from begin and waited on everywhere, as an unknown one.
"""

from __future__ import annotations

import json
import logging
import zlib
from dataclasses import dataclass, field, replace
from typing import Iterable

from airflow_hudi_occ.core.concurrency.heartbeat import is_expired
from airflow_hudi_occ.core.config import WRITE_KIND, HeartbeatConfig, IndexConfig
from airflow_hudi_occ.core.errors import ConfigError, HudiOccError
from airflow_hudi_occ.core.format.instant import Action, Instant, State
from airflow_hudi_occ.core.format import partition_path as pp
from airflow_hudi_occ.core.format.base_file import key_part_array
from airflow_hudi_occ.core.format.bucket_index import bucket_id, hash_fields
from airflow_hudi_occ.core.format.layout import FileGroupId, bucket_id_of
from airflow_hudi_occ.core.format.metadata import CommitMetadata, WriteStat

log = logging.getLogger(__name__)

#: extraMetadata key of a declared footprint: JSON ``{"owner": "dag.task", "kind": "ingestion"}``
EXTRA_FOOTPRINT = "airflow_hudi_occ.footprint"

#: write kinds, in the order admission lets them go when several wait (RFC-22's example:
#: ingestion first; a table service yields to ingestion)
INGESTION = "ingestion"
BACKFILL = "backfill"
TABLE_SERVICE = "table_service"
KIND_RANK = {INGESTION: 0, BACKFILL: 1, TABLE_SERVICE: 2}

#: what a footprint shows for "unknown": it may touch every partition
EVERY_PARTITION = "*"
#: the attempt label naming the admission request a write was admitted by (the operator sets
#: it; the transaction declares it in the footprint, so admission finds the request's reach)
REQUEST_LABEL = "admission_request"
#: the owner of a writer that declared none (a Java writer, a clustering's plan)
UNKNOWN_WRITER = "unknown writer"
#: a reach's name for a bucket of the bucket index (every writer maps a key to the same one)
BUCKET_PREFIX = "bucket:"
#: a reach's name for a slot of *new* keys (``new:<crc32 of the key mod NEW_KEY_SLOTS>``), or
#: ``new:*`` for all of them: two writers inserting the same new key each make a new file
#: group, which no conflict check sees, and the key ends up twice; so two batches whose new
#: keys may coincide meet, as if on one file group
NEW_KEY_PREFIX = "new:"
NEW_KEY_SLOTS = 1 << 16
EVERY_NEW_KEY = NEW_KEY_PREFIX + "*"

_DECLARING_ACTIONS = (Action.COMMIT, Action.DELTA_COMMIT)


def check_kind(kind: str) -> str:
    k = str(kind or INGESTION).strip().lower()
    if k not in KIND_RANK:
        raise ConfigError(f"unknown write kind {kind!r}", key=WRITE_KIND.key, value=kind,
                          remedy=f"use one of {', '.join(KIND_RANK)}")
    return k


@dataclass(frozen=True)
class Footprint:
    """What one attempt will touch. ``partitions`` None: unknown (may touch any partition).

    ``file_groups``: the groups declared (at inflight, the plan's); ``exact``: they are all
    the existing groups it touches (a refined footprint, a clustering plan's inputs).
    ``reach``: partition -> the file groups (fileIds, or ``bucket:<8 digits>``) its batch can
    touch, as admission computed it before submission; new file groups are left out (nobody
    else writes them). ``request``: the admission request this write was admitted by (the
    request keeps the reach while the instant is only requested)."""

    partitions: frozenset[str] | None
    file_groups: frozenset[FileGroupId] = field(default_factory=frozenset)
    owner: str | None = None
    kind: str = INGESTION
    exact: bool = False
    reach: dict[str, frozenset[str]] = field(default_factory=dict, hash=False)
    request: str | None = None

    @classmethod
    def of(cls, partitions: Iterable[str] | None, file_groups: Iterable[FileGroupId] = (), *,
           owner: str | None = None, kind: str = INGESTION, exact: bool = False,
           reach: dict | None = None, request: str | None = None) -> "Footprint":
        groups = frozenset((str(p), str(f)) for p, f in file_groups)
        parts = None if partitions is None else frozenset(str(p) for p in partitions) | {p for p, _ in groups}
        return cls(parts, groups, owner, check_kind(kind), exact, frozen_reach(reach), request)

    @property
    def known(self) -> bool:
        return self.partitions is not None

    def refined(self, file_groups: Iterable[FileGroupId]) -> "Footprint":
        """The same write once tagging knows its file groups (their partitions join in): from
        now on they are exactly what it touches."""
        groups = frozenset((str(p), str(f)) for p, f in file_groups)
        parts = None if self.partitions is None else self.partitions | {p for p, _ in groups}
        return replace(self, partitions=parts, file_groups=self.file_groups | groups, exact=True)

    def with_reach(self, reach: dict | None) -> "Footprint":
        return replace(self, reach=frozen_reach(reach))

    def groups_in(self, partition: str) -> frozenset[str] | None:
        """The file groups this write may touch in ``partition`` (new ones left out); None:
        any of them (unknown at file-group level)."""
        if self.partitions is None:
            return None
        if partition not in self.partitions:
            return frozenset()
        if self.exact:  # its plan's groups, and the new keys its request said it inserts
            return frozenset(f for p, f in self.file_groups if p == partition) | frozenset(
                g for g in self.reach.get(partition, ()) if g.startswith(NEW_KEY_PREFIX))
        return self.reach.get(partition)

    def shared_partitions(self, other: "Footprint | None") -> list[str]:
        """The partitions both may touch; ``["*"]`` when either side is unknown."""
        if other is None or not self.known or not other.known:
            return [EVERY_PARTITION]
        return sorted(self.partitions & other.partitions)

    def overlaps(self, other: "Footprint | None") -> bool:
        return bool(self.shared_partitions(other))

    # -- the codec: Hudi's workload-profile shape -------------------------------------------

    def to_metadata(self, operation_type: str = "UNKNOWN") -> CommitMetadata:
        stats = [WriteStat(file_id="", path="", partition_path=p) for p in sorted(self.partitions or ())]
        stats += [WriteStat(file_id=f, path="", partition_path=p) for p, f in sorted(self.file_groups)]
        who: dict = {"owner": self.owner, "kind": self.kind}
        if self.partitions is None:  # declared, but where it writes is not known yet
            who["partitions"] = EVERY_PARTITION
        if self.exact:
            who["exact"] = True
        if self.request:
            who["request"] = self.request
        extra = {EXTRA_FOOTPRINT: json.dumps(who, sort_keys=True)}
        return CommitMetadata.from_stats(stats, operation_type=operation_type, extra_metadata=extra)

    def encode(self, operation_type: str = "UNKNOWN") -> bytes:
        return self.to_metadata(operation_type).encode()

    @classmethod
    def from_metadata(cls, meta: CommitMetadata) -> "Footprint | None":
        """The footprint a requested or inflight file declares (ours, or a Java writer's
        workload profile); None when it declares nothing (an empty file). Only ours can be
        ``exact``: Java's workload profile leaves out the small file groups its inserts top up."""
        parts = set(meta.partition_to_write_stats) | set(meta.partition_to_replace_file_ids or {})
        groups = meta.mutated_file_groups()
        raw = meta.extra_metadata.get(EXTRA_FOOTPRINT)
        if not parts and not groups and raw is None:
            return None
        who: dict = {}
        if raw:
            try:
                loaded = json.loads(raw)
                who = loaded if isinstance(loaded, dict) else {}
            except ValueError:
                who = {}
        kind = str(who.get("kind") or INGESTION)
        unknown = who.get("partitions") == EVERY_PARTITION
        return cls(None if unknown else frozenset(parts) | {p for p, _ in groups}, frozenset(groups),
                   who.get("owner") or None, kind if kind in KIND_RANK else INGESTION,
                   who.get("exact") is True, {}, str(who["request"]) if who.get("request") else None)

    def to_json(self) -> dict:
        out = {"partitions": None if self.partitions is None else sorted(self.partitions),
               "file_groups": sorted(f"{p}/{f}" if p else f for p, f in self.file_groups),
               "owner": self.owner, "kind": self.kind}
        if self.reach:
            out["reach"] = {p: sorted(g) for p, g in sorted(self.reach.items())}
        return out


def frozen_reach(reach: dict | None) -> dict[str, frozenset[str]]:
    return {str(p): frozenset(str(g) for g in gs) for p, gs in (reach or {}).items()}


def _comparable(groups: frozenset[str], by_bucket: bool) -> set[str]:
    """Under the bucket index two writers meet on a bucket, whatever their fileIds (the
    commit-time bucket strategy compares them so)."""
    if not by_bucket:
        return set(groups)
    out = set()
    for g in groups:
        b = None if g.startswith(BUCKET_PREFIX) else bucket_id_of(g)
        out.add(BUCKET_PREFIX + b if b is not None else g)
    return out


def partition_index(batch, partition_fields: list[str], *, hive_style: bool,
                    url_encode: bool):
    """The distinct partition paths of an Arrow batch (spelt by ``format/partition_path``'s
    rule, as the writers spell them) and, per row, the index of its path (an int32 array)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = batch.num_rows
    if not partition_fields:
        return [""], pa.array([0] * n, pa.int32())
    cols = [pc.cast(batch.column(f), pa.string()).combine_chunks() for f in partition_fields]
    tuples = list(zip(*(c.to_pylist() for c in cols)))
    paths: dict[str, int] = {}
    index = []
    seen: dict[tuple, int] = {}
    for t in tuples:
        i = seen.get(t)
        if i is None:
            path = pp.partition_path(partition_fields, t, hive_style=hive_style, url_encode=url_encode)
            i = seen[t] = paths.setdefault(path, len(paths))
        index.append(i)
    return list(paths), pa.array(index, pa.int32())


def bucket_reach(batch, paths: list[str], index, hashed: list[str], buckets: int) -> dict[str, list[str]]:
    """Under the bucket index, partition -> the buckets (``bucket:<8 digits>``) the batch's
    rows fall in (Java's hash of the ``hashed`` fields, as the writers bucket them)."""
    cols = [key_part_array(batch.column(f)).to_pylist() for f in hashed]
    out: dict[str, set[str]] = {p: set() for p in paths}
    for i, vals in zip(index.to_pylist(), zip(*cols)):
        out[paths[i]].add(f"{BUCKET_PREFIX}{bucket_id(vals, buckets):08d}")
    return {p: sorted(g) for p, g in out.items()}


def batch_footprint(table, batch, options, *, owner: str | None = None, kind: str = INGESTION,
                    request: str | None = None) -> Footprint:
    """What an Arrow batch written by a core writer may touch, known before its instant
    exists: its partitions and, under the bucket index, their buckets (its *reach*); without
    the bucket index the partitions alone (whichever file groups the tagging finds there).
    What a library writer files for admission (``core/commit/retry.run_admitted``)."""
    cfg = table.config
    paths, index = partition_index(batch, list(cfg.partition_fields), hive_style=cfg.hive_style_partitioning,
                                   url_encode=cfg.url_encode_partitions)
    index_config = IndexConfig.from_options(options)
    buckets = index_config.buckets
    reach = (bucket_reach(batch, paths, index, hash_fields(index_config, cfg.record_key_fields), buckets)
             if buckets and cfg.record_key_fields else {})
    return Footprint.of(paths, owner=owner, kind=kind, reach=reach, request=request)


def new_key_slot(key: str) -> str:
    return f"{NEW_KEY_PREFIX}{zlib.crc32(key.encode()) % NEW_KEY_SLOTS}"


def _new_keys_meet(a: frozenset[str], b: frozenset[str]) -> bool:
    na = {g for g in a if g.startswith(NEW_KEY_PREFIX)}
    nb = {g for g in b if g.startswith(NEW_KEY_PREFIX)}
    return bool(na and nb and (EVERY_NEW_KEY in na or EVERY_NEW_KEY in nb or na & nb))


def meeting(mine: "Footprint | None", other: "Footprint | None") -> list[str]:
    """The partitions where both writers may touch a common file group: ``["*"]`` when
    either is unknown; a shared partition where either side's file groups are unknown
    counts (when in doubt, they meet)."""
    a = mine if mine is not None else Footprint(None)
    shared = a.shared_partitions(other)
    if shared == [EVERY_PARTITION]:
        return shared
    out = []
    for p in shared:
        ga, gb = a.groups_in(p), other.groups_in(p)
        if ga is None or gb is None:
            out.append(p)
            continue
        by_bucket = any(g.startswith(BUCKET_PREFIX) for g in (*ga, *gb))
        if _comparable(ga, by_bucket) & _comparable(gb, by_bucket) or _new_keys_meet(ga, gb):
            out.append(p)
    return out


def declares_at_begin(action: Action) -> bool:
    """Whether an instant of ``action`` carries its footprint in its requested file."""
    return action in _DECLARING_ACTIONS


def declared(timeline, instant: Instant) -> Footprint | None:
    """What a pending write instant declares: its inflight file (refined, or Java's workload
    profile) else its requested file; a replacecommit by its plan's input groups. None:
    nothing declared (unknown)."""
    try:
        if instant.action in (Action.REPLACE_COMMIT, Action.CLUSTERING):
            fp = None
            if instant.state is State.INFLIGHT:
                fp = Footprint.from_metadata(timeline.commit_metadata(instant))
            if fp is None:
                plan = timeline.requested_replace_metadata(instant)
                groups = plan.input_file_groups() if plan is not None and plan.has_plan else set()
                fp = Footprint.of((), groups, kind=TABLE_SERVICE, exact=True) if groups else None
            return fp
        if instant.action not in _DECLARING_ACTIONS:
            return None
        fp = Footprint.from_metadata(timeline.commit_metadata(instant))
        if fp is None and instant.state is State.INFLIGHT:
            req = Instant(instant.requested_time, instant.action, State.REQUESTED)
            fp = Footprint.from_metadata(timeline.commit_metadata(req))
        return fp
    except FileNotFoundError:  # completed or rolled back meanwhile
        return None
    except HudiOccError as e:  # an unreadable plan or profile: unknown (may touch anything)
        log.warning("cannot read what instant %s declares (%s): taken as unknown", instant, e)
        return None


@dataclass(frozen=True)
class LiveWriter:
    """A pending write instant whose heartbeat is alive, and what it declared."""

    instant: Instant
    footprint: Footprint | None

    @property
    def requested_time(self) -> str:
        return self.instant.requested_time

    @property
    def owner(self) -> str:
        return (self.footprint.owner if self.footprint is not None else None) or UNKNOWN_WRITER

    def describe(self, shared: list[str]) -> str:
        return (f"{self.requested_time} ({self.owner}) on partitions "
                f"{', '.join(shared) if shared else '-'}")


def live_writers(table, heartbeat: HeartbeatConfig, *, timeline=None, now: float | None = None,
                 exclude: Iterable[str] = (), include_table_services: bool = False,
                 include_clustering: bool = False) -> list[LiveWriter]:
    """The table's live writers, oldest first: pending write instants whose heartbeat is
    alive (a dead one is a failed write, rolled back lazily: nobody waits on it). Table
    services are left out by default: the early checks compare writers only (the clustering
    gate refuses writes into a pending plan's file groups). ``include_clustering``: a
    clustering being executed (its heartbeat alive) counts too, as admission wants it: a
    write into its partitions now would be refused by the gate or make it lose."""
    tl = timeline if timeline is not None else table.timeline()
    skip = set(exclude)
    out = []
    for inst in tl.pending_writes():
        t = inst.requested_time
        if t in skip or is_expired(table, t, heartbeat, now=now):
            continue
        service = inst.is_table_service or tl.is_clustering(inst)
        if service and not include_table_services and not (include_clustering and tl.is_clustering(inst)):
            continue
        out.append(LiveWriter(inst, declared(tl, inst)))
    return out


def overlapping(mine: Footprint | None, writers: Iterable[LiveWriter]) -> list[tuple[LiveWriter, list[str]]]:
    """The live writers whose footprint shares a partition with ``mine`` (an unknown side
    shares every partition), each with the shared partitions."""
    me = mine if mine is not None else Footprint(None)
    out = []
    for w in writers:
        shared = me.shared_partitions(w.footprint)
        if shared:
            out.append((w, shared))
    return out


__all__ = ["Footprint", "LiveWriter", "EXTRA_FOOTPRINT", "BUCKET_PREFIX", "NEW_KEY_PREFIX", "EVERY_NEW_KEY",
           "new_key_slot", "partition_index", "bucket_reach", "batch_footprint", "REQUEST_LABEL", "UNKNOWN_WRITER", "meeting", "frozen_reach", "INGESTION",
           "BACKFILL", "TABLE_SERVICE",
           "KIND_RANK", "EVERY_PARTITION", "check_kind", "declares_at_begin", "declared",
           "live_writers", "overlapping"]
