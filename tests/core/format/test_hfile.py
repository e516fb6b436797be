"""The HFile codec (core/format/hfile.py) against Hudi's own files and Hudi's own reader.

Java-written HFiles come from the v9 fixture's metadata table: its base file (with a bloom
filter meta block) and the HFile data blocks of its log files (one record per partition).
"""

from __future__ import annotations

import struct
import zipfile
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_hudi_occ.core.errors import CorruptMetadataError
from airflow_hudi_occ.core.format import hfile
from airflow_hudi_occ.core.format.hfile import read_hfile, write_hfile
from airflow_hudi_occ.core.format.log_file import BlockType, decode_blocks
from airflow_hudi_occ.testing.tables import FIXTURES_DIR

V9 = FIXTURES_DIR / "v9_txns_simple_overwrite.zip"


def java_hfiles() -> dict[str, bytes]:
    """name -> bytes of every HFile Java wrote into the v9 fixture's metadata table."""
    out = {}
    with zipfile.ZipFile(V9) as z:
        for name in z.namelist():
            if "/.hoodie/metadata/files/" not in name:
                continue
            short = name.rsplit("/", 1)[1]
            if short.endswith(".hfile"):
                out[short] = z.read(name)
            elif ".log." in short:
                for i, block in enumerate(decode_blocks(z.read(name))):
                    if block.block_type is BlockType.HFILE_DATA:
                        out[f"{short}#{i}"] = block.content
    return out


def blocks(data: bytes) -> list[tuple[bytes, bytes]]:
    """(magic, uncompressed payload) of every block before the trailer, in file order."""
    trailer = hfile.HFileTrailer.decode(data[-hfile.TRAILER_SIZE:])
    out, pos = [], 0
    while pos < len(data) - hfile.TRAILER_SIZE:
        magic, payload, size = hfile._read_block(data, pos, trailer.compression, None)
        out.append((magic, payload))
        pos += size
    return out


def test_reads_every_hfile_java_wrote_into_the_metadata_table():
    files = java_hfiles()
    assert len(files) == 4
    for name, data in files.items():
        h = read_hfile(data, path=name)
        keys = [k for k, _ in h.entries]
        assert keys[0] == "__all_partitions__" and keys == sorted(keys), name
        assert h.trailer.entry_count == len(keys) and h.trailer.compression == hfile.COMPRESSION_GZ
        assert h.file_info["hfile.LASTKEY"] == struct.pack(">h", len(keys[-1])) + keys[-1].encode()
        assert "schema" in h.file_info
        if name.endswith(".hfile"):  # the base file: the bloom filter as a meta block
            assert list(h.meta) == ["bloomFilter"] and len(h.meta["bloomFilter"]) > 1000
        else:  # the log blocks: one record per partition the commit touched
            assert set(keys[1:]) <= {"apac", "eu", "us"} and len(keys) >= 3
            assert h.meta == {}


@pytest.mark.parametrize("name", sorted(java_hfiles()))
def test_our_blocks_equal_javas_before_compression(name):
    """Written again from what was read (Java's file-info entries given, its creation time
    kept), every data and meta block's uncompressed content equals Java's byte for byte; the
    index blocks name the same keys (their offsets and sizes follow the compressed sizes, and
    our deflate is not Java's), and the file-info map holds the same entries (Java orders them
    by its hash map)."""
    java = java_hfiles()[name]
    h = read_hfile(java)
    own = {k: v for k, v in h.file_info.items() if not k.startswith("hfile.") and k not in (
        "KEY_VALUE_VERSION", "MAX_MEMSTORE_TS_KEY")}
    ours = write_hfile(h.entries, meta=h.meta, file_info=own,
                       create_time_ms=struct.unpack(">q", h.file_info["hfile.CREATE_TIME_TS"])[0])
    theirs, mine = blocks(java), blocks(ours)
    assert [m for m, _ in theirs] == [m for m, _ in mine]
    counts = iter([h.trailer.data_index_count, h.trailer.meta_index_count])  # data index, then meta
    for (magic, a), (_, b) in zip(theirs, mine):
        if magic == hfile.ROOT_INDEX_MAGIC:
            count = next(counts)
            assert [k for *_, k in hfile._read_index(a, count)] == [k for *_, k in hfile._read_index(b, count)]
        elif magic != hfile.FILE_INFO_MAGIC:
            assert a == b, magic
    again = read_hfile(ours)
    assert again.entries == h.entries and again.meta == h.meta and again.file_info == h.file_info
    t, m = hfile.HFileTrailer.decode(java[-4096:]), hfile.HFileTrailer.decode(ours[-4096:])
    for f in ("uncompressed_data_index_size", "total_uncompressed_bytes", "data_index_count", "meta_index_count",
              "entry_count", "num_data_index_levels", "first_data_block_offset", "comparator", "compression",
              "major_version", "minor_version"):
        assert getattr(t, f) == getattr(m, f), f


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=40), st.binary(max_size=300), min_size=1, max_size=200),
       st.sampled_from(["GZ", "NONE"]), st.sampled_from([256, 4096, hfile.DEFAULT_BLOCK_SIZE]))
def test_round_trip(entries, compression, block_size):
    data = write_hfile(entries, meta={"bloomFilter": b"\x01" * 50}, file_info={"schema": b"{}"},
                       compression=compression, block_size=block_size)
    h = read_hfile(data)
    want = sorted(((k.encode(), v) for k, v in entries.items()))
    assert [(k.encode(), v) for k, v in h.entries] == want
    assert h.meta == {"bloomFilter": b"\x01" * 50} and h.file_info["schema"] == b"{}"
    assert h.trailer.data_index_count >= 1 and h.trailer.entry_count == len(entries)
    for key, value in entries.items():
        assert h.get(key) == value
    assert h.get("\x00not-there") is None


def test_small_blocks_split_the_data_and_repeated_keys_keep_their_order():
    entries = [(f"k{i:04d}", bytes([i % 256]) * 100) for i in range(300)] + [("k0001", b"second")]
    h = read_hfile(write_hfile(entries, block_size=1024, compression="NONE"))
    assert h.trailer.data_index_count > 20
    assert [k for k, _ in h.entries] == sorted(k for k, _ in entries)
    assert [v for k, v in h.entries if k == "k0001"] == [b"\x01" * 100, b"second"]


@pytest.mark.parametrize("damage", ["truncated", "trailer_magic", "version", "block_magic", "gzip"])
def test_damaged_files_are_refused_naming_the_file(damage):
    data = bytearray(write_hfile({"a": b"1", "b": b"2"}))
    if damage == "truncated":
        data = data[:100]
    elif damage == "trailer_magic":
        data[-4096] ^= 0xFF
    elif damage == "version":
        data[-1] = 2
    elif damage == "block_magic":
        data[0:8] = b"NOTABLK!"
    elif damage == "gzip":
        data[hfile.HEADER_SIZE + 12] ^= 0xFF
    with pytest.raises(CorruptMetadataError) as e:
        read_hfile(bytes(data), path="files/x.hfile")
    assert e.value.path == "files/x.hfile" and "files/x.hfile" in e.value.message and e.value.remedy


def test_empty_and_invalid_input_is_refused_before_writing():
    with pytest.raises(ValueError):
        write_hfile({})
    with pytest.raises(ValueError):
        write_hfile({"a": b""}, compression="LZO")
    with pytest.raises(ValueError):
        write_hfile({"x" * 40000: b""})


def test_gzip_blocks_are_plain_gzip_streams():
    """Java reads block data with a GZIP input stream: ours must carry the gzip header."""
    data = write_hfile({"a": b"1"})
    first = data[hfile.HEADER_SIZE:]
    assert first[:2] == b"\x1f\x8b"
    assert zlib.decompress(first, 31)[:8] == struct.pack(">ii", 2 + 1 + hfile.KEY_TAIL_SIZE, 1)
