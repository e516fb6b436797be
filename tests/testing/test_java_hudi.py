"""The Java Hudi harness itself: set-up checks, the instant names it reports, and a JVM run
whose failed step comes back with Java's exception class while the other steps go on."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from airflow_hudi_occ.testing import java_hudi_driver as driver
from airflow_hudi_occ.testing.java_hudi import (INSTALL_SCRIPT, JavaHudi, JavaHudiError,
                                                JavaHudiNotInstalledError, JavaHudiSetup, Read, Write)
from airflow_hudi_occ.testing.tables import rows_by_key


def test_a_missing_set_up_fails_naming_the_script_to_run(tmp_path, monkeypatch):
    monkeypatch.setenv("HUDI_OCC_JAVA_HUDI_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(JavaHudiNotInstalledError, match=INSTALL_SCRIPT):
        JavaHudi(tmp_path / "w")


def test_a_set_up_whose_files_went_missing_names_them_and_the_script(tmp_path):
    real = JavaHudiSetup.load()
    data = {**real.__dict__, "hudi_jar": str(tmp_path / "gone.jar")}
    (tmp_path / "setup.json").write_text(json.dumps(data))
    with pytest.raises(JavaHudiNotInstalledError, match="gone.jar") as e:
        JavaHudiSetup.load(tmp_path)
    assert INSTALL_SCRIPT in str(e.value)


def test_the_driver_reads_instants_from_timeline_file_names():
    names = {"20260101000000001.commit.requested", "20260101000000001.inflight",
             "20260101000000001_20260101000000009.commit",
             "20260101000000002.deltacommit.requested", "20260101000000002.deltacommit.inflight",
             "20260101000000003.rollback.requested", "hoodie.properties"}
    got = driver.describe_instants(names)
    assert got["completed"] == [{"requested": "20260101000000001", "completed": "20260101000000009",
                                 "action": "commit"}]
    assert got["pending"] == [
        {"requested": "20260101000000002", "action": "deltacommit", "state": "inflight"},
        {"requested": "20260101000000003", "action": "rollback", "state": "requested"}]


def test_a_failed_step_reports_its_java_class_and_the_others_still_run(tmp_path):
    """On the kept JVM (``keep_jvm``: the calls of a test session share one) and on a JVM of
    its own (``start``) alike; a failed call leaves the kept JVM serving the next."""
    java = JavaHudi(tmp_path / "java", keep_jvm=True)
    path = str(tmp_path / "t")
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "p": ["a", "b"], "ts": pa.array([1, 1], pa.int64())})
    results = java.run(Read(str(tmp_path / "no-table")),
                       Write(path, rows, operation="insert", table_type="COPY_ON_WRITE", record_key="id",
                             partition_fields="p", ordering_field="ts",
                             options={"hoodie.metadata.enable": "false"}),
                       Read(path), check=False, continue_on_error=True)
    failed, wrote, read = results
    assert not failed.ok and isinstance(failed.error, JavaHudiError)
    assert failed.error.java_class == "org.apache.hudi.exception.TableNotFoundException"
    assert failed.error.has("TableNotFoundException") and "no-table" in str(failed.error)
    assert not failed.error.has("HoodieWriteConflictException")
    assert wrote.ok and [c["action"] for c in wrote.completed] == ["commit"]
    assert rows_by_key(read.rows, columns=["id", "p", "ts"]) == {
        1: {"id": 1, "p": "a", "ts": 1}, 2: {"id": 2, "p": "b", "ts": 1}}
    kept = java._kept
    with pytest.raises(JavaHudiError):  # the same JVM again: a failed call raises ...
        java.run(Read(str(tmp_path / "no-table")), Read(path))
    assert rows_by_key(java.read(path), columns=["id"]) == {1: {"id": 1}, 2: {"id": 2}}  # ... and it serves on
    assert java._kept is kept and kept.proc.poll() is None
    assert [p.name for p in (tmp_path / "java").glob("kept-*")] == [kept.run_dir.name]
    java.close()
    assert kept.proc.poll() is not None
    # without continue_on_error the first failure ends the run, and check raises it
    run = java.start(Read(str(tmp_path / "no-table")), Read(path))
    with pytest.raises(JavaHudiError) as e:
        run.wait()
    assert e.value.java_class == failed.error.java_class
    assert [r.index for r in run.results()] == [0]


def test_the_timelines_step_returns_javas_active_and_archived_instants(tmp_path, java_hudi):
    """On the v9 fixture and its metadata table (``.hoodie/metadata``, a table too): Java's
    active timeline is ours (times, actions, states, completion times) and nothing is
    archived. An archived timeline with rows is compared in
    tests/reliability/test_metadata_table_crash.py (the metadata table's archival)."""
    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.testing.java_hudi import Timelines
    from airflow_hudi_occ.testing.tables import java_fixture
    path = java_fixture("v9_txns_simple_overwrite", tmp_path)
    tables = [str(path), str(path / ".hoodie" / "metadata")]
    for table, step in zip(tables, java_hudi.run(*(Timelines(t) for t in tables))):
        found = step.timelines()
        ours = sorted((i.requested_time, i.action.value, i.state.value, i.completion_time)
                      for i in Table.open(table).timeline())
        assert ours and sorted((i["requested"], i["action"], i["state"].lower(), i["completed"])
                               for i in found["active"]) == ours
        assert found["archived"] == []
