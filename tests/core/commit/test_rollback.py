"""A rollback SIGKILLed part-way is finished by the next rollback or clean, from its plan.

The kill is real: a child process rolls back a dead writer's instant and kills itself with
SIGKILL at a chosen step (the step's function is replaced by ``os.kill(getpid, SIGKILL)``).
The check is independent: hudi-rs reads exactly the committed rows afterwards.
"""

import json
import os
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pytest

from airflow_hudi_occ.cli import main as cli_main
from airflow_hudi_occ.core.commit.transaction import WriteTransaction
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key

BASE_OPTS = {"hoodie.time.generator.max_expected_clock_skew_ms": "1",
             "hoodie.client.heartbeat.interval_in_ms": "100", "hoodie.client.heartbeat.tolerable.misses": "1"}


@pytest.fixture
def opts(zk_server):
    # The ZooKeeper lock: the killed process's lock goes with its session, as in production
    # (a file-system lock left by a SIGKILL stays until hoodie.write.lock.filesystem.expire).
    return {**BASE_OPTS, "hoodie.write.lock.provider": "zookeeper",
            "hoodie.write.lock.zookeeper.url": zk_server.hosts,
            "hoodie.write.lock.zookeeper.base_path": f"/rollback-{os.getpid()}-{time.time_ns()}",
            "hoodie.write.lock.zookeeper.session_timeout_ms": "2000"}

KILLER = textwrap.dedent("""
    import os, signal, sys, time
    from airflow_hudi_occ.core.commit import rollback
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.table.table import Table
    base, target, step, opts = sys.argv[1], sys.argv[2], sys.argv[3], eval(sys.argv[4])
    setattr(rollback, step, lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL))
    rollback.rollback_instant(Table.open(base), target, WriteConfig.from_options(opts))
    sys.exit(3)  # not reached: the step kills the process
""")


def dead_writer(tmp_path, opts):
    """A table with one commit and one failed write (files and markers, heartbeat stopped)."""
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"])
    # The healthy first commit beats at Hudi's default interval: with the 100 ms heartbeat a
    # busy machine (load 8 on 2 cores) expired it mid-write. Only the dead writer needs the
    # short one, so that the rollback below finds it dead at once.
    healthy = {k: v for k, v in opts.items() if not k.startswith("hoodie.client.heartbeat.")}
    ArrowTableWriter(t, WriteConfig.from_options(healthy)).write(
        pa.table({"id": [1, 2], "p": ["a", "b"], "v": ["x", "y"]}))
    tx = WriteTransaction(t, WriteConfig.from_options(opts))
    inst = tx.begin()
    name = f"dead-0_0-0-0_{inst}.parquet"
    tx.create_marker("a", name, "CREATE")
    (tmp_path / "t" / "a" / name).write_bytes(b"PAR1 half a file")
    tx.heartbeat.stop()
    return t, inst, tmp_path / "t" / "a" / name


@pytest.mark.parametrize("step", ["delete_planned_files", "complete"])
def test_a_rollback_killed_mid_way_is_finished_by_the_next_one(tmp_path, capsys, step, opts):
    t, dead, dead_file = dead_writer(tmp_path, opts)
    time.sleep(0.3)  # the dead writer's heartbeat (100 ms x 1) expires
    p = subprocess.run([sys.executable, "-c", KILLER, t.base_uri, dead, step, repr(opts)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == -9, p.stderr  # killed where asked
    tl = t.timeline()
    rollbacks = [i for i in tl.pending() if i.action is Action.ROLLBACK]
    assert len(rollbacks) == 1
    # killed before completing: the target is gone from the timeline only at the later step
    assert (tl.get(dead) is None) == (step == "complete")

    rc = cli_main(["rollback", t.base_uri, "--json", *sum((["--option", f"{k}={v}"] for k, v in opts.items()), [])])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0, out
    tl = t.timeline()
    assert tl.pending() == [] and tl.get(dead) is None
    done = [i for i in tl.completed() if i.action is Action.ROLLBACK]
    assert [i.requested_time for i in done] == [rollbacks[0].requested_time]  # the same plan, finished
    assert not dead_file.exists()
    assert sorted(rows_by_key(hudi_read(t.base_uri))) == [1, 2]
