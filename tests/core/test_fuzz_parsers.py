"""Hostile input for every metadata parser (hypothesis): only typed HudiOccError may escape.

The parsers read files other processes (or other engines, or a broken disk) wrote. Whatever the
bytes, a parser must either return a value or raise a HudiOccError subclass (usually
CorruptMetadataError) naming the file; never a raw KeyError / UnicodeDecodeError / fastavro
internals. Truncated files are the most common real corruption, so every prefix of a valid
file is checked too.
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.errors import HudiOccError
from airflow_hudi_occ.core.concurrency.heartbeat import is_expired, list_heartbeats
from airflow_hudi_occ.core.config import HeartbeatConfig, WriteConfig
from airflow_hudi_occ.core.format.instant import parse_file_name
from airflow_hudi_occ.core.concurrency.locks.filesystem import _parse as parse_lock_file
from airflow_hudi_occ.core.concurrency.markers.files import (MarkerFileContent, parse_marker_lines,
                                                             read_marker_file)
from airflow_hudi_occ.core.concurrency.markers.names import parse_marker
from airflow_hudi_occ.core.format.metadata import (CommitMetadata, RequestedReplaceMetadata, RollbackMetadata,
                                            RollbackPlan, WriteStat, decode_record)
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.format.properties import parse_properties, render_properties
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter

FUZZ = settings(max_examples=int(os.environ.get("HUDI_OCC_FUZZ_EXAMPLES", "150")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

DECODERS = [CommitMetadata.decode, RequestedReplaceMetadata.decode, RollbackPlan.decode,
            RollbackMetadata.decode]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=25), children, max_size=4),
    max_leaves=20)

# Shapes close to real metadata, so the fuzzer reaches past the first isinstance check.
KEYS = ["partitionToWriteStats", "extraMetadata", "operationType", "partitionToReplaceFileIds",
        "compacted", "inputGroups", "slices", "fileId", "partitionPath", "instantToRollback",
        "commitTime", "action", "filesToBeDeleted", "partitionMetadata", "commitsRollback",
        "instantsRollback", "successDeleteFiles", "startRollbackTime", "version", "path",
        "numWrites", "prevCommit", "dataFilePath", "clusteringPlan", "operation"]
near_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.sampled_from(KEYS) | st.text(max_size=8), children, max_size=5),
    max_leaves=25)


def only_typed(fn, *args):
    try:
        return fn(*args)
    except HudiOccError:
        return None


@FUZZ
@given(st.binary(max_size=400))
def test_metadata_decoders_on_random_bytes(data):
    for dec in DECODERS:
        only_typed(dec, data, "f")
    for magic in (b"Obj\x01", b"{"):
        for dec in DECODERS:
            only_typed(dec, magic + data, "f")


@FUZZ
@given(near_json)
def test_metadata_decoders_on_json_shapes(doc):
    data = json.dumps(doc).encode()
    for dec in DECODERS:
        only_typed(dec, data, "f")


def _valid_files():
    stat = WriteStat(file_id="f1", path="p0/f1_0-0-1_20240101000000000.parquet", partition_path="p0",
                     num_writes=3, num_inserts=3)
    return [CommitMetadata.from_stats([stat], operation_type="UPSERT",
                                      extra_metadata={"a": "b"}).encode(),
            RollbackPlan("20240101000000000", "commit", {"p0": ["p0/x.parquet"]}).encode(),
            RollbackMetadata("20240101000000001", [("20240101000000000", "commit")],
                             {"p0": ["p0/x.parquet"]}).encode(),
            json.dumps(CommitMetadata.from_stats([stat], operation_type="UPSERT").to_json()).encode()]


def test_every_truncation_of_valid_metadata():
    for data in _valid_files():
        for n in range(len(data)):
            for dec in DECODERS:
                only_typed(dec, data[:n], "f")


@FUZZ
@given(st.binary(max_size=60), st.integers(min_value=0, max_value=10_000))
def test_metadata_bit_flips(noise, pos):
    for data in _valid_files():
        i = pos % len(data)
        corrupted = data[:i] + noise + data[i + len(noise):]
        for dec in DECODERS:
            only_typed(dec, corrupted, "f")


@FUZZ
@given(st.text(max_size=300))
def test_properties_parser_never_raises(text):
    assert isinstance(parse_properties(text), dict)


@FUZZ
@given(st.dictionaries(st.text(min_size=1, max_size=15), st.text(max_size=20), max_size=6))
def test_properties_round_trip(props):
    """What we render, we (and Java) read back."""
    assert parse_properties(render_properties(props)) == props


def test_hoodie_properties_hostile_files(tmp_path):
    """Table.open on truncated / garbage hoodie.properties: a typed error or a sane table."""
    base = tmp_path / "t"
    t = Table.create(str(base), "t", record_key_fields=["id"], partition_fields=["p"])
    path = base / ".hoodie" / "hoodie.properties"
    good = path.read_bytes()
    cases = [good[:n] for n in range(0, len(good), 7)] + [b"\xff\xfe\x00garbage", b"=\n=\n",
                                                          good.replace(b"=8", b"=x")]
    for data in cases:
        path.write_bytes(data)
        only_typed(Table.open, str(base))
    path.unlink()
    only_typed(Table.open, str(base))
    assert t.name == "t"


@FUZZ
@given(st.text(max_size=80))
def test_marker_path_parser(s):
    only_typed(parse_marker, s)


@FUZZ
@given(st.binary(max_size=500))
def test_marker_file_parsers(data):
    lines = parse_marker_lines(data)
    c = MarkerFileContent(data.decode("utf-8", errors="replace"))
    _ = (c.lines, c.keys, lines)
    for attr in ("groups", "by_partition", "markers"):
        if hasattr(c, attr):
            only_typed(getattr, c, attr)


def test_marker_file_reader_on_garbage(tmp_path):
    from airflow_hudi_occ.core.format.storage import Storage
    s = Storage(str(tmp_path))
    for i, data in enumerate([b"", b"\x00" * 10, b"p0/a_1-0-1_1.parquet.marker.CREATE\np0/trunc",
                              os.urandom(300), "é\r\n".encode() * 5]):
        p = str(tmp_path / f"MARKERS{i}")
        with open(p, "wb") as f:
            f.write(data)
        c = read_marker_file(s, p)
        _ = (c.lines, c.keys)
    os.mkdir(tmp_path / "MARKERS_dir")
    read_marker_file(s, str(tmp_path / "MARKERS_dir"))


@FUZZ
@given(st.text(max_size=60))
def test_instant_file_names(name):
    inst = parse_file_name(name)
    if inst is not None:  # what parses must render back to a name that parses the same
        assert parse_file_name(inst.file_name()) == inst


@FUZZ
@given(st.lists(st.text(alphabet="0123456789._-acdeimlnoqrstu", min_size=1, max_size=40), max_size=8),
       st.binary(max_size=80))
def test_timeline_with_hostile_files(tmp_path_factory, names, data):
    base = tmp_path_factory.mktemp("tl")
    t = Table.create(str(base / "t"), "t", record_key_fields=["id"])
    for n in names:
        if n in (".", "..") or "/" in n:
            continue
        p = os.path.join(t.timeline_dir, n)
        if not os.path.exists(p):
            with open(p, "wb") as f:
                f.write(data)
    tl = only_typed(t.timeline)
    if tl is not None:
        for inst in tl:
            if inst.is_completed and inst.is_write:
                only_typed(tl.commit_metadata, inst)
        only_typed(lambda: ArrowTableWriter(t, WriteConfig.from_options(
            {"hoodie.write.lock.provider": "inprocess"})).write(pa.table({"id": [1]})))


@FUZZ
@given(st.lists(st.text(min_size=1, max_size=20).filter(lambda n: "/" not in n and n not in (".", "..")
                                                          and "\x00" not in n), max_size=6))
def test_heartbeat_folder_with_hostile_names(tmp_path_factory, names):
    t = Table.create(str(tmp_path_factory.mktemp("hb") / "t"), "t", record_key_fields=["id"])
    for n in names:
        p = os.path.join(t.heartbeat_dir, n)
        if not os.path.exists(p):
            os.mkdir(p) if n.startswith("d") else open(p, "wb").close()
    beats = list_heartbeats(t)
    assert all(b.isdigit() for b in beats)
    for b in beats:
        assert isinstance(is_expired(t, b, HeartbeatConfig(1000, 2)), bool)


@FUZZ
@given(st.binary(max_size=200))
def test_lock_file_content(data):
    assert isinstance(parse_lock_file(data), dict)


@FUZZ
@given(st.lists(st.binary(max_size=120) | near_json.map(lambda d: json.dumps(d).encode()), max_size=5))
def test_attempt_log_with_hostile_records(tmp_path_factory, docs):
    t = Table.create(str(tmp_path_factory.mktemp("al") / "t"), "t", record_key_fields=["id"])
    d = t.storage.path(".hoodie", ".aux", "occ", "attempts")
    os.makedirs(d, exist_ok=True)
    for i, data in enumerate(docs):
        with open(os.path.join(d, f"2024010100000000{i}.json"), "wb") as f:
            f.write(data)
    for rec in attempt_log.read_records(t):
        json.dumps(rec.to_json(), default=str)


def test_decode_record_names_the_file():
    try:
        decode_record(b"Obj\x01\x02garbage", "/x/.hoodie/timeline/1.commit")
    except HudiOccError as e:
        assert "/x/.hoodie/timeline/1.commit" in str(e)
    else:
        raise AssertionError("garbage decoded")
