"""The bucket index: a record's file group is fixed by a hash of its key.

With the simple index, two writers that insert the same *new* key at the same time put it in
two different new file groups: no file group overlaps, so OCC sees no conflict and the key
ends up twice (Hudi's documented limitation). The bucket index closes that hole: the bucket
is a function of the key, every writer maps it to the same ``(partition, bucket)``, and the
bucket strategy treats equal bucket numbers as a conflict even when the fileIds differ.

The hash is Java Hudi's (``BucketIdentifier``): ``List<String>.hashCode()`` of the index key
field values, masked positive, modulo the number of buckets, so buckets agree with tables
Java Hudi writes.
"""

from __future__ import annotations

from typing import Any, Iterable

from airflow_hudi_occ.core.config import IndexConfig

#: the fixed tail of a bucket's fileId under non-blocking concurrency control (Java's
#: ``BucketIdentifier.CONSTANT_FILE_ID_SUFFIX``): every writer names a bucket's file group alike
NBCC_FILE_ID_SUFFIX = "-0000-0000-0000-000000000000"


def java_string_hash(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def java_list_hash(values: Iterable[str | None]) -> int:
    h = 1
    for v in values:
        h = (31 * h + (0 if v is None else java_string_hash(v))) & 0xFFFFFFFF
    return h


def bucket_id(values: Iterable[Any], num_buckets: int) -> int:
    """The bucket of one record, from its index key field values (Java Hudi's formula)."""
    strs = [None if v is None else str(v) for v in values]
    return (java_list_hash(strs) & 0x7FFFFFFF) % num_buckets


def hash_fields(index: IndexConfig, record_key_fields: list[str]) -> list[str]:
    """The fields the bucket hash reads: ``hoodie.bucket.index.hash.field``, else the record key."""
    return list(index.hash_fields) or list(record_key_fields)


def nbcc_file_id(bucket: int) -> str:
    """A bucket's fileId under NBCC, ``<8-digit bucket>-0000-0000-0000-000000000000-0`` (Java's
    ``BucketIdentifier.newBucketFileIdForNBCC``): writers that create the same new bucket at
    the same time name the same file group, instead of one each."""
    return f"{bucket:08d}{NBCC_FILE_ID_SUFFIX}-0"
