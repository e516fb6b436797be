"""The Spark write path against a plain-Python model, read back with hudi-rs (the oracle)."""

import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.format.schema import SchemaError
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.spark.compat import to_arrow
from airflow_hudi_occ.spark.reader import read_snapshot
from airflow_hudi_occ.spark.writer import SparkHudiWriter
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key

SCHEMA = "id long, p string, ts long, v string"


def options(**extra):
    o = {"hoodie.datasource.write.recordkey.field": "id",
         "hoodie.datasource.write.partitionpath.field": "p",
         "hoodie.datasource.write.precombine.field": "ts",
         "hoodie.datasource.write.table.name": "tbl",
         "hoodie.write.lock.provider": "filesystem",
         "hoodie.write.lock.client.wait_time_ms_between_retry": "50",
         "hoodie.time.generator.max_expected_clock_skew_ms": "2",
         # small files so that batches spread over several file groups and top-ups happen
         "hoodie.parquet.max.file.size": "3000",
         "hoodie.parquet.small.file.limit": "1500",
         "hoodie.copyonwrite.record.size.estimate": "100"}
    o.update(extra)
    return o


def part_of(i):
    return "abc"[i % 3]


class Model:
    """What the table must hold: key -> (row, commit time of the write that last changed it)."""

    def __init__(self):
        self.rows = {}

    @staticmethod
    def dedupe(batch):
        best = {}
        for r in batch:  # core._dedupe with non-null ts: largest wins, later on a tie
            b = best.get(r["id"])
            if b is None or r["ts"] >= b["ts"]:
                best[r["id"]] = r
        return best

    def apply(self, op, batch, instant):
        best = self.dedupe(batch)
        if op == "upsert":
            for k, r in best.items():
                old = self.rows.get(k)
                if old is None or not r["ts"] < old[0]["ts"]:
                    self.rows[k] = (r, instant)
        elif op in ("insert", "bulk_insert"):
            for k, r in best.items():
                assert k not in self.rows
                self.rows[k] = (r, instant)
        elif op == "delete":
            for k in best:
                self.rows.pop(k, None)
        elif op == "insert_overwrite":
            parts = {r["p"] for r in best.values()}
            self.rows = {k: v for k, v in self.rows.items() if v[0]["p"] not in parts}
            for k, r in best.items():
                self.rows[k] = (r, instant)


def check_spark_reader(spark, path, model):
    """The project's own Spark reader must agree with the model as well."""
    got = to_arrow(read_snapshot(spark, path))
    if not model.rows:
        assert got.num_rows == 0
        return
    assert rows_by_key(got, columns=["id", "p", "ts", "v"]) == {k: v[0] for k, v in model.rows.items()}
    times = dict(zip(got.column("id").to_pylist(), got.column("_hoodie_commit_time").to_pylist()))
    assert times == {k: v[1] for k, v in model.rows.items()}


def check(path, model):
    got = hudi_read(path)
    if got.num_rows == 0:  # hudi-rs gives a column-less table when nothing is visible
        assert model.rows == {}
        return
    assert rows_by_key(got, columns=["id", "p", "ts", "v"]) == {k: v[0] for k, v in model.rows.items()}
    times = dict(zip(got.column("id").to_pylist(), got.column("_hoodie_commit_time").to_pylist()))
    assert times == {k: v[1] for k, v in model.rows.items()}


row = st.builds(lambda i, ts, v: {"id": i, "p": part_of(i), "ts": ts, "v": v},
                st.integers(0, 30), st.integers(0, 3), st.sampled_from(["x", "y", "z"]))
step = st.tuples(st.sampled_from(["upsert", "upsert", "delete", "insert", "bulk_insert", "insert_overwrite"]),
                 st.lists(row, min_size=1, max_size=25))


# Few examples (each step is a Spark job); the session is shared by every example.
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=st.lists(step, min_size=2, max_size=3))
def test_operations_match_the_model(spark, steps):
    path = os.path.join(tempfile.mkdtemp(), "tbl")
    writer = SparkHudiWriter(spark, path, options())
    model = Model()
    fresh = 1000
    for op, batch in steps:
        if op in ("insert", "bulk_insert"):  # inserts carry keys new to the table
            batch = [dict(r, id=fresh + j, p=part_of(fresh + j)) for j, r in enumerate(batch)]
            fresh += len(batch)
        if op == "delete":
            batch = [{"id": r["id"], "p": r["p"], "ts": r["ts"], "v": r["v"]} for r in batch]
        res = writer.write(spark.createDataFrame(batch, SCHEMA), op)
        model.apply(op, batch, res.instant)
        check(path, model)
    check_spark_reader(spark, path, model)


def test_upsert_keeps_unchanged_rows_commit_time_and_precombine(spark, tmp_path):
    path = str(tmp_path / "tbl")
    w = SparkHudiWriter(spark, path, options(**{"hoodie.parquet.max.file.size": str(10**8)}))
    r1 = w.write(spark.createDataFrame([(1, "b", 5, "old"), (2, "c", 1, "two")], SCHEMA), "upsert")
    r2 = w.write(spark.createDataFrame([(1, "b", 4, "stale"), (2, "c", 2, "new")], SCHEMA), "upsert")
    got = {r["id"]: r for r in hudi_read(path).to_pylist()}
    assert got[1]["v"] == "old" and got[1]["_hoodie_commit_time"] == r1.instant
    assert got[2]["v"] == "new" and got[2]["_hoodie_commit_time"] == r2.instant
    s = r2.summary()
    assert (s["updates"], s["inserts"]) == (1, 0)


def test_a_key_stored_in_two_partitions_is_updated_only_in_the_batch_record_s_partition(spark, tmp_path):
    """The simple index is per partition: the lookup's first pass matches stored keys by key
    alone (tagging.lookup), so a key that also lives in another partition must still be
    tagged to its own partition's file group only."""
    path = str(tmp_path / "tbl")
    w = SparkHudiWriter(spark, path, options(**{"hoodie.parquet.max.file.size": str(10**8)}))
    r1 = w.write(spark.createDataFrame([(1, "a", 1, "a1"), (2, "a", 1, "a2"), (1, "b", 1, "b1")], SCHEMA),
                 "bulk_insert")
    r2 = w.write(spark.createDataFrame([(1, "a", 2, "a1-new"), (1, "c", 2, "c1")], SCHEMA), "upsert")
    got = sorted((r["p"], r["id"], r["v"], r["_hoodie_commit_time"]) for r in hudi_read(path).to_pylist())
    assert got == [("a", 1, "a1-new", r2.instant), ("a", 2, "a2", r1.instant),
                   ("b", 1, "b1", r1.instant), ("c", 1, "c1", r2.instant)]
    s = r2.summary()
    assert (s["updates"], s["inserts"]) == (1, 1)
    assert {st.partition_path for st in r2.stats} == {"a", "c"}  # b's file group untouched


def test_new_keys_split_by_target_file_size_and_top_up_small_files(spark, tmp_path):
    path = str(tmp_path / "tbl")
    w = SparkHudiWriter(spark, path, options(**{"hoodie.parquet.max.file.size": "2000",
                                                "hoodie.parquet.small.file.limit": "0"}))
    res = w.write(spark.createDataFrame([(i, "a", 1, "v") for i in range(0, 300, 3)], SCHEMA), "bulk_insert")
    assert res.summary()["file_groups"] > 1  # 100 rows of ~100 bytes into 2 kB files
    t = Table.open(path)
    groups_before = {s.file_id for s in __import__("airflow_hudi_occ.core.table.file_system_view", fromlist=["x"])
                     .FileSystemView(t).latest_file_slices()}
    w2 = SparkHudiWriter(spark, path, options(**{"hoodie.parquet.small.file.limit": "100000",
                                                 "hoodie.parquet.max.file.size": "100000"}))
    res2 = w2.write(spark.createDataFrame([(1000, "a", 1, "new")], SCHEMA), "upsert")
    assert {s.file_id for s in res2.stats} <= groups_before  # topped up an existing small group
    assert len(rows_by_key(hudi_read(path))) == 101


def test_bucket_index_file_ids_carry_the_bucket(spark, tmp_path):
    path = str(tmp_path / "tbl")
    w = SparkHudiWriter(spark, path, options(**{"hoodie.index.type": "BUCKET",
                                                "hoodie.bucket.index.num.buckets": "2"}))
    w.write(spark.createDataFrame([(i, part_of(i), 1, "v") for i in range(30)], SCHEMA), "upsert")
    r = w.write(spark.createDataFrame([(i, part_of(i), 2, "w") for i in range(0, 30, 2)], SCHEMA), "upsert")
    assert all(s.file_id[:8] in ("00000000", "00000001") for s in r.stats)
    assert r.summary()["inserts"] == 0
    got = rows_by_key(hudi_read(path))
    assert len(got) == 30 and got[4]["v"] == "w" and got[5]["v"] == "v"
    assert len({(s.partition_path, s.file_id[:8]) for s in r.stats}) == len(r.stats)
    # the same buckets as the Arrow writer and Java Hudi (core.bucket_index's hash)
    from airflow_hudi_occ.core.format.bucket_index import bucket_id
    t = hudi_read(path)
    for key, fname in zip(t.column("id").to_pylist(), t.column("_hoodie_file_name").to_pylist()):
        assert int(fname[:8]) == bucket_id([key], 2)


def test_schema_evolution_adds_nullable_columns_and_refuses_incompatible(spark, tmp_path):
    path = str(tmp_path / "tbl")
    w = SparkHudiWriter(spark, path, options())
    w.write(spark.createDataFrame([(1, "b", 1, "a")], SCHEMA), "upsert")
    w.write(spark.createDataFrame([(2, "c", 1, "b", 7)], SCHEMA + ", extra int"), "upsert")
    got = rows_by_key(hudi_read(path))
    assert got[1]["extra"] is None and got[2]["extra"] == 7
    files_before = sorted(str(p) for p in (tmp_path / "tbl").rglob("*") if p.is_file())
    with pytest.raises(SchemaError) as e:
        w.write(spark.createDataFrame([(3, "a", 1, 5, 1)], "id long, p string, ts long, v long, extra int"),
                "upsert")
    assert "v" in e.value.columns and e.value.remedy
    with pytest.raises(SchemaError):  # dropping a column is refused as well
        w.write(spark.createDataFrame([(3, "a", 1)], "id long, p string, ts long"), "upsert")
    # refused before anything was written: not even a requested instant
    assert sorted(str(p) for p in (tmp_path / "tbl").rglob("*") if p.is_file()) == files_before


def test_missing_key_column_is_a_config_error_before_any_instant(spark, tmp_path):
    path = str(tmp_path / "tbl")
    w = SparkHudiWriter(spark, path, options())
    with pytest.raises(ConfigError) as e:
        w.write(spark.createDataFrame([("b", 1, "x")], "p string, ts long, v string"), "upsert")
    assert e.value.key == "hoodie.datasource.write.recordkey.field"
    assert Table.open(path).timeline().instants == [] if hasattr(Table.open(path).timeline(), "instants") \
        else len(list(Table.open(path).timeline())) == 0


def test_early_check_before_tagging_stops_only_writes_into_held_file_groups(spark, tmp_path):
    """An earlier live writer holds a marker on file group X of partition a. A Spark upsert of
    keys that live in another file group of a passes the check before tagging (and commits);
    an upsert of a key that lives in X stops before tagging, with nothing written."""
    from airflow_hudi_occ.core.commit.transaction import WriteTransaction
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.errors import EarlyConflictError

    path = str(tmp_path / "tbl")
    ecd = {"hoodie.write.concurrency.early.conflict.detection.enable": "true",
           "hoodie.parquet.small.file.limit": "0"}
    w = SparkHudiWriter(spark, path, options(**ecd))
    w.write(spark.createDataFrame([(0, "a", 1, "x")], SCHEMA), "insert")   # file group X
    w.write(spark.createDataFrame([(3, "a", 1, "y")], SCHEMA), "insert")   # file group Y
    t = Table.open(path)
    by_key = {r["id"]: r["_hoodie_file_name"].split("_")[0] for r in hudi_read(path).to_pylist()}
    fx, fy = by_key[0], by_key[3]
    assert fx != fy
    other = WriteTransaction(t, WriteConfig.from_options(options(**ecd)))
    other.begin()
    try:
        other.create_marker("a", f"{fx}_0-0-0_{other.instant_time}.parquet", "MERGE")
        # keys living in Y only: no conflict, the write commits
        res = w.write(spark.createDataFrame([(3, "a", 2, "y2")], SCHEMA), "upsert")
        assert res.outcome == "committed"
        with pytest.raises(EarlyConflictError) as e:
            w.write(spark.createDataFrame([(0, "a", 2, "x2")], SCHEMA), "upsert")
        assert e.value.other_instant == other.instant_time
        assert e.value.stopped_before_tagging is True and e.value.files_written == 0
        assert fx in str(e.value.file_groups) and fy not in str(e.value.file_groups)
    finally:
        other.abort(reason="test")
    assert {r["id"]: r["v"] for r in hudi_read(path).to_pylist()} == {0: "x", 3: "y2"}


def test_early_check_before_tagging_finds_a_held_key_beyond_the_probe(spark, tmp_path, monkeypatch):
    """The driver-side probe compares only the batch's first records; a held key further on is
    still found before tagging, by the Spark join."""
    from airflow_hudi_occ.core.commit.transaction import WriteTransaction
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.errors import EarlyConflictError
    from airflow_hudi_occ.spark import tagging

    monkeypatch.setattr(tagging, "PROBE_ROWS", 1)
    path = str(tmp_path / "tbl")
    ecd = {"hoodie.write.concurrency.early.conflict.detection.enable": "true",
           "hoodie.parquet.small.file.limit": "0"}
    w = SparkHudiWriter(spark, path, options(**ecd))
    w.write(spark.createDataFrame([(0, "a", 1, "x")], SCHEMA), "insert")
    fx = hudi_read(path).to_pylist()[0]["_hoodie_file_name"].split("_")[0]
    other = WriteTransaction(Table.open(path), WriteConfig.from_options(options(**ecd)))
    other.begin()
    try:
        other.create_marker("a", f"{fx}_0-0-0_{other.instant_time}.parquet", "MERGE")
        batch = spark.createDataFrame([(7, "a", 2, "new"), (0, "a", 2, "x2")], SCHEMA).coalesce(1)
        with pytest.raises(EarlyConflictError) as e:
            w.write(batch, "upsert")
        assert e.value.stopped_before_tagging is True and e.value.files_written == 0
    finally:
        other.abort(reason="test")
    assert {r["id"]: r["v"] for r in hudi_read(path).to_pylist()} == {0: "x"}


def test_a_shared_partition_alone_is_reported_not_a_conflict(spark, tmp_path):
    """An earlier live writer declared partition a at begin (no file groups yet, no marker).
    A Spark upsert of a commits: right after its begin it reports the rival on partition a,
    and stops on nothing (Hudi's rules compare file groups). Its own footprint was declared
    in its requested file, which the rival's view of the table sees, naming the admission
    request the operator's labels give it (admission reads that request's reach)."""
    import json

    from airflow_hudi_occ.core.commit.attempt_log import LABELS_OPTION
    from airflow_hudi_occ.core.commit.transaction import WriteTransaction
    from airflow_hudi_occ.core.concurrency.footprint import REQUEST_LABEL, live_writers
    from airflow_hudi_occ.core.config import WriteConfig

    path = str(tmp_path / "tbl")
    ecd = {"hoodie.write.concurrency.early.conflict.detection.enable": "true"}
    said, seen = [], {}
    labels = {LABELS_OPTION: json.dumps({"dag_id": "d", "task_id": "w", REQUEST_LABEL: "req-1"})}
    w = SparkHudiWriter(spark, path, options(**ecd, **labels), on_progress=lambda s, t: said.append((s, t)))
    w.write(spark.createDataFrame([(0, "a", 1, "x"), (1, "b", 1, "y")], SCHEMA), "insert")
    cfg = WriteConfig.from_options(options(**ecd))
    other = WriteTransaction(Table.open(path), cfg, footprint=["a"])
    other.begin()
    try:
        said.clear()
        res = w.write(spark.createDataFrame([(0, "a", 2, "x2")], SCHEMA), "upsert",
                      before_commit=lambda tx: seen.update(
                          {x.requested_time: x.footprint for x in live_writers(Table.open(path), cfg.heartbeat)}))
        assert res.outcome == "committed"
    finally:
        other.abort(reason="test")
    checks = [t for s, t in said if s == "early-check"]
    assert any(t.startswith(f"right after begin: live writer {other.instant_time}") and "partitions a"
               in t for t in checks), said
    assert seen[res.instant].partitions == {"a"}  # declared at begin, refined at inflight
    assert seen[res.instant].file_groups
    assert (seen[res.instant].request, seen[res.instant].owner, seen[res.instant].exact) == ("req-1", "d.w", True)
    assert {r["id"]: r["v"] for r in hudi_read(path).to_pylist()} == {0: "x2", 1: "y"}


# -- hostile partition values and keys (core/format/partition_path, core's key rule) -----------

@pytest.mark.parametrize("value", ["../../escaped", "..", "a//b", "x\x00y", "/abs"])
def test_hostile_partition_values_are_refused_before_the_instant(spark, tmp_path, value):
    from airflow_hudi_occ.core.errors import InvalidPartitionPathError
    from airflow_hudi_occ.testing.tables import tree_snapshot
    path = str(tmp_path / "a" / "b" / "tbl")
    SparkHudiWriter(spark, path, options()).write(spark.createDataFrame([(1, "ok", 1, "x")], SCHEMA), "upsert")
    before = tree_snapshot(tmp_path)
    with pytest.raises(InvalidPartitionPathError) as e:
        SparkHudiWriter(spark, path, options()).write(
            spark.createDataFrame([(2, "fine", 1, "y"), (3, value, 1, "z")], SCHEMA), "upsert")
    assert e.value.column == "p" and e.value.value == repr(value)
    assert tree_snapshot(tmp_path) == before  # no requested file, no marker, nothing outside


@pytest.mark.parametrize("columns,named", [(["id", "p", "ts", "v", "v"], "'v'"),
                                           (["id", "p", "ts", "my v"], "'my v'")], ids=["twice", "not-avro"])
def test_column_names_a_table_cannot_hold_are_refused_before_a_first_write_creates_it(spark, tmp_path,
                                                                                      columns, named):
    """core's ``check_column_names`` (issue 40), before ``open_or_create_table``: no table made."""
    from airflow_hudi_occ.core.format.schema import SchemaError
    from airflow_hudi_occ.testing.tables import tree_snapshot
    df = spark.createDataFrame([(1, "a", 1, "x", "y")[:len(columns)]], columns)
    before = tree_snapshot(tmp_path)
    with pytest.raises(SchemaError) as e:
        SparkHudiWriter(spark, str(tmp_path / "tbl"), options()).write(df, "upsert")
    assert named in str(e.value) and e.value.remedy
    assert tree_snapshot(tmp_path) == before


def test_spark_spells_partitions_as_core_does(spark, tmp_path):
    """url-encoded values, nested folders from a '/', null and empty values: the same
    _hoodie_partition_path (and folder) from the Spark engine as from core's rule."""
    from airflow_hudi_occ.core.format import partition_path as pp
    values = ["a/b:c", "2024/01", "", None, "é #1"]
    for encode in ("true", "false"):
        path = str(tmp_path / f"t{encode}")
        rows = [(i, v, 1, "x") for i, v in enumerate(values)]
        SparkHudiWriter(spark, path, options(**{pp.URL_ENCODE_KEY: encode})).write(
            spark.createDataFrame(rows, SCHEMA), "upsert")
        assert Table.open(path).config.url_encode_partitions is (encode == "true")
        got = {r["id"]: r["_hoodie_partition_path"] for r in hudi_read(path).to_pylist()}
        assert got == {i: pp.field_text("p", v, hive_style=False, url_encode=encode == "true")
                       for i, v in enumerate(values)}
        for r in hudi_read(path).to_pylist():
            assert os.path.isfile(os.path.join(path, r["_hoodie_partition_path"], r["_hoodie_file_name"]))


def test_null_or_empty_keys_are_refused_with_their_count(spark, tmp_path):
    from airflow_hudi_occ.core.errors import InvalidRecordKeyError
    from airflow_hudi_occ.testing.tables import tree_snapshot
    path = str(tmp_path / "tbl")
    SparkHudiWriter(spark, path, options()).write(spark.createDataFrame([(1, "a", 1, "x")], SCHEMA), "upsert")
    before = tree_snapshot(tmp_path)
    with pytest.raises(InvalidRecordKeyError) as e:
        SparkHudiWriter(spark, path, options()).write(
            spark.createDataFrame([(None, "a", 1, "x"), (2, "a", 1, "y"), (None, "b", 1, "z")], SCHEMA),
            "upsert")
    assert e.value.column == "id" and e.value.rows == 2
    assert tree_snapshot(tmp_path) == before


def test_null_ordering_values_are_refused_in_an_upsert_as_core_refuses_them(spark, tmp_path):
    """An upsert whose rows have a null precombine value is refused before its instant, by
    the batch check's one Spark job (the same InvalidOrderingValueError as core's), the table
    byte-identical; a bulk_insert compares no ordering value and writes them, as Hudi does."""
    from airflow_hudi_occ.core.errors import InvalidOrderingValueError
    from airflow_hudi_occ.testing.tables import tree_snapshot
    path = str(tmp_path / "tbl")
    SparkHudiWriter(spark, path, options()).write(spark.createDataFrame([(1, "a", 1, "x")], SCHEMA), "upsert")
    before = tree_snapshot(tmp_path)
    batch = spark.createDataFrame([(1, "a", None, "y"), (2, "a", 5, "y"), (3, "b", None, "z")], SCHEMA)
    with pytest.raises(InvalidOrderingValueError) as e:
        SparkHudiWriter(spark, path, options()).write(batch, "upsert")
    assert (e.value.column, e.value.rows) == ("ts", 2) and "nothing was written" in str(e.value)
    assert "coalesce(ts, 0)" in e.value.remedy
    assert tree_snapshot(tmp_path) == before
    SparkHudiWriter(spark, path, options()).write(batch.where("id = 3"), "bulk_insert")
    assert rows_by_key(hudi_read(path), "id", ["id", "ts", "v"]) == {
        1: {"id": 1, "ts": 1, "v": "x"}, 3: {"id": 3, "ts": None, "v": "z"}}


def test_a_synced_write_hands_its_sync_the_sessions_spark_version_as_javas_spark_writer_does(spark, tmp_path):
    """Java's Spark writer gives its sync ``hoodie.meta_sync.spark.version`` (recorded as the
    table property ``spark.sql.create.version``) and Spark's schema-string threshold, over the
    user's; so do ours, whether handed raw or checked options; a write without sync gets
    neither."""
    from airflow_hudi_occ.spark.submit.options import SparkWriteOptions
    sync = {"hoodie.datasource.hive_sync.enable": "true",
            "hoodie.datasource.hive_sync.schema_string_length_thresh": "10"}
    threshold = spark.conf.get("spark.sql.sources.schemaStringLengthThreshold")
    for given in (options(**sync), SparkWriteOptions.from_options(options(**sync))):
        w = SparkHudiWriter(spark, str(tmp_path / "t"), given)
        cfg = w.write_options.write_config.meta_sync
        assert (cfg.spark_version, cfg.schema_length_threshold) == (spark.version, int(threshold))
        assert w.options["hoodie.meta_sync.spark.version"] == spark.version
    plain = SparkHudiWriter(spark, str(tmp_path / "t"), options())
    assert "hoodie.meta_sync.spark.version" not in plain.options
    assert plain.write_options.write_config.meta_sync.spark_version == ""
