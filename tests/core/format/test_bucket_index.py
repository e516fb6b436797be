"""Bucket index: the same new key written by two concurrent writers conflicts instead of
appearing twice (the simple index's documented hole), checked with real processes."""

import multiprocessing as mp

import pyarrow as pa

from airflow_hudi_occ.core.format.bucket_index import bucket_id, java_list_hash, java_string_hash
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.core.format.layout import bucket_id_of
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key
from airflow_hudi_occ.testing.workers import commit_after_barrier


def test_hash_matches_java():
    assert java_string_hash("hello") == 99162322          # "hello".hashCode()
    assert java_string_hash("héllo") == 103094734          # UTF-16 code units (checked with javac)
    assert java_list_hash(["5"]) == 84                       # Arrays.asList("5").hashCode()
    assert bucket_id(["5"], 4) == 84 % 4


def _opts(fast_options):
    return fast_options | {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "4"}


def test_every_key_lives_in_its_bucket_file_group(table, fast_options):
    w = ArrowTableWriter(table, WriteConfig.from_options(_opts(fast_options)))
    for v in ("a", "b"):
        w.write(pa.table({"id": list(range(40)), "p": ["p0"] * 40, "value": [v] * 40, "ts": [1] * 40}))
    w.write(pa.table({"id": [100, 3], "p": ["p0"] * 2, "value": ["c"] * 2, "ts": [2] * 2}))
    slices = FileSystemView(table).latest_file_slices("p0")
    assert len(slices) == 4 and sorted(int(bucket_id_of(s.file_id)) for s in slices) == [0, 1, 2, 3]
    t = hudi_read(table.base_uri)
    for key, fname in zip(t.column("id").to_pylist(), t.column("_hoodie_file_name").to_pylist()):
        assert int(fname[:8]) == bucket_id([key], 4)
    got = rows_by_key(t)
    assert len(got) == 41 and got[3]["value"] == "c" and got[100]["value"] == "c" and got[7]["value"] == "b"


def test_concurrent_inserts_of_the_same_new_key_conflict(table, fast_options):
    opts = _opts(fast_options)
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    q = ctx.Queue()
    procs = [ctx.Process(target=commit_after_barrier,
                         args=(table.base_uri, opts, [{"id": 7, "p": "p0", "value": f"w{i}", "ts": 1}],
                               barrier, q, f"w{i}")) for i in range(2)]
    for p in procs:
        p.start()
    out = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert sorted(r["outcome"] for r in out) == ["committed", "conflict"]
    t = hudi_read(table.base_uri)
    assert t.column("id").to_pylist() == [7]
