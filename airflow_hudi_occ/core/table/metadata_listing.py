"""The file listing in Hudi's metadata table (its ``files`` partition), read.

Java Hudi and hudi-rs take a table's file listing from the metadata table when
``hoodie.properties`` lists ``files`` in ``hoodie.table.metadata.partitions``. Where this
project writes that listing (:mod:`.metadata_commit`, issue 32 item 1) it has to read it the way
they do: to check that a listing agrees with the storage (the invariant every deltacommit of
ours keeps, and the check after each crash point), and to list a table's files through it,
for every reader (:mod:`.file_listing`, item 5). Nothing here writes.

What Hudi 1.x (table versions 8 and 9) keeps there: ``.hoodie/metadata`` is a merge-on-read
table of its own, with its own timeline. Its ``files`` partition is one file group,
``files-0000-0``: a base HFile (written when the partition is initialised and at each of the
metadata table's compactions) and log files whose HFile data blocks
(:mod:`~airflow_hudi_occ.core.format.hfile`) each hold one deltacommit's records. A record
(Avro ``HoodieMetadataRecord``, :mod:`~airflow_hudi_occ.core.format.metadata_record`; the
writer schema in the block's ``SCHEMA`` header, or in the base file's ``schema`` file-info
entry) is keyed ``__all_partitions__`` (type 1: the partition
list) or by a partition path (type 2: that partition's files; ``.`` for a table without
partitions). Its ``filesystemMetadata`` maps a name to ``{size, isDeleted}``. Records merge in
commit order as ``HoodieMetadataPayload`` merges them: a deletion removes the name, an
addition keeps the larger size (a log file that grew).

Only records of completed instants of the metadata table's timeline count: a deltacommit that
failed (or was rolled back) is not read, as Java's log reader skips its blocks. The slice read
is the latest completed base file (written by the metadata table's initialisation or by its
latest completed compaction, Java's or ours: :mod:`.metadata_compaction`) and the log files of
deltacommits completed after that base file's instant, in completion order, as Hudi 1.x slices
log files by completion time (a pending compaction's base file is not read; its logs are).
Unreadable files raise :class:`~airflow_hudi_occ.core.errors.CorruptMetadataError`.
"""

from __future__ import annotations

import posixpath
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from airflow_hudi_occ.core.errors import CorruptMetadataError
from airflow_hudi_occ.core.format.hfile import HFile, read_hfile
from airflow_hudi_occ.core.format.log_file import BlockType, HeaderKey, LogFormatError, decode_blocks
from airflow_hudi_occ.core.format.metadata_record import (ALL_PARTITIONS_KEY, NON_PARTITIONED_KEY,
                                                          TYPE_FILE_LIST, TYPE_PARTITION_LIST, decode_record)
from airflow_hudi_occ.core.table.metadata_compaction import completed_times, latest_file_slices, read_log
from airflow_hudi_occ.core.table.metadata_table import FILES_PARTITION, METADATA_FOLDER
from airflow_hudi_occ.core.table.table import Table

FILES_FILE_ID = "files-0000-0"


@dataclass
class MetadataListing:
    """What the ``files`` partition says: the partitions (``""`` for a table without any) and
    each one's files by name with their sizes; ``instants``: the metadata table's completed
    instants whose records were merged, in order (the base file's first)."""

    partitions: set[str] = field(default_factory=set)
    files: dict[str, dict[str, int]] = field(default_factory=dict)
    instants: list[str] = field(default_factory=list)

    def apply(self, key: str, record: dict) -> None:
        entries = record.get("filesystemMetadata") or {}
        if record.get("type") == TYPE_PARTITION_LIST and key == ALL_PARTITIONS_KEY:
            for name, info in entries.items():
                part = _partition(name)
                if info.get("isDeleted"):
                    self.partitions.discard(part)
                    self.files.pop(part, None)
                else:
                    self.partitions.add(part)
        elif record.get("type") == TYPE_FILE_LIST:
            files = self.files.setdefault(_partition(key), {})
            for name, info in entries.items():
                if info.get("isDeleted"):
                    files.pop(name, None)
                else:
                    files[name] = max(int(info.get("size") or 0), files.get(name, 0))

    def to_json(self) -> dict:
        return {"partitions": sorted(self.partitions), "instants": list(self.instants),
                "files": {p: dict(sorted(f.items())) for p, f in sorted(self.files.items())}}


def _partition(key: str) -> str:
    return "" if key == NON_PARTITIONED_KEY else key


def _records(hf: HFile, schema_json: str | None, where: str) -> list[tuple[str, dict]]:
    if not schema_json:
        raise CorruptMetadataError(f"{where}: no writer schema for its records", path=where,
                                   remedy="let Java Hudi rebuild the metadata table")
    try:
        return [(key, decode_record(value, schema_json)) for key, value in hf.entries]
    except (ValueError, EOFError, TypeError, KeyError) as e:
        raise CorruptMetadataError(f"{where}: a record does not decode with its schema ({e})", path=where,
                                   remedy="let Java Hudi rebuild the metadata table") from e


def read_metadata_listing(table, trusted: Callable[[str], bool] | None = None, *,
                          mdt: Table | None = None, mdt_timeline=None) -> MetadataListing:
    """The listing in ``table``'s metadata table (see the module doc); an empty listing when
    the table has no metadata table or no ``files`` partition folder. ``trusted``: whether the
    log blocks of a (completed) metadata-table instant count, judged on the data table's
    timeline by the caller (:mod:`.file_listing` with :mod:`.metadata_trust`'s rule: not a data
    instant still pending or rolled back; a metadata table that is another table's is not read
    at all); the base file, written by the metadata table's own compaction, always counts.
    ``mdt`` and ``mdt_timeline``: the metadata table and its timeline when the caller has them
    already (:mod:`.file_listing` does, to tell whether the metadata table is the table's own)."""
    storage = table.storage
    folder = storage.path(METADATA_FOLDER, FILES_PARTITION)
    listing = MetadataListing()
    if mdt is None:
        mdt = table.metadata_table()
        if mdt is None:
            return listing
    completed = completed_times(mdt_timeline if mdt_timeline is not None else mdt.timeline())
    try:
        return _read_listing(storage, mdt, folder, completed, trusted, _folder_names(storage, folder, completed))
    except FileNotFoundError:
        # a file the kept folder listing named is gone, which Hudi's protocol never does to the
        # latest slice without changing the timeline (a person deleted it): list again
        with _CACHE_LOCK:
            _NAMES.pop(folder, None)
        return _read_listing(storage, mdt, folder, completed, trusted, _folder_names(storage, folder, completed))


def _read_listing(storage, mdt, folder: str, completed: dict[str, str], trusted, names: list[str]) -> MetadataListing:
    listing = MetadataListing()
    if not names:
        return listing
    slices = [s for s in latest_file_slices(mdt, completed, [FILES_PARTITION], names={FILES_PARTITION: names})
              if s.file_id == FILES_FILE_ID]
    if not slices:
        return listing
    fs = slices[0]
    if fs.base_name:
        for key, record in _decoded(storage, posixpath.join(folder, fs.base_name), base=True)[0][1]:
            listing.apply(key, record)
        listing.instants.append(fs.base_instant)
    for _completion, _instant, _version, name in fs.logs:
        for block_instant, records in _decoded(storage, posixpath.join(folder, name), base=False):
            if block_instant not in completed:
                continue
            if trusted is not None and not trusted(block_instant):
                continue
            for key, record in records:
                listing.apply(key, record)
            if block_instant not in listing.instants:
                listing.instants.append(block_instant)
    return listing


#: the ``files`` folder's names by folder, with the metadata table's completed instants they
#: were listed under: while those are the same, the files a listing reads are the same (a
#: deltacommit, a compaction, a clean or a rollback that changes them completes an instant or
#: removes one), so the folder is not listed again (issue 43: it was listed under the lock)
_NAMES: "OrderedDict[str, tuple[frozenset, list[str]]]" = OrderedDict()
#: decoded files by path: ``[(instant, records)]`` (a base file: one entry, its base instant
#: None). A base file or a log file of Hudi 1.x is written once under a name that carries its
#: instant and never changes (a new version or token is a new name), and only files of
#: completed instants are read, so a path's records hold for the process (bounded, oldest out)
_DECODED: "OrderedDict[str, list[tuple[str | None, list[tuple[str, dict]]]]]" = OrderedDict()
_CACHE_MAX = 512
_CACHE_LOCK = threading.Lock()


def _folder_names(storage, folder: str, completed: dict[str, str]) -> list[str]:
    key = frozenset(completed.items())
    with _CACHE_LOCK:
        hit = _NAMES.get(folder)
    if hit is not None and hit[0] == key:
        return hit[1]
    names = storage.list_names(folder)
    _keep(_NAMES, folder, (key, names))
    return names


def note_own_deltacommit(table, before: dict[str, str], instant_time: str, completion_time: str,
                         names: list[str]) -> None:
    """This process completed the metadata table's deltacommit ``instant_time`` of ``table``,
    under the table lock, on a metadata timeline whose completed instants were ``before``, with
    the log files ``names`` in the ``files`` partition. A kept folder listing for ``before``
    holds for the timeline after it with these names added (no other writer changes the
    metadata table while the lock is held: ``timeline.PinnedTimeline``), so this process's next
    listing does not list the folder again unless another commit came between (issue 43: a
    single writer's tagging listed it at every commit)."""
    folder = table.storage.path(METADATA_FOLDER, FILES_PARTITION)
    with _CACHE_LOCK:
        hit = _NAMES.get(folder)
    if hit is None or hit[0] != frozenset(before.items()):
        return
    after = frozenset({**before, instant_time: completion_time}.items())
    _keep(_NAMES, folder, (after, sorted(set(hit[1]) | set(names))))


def _keep(cache: OrderedDict, key, value) -> None:
    """Put ``value`` in a bounded cache of this module (the oldest out past ``_CACHE_MAX``)."""
    with _CACHE_LOCK:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > _CACHE_MAX:
            cache.popitem(last=False)


def _decoded(storage, path: str, *, base: bool) -> list[tuple[str | None, list[tuple[str, dict]]]]:
    with _CACHE_LOCK:
        hit = _DECODED.get(path)
    if hit is not None:
        return hit
    if base:
        hf = read_hfile(storage.read(path), path=path)
        schema = hf.file_info.get("schema")
        out: list = [(None, _records(hf, schema.decode() if schema else None, path))]
    else:
        try:
            blocks = decode_blocks(read_log(storage, path), allow_truncated_tail=True)
        except LogFormatError as e:
            raise CorruptMetadataError(f"{path}: {e}", path=path,
                                       remedy="let Java Hudi rebuild the metadata table") from e
        out = []
        for block in blocks:
            if block.block_type is not BlockType.HFILE_DATA:
                continue
            hf = read_hfile(block.content, path=path)
            out.append((block.instant_time, _records(hf, block.header.get(HeaderKey.SCHEMA), path)))
    _keep(_DECODED, path, out)
    return out


__all__ = ["MetadataListing", "read_metadata_listing", "note_own_deltacommit", "FILES_FILE_ID"]
