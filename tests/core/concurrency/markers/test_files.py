"""Batched MARKERS files (``markers/files``): tolerant reading of files that are cut or being
replaced, the cache that must never hide a grown file, and the bulk file-group keys."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_hudi_occ.core.concurrency.markers.write_markers import BatchedWriteMarkers, markers_for
from airflow_hudi_occ.core.concurrency.markers.names import IOType, Marker, group_key
from airflow_hudi_occ.core.concurrency.markers.files import MarkerFileContent, read_marker_file
from airflow_hudi_occ.core.concurrency.markers.folder import marker_dir

from tests.core.concurrency.markers import T1, fname, make_table

_fid = st.from_regex(r"[a-z0-9\-]{1,12}", fullmatch=True)


def _write(table, name: str, data: bytes) -> None:
    d = marker_dir(table, T1)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def test_cut_and_garbage_marker_files_are_tolerated(tmp_path):
    table = make_table(tmp_path)
    _write(table, "MARKERS.type", b"TIMELINE_SERVER_BASED")
    full = "".join(f"p/{fname(f'f{i}')}.marker.CREATE\n" for i in range(3))
    _write(table, "MARKERS0", (full + f"p/{fname('cut')}.marker.CRE").encode())  # cut mid-line
    _write(table, "MARKERS1", b"")                                             # just claimed
    _write(table, "MARKERS2", b"\x00\xff\xfe garbage \n\x80")                  # not text at all
    _write(table, "MARKERS3", f"p/{fname('whole')}.marker.MERGE".encode())     # cut right at the end
    _write(table, "MARKERS4", f"p/{fname('half')}_0-0".encode())              # cut inside the name
    _write(table, "MARKERSX", f"p/{fname('nope')}.marker.CREATE\n".encode())   # not a MARKERS<n>
    markers = markers_for(table, T1)
    assert isinstance(markers, BatchedWriteMarkers)
    assert markers.file_ids_in_partition("p") == {"f0", "f1", "f2", "whole"}
    assert {m.file_id for m in markers.all_markers()} == {"f0", "f1", "f2", "whole"}


def test_a_growing_file_is_reread(tmp_path):
    """The per-file cache must never hide a marker appended later."""
    table = make_table(tmp_path)
    path = os.path.join(marker_dir(table, T1), "MARKERS0")
    lines = ""
    for i in range(20):
        lines += f"p/{fname(f'f{i}')}.marker.CREATE\n"
        _write(table, "MARKERS0", lines.encode())
        assert len(read_marker_file(table.storage, path).lines) == i + 1


_odd_part = st.lists(st.from_regex(r"[a-z0-9_.=\-]{1,8}", fullmatch=True).filter(lambda c: c not in (".", "..")),
                     min_size=0, max_size=3).map("/".join)
_odd_name = st.one_of(
    st.builds(lambda f, t: f"{f}_{t}_20250101000000001.parquet", _fid, st.from_regex(r"[0-9\-]{1,6}", fullmatch=True)),
    st.builds(lambda f: f".{f}_20250101000000001.log.1_0-1-2", _fid),   # log file
    st.builds(lambda f: f"{f}.parquet", _fid),                            # no "_" at all
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_odd_part, _odd_name, st.sampled_from(list(IOType))), max_size=12),
       st.booleans())
def test_bulk_file_group_keys_match_the_exact_parser(items, crlf):
    """The batched checker's fast key extraction must agree with parse_marker on every shape."""
    markers = [Marker(p, n, t) for p, n, t in items]
    sep = "\r\n" if crlf else "\n"
    content = MarkerFileContent("".join(m.relative_path + sep for m in markers))
    assert set(content.keys) == {group_key(*m.file_group) for m in markers}
    assert content.file_groups == {m.file_group for m in markers}
    assert set(content.markers) == set(markers)


