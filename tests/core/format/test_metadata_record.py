"""The files partition's records and log block (core/format/metadata_record.py), built from
scratch, against what Java wrote into the v9 fixture's metadata table."""

from __future__ import annotations

import zipfile

from airflow_hudi_occ.core.format.hfile import read_hfile
from airflow_hudi_occ.core.format.log_file import BlockType, HeaderKey, decode_blocks, encode_block
from airflow_hudi_occ.core.format.metadata_record import (ALL_PARTITIONS_KEY, decode_record, encode_record,
                                                          files_record, hfile_data_block, partition_key,
                                                          partition_list_record, schema_json)
from airflow_hudi_occ.testing.tables import FIXTURES_DIR

V9 = FIXTURES_DIR / "v9_txns_simple_overwrite.zip"


def java_log_blocks():
    """(instant, block) of every HFile data block in the fixture's files partition."""
    with zipfile.ZipFile(V9) as z:
        for name in sorted(z.namelist()):
            if "/.hoodie/metadata/files/.files-0000-0_2026" in name:
                for block in decode_blocks(z.read(name)):
                    if block.block_type is BlockType.HFILE_DATA:
                        yield block.instant_time, block


def ours_for(java_entries) -> dict:
    """The same records, built from scratch from what each one says."""
    out = {}
    for key, value in java_entries:
        rec = decode_record(value)
        entries = rec["filesystemMetadata"]
        if key == ALL_PARTITIONS_KEY:
            out[key] = partition_list_record(added=[p for p, i in entries.items() if not i["isDeleted"]],
                                             deleted=[p for p, i in entries.items() if i["isDeleted"]])
        else:
            out[key] = files_record(added={f: i["size"] for f, i in entries.items() if not i["isDeleted"]},
                                    deleted=[f for f, i in entries.items() if i["isDeleted"]])
    return out


def test_records_built_from_scratch_encode_to_javas_bytes():
    seen = 0
    for _instant, block in java_log_blocks():
        assert block.header[HeaderKey.SCHEMA] == schema_json()
        entries = read_hfile(block.content).entries
        ours = ours_for(entries)
        for key, value in entries:
            assert encode_record(ours[key]) == value, key
            seen += 1
    assert seen == 11  # 3 blocks: the partition list and one record per partition each


def test_our_log_block_carries_what_javas_does():
    for instant, java in java_log_blocks():
        entries = read_hfile(java.content).entries
        ours = decode_blocks(encode_block(hfile_data_block(instant, ours_for(entries))))[0]
        assert ours.block_type is BlockType.HFILE_DATA and ours.header == java.header
        ours_hfile, java_hfile = read_hfile(ours.content), read_hfile(java.content)
        assert ours_hfile.entries == java_hfile.entries
        assert ours_hfile.file_info["schema"] == java_hfile.file_info["schema"]


def test_deletions_and_a_table_without_partitions():
    rec = files_record(added={"a.parquet": 10}, deleted=["b.parquet"])
    assert decode_record(encode_record(rec))["filesystemMetadata"] == {
        "a.parquet": {"size": 10, "isDeleted": False}, "b.parquet": {"size": 0, "isDeleted": True}}
    assert partition_key("") == "." and partition_key("eu") == "eu"
    parts = decode_record(encode_record(partition_list_record(added=[""], deleted=["old"])))
    assert parts["type"] == 1 and parts["key"] == "" and parts["filesystemMetadata"] == {
        ".": {"size": 0, "isDeleted": False}, "old": {"size": 0, "isDeleted": True}}


def test_a_base_file_of_javas_records_has_javas_data_and_bloom_blocks():
    """The base HFile a metadata-table compaction writes (base_file_hfile): Java's records
    written again give Java's uncompressed data block and bloom-filter block, byte for byte,
    and its file info (the schema, the bloom filter's type, the first and last key)."""
    import struct

    from airflow_hudi_occ.core.format import hfile
    from airflow_hudi_occ.core.format.metadata_record import base_file_hfile, decode_record
    from tests.core.format.test_hfile import blocks, java_hfiles
    [(name, java)] = [(k, v) for k, v in java_hfiles().items() if k.endswith(".hfile")]
    theirs = hfile.read_hfile(java)
    records = {k: decode_record(v, theirs.file_info["schema"].decode()) for k, v in theirs.entries}
    ours = base_file_hfile(records, name, create_time_ms=struct.unpack(">q", theirs.file_info["hfile.CREATE_TIME_TS"])[0],
                           stamp_file_name=False)  # the initialisation's file (a compaction's stamps its name)
    mine = hfile.read_hfile(ours)
    assert mine.entries == theirs.entries and mine.meta == theirs.meta
    assert mine.file_info == theirs.file_info
    same = {magic: a == b for (magic, a), (_, b) in zip(blocks(ours), blocks(java)) if magic != hfile.ROOT_INDEX_MAGIC}
    assert same == {hfile.DATA_MAGIC: True, hfile.META_MAGIC: True, hfile.FILE_INFO_MAGIC: same[hfile.FILE_INFO_MAGIC]}


def test_restamping_an_encoded_records_file_name_is_decoding_stamping_and_encoding_it():
    """A compaction restamps every base record with its new file's name; the ones no log
    changed are restamped in their bytes (``with_file_name``), which must be what decoding,
    setting the field and encoding again gives: on Java's records (files partition, its base
    file and its log blocks) and on names of any length (the length is a varint), and back to
    no name."""
    from airflow_hudi_occ.core.format.metadata_record import with_file_name
    from tests.core.format.test_hfile import java_hfiles
    encoded = [v for data in java_hfiles().values() for _, v in read_hfile(data).entries]
    encoded += [encode_record(r) for _, block in java_log_blocks()
                for r in (decode_record(v) for _, v in read_hfile(block.content).entries)]
    assert len(encoded) > 5
    for name in ("files-0000-0_0-0-0_20261129.hfile", "x" * 200, "é" * 70, None):
        for v in encoded:
            want = encode_record({**decode_record(v), "_hoodie_file_name": name})
            assert with_file_name(v, name) == want
            assert with_file_name(with_file_name(v, name), None) == encode_record(
                {**decode_record(v), "_hoodie_file_name": None})
