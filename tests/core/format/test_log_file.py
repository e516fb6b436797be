"""Hudi's log file codec: names and blocks round-trip, and the byte layout is Java's."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.format.log_file import (MAGIC, BlockType, DeleteRecord, HeaderKey, LogFileName,
                                                   LogFormatError, avro_data_block, decode_blocks,
                                                   delete_block, encode_block, encode_blocks,
                                                   parquet_data_block, read_avro_records,
                                                   read_delete_records, read_parquet_block,
                                                   rollback_block, table_avro_schema)
from airflow_hudi_occ.core.format.schema import arrow_to_avro

T1, T2 = "20250101000000000", "20250101000000001"


def test_name_round_trip_and_hudi_rs_example():
    name = ".54e9a5e9-ee5d-4ed2-acee-720b5810d380-0_20250109233025121.log.1_0-51-115"
    lf = LogFileName.parse(name)
    assert lf == LogFileName("54e9a5e9-ee5d-4ed2-acee-720b5810d380-0", "20250109233025121", 1, "0-51-115")
    assert lf.name == name
    assert LogFileName("f-0", T1, 12, "1-2-3").name == f".f-0_{T1}.log.12_1-2-3"


@pytest.mark.parametrize("name", ["f-0_0-0-0_20250101000000000.parquet", ".hoodie_partition_metadata",
                                  f"f-0_{T1}.log.1_0-0-0", f".f-0_{T1}.log.x_0-0-0",
                                  f".f-0_{T1}.cdc.1_0-0-0", f".f-0_{T1}.log.1_",
                                  # Hadoop's checksum file of a log file (Java Hudi on a local disk)
                                  f"..f-0_{T1}.log.1_0-0-0.crc"])
def test_other_names_are_not_log_files(name):
    assert LogFileName.parse(name) is None


def test_fileid_with_underscore_is_refused():
    with pytest.raises(ValueError):
        LogFileName("a_b", T1).name


def test_block_layout_is_javas():
    b = rollback_block(T2, T1)
    raw = encode_block(b)
    assert raw[:6] == MAGIC
    (length,) = struct.unpack(">q", raw[6:14])
    assert length == len(raw) - 14  # everything after the length field
    assert struct.unpack(">ii", raw[14:22]) == (1, BlockType.COMMAND)
    # the reverse pointer: the bytes from the magic to the end of the footer
    assert struct.unpack(">q", raw[-8:])[0] == len(raw) - 8
    [back] = decode_blocks(raw)
    assert back.is_rollback and back.target_instant_time == T1 and back.instant_time == T2


def test_avro_block_round_trip():
    data = pa.table({"id": [1, 2], "v": ["a", None], "x": [1.5, 2.5]})
    schema = table_avro_schema(arrow_to_avro(data.schema, "t"))
    assert [f["name"] for f in schema["fields"]][:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno",
                                                          "_hoodie_record_key", "_hoodie_partition_path",
                                                          "_hoodie_file_name"]
    import json
    recs = [{"_hoodie_commit_time": T1, "_hoodie_commit_seqno": f"{T1}_0_{i}", "_hoodie_record_key": str(r["id"]),
             "_hoodie_partition_path": "", "_hoodie_file_name": "f-0", **r} for i, r in enumerate(data.to_pylist())]
    b = avro_data_block(T1, json.dumps(schema), recs)
    [back] = decode_blocks(encode_blocks([b]))
    assert back.block_type is BlockType.AVRO_DATA and back.header[HeaderKey.INSTANT_TIME] == T1
    assert read_avro_records(back) == recs


def test_delete_block_round_trip_keeps_the_ordering_branch():
    dels = [DeleteRecord("k1", "p", 0, "long"), DeleteRecord("k2", "p", 7, "int")]
    raw = encode_block(delete_block(T1, "{}", dels))
    [back] = decode_blocks(raw)
    got = read_delete_records(back)
    assert [(d.record_key, d.partition_path, d.ordering_value) for d in got] == [("k1", "p", 0), ("k2", "p", 7)]
    # union branch 2 (long) for the first record, branch 1 (int) for the second
    assert b"\x04k1\x02\x02p\x04\x00" in back.content


def test_parquet_block_round_trip():
    t = pa.table({"_hoodie_record_key": ["1"], "v": [3]})
    [back] = decode_blocks(encode_block(parquet_data_block(T1, "{}", t)))
    assert read_parquet_block(back).equals(t)


def test_several_blocks_and_a_truncated_tail():
    raw = encode_blocks([rollback_block(T2, T1), delete_block(T2, "{}", [DeleteRecord("k", "", 0, "int")])])
    assert [b.block_type for b in decode_blocks(raw)] == [BlockType.COMMAND, BlockType.DELETE]
    cut = raw[:-5]
    with pytest.raises(LogFormatError):
        decode_blocks(cut)
    assert [b.block_type for b in decode_blocks(cut, allow_truncated_tail=True)] == [BlockType.COMMAND]
    with pytest.raises(LogFormatError):
        decode_blocks(b"#HUDX#" + raw[6:])
