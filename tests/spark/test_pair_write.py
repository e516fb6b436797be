"""A bulk_insert checked and written by its input tasks through pyarrow (spark/pair_write.py):
one Spark job, Hudi names and meta columns, file ids fixed per (instant, partition, task, n),
files rolled over by the max file size, markers before the files are published, a refused
batch (a hostile partition value, rows without a key) leaving the table as it was, and a failed
attempt's file never staged. hudi-rs is the reader throughout."""

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.concurrency.markers.write_markers import markers_for
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.spark import native_write, pair_write
from airflow_hudi_occ.spark.writer import SparkHudiWriter
from airflow_hudi_occ.testing.tables import hudi_read, tree_snapshot
from tests.spark.test_native_write import OPTS  # small files, a file lock, no clock-skew wait

PLAN = pair_write.TaskPlan(("id",), ("p",), False, False, max_file_bytes=100_000, record_size=100)
SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string())])


def _files(out, plan=PLAN, task=0, attempt=0):
    return pair_write.TaskFiles(plan, SCHEMA, "1", str(out), task, attempt)


def _batch(ids, parts):
    return pa.record_batch([pa.array(ids, pa.int64()), pa.array(parts, pa.string())], names=["id", "p"])


def test_a_bulk_insert_by_default_is_written_by_its_input_tasks_as_given(spark, tmp_path, monkeypatch):
    """Hudi's default (``hoodie.combine.before.insert=false``): no key is combined or looked
    up, every input task writes its records into file groups of its own, a new one each time
    one holds the max file size's worth; no marker exists while the job runs, every file's
    marker exists before it is published; duplicates stay, as Java Hudi writes them."""
    path = str(tmp_path / "t")
    df = spark.range(0, 90, numPartitions=3).selectExpr(
        "id % 80 as id", "if(id % 2 = 0, 'a', 'b') as p", "cast(id as bigint) as ts",
        "concat('x', cast(id as string)) as v")
    seen = {}
    real_job, real_publish = pair_write.write_job, native_write.publish

    def job(spark_, records, *, instant, **kw):
        action = real_job(spark_, records, instant=instant, **kw)

        def checked():
            seen["markers_in_job"] = set(markers_for(Table.open(path), instant).data_files())
            return action()
        return checked

    def publish(table, instant, staged, out, started):
        seen["markers"] = set(markers_for(table, instant).data_files())
        seen["staged"] = {f"{p}/{name}" for p, _, name, _ in staged}
        return real_publish(table, instant, staged, out, started)
    monkeypatch.setattr(pair_write, "write_job", job)
    monkeypatch.setattr(native_write, "publish", publish)
    opts = {**OPTS, "hoodie.parquet.max.file.size": "1000"}  # 10 records a file
    res = SparkHudiWriter(spark, path, opts).write(df, "bulk_insert")
    assert seen["markers_in_job"] == set() and seen["markers"] == seen["staged"]
    got = hudi_read(path).to_pylist()
    assert sorted((r["id"], r["v"]) for r in got) == sorted((i % 80, f"x{i}") for i in range(90))
    assert sum(s.num_writes for s in res.stats) == 90
    stats = {s.path: s for s in res.stats}
    for r in got:
        assert r["_hoodie_partition_path"] == r["p"] and r["_hoodie_record_key"] == str(r["id"])
        assert f"{r['p']}/{r['_hoodie_file_name']}" in stats
        task = int(r["_hoodie_file_name"].split("_")[1].split("-")[0])
        assert r["_hoodie_commit_seqno"].startswith(f"{res.instant}_{task}_")
    assert len({r["_hoodie_commit_seqno"] for r in got}) == 90
    # 3 tasks x 2 partitions, 15 records each: a file of 10 then one of 5, named per
    # (instant, partition, task, n)
    by_file = {(s.partition_path, int(s.path.split("_")[1].split("-")[0]), s.file_id): s.num_writes
               for s in res.stats}
    assert by_file == {(p, t, pair_write.file_id(res.instant, p, t, n)): rows
                       for p in "ab" for t in range(3) for n, rows in ((0, 10), (1, 5))}
    assert not os.path.exists(os.path.join(path, ".hoodie", ".temp", res.instant))


def test_the_tasks_spell_partitions_as_core_does(spark, tmp_path):
    """The tasks spell each path with core's rule themselves (no labels from a batch check):
    url-encoded values, a '/' making nested folders, null and empty values (the Hive default),
    two fields of a string, an int and a date, hive-style; each row's _hoodie_partition_path
    and folder as core spells it. An empty batch commits no file."""
    import datetime as dt

    from airflow_hudi_occ.core.format import partition_path as pp
    values = ["a/b:c", "2024/01", "", None, "é #1"]
    rows = [(i, v, i % 2 if i % 3 else None, dt.date(2026, 1, 1 + i % 2), "x") for i, v in enumerate(values)]
    df = spark.createDataFrame(rows, "id long, s string, n int, d date, v string").repartition(2)
    fields = ["s", "n", "d"]
    path = str(tmp_path / "t")
    w = SparkHudiWriter(spark, path, {**OPTS, "hoodie.datasource.write.partitionpath.field": "s,n,d",
                                      "hoodie.datasource.write.hive_style_partitioning": "true",
                                      pp.URL_ENCODE_KEY: "true"})
    w.write(df, "bulk_insert")
    got = {r["id"]: r for r in hudi_read(path).to_pylist()}
    for i, s_, n, d, _ in rows:
        want = pp.partition_path(fields, [s_, n, d], hive_style=True, url_encode=True)
        assert got[i]["_hoodie_partition_path"] == want
        assert os.path.isfile(os.path.join(path, want, got[i]["_hoodie_file_name"]))
    res = w.write(df.limit(0), "bulk_insert")
    assert res.stats == [] and len(hudi_read(path)) == len(rows)


def _spark_jobs(spark) -> int:
    """Spark jobs the application has run so far (its status store, as the UI lists them)."""
    sc = spark.sparkContext._jsc.sc()
    sc.listenerBus().waitUntilEmpty()
    return sc.statusStore().jobsList(None).size()


def test_a_bulk_insert_runs_one_spark_job_before_it_publishes(spark, tmp_path, monkeypatch):
    """The honest proof that the batch check is inside the write job: the Spark jobs counted
    from the write's start to its publish. The two-job route (a bulk_insert that combines
    keys: the batch check, then the write) counts more on the same data."""
    df = spark.range(0, 60, numPartitions=2).selectExpr(
        "id", "concat('p', cast(id % 3 as string)) as p", "id as ts", "'v' as v")
    counted = {}
    real_publish = native_write.publish

    def publish(table, instant, *a, **kw):
        counted["jobs"] = _spark_jobs(spark) - counted["start"]
        return real_publish(table, instant, *a, **kw)
    monkeypatch.setattr(native_write, "publish", publish)
    for name, extra in (("fused", {}), ("two_jobs", {"hoodie.combine.before.insert": "true"})):
        counted["start"] = _spark_jobs(spark)
        res = SparkHudiWriter(spark, str(tmp_path / name), {**OPTS, **extra}).write(df, "bulk_insert")
        counted[name] = counted.pop("jobs")
        assert sum(s.num_writes for s in res.stats) == 60
    assert counted["fused"] == 1, counted
    assert counted["two_jobs"] >= 2, counted


def test_a_hostile_value_in_the_last_task_leaves_the_table_as_it_was(spark, tmp_path, monkeypatch):
    """A hostile partition value in the last row of the last input task, after the other
    tasks staged their files: the error core raises, naming
    the column and the value; nothing published, no file outside ``.hoodie``, no folder made
    from the value, the attempt rolled back on the timeline, readers unchanged."""
    from airflow_hudi_occ.core.errors import InvalidPartitionPathError
    path = str(tmp_path / "a" / "b" / "t")
    opts = {**OPTS, "hoodie.parquet.max.file.size": str(10 * 1024 * 1024)}  # one file a pair
    SparkHudiWriter(spark, path, opts).write(
        spark.createDataFrame([(1000, "a", 1, "old")], "id long, p string, ts long, v string"), "bulk_insert")
    before_rows = hudi_read(path).to_pylist()
    outside = lambda: {k: v for k, v in tree_snapshot(tmp_path).items() if "/.hoodie" not in k}  # noqa: E731
    before = outside()
    before_instants = {i.requested_time for i in Table.open(path).timeline().instants}
    monkeypatch.setattr(pair_write, "CHUNK_ROWS", 10)  # 10-row Arrow batches (set by the driver)
    staged = {}
    real_refusal = pair_write.refusal

    def refusal(plan, rows):
        [pending] = Table.open(path).timeline().pending()
        out = native_write.staging_dir(Table.open(path), pending.requested_time)
        staged.update(instant=pending.requested_time, files=[n for n in os.listdir(out) if not n.startswith(".")])
        return real_refusal(plan, rows)
    monkeypatch.setattr(pair_write, "refusal", refusal)
    df = spark.range(0, 90, numPartitions=3).selectExpr(
        "id", "if(id = 89, '../../escaped', if(id % 2 = 0, 'a', 'b')) as p", "id as ts", "'x' as v")
    with pytest.raises(InvalidPartitionPathError) as e:
        SparkHudiWriter(spark, path, opts).write(df, "bulk_insert")
    assert e.value.column == "p" and e.value.value == repr("../../escaped")
    assert "'../../escaped'" in str(e.value) and e.value.remedy
    assert len(staged["files"]) == 4, staged  # tasks 0 and 1: a file in each of two partitions
    assert outside() == before and not list(tmp_path.rglob("escaped"))
    assert not os.path.exists(os.path.join(path, ".hoodie", ".temp", staged["instant"]))  # staging gone
    tl = Table.open(path).timeline()
    new = [i for i in tl.instants if i.requested_time not in before_instants]
    assert [i.action for i in new] == ["rollback"], new  # the attempt, rolled back
    assert not tl.pending()
    assert hudi_read(path).to_pylist() == before_rows


def test_a_task_killed_mid_write_leaves_nothing_visible(spark, tmp_path, monkeypatch):
    """A Python worker killed (``os._exit``) while its task is writing, after the other task
    staged its files: the job fails, the instant is rolled back, the staging folder goes with
    it, and the table is byte-for-byte as it was outside ``.hoodie``; readers unchanged."""
    from airflow_hudi_occ.spark.errors import SparkWriteError
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.parquet.max.file.size": str(10 * 1024 * 1024)}
    SparkHudiWriter(spark, path, opts).write(
        spark.createDataFrame([(1000, "a", 1, "old")], "id long, p string, ts long, v string"), "bulk_insert")
    before, rows = tree_snapshot(path), hudi_read(path).to_pylist()
    monkeypatch.setattr(pair_write, "CHUNK_ROWS", 10)  # 10-row Arrow batches

    def killer(batches):  # a stage before the write, in the same task: dies on id 55
        import os as os_
        import pyarrow.compute as pc_
        for b in batches:
            if pc_.any(pc_.equal(b.column(0), 55)).as_py():
                os_._exit(1)
            yield b
    df = spark.range(0, 60, numPartitions=2).selectExpr(
        "id", "if(id % 2 = 0, 'a', 'b') as p", "id as ts", "'x' as v")
    df = df.mapInArrow(killer, df.schema)
    with pytest.raises(SparkWriteError) as e:
        SparkHudiWriter(spark, path, opts).write(df, "bulk_insert")
    instant = e.value.instant
    after = tree_snapshot(path)
    assert {k: v for k, v in after.items() if not k.startswith(".hoodie")} == \
        {k: v for k, v in before.items() if not k.startswith(".hoodie")}
    assert not [k for k in after if instant in k and ".temp" in k]  # its staging folder removed
    assert not Table.open(path).timeline().pending()
    assert hudi_read(path).to_pylist() == rows


def test_rows_without_a_key_are_refused_with_their_count_over_every_task(spark, tmp_path):
    from airflow_hudi_occ.core.errors import InvalidRecordKeyError
    path = str(tmp_path / "t")
    df = spark.range(0, 40, numPartitions=2).selectExpr(
        "if(id % 10 = 3, null, id) as id", "'a' as p", "id as ts", "'x' as v")
    with pytest.raises(InvalidRecordKeyError) as e:
        SparkHudiWriter(spark, path, OPTS).write(df, "bulk_insert")
    assert e.value.column == "id" and e.value.rows == 4
    assert not [d for d in os.listdir(path) if d != ".hoodie"]


def test_a_task_keeps_at_most_its_open_files_and_a_partition_coming_back_gets_a_new_file(tmp_path, monkeypatch):
    """Above MAX_OPEN_FILES the least recently written file is finished; that partition's next
    rows go to its next file (n + 1), so every file is written once, whole."""
    monkeypatch.setattr(pair_write, "MAX_OPEN_FILES", 2)
    monkeypatch.setattr(pair_write, "CHUNK_ROWS", 2)  # every add flushes: writers open at once
    files = _files(tmp_path / "staging")
    for k in range(3):
        files.add(_batch([10 * k + i for i in range(9)], ["abc"[i % 3] for i in range(9)]))
        assert len(files.writers) <= 2
    report = files.close_all()
    assert sum(r["rows"] for r in report) == 27
    assert len({r["name"] for r in report}) == len(report) > 3
    for r in report:
        t = pq.read_table(os.path.join(tmp_path / "staging", r["name"]))
        assert t.num_rows == r["rows"] and set(t.column("p").to_pylist()) == {r["partition"]}
        assert r["file_id"] == pair_write.file_id("1", r["partition"], 0, int(r["file_id"].rsplit("-", 1)[1]))


def test_an_attempt_that_fails_midway_leaves_no_staged_file_and_its_retry_stages_the_same_one(tmp_path):
    """The worker writes each file under a hidden temporary name and renames it to its staged
    name once complete: a task attempt that dies midway leaves only the hidden file, and the
    retry (same task, same rows) stages the complete one under the same name."""
    out = tmp_path / "staging"
    batch = _batch([1, 2, 3], ["a"] * 3)
    failed = _files(out, attempt=0)
    failed.add(batch)
    failed._flush("a")  # written, never closed: the attempt died here
    assert [n.startswith(".") and n.endswith(".0.inprogress") for n in os.listdir(out)] == [True]
    retry = _files(out, attempt=1)
    retry.add(batch)
    [report] = retry.close_all()
    assert report["name"] == pair_write.file_name("1", "a", 0, 0) and report["rows"] == 3
    assert sorted(n for n in os.listdir(out) if not n.startswith(".")) == [report["name"]]
    t = pq.read_table(os.path.join(out, report["name"]))
    assert t.column("_hoodie_record_key").to_pylist() == ["1", "2", "3"]
    assert t.column("_hoodie_commit_seqno").to_pylist() == ["1_0_0", "1_0_1", "1_0_2"]
    assert set(t.column("_hoodie_file_name").to_pylist()) == {report["name"]}


def test_a_task_never_buffers_more_than_its_bound_when_batches_spread_over_many_partitions(tmp_path, monkeypatch):
    """Batches as large as a row group, spread evenly over 16 partitions: each batch leaves
    every buffer below a row group, so only the task's bound flushes them; it must keep the
    task within TASK_BUFFER_ROWS after every batch, and every row must still be written."""
    monkeypatch.setattr(pair_write, "CHUNK_ROWS", 160)
    monkeypatch.setattr(pair_write, "TASK_BUFFER_ROWS", 4 * 160)
    files = _files(tmp_path / "staging", plan=pair_write.TaskPlan(("id",), ("p",), False, False, 10**8, 100))
    most, n = 0, 0
    for b in range(30):
        ids = list(range(n, n + 160))
        n += 160
        files.add(_batch(ids, [f"p{i % 16}" for i in ids]))
        most = max(most, sum(files.buffered.values()))
    assert most <= 4 * 160
    assert sum(r["rows"] for r in files.close_all()) == n


def test_a_task_rolls_its_files_by_the_bytes_they_hold_not_by_the_record_size_estimate(tmp_path, monkeypatch):
    """Java's bulk_insert rolls a file over by the bytes it wrote; the record-size estimate
    (1 KB a record, Hudi's default) sizes a file's first chunk only. Small records: the
    estimate alone would make 30 files of 200 rows; by their bytes, 6,000 rows fit in one.
    An estimate too low the other way: the file's bytes close it."""
    small = _files(tmp_path / "small", plan=pair_write.TaskPlan(("id",), ("p",), False, False, 200_000, 1_000))
    for b in range(3):
        small.add(_batch(list(range(b * 2_000, b * 2_000 + 2_000)), ["a"] * 2_000))
    report = small.close_all()
    assert [r["rows"] for r in report] == [6_000], report
    assert os.path.getsize(tmp_path / "small" / report[0]["name"]) < 200_000

    # the other way: an estimate of 1 byte a record would put 240 rows in one file of 3,000
    # bytes; once a chunk (20 rows here) is written, the file's own bytes close it near the max
    monkeypatch.setattr(pair_write, "CHUNK_ROWS", 20)
    large = _files(tmp_path / "large", plan=pair_write.TaskPlan(("id",), ("p",), False, False, 3_000, 1))
    for b in range(3):
        large.add(_batch(list(range(b * 80, b * 80 + 80)), ["a"] * 80))
    report = large.close_all()
    assert sum(r["rows"] for r in report) == 240 and len(report) > 1, report


def test_a_task_refuses_a_hostile_value_before_any_path_is_made_and_keeps_counting(tmp_path):
    """The task spells partitions with core's rule: a hostile value stops its writing (its open
    file deleted, nothing made from the value) and it reports the value and every row without
    a key it reads, for the driver's error."""
    out = tmp_path / "staging"
    files = _files(out)
    files.add(_batch([1, 2], ["a", "a"]))
    files._flush("a")  # an open file, then the hostile value
    files.add(_batch([3, 4], ["a", "../x"]))
    files.add(pa.record_batch([pa.array([None, 5], pa.int64()), pa.array(["b", "b"])], names=["id", "p"]))
    report = files.close_all()
    assert sorted(report, key=lambda r: r["kind"]) == [{"kind": "no_key", "rows": 1},
                                                       {"kind": "partition", "field": "p", "value": "../x"}]
    assert os.listdir(out) == [] and not list(tmp_path.rglob("x"))
    err = pair_write.refusal(PLAN, report)
    assert type(err).__name__ == "InvalidPartitionPathError" and err.value == repr("../x")


def test_a_timestamp_column_takes_this_route_and_is_stored_as_the_python_route_stores_it(spark, tmp_path, monkeypatch):
    """Spark's own writer would store a timestamp as INT96 (native_write.applies refuses it);
    pyarrow stores it as the per-file-group Python route does, so such a bulk_insert is
    written by its input tasks too, with the same parquet type and the same values."""
    import datetime as dt
    calls = []
    real_job = pair_write.write_job

    def job(*a, **kw):
        calls.append(kw["plan"])
        return real_job(*a, **kw)
    monkeypatch.setattr(pair_write, "write_job", job)
    df = spark.range(0, 40, numPartitions=2).selectExpr(  # one partition per input task
        "id", "if(id < 20, 'a', 'b') as p", "id as ts", "timestamp_seconds(1767225600 + id * 61) as at")
    by_pair, by_group = str(tmp_path / "pair"), str(tmp_path / "group")
    SparkHudiWriter(spark, by_pair, OPTS).write(df, "bulk_insert")
    assert len(calls) == 1  # the pair route wrote it
    SparkHudiWriter(spark, by_group, OPTS).write(df, "upsert")  # the per-file-group Python route
    assert len(calls) == 1
    pair_rows, group_rows = hudi_read(by_pair), hudi_read(by_group)
    assert pair_rows.schema.field("at").type == group_rows.schema.field("at").type
    assert sorted((r["id"], r["at"]) for r in pair_rows.to_pylist()) == \
        sorted((r["id"], r["at"]) for r in group_rows.to_pylist())
    assert len(pair_rows) == 40
    assert {r["id"]: r["at"] for r in pair_rows.to_pylist()}[3] == \
        dt.datetime(2026, 1, 1, 0, 3, 3, tzinfo=dt.timezone.utc)  # the instant, in UTC
    some = next(f for f in os.listdir(os.path.join(by_pair, "a")) if f.endswith(".parquet"))
    other = next(f for f in os.listdir(os.path.join(by_group, "a")) if f.endswith(".parquet"))
    assert pq.read_schema(os.path.join(by_pair, "a", some)).field("at").type == \
        pq.read_schema(os.path.join(by_group, "a", other)).field("at").type
