"""The codec of marker names (``markers/names``): render and parse round-trip, garbage is
refused, and what a writer may create stays inside its instant's folder."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_hudi_occ.core.errors import CorruptMetadataError, UnsafePathError
from airflow_hudi_occ.core.concurrency.markers.names import (IOType, Marker, new_marker, parse_marker,
                                                            try_parse_marker)

from tests.core.concurrency.markers import fname

_part = st.lists(st.from_regex(r"[a-z0-9=\-]{1,8}", fullmatch=True), min_size=0, max_size=3).map("/".join)
_fid = st.from_regex(r"[a-z0-9\-]{1,12}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(_part, _fid, st.sampled_from(list(IOType)), st.booleans())
def test_marker_path_round_trip(partition, file_id, io_type, log_file):
    name = f".{file_id}_20250101000000001.log.1_0-1-2" if log_file else fname(file_id)
    m = Marker(partition, name, io_type)
    assert m.relative_path.endswith(f".marker.{io_type.value}")
    assert m.relative_path.startswith(f"{partition}/") == bool(partition)
    back = parse_marker(m.relative_path)
    assert back == m
    assert try_parse_marker(m.relative_path) == m
    # what a writer renders is the marker it meant (IO type by name, any case; slashes trimmed)
    assert new_marker(f"/{partition}/", name, io_type.value.lower()) == m
    assert back.file_id == file_id
    assert back.data_file_path == (f"{partition}/{name}" if partition else name)


def test_marker_name_and_file_id():
    m = Marker("2022/07/01", "ff26cb9e-0_1-0-1_20220701000000000.parquet", IOType.MERGE)
    assert m.name == "ff26cb9e-0_1-0-1_20220701000000000.parquet.marker.MERGE"
    assert m.relative_path == "2022/07/01/" + m.name
    assert m.file_id == "ff26cb9e-0"
    assert Marker("", "abc_1_2.parquet", IOType.CREATE).relative_path == "abc_1_2.parquet.marker.CREATE"


@pytest.mark.parametrize("garbage", [
    "", "   ", "p/file.parquet", "p/file.parquet.marker.", "p/file.parquet.marker.DELETE",
    "/abs/f_1_2.parquet.marker.CREATE", "p//f_1_2.parquet.marker.CREATE",
    "p/../f_1_2.parquet.marker.CREATE", "p/.marker.CREATE", "p/_x.marker.CREATE",
])
def test_parse_marker_rejects_garbage(garbage):
    with pytest.raises(CorruptMetadataError):
        parse_marker(garbage)
    assert try_parse_marker(garbage) is None


@pytest.mark.parametrize("partition, name, io_type, error", [
    ("..", fname("a"), "CREATE", UnsafePathError),
    ("a//b", fname("a"), "CREATE", UnsafePathError),
    ("p", "sub/" + fname("a"), "CREATE", ValueError),
    ("p", "", "CREATE", ValueError),
    ("p", fname("a"), "DELETE", ValueError),
])
def test_new_marker_refuses_what_would_not_parse_back(partition, name, io_type, error):
    with pytest.raises(error):
        new_marker(partition, name, io_type)


