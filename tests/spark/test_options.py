"""SparkWriteOptions: the Spark engine's refusals, made before a session exists."""

import pytest

from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.spark.submit.options import SparkWriteOptions


@pytest.mark.parametrize("key", ["hoodie.datasource.write.table.type", "hoodie.table.type"])
def test_merge_on_read_is_accepted_for_the_operations_core_writes_as_deltacommits(key):
    for op in ("upsert", "insert", "bulk_insert", "delete"):
        o = SparkWriteOptions.from_options({key: "MERGE_ON_READ", "hoodie.datasource.write.operation": op})
        assert o.table_type == "MERGE_ON_READ"


@pytest.mark.parametrize("extra", [{"hoodie.datasource.write.operation": "insert_overwrite"},
                                   {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2"}])
def test_merge_on_read_refuses_what_deltacommits_do_not_write_yet(extra):
    with pytest.raises(ConfigError) as e:
        SparkWriteOptions.from_options({"hoodie.datasource.write.table.type": "MERGE_ON_READ",
                                        **extra}).check_writable()
    assert "merge-on-read" in str(e.value) and e.value.remedy


def test_copy_on_write_is_the_default():
    SparkWriteOptions.from_options({"hoodie.datasource.write.table.type": "COPY_ON_WRITE"})


def test_non_blocking_concurrency_control_is_refused_by_spark():
    with pytest.raises(ConfigError) as e:
        SparkWriteOptions.from_options({"hoodie.datasource.write.table.type": "MERGE_ON_READ",
                                        "hoodie.write.concurrency.mode": "NON_BLOCKING_CONCURRENCY_CONTROL"}
                                       ).check_writable()
    assert e.value.key == "hoodie.write.concurrency.mode" and "MergeOnReadWriter" in e.value.remedy


def test_table_services_accept_the_options_of_an_nbcc_merge_on_read_table():
    """The service job and the service operators parse options without the write checks."""
    SparkWriteOptions.from_options({"hoodie.datasource.write.table.type": "MERGE_ON_READ",
                                    "hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2",
                                    "hoodie.write.concurrency.mode": "NON_BLOCKING_CONCURRENCY_CONTROL"})


def test_another_operation_reuses_the_checked_options_and_checks_only_the_operation(monkeypatch):
    """``SparkHudiWriter.write(df, "delete")`` on a writer built for upserts: the operation
    changes, nothing else is parsed again (issue 29 item 5), and a wrong one is still named."""
    from airflow_hudi_occ.core.errors import ConfigError
    from airflow_hudi_occ.spark.submit import options as submit_options

    opts = submit_options.SparkWriteOptions.from_options(
        {"hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.operation": "upsert"})
    monkeypatch.setattr(submit_options, "check_write_options",
                        lambda *a, **kw: pytest.fail("parsed again"))
    assert opts.with_operation(None) is opts and opts.with_operation("upsert") is opts
    deleting = opts.with_operation("delete")
    assert deleting.operation == "delete" and deleting.operation_type == "DELETE"
    assert deleting.options["hoodie.datasource.write.operation"] == "delete"
    assert deleting.write_config.options["hoodie.datasource.write.operation"] == "delete"
    assert deleting.record_key_fields == ["id"] and opts.operation == "upsert"
    with pytest.raises(ConfigError) as e:
        opts.with_operation("upsertt")
    assert e.value.key == "hoodie.datasource.write.operation"
