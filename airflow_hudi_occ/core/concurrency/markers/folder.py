"""Where an instant's markers live: its folder ``.hoodie/.temp/<instant>/``, the ``MARKERS<n>``
files and the ``MARKERS.type`` file that tell the batched layout from the direct one, and the
instants that have a folder at all (what rollback and the early conflict check look for).

Reading ``MARKERS.type`` raises :class:`~airflow_hudi_occ.core.errors.CorruptMetadataError`
for a value that is no marker type (a caller must not guess the layout: guessing wrong hides
every marker of the other layout); a missing file means direct markers.
"""

from __future__ import annotations

from typing import Iterable

from airflow_hudi_occ.core.config import MarkerType
from airflow_hudi_occ.core.errors import CorruptMetadataError
from airflow_hudi_occ.core.concurrency.markers.names import (INSTANT_DIR_RE, MARKERS_FILE_RE, MARKERS_TYPE_FILE,
                                                            TEMP_FOLDER)


def marker_dir(table, instant_time: str) -> str:
    return table.storage.path(*TEMP_FOLDER, instant_time)


def markers_file_names(names: Iterable[str]) -> list[str]:
    """``MARKERS<n>`` names among a folder listing, in index order."""
    found = []
    for n in names:
        m = MARKERS_FILE_RE.match(n)
        if m:
            found.append((int(m.group(1)), n))
    return [n for _, n in sorted(found)]


def read_marker_type(table, instant_time: str) -> MarkerType | None:
    """The type recorded in ``MARKERS.type``, or None when there is none (direct markers)."""
    path = table.storage.path(*TEMP_FOLDER, instant_time, MARKERS_TYPE_FILE)
    try:
        raw = table.storage.read(path).decode("utf-8", errors="replace").strip()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    try:
        return MarkerType[raw.upper()]
    except KeyError:
        raise CorruptMetadataError(f"{path} holds {raw!r}, not a marker type", path=path,
                                   base_path=table.base_uri,
                                   remedy="it should read TIMELINE_SERVER_BASED; fix or delete it "
                                          "after checking which writer owns the folder") from None


def list_marker_instants(table) -> list[str]:
    """Instant times that have a marker folder under ``.hoodie/.temp`` (ascending)."""
    return sorted(n for n in table.storage.list_dirs(table.temp_dir) if INSTANT_DIR_RE.match(n))
