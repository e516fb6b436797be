"""hudi:// assets: the URI codec through Airflow's own Asset (the provider's handler is found
by the providers manager, as in a DAG file), the factory, and the errors of bad input."""

import pyarrow as pa
import pytest

from airflow_hudi_occ.core import ArrowTableWriter, Table, WriteConfig
from airflow_hudi_occ.core.errors import InvalidTableUriError, TableNotFoundError
from airflow_hudi_occ.provider import assets
from airflow_hudi_occ.provider.version_compat import Asset

OPTS = {"hoodie.write.lock.provider": "filesystem", "hoodie.time.generator.max_expected_clock_skew_ms": "2"}


@pytest.mark.parametrize("given, uri, base", [
    ("/data//lake/./orders/", "hudi://file/data/lake/orders", "/data/lake/orders"),
    ("file:///data/lake/x/../orders", "hudi://file/data/lake/orders", "/data/lake/orders"),
    ("hudi:///data/lake/orders/", "hudi://file/data/lake/orders", "/data/lake/orders"),
    ("s3a://lake/orders/", "hudi://s3/lake/orders", "s3://lake/orders"),
    ("s3://lake//orders", "hudi://s3/lake/orders", "s3://lake/orders"),
    ("hudi://S3/lake/orders", "hudi://s3/lake/orders", "s3://lake/orders"),
    ("gcs://b/t", "hudi://gs/b/t", "gs://b/t"),
    ("hdfs://nn:8020/warehouse/t", "hudi://hdfs/nn:8020/warehouse/t", "hdfs://nn:8020/warehouse/t"),
])
def test_one_table_one_uri_and_back(given, uri, base):
    assert assets.table_uri(given) == uri
    assert assets.base_path(uri) == base
    assert assets.table_uri(base) == uri  # round trip
    if given.startswith("hudi:"):
        assert Asset(uri=given).uri == uri  # Airflow's sanitiser calls ours


def test_airflow_normalises_through_the_registered_handler():
    # the same table spelled three ways is one asset (one node in the asset graph)
    spelled = {Asset(uri=u).uri for u in ("hudi:///d/t", "hudi://file//d/t/", "hudi://FILE/d/x/../t")}
    assert spelled == {"hudi://file/d/t"}
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime
    pm = ProvidersManagerTaskRuntime()
    assert pm.asset_uri_handlers["hudi"] is assets.sanitize_uri
    assert pm.asset_factories["hudi"] is assets.create_asset


def test_factory_with_a_storage_and_no_io(tmp_path):
    a = assets.create_asset(path="lake/orders", storage="s3", extra={"team": "x"})
    assert (a.uri, a.name, a.extra) == ("hudi://s3/lake/orders", "hudi://s3/lake/orders", {"team": "x"})
    # a table that does not exist yet is nameable: the DAG that creates it must parse
    assert assets.create_asset(path=str(tmp_path / "not-yet")).uri == f"hudi://file{tmp_path}/not-yet"


@pytest.mark.parametrize("bad, words", [
    ("hudi://s3/b?region=eu", ["has a query", "connection"]),
    ("hudi://s3/", ["no path", "hudi://s3/<bucket/path>"]),
    ("hudi:///", ["no path"]),
    ("hudi:///../etc", ["'..' goes above the root of its file system"]),
    ("hudi://s3/b/../../x", ["above the root of its bucket"]),
    ("hudi://nn:8020/x", ["host:port", "hudi://hdfs/namenode:8020/path"]),
    ("hudi://user@s3/b/t", ["user info", "storage_options"]),
    ("hudi://s_3/b", ["not a storage protocol"]),
])
def test_a_malformed_uri_says_what_and_how_to_fix(bad, words):
    with pytest.raises(InvalidTableUriError) as ei:
        Asset(uri=bad)
    assert isinstance(ei.value, ValueError)  # what Airflow expects of a URI handler
    assert ei.value.remedy and bad.rstrip("/").split("?")[0][:9] in str(ei.value)
    for w in words:
        assert w in str(ei.value)


@pytest.mark.parametrize("bad, words", [
    ("relative/table", ["relative path", "absolute"]),
    ("", ["empty"]),
    ("file://otherhost/x", ["host 'otherhost'"]),
])
def test_factory_refuses_paths_that_name_no_single_table(bad, words):
    with pytest.raises(InvalidTableUriError) as ei:
        assets.create_asset(path=bad)
    assert all(w in str(ei.value) for w in words), ei.value
    with pytest.raises(InvalidTableUriError, match="give one of them"):
        assets.create_asset(path="s3://b/t", storage="gs")


def test_require_table_names_the_asset_and_the_fix(tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(TableNotFoundError) as ei:
        assets.require_table(assets.create_asset(path=str(tmp_path / "plain")))
    msg = str(ei.value)
    assert f"hudi://file{tmp_path}/plain names no Hudi table" in msg and ".hoodie/" in msg
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"])
    assert assets.require_table(f"hudi://file{tmp_path}/t").base_uri == t.base_uri


def test_commit_summary_counts_from_the_commit_metadata(tmp_path):
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"])
    w = ArrowTableWriter(t, WriteConfig.from_options(OPTS))
    w.write(pa.table({"id": [1, 2, 3], "p": ["a", "a", "b"], "ts": [1, 1, 1]}), "upsert")
    r = w.write(pa.table({"id": [1, 4], "p": ["a", "a"], "ts": [2, 2]}), "upsert")
    s = assets.commit_summary(t.base_uri, None, instant=r.instant.requested_time,
                              operation="upsert", outcome="committed", conflict_retries=1)
    assert s["table_uri"] == f"hudi://file{tmp_path}/t" and s["instant"] == r.instant.requested_time
    assert (s["rows_inserted"], s["rows_updated"], s["rows_deleted"]) == (1, 1, 0)
    tl = t.timeline()
    stats = tl.commit_metadata(tl.get(r.instant.requested_time)).write_stats()
    assert s["rows_written"] == sum(x.num_writes for x in stats) >= 2
    assert s["files_written"] == len(stats) and s["partitions"] == 1
    assert s["bytes_written"] == sum(x.file_size_in_bytes for x in stats) > 0
    assert s["completion_time"] == r.instant.completion_time and '"id"' in s["schema"]
    # a metadata read that fails loses the counts, not the run
    gone = assets.commit_summary(str(tmp_path / "nope"), None, instant="1", operation="upsert",
                                 outcome="committed")
    assert "rows_written" not in gone and "TableNotFoundError" in gone["metadata_error"]


def test_openlineage_converter_uses_file_and_object_store_naming():
    ds = assets.convert_asset_to_openlineage(Asset(uri="hudi://s3/lake/orders"), None)
    assert (ds.namespace, ds.name) == ("s3://lake", "orders")
    ds = assets.convert_asset_to_openlineage(Asset(uri="hudi:///data/lake/orders"), None)
    assert (ds.namespace, ds.name) == ("file", "/data/lake/orders")


class _StubTI:
    dag_id, task_id, run_id, try_number, map_index = "services", "clean", "manual__1", 1, -1

    def xcom_push(self, key, value):
        pass


class _OutletEvents(dict):
    """What the Task SDK's ``outlet_events`` offers the operators: ``[asset].extra``."""

    def __missing__(self, key):
        class Acc:
            extra: dict = {}
        acc = Acc()
        acc.extra = {}
        self[key] = acc
        return acc


def test_a_service_run_is_an_event_with_its_instant_and_no_row_counts(tmp_path):
    from airflow_hudi_occ.provider.operators.table_service import HudiTableServiceOperator

    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"])
    w = ArrowTableWriter(t, WriteConfig.from_options(OPTS))
    for ts in (1, 2, 3):
        w.write(pa.table({"id": [1, 2], "p": ["a", "a"], "ts": [ts, ts]}), "upsert")
    op = HudiTableServiceOperator(task_id="clean", service="clean", table_path=t.base_uri, hudi_conn_id=None,
                                  options={**OPTS, "hoodie.clean.commits.retained": "1"})
    assert op.outlets == [assets.create_asset(path=t.base_uri)]
    events = _OutletEvents()
    out = op.execute({"ti": _StubTI(), "outlet_events": events})
    extra = events[op.outlets[0]].extra
    assert out["clean_instant"] and extra["instant"] == out["clean_instant"]
    assert (extra["operation"], extra["action"], extra["outcome"]) == ("clean", "clean", "done")
    assert "rows_written" not in extra and "schema" not in extra
    lin = op.get_openlineage_facets_on_complete(None)
    assert [d.name for d in lin.inputs] == [d.name for d in lin.outputs] == [t.base_uri]
    assert lin.run_facets["hudi_occ"].operation == "clean"
