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

Import a name from the module that defines it (``tests/test_layers.py`` checks it).
"""
