"""docker-compose.yaml's topology from local processes on 127.0.0.1, driven end to end.

Why: images cannot be built everywhere (no registry here), yet what the compose file claims
(the example DAGs run on a Spark master and worker, locked through ZooKeeper, on a shared
table) must be shown by running it, not by parsing it. This module starts the same services
as local processes and drives the example DAGs through Airflow's REST API:

=====================================  ==================================================
docker-compose service                 here
=====================================  ==================================================
``zookeeper``                          :class:`~.zookeeper.ZooKeeperServer` (Debian's jar)
``spark-master``, ``spark-worker``     :class:`~.spark_cluster.SparkStandaloneCluster`
                                       (one worker, 2 cores, clean environment)
volume ``lake`` (``/lake/orders``)     :class:`~.s3.S3Server` (moto), bucket ``lake``;
                                       the table is ``s3://lake/orders``
``postgres``                           SQLite in a fresh ``AIRFLOW_HOME``
``airflow-api-server``, ``-scheduler``  ``airflow standalone`` (api-server, scheduler,
``-dag-processor``, ``-triggerer``      dag-processor, triggerer; LocalExecutor)
=====================================  ==================================================

The Airflow processes get the compose file's variables by the same names
(``HUDI_OCC_TABLE``, ``HUDI_OCC_STAGING``, ``HUDI_OCC_SPARK_CONN``,
``AIRFLOW_CONN_SPARK_CLUSTER``, ``AIRFLOW_CONN_HUDI_ZOOKEEPER_DEFAULT``,
``AIRFLOW_CONN_HUDI_OCC_DEFAULT``) with loopback addresses; the table connection also carries
the S3 storage options, which never reach a command line (the hook's secrets file).

The run: backfill and two ingestion runs at once, then the table services; then the table
is read with hudi-rs and compared with the model rebuilt from the staged batches
(:func:`~airflow_hudi_occ.provider.examples.expected_table`), and no instant may be pending.

Errors: a service that does not come up raises ``RuntimeError`` with its log tail; a DAG run
that fails or a table that differs from the model is reported in :class:`TopologyResult`
(``ok`` False, ``lines`` say what). :meth:`Topology.stop` ends every process started, the
Airflow task processes and Spark drivers in their own sessions included, and
:attr:`Topology.survivors` lists any that outlived it (none, or the run failed).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from airflow_hudi_occ.testing.airflow_standalone import AirflowStandalone, standalone_env, survivors
from airflow_hudi_occ.testing.s3 import S3Server, hudi_read_s3
from airflow_hudi_occ.testing.spark_cluster import SparkStandaloneCluster, free_port
from airflow_hudi_occ.testing.zookeeper import ZooKeeperServer

REPO = Path(__file__).resolve().parents[2]
BUCKET = "lake"
TABLE_URI = f"s3://{BUCKET}/orders"
ADMIN_PASSWORD = "topology-admin"  # a throw-away instance on loopback


@dataclass
class TopologyResult:
    ok: bool
    lines: list[str] = field(default_factory=list)
    runs: dict[str, list[dict]] = field(default_factory=dict)


class Topology:
    """``start()`` ZooKeeper, S3, Spark and Airflow; ``run_example_dags()``; ``stop()``."""

    def __init__(self, workdir: str | os.PathLike, *, spark_cores: int = 2, ingestion_runs: int = 2,
                 python: str | None = None):
        self.workdir = Path(workdir).resolve()
        self.home = self.workdir / "airflow"
        self.staging = self.workdir / "staging"
        self.spark_cores = spark_cores
        self.ingestion_runs = ingestion_runs
        self.python = python or sys.executable
        self.zk: ZooKeeperServer | None = None
        self.s3: S3Server | None = None
        self.spark: SparkStandaloneCluster | None = None
        self.airflow: AirflowStandalone | None = None
        self.api_port = free_port()
        self.seen_pids: dict[int, float] = {}

    # -- lifecycle -------------------------------------------------------------------------------

    def __enter__(self) -> "Topology":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> "Topology":
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(exist_ok=True)
        self.zk = ZooKeeperServer(self.workdir / "zookeeper", tick_time_ms=500).start()
        self.s3 = S3Server().start()
        self.s3.create_bucket(BUCKET)
        self.spark = SparkStandaloneCluster(self.workdir / "spark", cores=self.spark_cores,
                                            memory="2g").start()
        self.airflow = AirflowStandalone(self.home, self.airflow_env(), self.api_port, bin_dir=self._bin_dir(),
                                         log_path=self.workdir / "airflow-standalone.log",
                                         password=ADMIN_PASSWORD).start()
        return self

    def airflow_env(self) -> dict[str, str]:
        """The compose file's ``x-airflow-common`` environment, with loopback addresses."""
        assert self.zk and self.s3 and self.spark
        spark_conf = self.workdir / "spark-conf"
        spark_conf.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)
        # the compose file's (docker/spark-defaults.conf): the cap that lets two writers share
        # the 2-core worker, as the example DAGs set no spark_conf
        shutil.copy(REPO / "docker" / "spark-defaults.conf", spark_conf / "spark-defaults.conf")
        users = self.home / "passwords.json"
        users.write_text(json.dumps({"admin": ADMIN_PASSWORD}))
        keep = ("PATH", "HOME", "LANG", "JAVA_HOME", "TMPDIR", "TZ")
        env = {k: v for k, v in os.environ.items() if k in keep}
        port = self.api_port
        env.update(standalone_env(self.home, port))
        env.update({
            "PATH": self._bin_dir() + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": str(REPO),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(users),
            # the example DAGs' settings, as in docker-compose.yaml
            "HUDI_OCC_TABLE": TABLE_URI,
            "HUDI_OCC_STAGING": str(self.staging),
            "HUDI_OCC_SPARK_CONN": "spark_cluster",
            "PYSPARK_PYTHON": self.python,
            "SPARK_CONF_DIR": str(spark_conf),
            "AIRFLOW_CONN_SPARK_CLUSTER": json.dumps(
                {"conn_type": "spark", "host": "spark://127.0.0.1", "port": self.spark.port,
                 "extra": {"deploy-mode": "client"}}),
            "AIRFLOW_CONN_HUDI_ZOOKEEPER_DEFAULT": json.dumps(
                {"conn_type": "hudi_zookeeper", "host": self.zk.hosts, "schema": "/hudi/locks",
                 "extra": {"session_timeout_ms": 10000}}),
            "AIRFLOW_CONN_HUDI_OCC_DEFAULT": json.dumps(
                {"conn_type": "hudi_occ", "host": f"{BUCKET}/orders", "schema": "s3",
                 "extra": {"lock_provider": "zookeeper", "zookeeper_conn_id": "hudi_zookeeper_default",
                           "storage_options": self.s3.storage_options}}),
        })
        return env

    def _bin_dir(self) -> str:
        return os.path.dirname(self.python)

    def airflow_log(self, n: int = 5000) -> str:
        return self.airflow.log_tail(n) if self.airflow is not None else ""

    def stop(self) -> None:
        """Airflow first (so no task submits new Spark work), then Spark, S3, ZooKeeper."""
        if self.airflow is not None:
            self.airflow.stop()
            self.seen_pids |= self.airflow.seen_pids
        if self.spark is not None:
            self.spark.stop()
            self.seen_pids |= self.spark.seen_pids
        if self.s3 is not None:
            self.s3.stop()
        if self.zk is not None:
            self.zk.stop()

    @property
    def survivors(self) -> list[int]:
        return survivors(self.seen_pids)

    # -- the run ---------------------------------------------------------------------------------

    def run_example_dags(self, timeout_s: float = 1500.0) -> TopologyResult:
        """Backfill and ingestion at once, then the table services; the table checked."""
        t0 = time.time()
        af = self.airflow
        assert af is not None, "start() first"
        writers = ["hudi_occ_backfill", "hudi_occ_ingestion"]
        af.wait_for_dags(writers + ["hudi_occ_table_services"])
        af.trigger("hudi_occ_backfill", "topology_backfill")
        for i in range(self.ingestion_runs):
            af.trigger("hudi_occ_ingestion", f"topology_ingestion_{i + 1}")
        runs = af.wait_for_runs(writers, timeout_s)
        af.trigger("hudi_occ_table_services", "topology_services")
        runs.update(af.wait_for_runs(["hudi_occ_table_services"], max(60.0, timeout_s - (time.time() - t0))))
        lines = [f"DAG runs after {time.time() - t0:.0f} s:"]
        ok = True
        for dag_id, rs in runs.items():
            for r in rs:
                states = af.task_states(dag_id, r["dag_run_id"])
                lines.append(f"  {dag_id} {r['dag_run_id']}: {r['state']} {states}")
                ok &= r["state"] == "success"
        table_ok, table_lines = self.check_table()
        return TopologyResult(ok and table_ok, lines + table_lines, runs)

    def check_table(self) -> tuple[bool, list[str]]:
        """hudi-rs against the model of every staged batch; nothing pending on the timeline."""
        from airflow_hudi_occ.core.table.table import Table
        from airflow_hudi_occ.provider.examples import expected_table
        from airflow_hudi_occ.testing.tables import rows_by_key

        assert self.s3 is not None
        so = self.s3.storage_options
        tl = Table.open(TABLE_URI, so).timeline()
        lines = [f"timeline: {len(tl.completed())} completed "
                 f"({sorted(i.action.value for i in tl.completed())}), {len(tl.pending())} pending"]
        batches = sorted(glob.glob(os.path.join(self.staging, "*", "*.parquet")))
        want = expected_table(batches)
        got = rows_by_key(hudi_read_s3(TABLE_URI, so))
        wrong = sorted(k for k in set(got) & set(want)
                       if (got[k]["v"], got[k]["ts"]) != (want[k]["v"], want[k]["ts"]))
        lost, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
        ok = bool(want) and not (lost or extra or wrong) and not tl.pending()
        lines.append(f"hudi-rs reads {len(got)} rows of {TABLE_URI}; the model of {len(batches)} "
                     f"batches expects {len(want)}: "
                     + ("OK" if ok else f"MISMATCH lost {lost[:10]} extra {extra[:10]} wrong {wrong[:10]}"))
        return ok, lines


def main(argv=None) -> int:
    import argparse
    import tempfile
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", default=None, help="where logs and state go (default: a temp dir)")
    ap.add_argument("--ingestion-runs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=1500.0)
    args = ap.parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="hudi-occ-topology-")
    print(f"topology in {workdir}", flush=True)
    t0 = time.time()
    topo = Topology(workdir, ingestion_runs=args.ingestion_runs)
    result = TopologyResult(False)
    try:
        with topo:
            print(f"up in {time.time() - t0:.0f} s: ZooKeeper {topo.zk.hosts}, S3 {topo.s3.endpoint}, "
                  f"Spark {topo.spark.master_url}, Airflow http://127.0.0.1:{topo.api_port}", flush=True)
            result = topo.run_example_dags(args.timeout)
            print("\n".join(result.lines), flush=True)
    except RuntimeError as e:
        print(f"FAILED: {e}", flush=True)
    left = topo.survivors
    print(f"torn down; processes left: {left or 'none'}")
    ok = result.ok and not left
    print(f"{'OK' if ok else 'FAILED'} in {time.time() - t0:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
