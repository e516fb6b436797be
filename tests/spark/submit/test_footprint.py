"""The batch's partitions read before submission (spark/submit/footprint.py): as the job spells
them (core's partition-path rule, hive style, url-encoding), from parquet, csv and json, and
unknown (None) wherever the answer could differ from the job's."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_hudi_occ.spark.submit.footprint import batch_partitions


def test_parquet_folder_partitions_as_the_job_spells_them(tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    pq.write_table(pa.table({"id": [1, 2], "p": ["a", "b/c"], "n": [1, 1]}), d / "part-0.parquet")
    pq.write_table(pa.table({"id": [3], "p": ["a"], "n": [7]}), d / "part-1.parquet")
    (d / "_SUCCESS").write_text("")
    assert batch_partitions(str(d), "parquet", ["p"], hive_style=False, url_encode=False) == ["a", "b/c"]
    assert batch_partitions(str(d), "parquet", ["p"], hive_style=False, url_encode=True) == ["a", "b%2Fc"]
    assert batch_partitions(str(d), "parquet", ["p", "n"], hive_style=True, url_encode=False) == \
        ["p=a/n=1", "p=a/n=7", "p=b/c/n=1"]
    assert batch_partitions(str(d), "parquet", [], hive_style=False, url_encode=False) == [""]


def test_csv_and_json_sources(tmp_path):
    csv = tmp_path / "b.csv"
    csv.write_text("id,p,v\n1,x,a\n2,y,b\n")
    assert batch_partitions(str(csv), "csv", ["p"], hive_style=False, url_encode=False) == ["x", "y"]
    js = tmp_path / "b.json"
    js.write_text("\n".join(json.dumps({"id": i, "p": i % 2}) for i in range(4)) + "\n")
    assert batch_partitions(str(js), "json", ["p"], hive_style=False, url_encode=False) == ["0", "1"]


def test_unknown_where_the_job_could_answer_otherwise(tmp_path):
    f = tmp_path / "f.parquet"
    pq.write_table(pa.table({"id": [1], "p": [1.5], "d": pa.array([0], pa.date32())}), f)
    for fields in (["p"], ["d"], ["missing"]):  # a double, a date, no such column
        assert batch_partitions(str(f), "parquet", fields, hive_style=False, url_encode=False) is None
    assert batch_partitions("select 1", "sql", ["p"], hive_style=False, url_encode=False) is None
    assert batch_partitions("s3a://bucket/x", "parquet", ["p"], hive_style=False, url_encode=False) is None
    assert batch_partitions(str(tmp_path / "nothing"), "parquet", ["p"], hive_style=False,
                            url_encode=False) is None
    assert batch_partitions(str(f), "parquet", ["id"], hive_style=False, url_encode=False,
                            max_files=0) is None


# -- the reach: the existing file groups a batch can touch, read from the table's footers ---------

SEED_OPTS = {"hoodie.datasource.write.recordkey.field": "id",
             "hoodie.datasource.write.partitionpath.field": "p",
             "hoodie.datasource.write.precombine.field": "ts",
             "hoodie.write.lock.provider": "filesystem",
             "hoodie.parquet.small.file.limit": "0"}  # each seed write: new file groups


def seeded(tmp_path, write=True, **create):
    """Partition c: group C1 holds c0..c3, group C2 c10..c13 (whose keys lie inside C1's key
    range as text: the footers alone cannot tell them apart); b: one group."""
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.table.table import Table
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts", **create)
    groups = {}
    for keys in () if not write else ([f"b{i}" for i in range(6)] + [f"c{i}" for i in range(4)], [f"c1{i}" for i in range(4)]):
        res = ArrowTableWriter(table, WriteConfig.from_options(SEED_OPTS)).write(
            pa.Table.from_pylist([{"id": k, "p": k[0], "ts": 1} for k in keys]), "insert")
        for p, f in sorted(res.metadata.mutated_file_groups()):
            groups.setdefault(p, []).append(f)
    if not write:
        return table, {}
    return table, {"B1": groups["b"][0], "C1": groups["c"][0], "C2": groups["c"][1]}


def batch(tmp_path, name, keys):
    path = tmp_path / f"{name}.parquet"
    pq.write_table(pa.table({"id": keys, "p": [k[0] for k in keys], "ts": [2] * len(keys)}), path)
    return str(path)


def test_reach_looks_the_batch_keys_up_in_the_committed_file_groups(tmp_path):
    from airflow_hudi_occ.core.concurrency.footprint import EVERY_NEW_KEY, new_key_slot
    from airflow_hudi_occ.spark.submit.footprint import batch_reach
    table, g = seeded(tmp_path)
    reach = lambda src, op="upsert", **kw: batch_reach(table, src, "parquet", operation=op,  # noqa: E731
                                                      options=SEED_OPTS, **kw)
    ingest_c = batch(tmp_path, "ingest_c", ["c0", "c1"])
    backfill = batch(tmp_path, "backfill", ["b2", "b3", "c10", "c11"])
    assert reach(ingest_c) == {"c": [g["C1"]]}
    assert reach(backfill) == {"b": [g["B1"]], "c": [g["C2"]]}
    # over the key budget the footers' key ranges decide: c10 lies in C1's range [c0, c3] as
    # text, so both groups may hold it, and any key may be new
    assert reach(backfill, max_stored_keys=0)["c"] == sorted([g["C1"], g["C2"], EVERY_NEW_KEY])
    # a new key: a new file group (no one else's), its slot, and with small-file top-up on,
    # the partition's small file groups
    mixed = batch(tmp_path, "mixed", ["c0", "c99"])
    assert reach(mixed) == {"c": sorted([g["C1"], new_key_slot("c99")])}
    small = batch_reach(table, mixed, "parquet", operation="upsert",
                        options={**SEED_OPTS, "hoodie.parquet.small.file.limit": str(1 << 30)})
    assert small == {"c": sorted([g["C1"], g["C2"], new_key_slot("c99")])}
    assert reach(mixed, "delete") == {"c": [g["C1"]]}  # a delete of a key found nowhere writes nothing
    # what cannot be predicted: an overwrite replaces the partition's groups
    assert reach(mixed, "insert_overwrite") == {}


def test_reach_under_the_bucket_index_is_the_batch_buckets(tmp_path):
    from airflow_hudi_occ.core.format.bucket_index import bucket_id
    from airflow_hudi_occ.spark.submit.footprint import batch_reach
    table, _ = seeded(tmp_path)
    opts = {**SEED_OPTS, "hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "8"}
    keys = ["b0", "c0", "c7", "c42"]
    got = batch_reach(table, batch(tmp_path, "bk", keys), "parquet", operation="upsert", options=opts)
    want = {}
    for k in keys:
        want.setdefault(k[0], set()).add(f"bucket:{bucket_id([k], 8):08d}")
    assert got == {p: sorted(v) for p, v in want.items()}


def test_no_reach_where_the_footers_cannot_say(tmp_path):
    """Merge-on-read (keys may live in log files) without the bucket index, a key column whose
    text Spark may spell otherwise, an unreadable source: no reach (partitions decide)."""
    from airflow_hudi_occ.spark.submit.footprint import batch_reach
    table, _ = seeded(tmp_path, write=False, table_type="MERGE_ON_READ")
    assert batch_reach(table, batch(tmp_path, "m", ["c0"]), "parquet", operation="upsert",
                       options=SEED_OPTS) == {}
    cow, _ = seeded(tmp_path / "cow")
    f = tmp_path / "float.parquet"
    pq.write_table(pa.table({"id": [1.5], "p": ["c"], "ts": [1]}), f)
    assert batch_reach(cow, str(f), "parquet", operation="upsert", options=SEED_OPTS) == {}
    assert batch_reach(cow, str(tmp_path / "missing"), "parquet", operation="upsert", options=SEED_OPTS) == {}
