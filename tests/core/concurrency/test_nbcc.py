"""NBCC's configuration: refused where Hudi refuses it, before anything is written, with an
error naming the key to set; and which commits still resolve conflicts."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.concurrency import nbcc
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.format.bucket_index import bucket_id, nbcc_file_id
from airflow_hudi_occ.core.format.layout import bucket_id_of
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS

NBCC_OPTIONS = {**FAST_WRITE_OPTIONS, "hoodie.write.concurrency.mode": "NON_BLOCKING_CONCURRENCY_CONTROL",
                "hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2"}
ROWS = pa.table({"id": [1, 2], "p": ["a", "a"], "ts": [1, 1], "v": ["x", "y"]})


def _table(tmp_path, table_type="MERGE_ON_READ", **extra):
    return Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                        precombine_field="ts", table_type=table_type, extra_properties=extra or None)


def _refused(table, writer_cls, options, key):
    with pytest.raises(ConfigError) as e:
        writer_cls(table, WriteConfig.from_options(options)).write(ROWS, "upsert")
    assert e.value.key == key
    assert list(table.timeline()) == []  # nothing requested, nothing written
    return e.value


def test_copy_on_write_table_refused(tmp_path):
    err = _refused(_table(tmp_path, "COPY_ON_WRITE"), ArrowTableWriter, NBCC_OPTIONS, "hoodie.table.type")
    assert "MERGE_ON_READ" in str(err) and "OPTIMISTIC_CONCURRENCY_CONTROL" in err.remedy


def test_simple_index_refused(tmp_path):
    opts = {k: v for k, v in NBCC_OPTIONS.items() if k != "hoodie.index.type"}
    err = _refused(_table(tmp_path), MergeOnReadWriter, opts, "hoodie.index.type")
    assert "hoodie.index.type=BUCKET" in err.remedy and "hoodie.bucket.index.num.buckets" in err.remedy


def test_consistent_hashing_refused(tmp_path):
    opts = {**NBCC_OPTIONS, "hoodie.index.bucket.engine": "CONSISTENT_HASHING"}
    err = _refused(_table(tmp_path), MergeOnReadWriter, opts, "hoodie.index.bucket.engine")
    assert "SIMPLE" in err.remedy


def test_early_conflict_detection_refused(tmp_path):
    opts = {**NBCC_OPTIONS, "hoodie.write.concurrency.early.conflict.detection.enable": "true"}
    _refused(_table(tmp_path), MergeOnReadWriter, opts,
             "hoodie.write.concurrency.early.conflict.detection.enable")


def test_eager_rollback_refused(tmp_path):
    opts = {**NBCC_OPTIONS, "hoodie.clean.failed.writes.policy": "EAGER"}
    err = _refused(_table(tmp_path), MergeOnReadWriter, opts, "hoodie.clean.failed.writes.policy")
    assert "LAZY" in err.remedy


def test_bucket_count_must_match_the_table(tmp_path):
    table = _table(tmp_path, **{"hoodie.bucket.index.num.buckets": "4"})
    err = _refused(table, MergeOnReadWriter, NBCC_OPTIONS, "hoodie.bucket.index.num.buckets")
    assert "=4" in err.remedy
    # without the option, the table's count is taken
    cfg = WriteConfig.from_options({k: v for k, v in NBCC_OPTIONS.items()
                                    if k != "hoodie.bucket.index.num.buckets"})
    assert nbcc.num_buckets(table, cfg) == 4


def test_bucket_index_on_mor_needs_nbcc(tmp_path):
    opts = {k: v for k, v in NBCC_OPTIONS.items() if k != "hoodie.write.concurrency.mode"}
    err = _refused(_table(tmp_path), MergeOnReadWriter, opts, "hoodie.index.type")
    assert "NON_BLOCKING_CONCURRENCY_CONTROL" in err.remedy


def test_unknown_mode_refused():
    with pytest.raises(ConfigError) as e:
        WriteConfig.from_options({"hoodie.write.concurrency.mode": "NON_BLOCKING"})
    assert e.value.key == "hoodie.write.concurrency.mode"


def test_which_commits_resolve_conflicts():
    on = WriteConfig.from_options(NBCC_OPTIONS)
    off = WriteConfig.from_options(FAST_WRITE_OPTIONS)
    assert not nbcc.resolves_conflicts(on, "UPSERT", is_table_service=False)
    assert not nbcc.resolves_conflicts(on, "INSERT", is_table_service=False)
    assert not nbcc.resolves_conflicts(on, "DELETE", is_table_service=False)
    assert nbcc.resolves_conflicts(on, "BULK_INSERT", is_table_service=False)
    assert nbcc.resolves_conflicts(on, "COMPACT", is_table_service=True)
    assert nbcc.resolves_conflicts(off, "UPSERT", is_table_service=False)


def test_fixed_file_id_per_bucket():
    # Java's BucketIdentifier.newBucketFileIdForNBCC
    assert nbcc_file_id(3) == "00000003-0000-0000-0000-000000000000-0"
    assert bucket_id_of(nbcc_file_id(12)) == "00000012"
    # one hash for the core and Spark: Java's List<String>.hashCode of the key values
    assert [bucket_id([k], 4) for k in ("a", "b", "id1", "1")] == [
        (31 + 97) % 4, (31 + 98) % 4, bucket_id(["id1"], 4), (31 + 49) % 4]
