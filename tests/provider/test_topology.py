"""docker-compose.yaml's topology from local processes (``testing/topology.py``): ZooKeeper,
the loopback S3 server, a Spark standalone master and worker, ``airflow standalone``; the
example DAGs triggered through the REST API; the table checked with hudi-rs; nothing left
running afterwards. The same names as the compose file: checked here too."""

import json
from pathlib import Path

import pytest
import yaml

from airflow_hudi_occ.testing.topology import Topology

REPO = Path(__file__).resolve().parents[2]


def test_the_local_topology_uses_the_compose_files_variables_and_connections(tmp_path):
    compose = yaml.safe_load((REPO / "docker-compose.yaml").read_text())
    want = compose["x-airflow-common"]["environment"]
    topo = Topology(tmp_path)

    class Fake:  # addresses only: nothing is started
        hosts, port, storage_options = "127.0.0.1:2181", 7077, {"key": "k"}
    topo.zk = topo.s3 = topo.spark = Fake()
    env = topo.airflow_env()
    for name in ("HUDI_OCC_TABLE", "HUDI_OCC_STAGING", "HUDI_OCC_SPARK_CONN", "PYSPARK_PYTHON", "SPARK_CONF_DIR",
                 "AIRFLOW_CONN_SPARK_CLUSTER", "AIRFLOW_CONN_HUDI_ZOOKEEPER_DEFAULT",
                 "AIRFLOW_CONN_HUDI_OCC_DEFAULT"):
        assert name in env, name
    assert env["HUDI_OCC_SPARK_CONN"] == want["HUDI_OCC_SPARK_CONN"]
    for conn in ("AIRFLOW_CONN_SPARK_CLUSTER", "AIRFLOW_CONN_HUDI_ZOOKEEPER_DEFAULT", "AIRFLOW_CONN_HUDI_OCC_DEFAULT"):
        ours, theirs = json.loads(env[conn]), json.loads(want[conn])
        assert ours["conn_type"] == theirs["conn_type"]
        assert {k: v for k, v in ours.get("extra", {}).items() if k != "storage_options"} == \
            {k: v for k, v in theirs.get("extra", {}).items() if k != "session_timeout_ms"} | \
            ({"session_timeout_ms": 10000} if "session_timeout_ms" in theirs.get("extra", {}) else {})


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_the_example_dags_run_on_the_local_topology(tmp_path):
    topo = Topology(tmp_path / "topology")
    with topo:
        result = topo.run_example_dags(timeout_s=1200)
    assert result.ok, "\n".join(result.lines) + "\n" + topo.airflow_log()
    assert {"hudi_occ_backfill", "hudi_occ_ingestion", "hudi_occ_table_services"} <= set(result.runs)
    assert topo.survivors == [], "processes outlived the topology"


def test_the_spark_defaults_are_the_compose_files(tmp_path):
    compose = yaml.safe_load((REPO / "docker-compose.yaml").read_text())
    common = compose["x-airflow-common"]
    mount = next(v for v in common["volumes"] if "spark-defaults.conf" in v)
    assert mount.split(":")[1] == common["environment"]["SPARK_CONF_DIR"] + "/spark-defaults.conf"
    assert "spark.cores.max 1" in (REPO / "docker" / "spark-defaults.conf").read_text()
