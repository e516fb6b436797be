"""``HudiTableServiceOperator(service="compact")``: planned in the worker under the lock, executed
by the service job with ``--instant``; a no-op on copy-on-write tables.

The job runs for real (``python -m airflow_hudi_occ.spark.service_job`` in a subprocess, which
executes compaction with Arrow in its driver); only spark-submit is replaced, by a stand-in hook
that runs that command and feeds its lines to the operator as the real hook does.
"""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider.operators import table_service as ops
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key

OPTS = {**FAST_WRITE_OPTIONS, "hoodie.compact.inline.max.delta.commits": "2"}


class _StubTI:
    dag_id, task_id, run_id, try_number, map_index = "d", "compact", "r", 1, -1


class _Events(dict):
    def __missing__(self, key):
        class Acc:
            extra: dict = {}
        self[key] = Acc()
        return self[key]


class _LocalJobHook:
    """spark-submit replaced by the job's own command line; everything else is the real job."""

    calls: list[list[str]] = []

    def __init__(self, *, application_args, on_line, **kw):
        self.args, self.on_line = application_args, on_line

    def run(self, application):
        _LocalJobHook.calls.append(self.args)
        p = subprocess.run([sys.executable, "-m", "airflow_hudi_occ.spark.service_job", *self.args],
                           capture_output=True, text=True, timeout=300)
        for line in p.stdout.splitlines():
            self.on_line(line)
        return p.returncode

    def on_kill(self):
        pass


@pytest.fixture
def local_job(monkeypatch):
    _LocalJobHook.calls = []
    monkeypatch.setattr(ops, "HudiSparkJobHook", _LocalJobHook)
    return _LocalJobHook


def _op(table: Table, **kw) -> ops.HudiTableServiceOperator:
    return ops.HudiTableServiceOperator(task_id="compact", service="compact", table_path=table.base_uri,
                                        hudi_conn_id=None, options=OPTS, **kw)


def _run(op):
    return op.execute({"ti": _StubTI(), "outlet_events": _Events()})


def test_compact_plans_under_the_lock_then_the_job_executes_that_instant(tmp_path, local_job):
    t = Table.create(str(tmp_path / "mor"), "mor", record_key_fields=["id"], partition_fields=["p"],
                     precombine_field="ts", table_type="MERGE_ON_READ")
    w = MergeOnReadWriter(t, WriteConfig.from_options(OPTS))
    w.write(pa.table({"id": [1, 2, 3], "p": ["a", "a", "b"], "ts": [0, 0, 0], "v": ["x", "y", "z"]}))
    assert _run(_op(t))["scheduled"] is None  # trigger (2 deltacommits) not reached: no job
    assert local_job.calls == []
    for ts in (1, 2):
        w.write(pa.table({"id": [1, 3], "p": ["a", "b"], "ts": [ts, ts], "v": [f"x{ts}", f"z{ts}"]}))
    before = rows_by_key(hudi_read(t.base_uri))

    out = _run(_op(t))
    planned = out["scheduled"]
    assert planned and out["executed"] == planned and out["outcome"] == "committed", out
    assert out["executor"] == "spark"  # the service job runs the plan as Spark tasks
    assert local_job.calls[0][local_job.calls[0].index("--instant") + 1] == planned
    tl = t.timeline()
    assert tl.get(planned).is_completed and tl.pending() == []
    assert rows_by_key(hudi_read(t.base_uri)) == before


def test_compact_on_a_copy_on_write_table_is_a_logged_no_op(tmp_path, local_job, capsys):
    t = Table.create(str(tmp_path / "cow"), "cow", record_key_fields=["id"], partition_fields=["p"])
    out = _run(_op(t))
    assert out["scheduled"] is None and "COPY_ON_WRITE: nothing to compact" in out["message"]
    assert "is COPY_ON_WRITE: nothing to compact" in capsys.readouterr().out  # Airflow's task log
    assert local_job.calls == []


def test_unknown_service_is_still_refused():
    with pytest.raises(Exception, match="compact"):
        ops.HudiTableServiceOperator(task_id="x", service="compaction", table_path="/t", hudi_conn_id=None)
