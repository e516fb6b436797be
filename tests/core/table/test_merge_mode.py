"""A table's record merge mode (``core/table/merge_mode.py``, ``TableConfig.merge_mode`` /
``ordering_field``), judged by Java Hudi: the same two batches (copies of a key within the
first, then an update whose ordering value is smaller for one key and larger for the other)
written by Java and by our core writers, copy-on-write and merge-on-read, under the write key
``hoodie.write.record.merge.mode`` and under the payload class that means it, read the same
after each batch, and the table records the same mode. Where Java differs by design (the table
key on a table's first write; another mode than the table's on a later write) the tests say
what Java does and what we do instead."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, read_table
from airflow_hudi_occ.core.config import RecordMergeMode, WriteConfig
from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.table.merge_mode import creation_properties
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.java_hudi import Read, Write
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS

MODEL = "org.apache.hudi.common.model."
CASES = {
    "commit_time": {"hoodie.write.record.merge.mode": "COMMIT_TIME_ORDERING"},
    "event_time": {"hoodie.write.record.merge.mode": "EVENT_TIME_ORDERING"},
    "overwrite_latest_payload": {"hoodie.datasource.write.payload.class": MODEL + "OverwriteWithLatestAvroPayload"},
    "default_payload": {"hoodie.datasource.write.payload.class": MODEL + "DefaultHoodieRecordPayload"},
}
TYPES = ("COPY_ON_WRITE", "MERGE_ON_READ")


def batch(ids, ts, v) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "p": pa.array(["a"] * len(ids)),
                     "ts": pa.array(ts, pa.int64()), "v": pa.array(v)})


BATCHES = [batch([1, 1, 2, 2], [5, 3, 3, 5], ["a5", "b3", "c3", "d5"]), batch([1, 2], [1, 9], ["e1", "f9"])]


def rows(t: pa.Table) -> list[tuple]:
    return sorted((r["id"], r["ts"], r["v"]) for r in t.select(["id", "ts", "v"]).to_pylist())


def ours(path: str, table_type: str, options: dict) -> tuple[Table, list[list[tuple]]]:
    cfg = WriteConfig.from_options({**FAST_WRITE_OPTIONS, **options})
    t = Table.create(path, "t", record_key_fields=["id"], partition_fields=["p"], precombine_field="ts",
                     table_type=table_type, extra_properties=creation_properties(cfg.merge_mode))
    w = (ArrowTableWriter if table_type == "COPY_ON_WRITE" else MergeOnReadWriter)(t, cfg)
    seen = []
    for b in BATCHES:
        w.write(b, "upsert")
        seen.append(rows(read_table(Table.open(path))))
    return t, seen


def java_history(java_hudi, path: str, table_type: str, options: dict):
    """Java's reads after each batch of :data:`BATCHES` (one call to the session's JVM)."""
    steps = []
    for n, b in enumerate(BATCHES):
        first = dict(table_type=table_type, table_version=8, record_key="id", partition_fields="p",
                     ordering_field="ts") if n == 0 else {}
        steps += [Write(path, b, operation="upsert", options={"hoodie.metadata.enable": "false", **options},
                        **first), Read(path)]
    results = java_hudi.run(*steps, check=False, continue_on_error=True)
    return [results[i] for i in range(len(steps))]


#: the default run's slice: copy-on-write, one spelling of each mode; the rest slow
DEFAULT_SLICE = ("commit_time", "default_payload")
MATRIX = [pytest.param("COPY_ON_WRITE", c, id=f"{c}-COPY_ON_WRITE",
                       marks=() if c in DEFAULT_SLICE else pytest.mark.slow) for c in sorted(CASES)] + [
    pytest.param("MERGE_ON_READ", c, id=f"{c}-MERGE_ON_READ", marks=pytest.mark.slow) for c in sorted(CASES)]


@pytest.mark.parametrize("table_type, case", MATRIX)
def test_rows_after_each_batch_and_the_recorded_mode_are_javas(java_hudi, tmp_path, table_type, case):
    results = java_history(java_hudi, str(tmp_path / "java"), table_type, CASES[case])
    t, seen = ours(str(tmp_path / "ours"), table_type, CASES[case])
    for n in range(len(BATCHES)):
        wrote, read = results[2 * n], results[2 * n + 1]
        assert wrote.ok and read.ok, (wrote.error, read.error)
        assert seen[n] == rows(read.rows), (n, seen[n])
    javas = Table.open(str(tmp_path / "java"))
    assert t.config.merge_mode is javas.config.merge_mode
    assert t.config.properties["hoodie.record.merge.mode"] == javas.config.properties["hoodie.record.merge.mode"]


def test_another_mode_than_the_tables_is_refused_before_any_instant(java_hudi, tmp_path):
    """On an EVENT_TIME_ORDERING table Java refuses the table key with another value ("Config
    conflict"), takes the write key without a word and merges by the table's mode anyway (the
    stored a5 stays), and takes a payload class of the other mode and merges that write by it
    (e1 replaces a5 although its ordering value is smaller): the table's declared mode then no
    longer says how its records merged. Here every spelling is refused, before any instant."""
    clash = str(tmp_path / "java")
    plain = {"hoodie.metadata.enable": "false"}
    made, by_table_key, by_write_key, after_write_key, by_payload, after_payload = java_hudi.run(
        Write(clash, BATCHES[0], operation="upsert", table_type="COPY_ON_WRITE", table_version=8,
              record_key="id", partition_fields="p", ordering_field="ts", options=plain),
        Write(clash, BATCHES[1], operation="upsert",
              options={**plain, "hoodie.record.merge.mode": "COMMIT_TIME_ORDERING"}),
        Write(clash, BATCHES[1], operation="upsert", options={**plain, **CASES["commit_time"]}),
        Read(clash),
        Write(clash, BATCHES[1], operation="upsert", options={**plain, **CASES["overwrite_latest_payload"]}),
        Read(clash), check=False, continue_on_error=True)
    assert made.ok and not by_table_key.ok and "Config conflict" in str(by_table_key.error)
    assert by_write_key.ok and rows(after_write_key.rows) == [(1, 5, "a5"), (2, 9, "f9")]
    assert by_payload.ok and rows(after_payload.rows) == [(1, 1, "e1"), (2, 9, "f9")]
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                     precombine_field="ts")
    assert t.config.merge_mode is RecordMergeMode.EVENT_TIME_ORDERING
    for options in ({"hoodie.record.merge.mode": "COMMIT_TIME_ORDERING"}, CASES["commit_time"],
                    CASES["overwrite_latest_payload"]):
        w = ArrowTableWriter(t, WriteConfig.from_options({**FAST_WRITE_OPTIONS, **options}))
        with pytest.raises(ConfigError) as e:
            w.write(BATCHES[0], "upsert")
        assert e.value.key == "hoodie.record.merge.mode" and "EVENT_TIME_ORDERING" in str(e.value)
        assert t.timeline().instants == []


def test_the_table_key_on_a_first_write_is_recorded(java_hudi, tmp_path):
    """Java 1.2 ignores ``hoodie.record.merge.mode`` on the write that creates the table (it
    infers EVENT_TIME_ORDERING from the ordering field) and then refuses the next write with the
    same options. Here the table takes the mode asked, and the same options keep working."""
    opts = {"hoodie.record.merge.mode": "COMMIT_TIME_ORDERING"}
    first, second = java_history(java_hudi, str(tmp_path / "java"), "COPY_ON_WRITE", opts)[:3:2]
    assert first.ok and not second.ok and "Config conflict" in str(second.error)
    assert Table.open(str(tmp_path / "java")).config.merge_mode is RecordMergeMode.EVENT_TIME_ORDERING
    t, seen = ours(str(tmp_path / "ours"), "COPY_ON_WRITE", opts)
    assert t.config.merge_mode is RecordMergeMode.COMMIT_TIME_ORDERING
    assert seen[-1] == [(1, 1, "e1"), (2, 9, "f9")]  # as Java merges under the write key


def test_mode_and_payload_that_disagree_are_refused():
    with pytest.raises(ConfigError, match="disagree"):
        WriteConfig.from_options({**CASES["commit_time"], **CASES["default_payload"]})


@pytest.mark.parametrize("options", [{"hoodie.record.merge.mode": "CUSTOM"},
                                     {"hoodie.datasource.write.payload.class": MODEL + "PartialUpdateAvroPayload"}])
def test_merges_this_project_does_not_apply_are_refused(options):
    with pytest.raises(ConfigError) as e:
        WriteConfig.from_options(options)
    assert "HudiJavaWriteOperator" in e.value.remedy


def test_event_time_without_an_ordering_field_is_recorded_as_java_records_it():
    assert creation_properties(RecordMergeMode.EVENT_TIME_ORDERING) == {
        "hoodie.record.merge.mode": "EVENT_TIME_ORDERING"}
    assert creation_properties(None) == {}


def test_a_table_merging_by_a_java_merger_is_refused_before_any_instant(tmp_path):
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                     precombine_field="ts", extra_properties={"hoodie.record.merge.mode": "CUSTOM"})
    with pytest.raises(ConfigError) as e:
        ArrowTableWriter(t, WriteConfig.from_options(FAST_WRITE_OPTIONS)).write(BATCHES[0], "upsert")
    assert "CUSTOM" in str(e.value) and "HudiJavaWriteOperator" in e.value.remedy
    assert t.timeline().instants == []
