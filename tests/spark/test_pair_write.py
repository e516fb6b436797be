"""A bulk_insert written by its input tasks through pyarrow (spark/pair_write.py): Hudi names
and meta columns, markers before the job, no shuffle, file groups split by the max file size,
sorted input for tasks with many file groups, and a failed attempt's file never staged.
hudi-rs is the reader throughout."""

import os

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_hudi_occ.core.concurrency.markers import markers_for
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.spark import native_write, pair_write
from airflow_hudi_occ.spark.writer import SparkHudiWriter
from airflow_hudi_occ.testing.tables import hudi_read
from tests.spark.test_native_write import OPTS  # small files, a file lock, no clock-skew wait


def test_a_bulk_insert_by_default_is_written_by_its_input_tasks_as_given(spark, tmp_path, monkeypatch):
    """Hudi's default (``hoodie.combine.before.insert=false``): no key is combined or looked
    up, every input task writes its records into file groups of its own, named in the write
    job from the task, the partition's hash and the key's hash; every marker exists when the
    job starts; duplicates stay, as Java Hudi writes them (hudi-rs reads both copies)."""
    path = str(tmp_path / "t")
    df = spark.range(0, 90, numPartitions=3).selectExpr(
        "id % 80 as id", "if(id % 2 = 0, 'a', 'b') as p", "cast(id as bigint) as ts",
        "concat('x', cast(id as string)) as v")
    seen = {}
    real_job = pair_write.write_job

    def job(spark_, records, *, instant, plan, **kw):
        action = real_job(spark_, records, instant=instant, plan=plan, **kw)

        def checked():
            seen["markers"] = set(markers_for(Table.open(path), instant).data_files())
            seen["names"] = {f"{p}/{n}" for (p, _), n in pair_write.file_names(plan, instant).items()}
            return action()
        return checked
    monkeypatch.setattr(pair_write, "write_job", job)
    opts = {**OPTS, "hoodie.parquet.max.file.size": "1000"}  # 10 records a file: 2 per pair
    res = SparkHudiWriter(spark, path, opts).write(df, "bulk_insert")
    assert seen["markers"] == seen["names"]
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
    tasks = {s.path.split("_")[1].split("-")[0] for s in res.stats}
    assert tasks == {"0", "1", "2"}  # no shuffle: the files are the input tasks'
    # 3 tasks x 2 partitions, 15 records each, 10 a file: each pair's keys split by hash in 2
    assert {(s.partition_path, s.path.split("_")[1]) for s in res.stats} == \
        {(p, f"{t}-0-0") for p in "ab" for t in range(3)}
    assert 6 < len(res.stats) <= 12
    assert not os.path.exists(os.path.join(path, ".hoodie", ".temp", res.instant))


def test_a_task_with_many_file_groups_writes_them_one_at_a_time(spark, tmp_path, monkeypatch):
    """Above MAX_OPEN_FILES file groups in a task, Spark sorts the task's rows by file group and
    the worker closes each file before the next one begins: the same rows, one file a group."""
    monkeypatch.setattr(pair_write, "MAX_OPEN_FILES", 1)
    modes = []
    real_writer = pair_write._task_writer

    def task_writer(*args):  # built on the driver: records whether the rows are sorted
        modes.append(args[-1])
        return real_writer(*args)
    monkeypatch.setattr(pair_write, "_task_writer", task_writer)
    path = str(tmp_path / "t")
    df = spark.range(0, 400, numPartitions=2).selectExpr(
        "id", "concat('p', cast(id % 7 as string)) as p", "id as ts", "concat('x', cast(id as string)) as v")
    res = SparkHudiWriter(spark, path, OPTS).write(df, "bulk_insert")  # 30 records a file
    got = hudi_read(path).to_pylist()
    assert sorted((r["id"], r["p"], r["v"]) for r in got) == [(i, f"p{i % 7}", f"x{i}") for i in range(400)]
    assert {(s.partition_path, s.path.split("_")[1]) for s in res.stats} == \
        {(f"p{i}", f"{t}-0-0") for i in range(7) for t in range(2)}  # 7 partitions x 2 tasks
    assert modes == [True]
    for s in res.stats:
        assert pq.read_metadata(os.path.join(path, s.path)).num_rows == s.num_writes


def test_an_attempt_that_fails_midway_leaves_no_staged_file_and_its_retry_stages_one(tmp_path):
    """The worker writes each file under a hidden temporary name and renames it to its staged
    name once complete: a task attempt that dies midway leaves only the hidden file, which
    publish ignores, and the retry stages the complete one."""
    out = str(tmp_path / "staging")
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    targets = {7: ("a", "f-0_0-0-0_1.parquet")}
    batch = pa.record_batch([pa.array([1, 2, 3]), pa.array(["a"] * 3), pa.array([7] * 3)],
                            names=["id", "p", native_write.GROUP])
    failed = pair_write._TaskFiles(targets, ["id"], schema, "1", out, "1_0_", ".0-0.inprogress")
    failed.add(batch, ordered=False)
    failed._flush(7)  # written, never closed: the attempt died here
    folder = os.path.join(out, f"{native_write.GROUP}=7")
    assert os.listdir(folder) == [".0-0.inprogress"]
    retry = pair_write._TaskFiles(targets, ["id"], schema, "1", out, "1_0_", ".0-1.inprogress")
    retry.add(batch, ordered=False)
    assert retry.close_all() == [{"folder": 7, "rows": 3}]
    assert sorted(os.listdir(folder)) == [".0-0.inprogress", pair_write.STAGED_NAME]
    t = pq.read_table(os.path.join(folder, pair_write.STAGED_NAME))
    assert t.column("_hoodie_record_key").to_pylist() == ["1", "2", "3"]
    assert t.column("_hoodie_commit_seqno").to_pylist() == ["1_0_0", "1_0_1", "1_0_2"]
    assert set(t.column("_hoodie_file_name").to_pylist()) == {"f-0_0-0-0_1.parquet"}


def test_a_task_never_buffers_more_than_its_bound_when_batches_spread_over_many_file_groups(tmp_path, monkeypatch):
    """Batches as large as a row group, spread evenly over 16 file groups: each batch leaves
    every buffer below a row group, so only the task's bound flushes them; it must keep the
    task within TASK_BUFFER_ROWS after every batch, and every row must still be written."""
    monkeypatch.setattr(pair_write, "CHUNK_ROWS", 160)
    monkeypatch.setattr(pair_write, "TASK_BUFFER_ROWS", 4 * 160)
    folders = list(range(16))
    targets = {f: ("a", f"f{f}-0_0-0-0_1.parquet") for f in folders}
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    files = pair_write._TaskFiles(targets, ["id"], schema, "1", str(tmp_path / "staging"), "1_0_", ".0-0.inprogress")
    most, n = 0, 0
    for b in range(30):
        ids = list(range(n, n + 160))
        n += 160
        files.add(pa.record_batch([pa.array(ids), pa.array(["a"] * 160), pa.array([i % 16 for i in ids])],
                                  names=["id", "p", native_write.GROUP]), ordered=False)
        most = max(most, sum(files.buffered.values()))
    assert most <= 4 * 160
    assert sum(r["rows"] for r in files.close_all()) == n


def test_rows_of_a_file_group_the_plan_did_not_count_fail_the_task(tmp_path):
    out = str(tmp_path / "staging")
    files = pair_write._TaskFiles({}, ["id"], pa.schema([("id", pa.int64())]), "1", out, "1_0_", ".t")
    files.add(pa.record_batch([pa.array([1]), pa.array([5])], names=["id", native_write.GROUP]), ordered=False)
    try:
        files.close_all()
    except RuntimeError as e:
        assert "did not count" in str(e) and "deterministic" in str(e)
    else:
        raise AssertionError("rows of an unplanned file group were written")


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


def test_the_batch_check_counts_the_pairs_the_planner_would_count_so_its_job_is_saved(spark, tmp_path, monkeypatch):
    """The batch check's job, grouped by input task too, gives ``plan_by_pair`` the same
    (partition, task) -> (hash, records) as the planner's own count job (a null and an empty
    value both counted under the Hive default's path, hive-style paths hashed as the write job
    hashes them); the writer then plans without that second job, and the table is whole."""
    from pyspark.sql import functions as F

    from airflow_hudi_occ.spark import file_group_plan, tagging
    from airflow_hudi_occ.spark.session import task_ids_as_run
    df = spark.range(0, 60, numPartitions=3).selectExpr(
        "id", "case when id % 3 = 0 then 'a' when id % 3 = 1 then null else '' end as p",
        "cast(id as bigint) as ts", "concat('x', cast(id as string)) as v")
    for hive in (False, True):
        pairs: dict = {}
        labels = tagging.check_batch(df, ["id"], ["p"], hive, False, {}, pairs=pairs)
        keyed = tagging.keyed(df, ["id"], ["p"], hive, labels)
        with task_ids_as_run(spark):
            rows = keyed.groupBy(tagging.PART, F.spark_partition_id(), F.xxhash64(tagging.PART)).count().collect()
        assert pairs == {(r[0], int(r[1])): (int(r[2]), int(r[3])) for r in rows}
        assert sum(n for _, n in pairs.values()) == 60 and len({p for p, _ in pairs}) == 2
    calls = []
    real = file_group_plan.plan_by_pair

    def spy(keyed, opts, table, prefix, counted=None):
        calls.append(counted)
        return real(keyed, opts, table, prefix, counted=counted)
    monkeypatch.setattr("airflow_hudi_occ.spark.writer.plan_by_pair", spy)
    path = str(tmp_path / "t")
    SparkHudiWriter(spark, path, OPTS).write(df, "bulk_insert")
    assert len(calls) == 1 and calls[0] and sum(n for _, n in calls[0].values()) == 60
    assert sorted(r["id"] for r in hudi_read(path).to_pylist()) == list(range(60))
