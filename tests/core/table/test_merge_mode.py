"""A table's record merge mode (``core/table/merge_mode.py``, ``TableConfig.merge_mode`` /
``ordering_field``), judged by Java Hudi: the same two batches (copies of a key within the
first, then an update whose ordering value is smaller for one key and larger for the other)
written by Java and by our core writers, copy-on-write and merge-on-read, under
``hoodie.record.merge.mode`` and under the payload class that means it, read the same after
each batch; the table records the same mode; a write asking another mode than the table's is
refused before any instant exists, as Java refuses it."""

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
    "commit_time": {"hoodie.record.merge.mode": "COMMIT_TIME_ORDERING"},
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
                     table_type=table_type, extra_properties=creation_properties(cfg.merge_mode, "ts"))
    w = (ArrowTableWriter if table_type == "COPY_ON_WRITE" else MergeOnReadWriter)(t, cfg)
    seen = []
    for b in BATCHES:
        w.write(b, "upsert")
        seen.append(rows(read_table(Table.open(path))))
    return t, seen


@pytest.fixture(scope="module")
def java(tmp_path_factory, java_hudi):
    """Java's reads after each batch, per (table type, case), and its tables' paths."""
    root = tmp_path_factory.mktemp("merge_mode")
    steps, where, paths = [], {}, {}
    for tt in TYPES:
        for name, opts in CASES.items():
            path = paths[tt, name] = str(root / f"{tt}_{name}")
            o = {"hoodie.metadata.enable": "false", **opts}
            for n, b in enumerate(BATCHES):
                first = dict(table_type=tt, table_version=8, record_key="id", partition_fields="p",
                             ordering_field="ts") if n == 0 else {}
                steps.append(Write(path, b, operation="upsert", options=o, **first))
                where[tt, name, n] = len(steps)
                steps.append(Read(path))
    # a table made with EVENT_TIME_ORDERING, then a write asking COMMIT_TIME_ORDERING
    clash = paths["clash"] = str(root / "clash")
    steps.append(Write(clash, BATCHES[0], operation="upsert", table_type="COPY_ON_WRITE", table_version=8,
                       record_key="id", partition_fields="p", ordering_field="ts",
                       options={"hoodie.metadata.enable": "false"}))
    where["clash"] = len(steps)
    steps.append(Write(clash, BATCHES[1], operation="upsert",
                       options={"hoodie.metadata.enable": "false", **CASES["commit_time"]}))
    results = java_hudi.run(*steps, check=False, continue_on_error=True)
    return paths, {k: results[i] for k, i in where.items()}


@pytest.mark.parametrize("table_type", TYPES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_rows_after_each_batch_are_javas(java, tmp_path, table_type, case):
    paths, results = java
    _, seen = ours(str(tmp_path / "t"), table_type, CASES[case])
    for n in range(len(BATCHES)):
        got = results[table_type, case, n]
        assert got.ok, got.error
        assert seen[n] == rows(got.rows), (n, seen[n])


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_table_records_javas_merge_mode(java, tmp_path, case):
    paths, _ = java
    t, _ = ours(str(tmp_path / "t"), "COPY_ON_WRITE", CASES[case])
    javas = Table.open(paths["COPY_ON_WRITE", case])
    assert t.config.merge_mode is javas.config.merge_mode
    assert t.config.properties["hoodie.record.merge.mode"] == javas.config.properties["hoodie.record.merge.mode"]


def test_another_mode_than_the_tables_is_refused_before_any_instant(java, tmp_path):
    _, results = java
    assert not results["clash"].ok  # Java refuses it too
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                     precombine_field="ts")
    assert t.config.merge_mode is RecordMergeMode.EVENT_TIME_ORDERING
    w = ArrowTableWriter(t, WriteConfig.from_options({**FAST_WRITE_OPTIONS, **CASES["commit_time"]}))
    with pytest.raises(ConfigError) as e:
        w.write(BATCHES[0], "upsert")
    assert e.value.key == "hoodie.record.merge.mode" and "EVENT_TIME_ORDERING" in str(e.value)
    assert t.timeline().instants == []


def test_mode_and_payload_that_disagree_are_refused():
    with pytest.raises(ConfigError, match="disagree"):
        WriteConfig.from_options({**CASES["commit_time"], **CASES["default_payload"]})


@pytest.mark.parametrize("options", [{"hoodie.record.merge.mode": "CUSTOM"},
                                     {"hoodie.datasource.write.payload.class": MODEL + "PartialUpdateAvroPayload"}])
def test_merges_this_project_does_not_apply_are_refused(options):
    with pytest.raises(ConfigError) as e:
        WriteConfig.from_options(options)
    assert "HudiJavaWriteOperator" in e.value.remedy


def test_event_time_without_an_ordering_field_is_refused_at_creation():
    with pytest.raises(ConfigError, match="ordering field"):
        creation_properties(RecordMergeMode.EVENT_TIME_ORDERING, None)


def test_a_table_merging_by_a_java_merger_is_refused_before_any_instant(tmp_path):
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                     precombine_field="ts", extra_properties={"hoodie.record.merge.mode": "CUSTOM"})
    with pytest.raises(ConfigError) as e:
        ArrowTableWriter(t, WriteConfig.from_options(FAST_WRITE_OPTIONS)).write(BATCHES[0], "upsert")
    assert "CUSTOM" in str(e.value) and "HudiJavaWriteOperator" in e.value.remedy
    assert t.timeline().instants == []
