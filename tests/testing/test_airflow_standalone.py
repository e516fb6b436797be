"""The parts of the ``airflow standalone`` harness that need no Airflow process: the metadata
database it is told to use, and the runs listing that pages past the API's 100 a page."""

from airflow_hudi_occ.testing.airflow_standalone import AirflowStandalone, standalone_env

URL = "postgresql+psycopg2://airflow:pw@127.0.0.1:5432/airflow_scale"


def test_standalone_env_takes_a_database_url_and_a_parallelism(tmp_path):
    env = standalone_env(tmp_path, 8080, database_url=URL, parallelism=20)
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == URL and env["AIRFLOW__CORE__PARALLELISM"] == "20"
    default = standalone_env(tmp_path, 8080)  # SQLite in AIRFLOW_HOME, Airflow's own default
    assert "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" not in default and default["AIRFLOW__CORE__PARALLELISM"] == "4"


def test_runs_pages_through_every_run(tmp_path, monkeypatch):
    """An ingestion DAG scheduled every minute has hundreds of runs: every one is listed, or a
    run still going past the first page would be missed by ``wait_for_runs``."""
    runs = [{"dag_run_id": f"r{i}", "state": "success"} for i in range(250)]
    asked = []

    def api(method, path, body=None):
        offset = int(path.rsplit("offset=", 1)[1])
        asked.append(offset)
        return {"dag_runs": runs[offset:offset + 100], "total_entries": len(runs)}

    af = AirflowStandalone(tmp_path, {}, 8080, bin_dir="/nonexistent", log_path=tmp_path / "log")
    monkeypatch.setattr(af, "api", api)
    assert af.runs("ingest") == runs and asked == [0, 100, 200]


def test_a_survivor_is_a_process_seen_that_still_runs_not_a_later_one_with_its_pid():
    """A 90-day backfill starts thousands of processes; one of their pids came back as a kernel
    thread and the run was reported as leaving a process behind. A process is known by its pid
    and its start time."""
    import subprocess

    import psutil

    from airflow_hudi_occ.testing.airflow_standalone import remember, survivors
    child = subprocess.Popen(["sleep", "30"])
    try:
        seen: dict[int, float] = {}
        remember(seen, [psutil.Process(child.pid)])
        assert survivors(seen) == [child.pid]
        assert survivors({child.pid: seen[child.pid] - 60}) == []  # the pid names a later process
    finally:
        child.kill()
        child.wait()
    assert survivors(seen) == []
