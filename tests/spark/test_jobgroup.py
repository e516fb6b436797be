"""spark/jobgroup.py without a cluster: Spark's time settings as the Connect route reads them
(the cancel itself runs on real servers: test_writer_connect.py, test_executor.py)."""

import pytest

from airflow_hudi_occ.spark.jobgroup import spark_seconds


@pytest.mark.parametrize("text, seconds", [("2s", 2.0), ("500ms", 0.5), ("3", 3.0), ("1min", 60.0),
                                           (" 1.5s ", 1.5), ("2h", 7200.0)])
def test_spark_time_settings_in_seconds(text, seconds):
    assert spark_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "s", "2 parsecs", "-1s", "two"])
def test_a_setting_that_is_not_a_time_is_refused(text):
    with pytest.raises(ValueError, match="not a Spark time setting"):
        spark_seconds(text)


def test_a_stopped_driver_cancels_its_job_and_waits_for_its_tasks_before_raising(table, monkeypatch):
    """SIGTERM turned into KeyboardInterrupt (a Connect client's kill) arrives while the driver
    watches its job: the job is cancelled AND its tasks waited for before the interruption
    reaches the caller, whose rollback must come after the last task wrote (a task still
    running would leave its file on the table)."""
    import threading

    from airflow_hudi_occ.spark import jobgroup

    calls, release = [], threading.Event()

    class Handle:
        def __init__(self, spark, name, description):
            pass

        def enter(self):
            pass

        def leave(self):
            pass

        def progress(self):
            return (0, 4)

        def cancel(self):
            calls.append("cancel")

        def wait_until_idle(self):
            calls.append("wait")
            release.set()  # the tasks are gone: the action returns

    def interrupted():
        calls.append("interrupt")
        raise KeyboardInterrupt("signal 15")

    monkeypatch.setattr(jobgroup, "job_handle", Handle)
    with pytest.raises(KeyboardInterrupt):
        jobgroup.run_watched(None, table, "20261129000000001", lambda: release.wait(10), extra_check=interrupted)
    assert calls == ["interrupt", "cancel", "wait"]
