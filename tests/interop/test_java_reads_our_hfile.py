"""Hudi's own HFile reader (hudi-io's ``HFileReaderImpl``, what Java's metadata table reads
with) reads the HFiles our codec (core/format/hfile.py) writes: every entry in order, point
lookups, meta blocks and file info; GZ and NONE, one and many data blocks."""

from __future__ import annotations

import struct

import pytest

from airflow_hudi_occ.core.format.hfile import read_hfile, write_hfile
from airflow_hudi_occ.testing.java_hudi import ReadHFile
from tests.core.format.test_hfile import java_hfiles

FOUND, BEFORE_FIRST, PAST_END = 0, -1, 2


@pytest.mark.slow  # the default run has Java read ours through the metadata table (test_java_metadata_table)
def test_java_reads_the_hfiles_we_write(tmp_path, java_hudi):
    many = {f"{p}/part-{i:05d}": (f"value of {i} é".encode() * (1 + i % 7)) for p in ("apac", "eu", "us")
            for i in range(400)}
    small = {"__all_partitions__": b"\x00\x01", "eu": b"\x02" * 40, "us": b""}
    base = next(v for k, v in java_hfiles().items() if k.endswith(".hfile"))
    theirs = read_hfile(base)
    cases = {
        "many-gz": (write_hfile(many, block_size=4096), many, {}, {}),
        "small-none": (write_hfile(small, compression="NONE", meta={"bloomFilter": b"\x07" * 300},
                                   file_info={"schema": b"{}"}), small, {"bloomFilter": b"\x07" * 300}, {"schema": b"{}"}),
        "javas-base-file-again": (write_hfile(theirs.entries, meta=theirs.meta,
                                              file_info={"schema": theirs.file_info["schema"]}),
                                  dict(theirs.entries), theirs.meta, {"schema": theirs.file_info["schema"]}),
    }
    steps = []
    for name, (data, entries, meta, info) in cases.items():
        f = tmp_path / f"{name}.hfile"
        f.write_bytes(data)
        keys = sorted(entries)
        steps.append(ReadHFile(str(f), lookups=["\x00", keys[0], keys[len(keys) // 2], keys[-1], "\U0010ffff"],
                               meta=[*meta, "absent"], info=[*info, "hfile.LASTKEY"]))
    assert read_hfile((tmp_path / "many-gz.hfile").read_bytes()).trailer.data_index_count > 10

    results = java_hudi.run(*steps)
    for (name, (data, entries, meta, info)), result in zip(cases.items(), results):
        got = result.hfile()
        keys = sorted(entries)
        assert got["count"] == len(entries), name
        assert got["entries"] == sorted(entries.items()), name
        assert got["lookups"] == {keys[0]: FOUND, keys[len(keys) // 2]: FOUND, keys[-1]: FOUND,
                                  "\x00": BEFORE_FIRST, "\U0010ffff": PAST_END}, name
        assert got["meta"] == {**meta, "absent": None}, name
        last = keys[-1].encode()
        assert got["info"] == {**info, "hfile.LASTKEY": struct.pack(">h", len(last)) + last}, name
