"""What the Apache Spark provider's own ``on_kill`` leaves behind in local mode, measured
against ours, on a real spark-submit held before its commit (slow: two Spark start-ups)."""

import os
import sys
import threading
import time

import psutil
import pytest

from airflow_hudi_occ.provider.hooks.hudi_occ import HudiSparkJobHook
from airflow_hudi_occ.testing.spark_job import PATH as SPARK_APP

pytestmark = pytest.mark.slow


def _source(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    f = str(tmp_path / "src.parquet")
    pq.write_table(pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"], "ts": [1, 1, 1]}), f)
    return f


def _submit(hook_cls, tmp_path, name):
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    hold = tmp_path / f"hold-{name}"
    args = ["--table", str(tmp_path / f"t-{name}"), "--source", _source(tmp_path),
            "--option", "hoodie.datasource.write.recordkey.field=id",
            "--option", "hoodie.datasource.write.partitionpath.field=p"]
    env = {"PYSPARK_PYTHON": sys.executable, "HUDI_OCC_TEST_COMMIT_BARRIER": f"{hold}:99",
           "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    os.environ.setdefault("AIRFLOW_CONN_SPARK_LOCAL", '{"conn_type": "spark", "host": "local[1]"}')
    kw = dict(conn_id="spark_local", application_args=args, env_vars=env,
              conf={"spark.ui.enabled": "false"}, spark_binary=None)
    hook = hook_cls(**kw)
    if hook_cls is SparkSubmitHook:
        hook._get_spark_binary_path = lambda: [os.path.join(os.path.dirname(sys.executable), "spark-submit")]
        run = lambda: hook.submit(SPARK_APP)  # noqa: E731
    else:
        run = lambda: hook.run(SPARK_APP)  # noqa: E731
    th = threading.Thread(target=lambda: _quiet(run), daemon=True)
    th.start()
    deadline = time.time() + 300
    while not (hold.exists() and os.listdir(hold)) and time.time() < deadline:
        time.sleep(0.5)
    assert hold.exists() and os.listdir(hold), "the job never reached its commit"
    tree = psutil.Process(hook._submit_sp.pid).children(recursive=True) + [psutil.Process(hook._submit_sp.pid)]
    return hook, tree


def _quiet(fn):
    try:
        fn()
    except Exception:  # noqa: BLE001 - the kill makes submit raise
        pass


def _drivers(tree):
    return [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE
            and "spark_job.py" in " ".join(p.cmdline()) and "python" in os.path.basename(p.cmdline()[0])]


def test_provider_on_kill_orphans_the_local_python_driver_ours_does_not(tmp_path):
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    hook, tree = _submit(SparkSubmitHook, tmp_path, "provider")
    hook.on_kill()
    time.sleep(5)
    orphans = _drivers(tree)
    try:
        assert orphans, "the provider's on_kill now ends the Python driver too (update the docs)"
        assert all(p.ppid() != hook._submit_sp.pid for p in orphans)  # re-parented: an orphan
    finally:
        for p in [p for p in tree if p.is_running()]:
            p.kill()
    ours, tree = _submit(HudiSparkJobHook, tmp_path, "ours")
    ours.on_kill()
    _, alive = psutil.wait_procs(tree, timeout=10)
    assert not alive, [(p.pid, p.cmdline()) for p in alive]
