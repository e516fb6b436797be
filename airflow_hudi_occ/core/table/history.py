"""The archived timeline: Hudi 1.x's LSM history under ``.hoodie/timeline/history/``.

Archival moves old completed instants off the active timeline so that listing it (every
commit does, under the lock) costs what the recent past costs, not the table's age. Java Hudi
must be able to read what we move, so the layout is Hudi's (``LSMTimeline``,
``LSMTimelineWriter``):

- data files ``<min instant>_<max instant>_<layer>.parquet``, one row per archived instant
  with the fields of Hudi's ``HoodieLSMTimelineInstant`` Avro record (``instantTime``,
  ``completionTime``, ``action``, ``metadata`` = the bytes of the completed instant file,
  ``plan`` = the bytes of its requested/inflight plan where the action has one, ``version``);
  the Avro schema is stored in the footer under ``parquet.avro.schema`` as parquet-avro does;
- ``manifest_<N>``: JSON ``{"files": [{"fileName", "fileLen"}]}``, the files of snapshot N;
- ``_version_``: the number of the latest snapshot. A reader takes ``_version_`` and, when it
  is missing or unreadable, the largest ``manifest_N`` listed.

Crash safety (a new snapshot is visible only once its manifest and version exist):
a data file not named by the latest manifest is garbage from an interrupted run and is
rewritten; ``manifest_<N+1>`` left without ``_version_`` pointing at it is rewritten too;
``_version_`` itself is replaced in one step (local rename, or one PUT on an object store).
Every layer compacts ``hoodie.timeline.compaction.batch.size`` files into one file of the
next layer, as Hudi does; files of snapshots older than the last three (plus one per layer
compacted) are deleted.
"""

from __future__ import annotations

import io
import json
import logging
import posixpath
import re
from dataclasses import dataclass
from typing import Iterable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_hudi_occ.core.errors import CorruptMetadataError
from airflow_hudi_occ.core.format.instant import WRITE_ACTIONS, Action, Instant, State
from airflow_hudi_occ.core.format.metadata import CommitMetadata

log = logging.getLogger(__name__)

VERSION_FILE = "_version_"
MANIFEST_PREFIX = "manifest_"
_MANIFEST_RE = re.compile(r"^manifest_(\d+)$")
_DATA_RE = re.compile(r"^(\d+)_(\d+)_(\d+)\.parquet$")
#: snapshots kept for readers that loaded an older manifest (Hudi: 3, plus one per layer compacted)
SNAPSHOTS_KEPT = 3
#: (base uri, snapshot version) -> archived writes; see TimelineHistory.completed_writes
_WRITES_CACHE: dict = {}
#: (base uri, snapshot version) -> {instant time: completion time}; see TimelineHistory.completion_times
_COMPLETION_CACHE: dict = {}

#: Hudi's org.apache.hudi.avro.model.HoodieLSMTimelineInstant, as parquet-avro stores it
AVRO_SCHEMA = {
    "type": "record", "name": "HoodieLSMTimelineInstant", "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {"name": "instantTime", "type": ["null", "string"], "default": None},
        {"name": "completionTime", "type": ["null", "string"], "default": None},
        {"name": "action", "type": ["null", "string"], "default": None},
        {"name": "metadata", "type": ["null", "bytes"], "default": None},
        {"name": "plan", "type": ["null", "bytes"], "default": None},
        {"name": "version", "type": "int", "default": 1},
    ],
}
ARROW_SCHEMA = pa.schema(
    [pa.field("instantTime", pa.string()), pa.field("completionTime", pa.string()),
     pa.field("action", pa.string()), pa.field("metadata", pa.binary()),
     pa.field("plan", pa.binary()), pa.field("version", pa.int32(), nullable=False)],
    metadata={"parquet.avro.schema": json.dumps(AVRO_SCHEMA), "writer.model.name": "avro"})
LSM_INSTANT_VERSION = 1


@dataclass(frozen=True)
class ArchivedInstant:
    """One row of the history: an instant as it was when archived."""

    instant_time: str
    completion_time: str | None
    action: str
    metadata: bytes | None = None
    plan: bytes | None = None


@dataclass(frozen=True)
class HistoryFile:
    name: str
    length: int

    @property
    def min_time(self) -> str:
        return _DATA_RE.match(self.name).group(1)

    @property
    def max_time(self) -> str:
        return _DATA_RE.match(self.name).group(2)

    @property
    def layer(self) -> int:
        return int(_DATA_RE.match(self.name).group(3))


def data_file_name(min_time: str, max_time: str, layer: int) -> str:
    return f"{min_time}_{max_time}_{layer}.parquet"


def is_data_file(name: str) -> bool:
    return _DATA_RE.match(name) is not None


class TimelineHistory:
    """The LSM history of one table: read its latest snapshot, append and compact files.

    Writers must hold the table lock (archival does); readers need no lock, since a snapshot's
    files are immutable and stay for :data:`SNAPSHOTS_KEPT` newer snapshots."""

    def __init__(self, table):
        self.table = table
        self.storage = table.storage
        history = table.config.properties.get("hoodie.timeline.history.path", "history")
        self.folder = self.storage.path(table.config.timeline_folder, history)

    def _path(self, name: str) -> str:
        return posixpath.join(self.folder, name)

    # -- snapshots ---------------------------------------------------------------------------

    def _names(self) -> list[str]:
        try:
            return self.storage.list_names(self.folder)
        except FileNotFoundError:
            return []

    def manifest_versions(self) -> list[int]:
        return sorted(int(m.group(1)) for m in map(_MANIFEST_RE.match, self._names()) if m)

    def latest_version(self) -> int:
        """The latest snapshot: ``_version_``, else the largest manifest listed, else -1."""
        try:
            return int(self.storage.read(self._path(VERSION_FILE)).decode("utf-8").strip())
        except (FileNotFoundError, ValueError, UnicodeDecodeError):
            versions = self.manifest_versions()
            return versions[-1] if versions else -1

    def files(self, version: int | None = None) -> list[HistoryFile]:
        """The data files of a snapshot (the latest by default), sorted by name."""
        version = self.latest_version() if version is None else version
        if version < 0:
            return []
        path = self._path(f"{MANIFEST_PREFIX}{version}")
        try:
            doc = json.loads(self.storage.read(path).decode("utf-8") or "{}")
            entries = doc.get("files") or []
            out = [HistoryFile(str(e["fileName"]), int(e.get("fileLen", 0))) for e in entries]
        except FileNotFoundError:
            raise CorruptMetadataError(f"the archived timeline names snapshot {version} but "
                                       f"{MANIFEST_PREFIX}{version} is missing", path=path,
                                       base_path=self.table.base_uri) from None
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CorruptMetadataError(f"unreadable archived-timeline manifest: {e}", path=path,
                                       base_path=self.table.base_uri) from None
        bad = [f.name for f in out if not is_data_file(f.name)]
        if bad:
            raise CorruptMetadataError(f"archived-timeline manifest names unexpected files {bad}",
                                       path=path, base_path=self.table.base_uri)
        return sorted(out, key=lambda f: f.name)

    def max_instant_time(self) -> str | None:
        """The largest archived instant time, from file names alone (no data read)."""
        files = self.files()
        return max((f.max_time for f in files), default=None)

    def is_empty(self) -> bool:
        return self.latest_version() < 0 or not self.files()

    # -- reading -----------------------------------------------------------------------------

    def read(self, columns: Sequence[str] | None = None, *, min_time: str | None = None) -> pa.Table:
        """Rows of the latest snapshot (optionally only files that may hold instants at or after
        ``min_time``), sorted by instant time; an instant found twice (an interrupted archival
        that wrote it once more) is returned once."""
        cols = list(columns) if columns else ARROW_SCHEMA.names
        if "instantTime" not in cols:
            cols = ["instantTime", *cols]
        parts = []
        for f in self.files():
            if min_time is not None and f.max_time < min_time:
                continue
            data = self.storage.read(self._path(f.name))
            parts.append(pq.read_table(io.BytesIO(data), columns=cols))
        if not parts:
            return ARROW_SCHEMA.empty_table().select(cols)
        out = pa.concat_tables(parts).sort_by("instantTime")
        times = out.column("instantTime").to_pylist()
        keep = [i for i, t in enumerate(times) if i == 0 or t != times[i - 1]]
        return out if len(keep) == len(times) else out.take(keep)

    def instants(self, *, min_time: str | None = None) -> list[ArchivedInstant]:
        t = self.read(["instantTime", "completionTime", "action"], min_time=min_time)
        return [ArchivedInstant(r["instantTime"], r["completionTime"], r["action"])
                for r in t.to_pylist()]

    def instant_times(self, *, min_time: str | None = None) -> set[str]:
        return set(self.read(["instantTime"], min_time=min_time).column("instantTime").to_pylist())

    def completed_writes(self) -> list[tuple[Instant, CommitMetadata]]:
        """The archived write instants (commit, replacecommit) with their metadata, in
        completion order: what the active timeline's completed writes were before archival.
        Cached for the process per snapshot (history files are never rewritten in place)."""
        version = self.latest_version()
        if version < 0:
            return []
        key = (self.table.base_uri, version)
        cached = _WRITES_CACHE.get(key)
        if cached is not None:
            return cached
        writes = {a.value for a in WRITE_ACTIONS}
        out = []
        for r in self.read(["completionTime", "action", "metadata"]).to_pylist():
            if r["action"] not in writes or not r["metadata"]:
                continue
            inst = Instant(r["instantTime"], Action(r["action"]), State.COMPLETED, r["completionTime"])
            try:
                out.append((inst, CommitMetadata.decode(r["metadata"])))
            except CorruptMetadataError:  # one unreadable entry must not hide the others
                log.warning("archived metadata of %s in %s is unreadable", inst, self.table.base_uri)
        out.sort(key=lambda im: (im[0].completion_time or im[0].requested_time, im[0].requested_time))
        if len(_WRITES_CACHE) > 64:
            _WRITES_CACHE.clear()
        _WRITES_CACHE[key] = out
        return out

    def completion_times(self) -> dict[str, str]:
        """Archived instant time -> its completion time (instants archived without one are left
        out). Merge-on-read slicing needs these once a deltacommit is archived: its log file
        belongs to the slice chosen by when it *completed*, which its name does not tell.
        Cached for the process per snapshot, as :meth:`completed_writes`."""
        version = self.latest_version()
        if version < 0:
            return {}
        key = (self.table.base_uri, version)
        cached = _COMPLETION_CACHE.get(key)
        if cached is None:
            t = self.read(["completionTime"])
            cached = {i: c for i, c in zip(t.column("instantTime").to_pylist(),
                                           t.column("completionTime").to_pylist()) if c}
            if len(_COMPLETION_CACHE) > 64:
                _COMPLETION_CACHE.clear()
            _COMPLETION_CACHE[key] = cached
        return cached

    def max_completion_time(self) -> str | None:
        col = self.read(["completionTime"]).column("completionTime").to_pylist()
        return max((c for c in col if c), default=None)

    # -- writing (under the table lock) ------------------------------------------------------

    def append(self, instants: Sequence[ArchivedInstant]) -> str:
        """Write ``instants`` (sorted by time) as a new layer-0 file and publish a snapshot
        naming it. Idempotent: a file of the same name that the latest snapshot already names
        was published by an interrupted run, and is kept as it is."""
        if not instants:
            raise ValueError("nothing to archive")
        name = data_file_name(instants[0].instant_time, instants[-1].instant_time, 0)
        current = self.files()
        if any(f.name == name for f in current):
            log.info("archived-timeline file %s already published; not rewritten", name)
            return name
        self._write_data(name, instants)
        self._publish([f for f in current] + [HistoryFile(name, self.storage.size(self._path(name)))])
        return name

    def _write_data(self, name: str, rows: Iterable[ArchivedInstant] | pa.Table) -> None:
        if isinstance(rows, pa.Table):
            table = rows.select(ARROW_SCHEMA.names).cast(ARROW_SCHEMA)
        else:
            rows = list(rows)
            table = pa.Table.from_pydict({
                "instantTime": [r.instant_time for r in rows],
                "completionTime": [r.completion_time for r in rows],
                "action": [r.action for r in rows],
                "metadata": [r.metadata for r in rows],
                "plan": [r.plan for r in rows],
                "version": [LSM_INSTANT_VERSION] * len(rows),
            }, schema=ARROW_SCHEMA)
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="gzip", use_dictionary=False)
        path = self._path(name)
        # garbage of an interrupted run (never published): replace it
        self.storage.delete(path)
        self.storage.makedirs(self.folder)
        self.storage.write(path, buf.getvalue())

    def _publish(self, files: list[HistoryFile]) -> int:
        version = self.latest_version()
        new = 1 if version < 0 else version + 1
        doc = {"files": [{"fileName": f.name, "fileLen": f.length}
                         for f in sorted(files, key=lambda f: f.name)]}
        # a manifest_<new> left by a run that died before writing _version_ is not visible: replace
        self.storage.write(self._path(f"{MANIFEST_PREFIX}{new}"),
                           json.dumps(doc, indent=2).encode("utf-8"))
        self.storage.write(self._path(VERSION_FILE), str(new).encode("utf-8"))
        return new

    def compact(self, batch_size: int = 10, max_bytes: int = 1024 * 1024 * 1024) -> list[str]:
        """Hudi's universal compaction: while a layer holds ``batch_size`` files, its oldest
        consecutive files (at least two, at most ``batch_size``, within ``max_bytes``) become one
        file of the next layer. Returns the new files; cleans old snapshots afterwards."""
        made: list[str] = []
        layer = 0
        files = self.files()
        while True:
            in_layer = sorted((f for f in files if f.layer == layer), key=lambda f: f.name)
            if len(in_layer) < batch_size:
                break
            batch: list[HistoryFile] = []
            total = 0
            for f in in_layer:
                total += f.length
                batch.append(f)
                if len(batch) >= batch_size:
                    break
                if total > max_bytes:
                    if len(batch) < 2:
                        batch, total = [], 0
                    else:
                        break
            if len(batch) < 2:
                break
            name = data_file_name(min(f.min_time for f in batch), max(f.max_time for f in batch),
                                  layer + 1)
            tables = [pq.read_table(io.BytesIO(self.storage.read(self._path(f.name))))
                      for f in batch]
            self._write_data(name, pa.concat_tables(tables).sort_by("instantTime"))
            gone = {f.name for f in batch}
            files = [f for f in files if f.name not in gone] + [
                HistoryFile(name, self.storage.size(self._path(name)))]
            self._publish(files)
            made.append(name)
            layer += 1
        self.clean(extra_versions=layer)
        return made

    def clean(self, *, extra_versions: int = 0) -> list[str]:
        """Delete manifests and data files that none of the newest snapshots names."""
        versions = self.manifest_versions()
        keep_n = SNAPSHOTS_KEPT + extra_versions
        if len(versions) <= keep_n:
            return []
        kept = versions[-keep_n:]
        needed: set[str] = set()
        for v in kept:
            needed |= {f.name for f in self.files(v)}
        deleted = []
        for v in versions[:-keep_n]:
            p = self._path(f"{MANIFEST_PREFIX}{v}")
            self.storage.delete(p)
            deleted.append(p)
        for name in self._names():
            if is_data_file(name) and name not in needed:
                p = self._path(name)
                self.storage.delete(p)
                deleted.append(p)
        return deleted


__all__ = ["TimelineHistory", "ArchivedInstant", "HistoryFile", "ARROW_SCHEMA", "AVRO_SCHEMA",
           "data_file_name"]
