"""Write markers: the record of every data file an instant is about to write.

A marker is created *before* its data file, so the markers of an instant are always a superset
of the files it wrote. Two readers depend on that: rollback (a failed instant's markers name
the files to delete) and early conflict detection (an earlier, still running writer's markers
say which file groups it is writing). Markers live under ``.hoodie/.temp/<instant>/`` and are
deleted when the instant completes.

The family, one concept per module, each importing only those before it:

- ``names``: the codec of marker names, ``<partition>/<datafile>.marker.<IOTYPE>``:
  :func:`new_marker` and :attr:`Marker.relative_path` render, :func:`parse_marker` and
  :func:`try_parse_marker` parse (the round trip is tested), plus the file-group keys;
- ``files``: batched ``MARKERS<n>`` files read tolerantly and cached by (size, mtime);
- ``folder``: an instant's marker folder, its ``MARKERS.type``, the instants that have one;
- ``write_markers``: the markers of one instant in Hudi's two layouts, direct and batched, and
  :func:`markers_for`, which picks the layout from the folder.

Import from this package; its names are the family's API (the 0.2 modules
``concurrency.marker_names`` and ``concurrency.marker_files`` still import, with a
``DeprecationWarning``, through ``core/_moved``).
"""

from __future__ import annotations

from airflow_hudi_occ.core.concurrency.markers.names import (  # noqa: F401
    DEFAULT_MAX_LINES_PER_FILE, INSTANT_DIR_RE, MARKER_INFIX, MARKER_SUFFIXES, MARKERS_FILE_PREFIX,
    MARKERS_FILE_RE, MARKERS_TYPE_FILE, TEMP_FOLDER, IOType, Marker, file_id_of, group_key,
    group_of_line, marker_partition, new_marker, parse_marker, split_group_key, try_parse_marker)
from airflow_hudi_occ.core.concurrency.markers.files import (  # noqa: F401
    EMPTY_CONTENT, MarkerFileContent, clear_cache, parse_marker_lines, read_marker_file, stat_key)
from airflow_hudi_occ.core.concurrency.markers.folder import (  # noqa: F401
    list_marker_instants, marker_dir, markers_file_names, read_marker_type)
from airflow_hudi_occ.core.concurrency.markers.write_markers import (  # noqa: F401
    BatchedWriteMarkers, DirectWriteMarkers, WriteMarkers, markers_for)

__all__ = [
    "BatchedWriteMarkers", "DirectWriteMarkers", "IOType", "Marker", "MarkerFileContent",
    "WriteMarkers", "clear_cache", "file_id_of", "group_key", "list_marker_instants",
    "marker_dir", "marker_partition", "markers_file_names", "markers_for", "new_marker",
    "parse_marker", "parse_marker_lines", "read_marker_file", "read_marker_type",
    "split_group_key", "stat_key", "try_parse_marker",
]
