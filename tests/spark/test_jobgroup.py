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


def test_a_stopped_driver_cancels_its_job_until_it_ends_and_waits_for_its_tasks_before_raising(table, monkeypatch):
    """SIGTERM turned into KeyboardInterrupt (a Connect client's kill) arrives while the driver
    watches its job, before the job's thread has sent its action (the first cancel meets
    nothing): the driver cancels again until the action ends, then waits for its tasks, and
    only then lets the interruption reach the caller, whose rollback must come after the last
    task wrote (a task still running would leave its file on the table). The instant's abort
    signal is up before the first cancel, so tasks Spark does not kill stop at their next check."""
    import threading

    from airflow_hudi_occ.core.concurrency import abort_signal
    from airflow_hudi_occ.spark import jobgroup

    calls, ended, signalled = [], threading.Event(), []

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
            signalled.append(abort_signal.abort_reason(table, "20261129000000001"))
            if calls.count("cancel") == 2:  # the action was sent after the first one
                ended.set()

        def wait_until_idle(self):
            calls.append("wait")

    def action():
        assert ended.wait(30)
        calls.append("action ended")
        raise RuntimeError("cancelled")

    def interrupted():
        calls.append("interrupt")
        raise KeyboardInterrupt("signal 15")

    monkeypatch.setattr(jobgroup, "job_handle", Handle)
    with pytest.raises(KeyboardInterrupt):
        jobgroup.run_watched(None, table, "20261129000000001", action, extra_check=interrupted)
    assert calls == ["interrupt", "cancel", "cancel", "action ended", "wait"]
    assert signalled[0] is not None and signalled[0]["source"] == "spark-driver", signalled
