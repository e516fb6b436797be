"""Bad input through a real ``airflow dags test``: refused with what is wrong and the fix,
before Spark writes anything; the table and the folder are byte-for-byte unchanged.

Arguments wrong in the DAG file fail when the file is parsed (an import error: the DAG never
runs); input known only at run time (a templated path or option) fails the task, with the
job's own message as the task's exception text.
"""

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import tree_snapshot

from .conftest import finish

pytestmark = [pytest.mark.zookeeper, pytest.mark.timeout(900)]

BAD_DAGS = Path(__file__).parent / "dags_bad_input"


@pytest.fixture(scope="module")
def bad_env(airflow_env, tmp_path_factory):
    folder = tmp_path_factory.mktemp("bad_dags")
    for f in BAD_DAGS.glob("*.py"):
        shutil.copy(f, folder / f.name)
    return {"AIRFLOW__CORE__DAGS_FOLDER": str(folder)}


@pytest.mark.parametrize("dag_id, words", [
    ("hudi_occ_bad_operation", ["HudiWriteOperator(task_id='upsert'): operation='upsertt' is not one of",
                                "did you mean 'upsert'?"]),
    pytest.param("hudi_occ_bad_key", ["unknown option 'hoodie.write.lock.providr': did you mean "
                                      "'hoodie.write.lock.provider'?", "rename it to hoodie.write.lock.provider"],
                 marks=pytest.mark.slow),  # each case is a dags-test process; one stays in the default run
    pytest.param("hudi_occ_bad_lock_provider", ["unknown lock provider 'zookeepr'", "did you mean 'zookeeper'?"],
                 marks=pytest.mark.slow),
])
def test_a_wrong_argument_fails_when_the_dag_is_parsed(airflow_env, bad_env, dag_id, words):
    p = airflow_env.dags_test(dag_id, f"bad-{dag_id}", env=bad_env)
    log = finish(p, timeout=300)
    assert p.returncode != 0, log[-3000:]
    for w in words:
        assert w in log, log[-3000:]
    assert "spark-submit" not in log and "state=success" not in log


def test_run_time_bad_input_fails_each_task_with_its_fix_and_changes_nothing(airflow_env, bad_env, tmp_path):
    base = tmp_path / "bad"
    (base / "landing").mkdir(parents=True)
    pq.write_table(pa.table({"id": [3], "day": ["d1"], "v": ["c"]}), base / "landing" / "batch.parquet")
    pq.write_table(pa.table({"id": [4], "day": ["../../escaped"], "v": ["d"]}),
                   base / "landing" / "hostile.parquet")
    t = Table.create(str(base / "table"), "orders", record_key_fields=["id"], partition_fields=["day"])
    ArrowTableWriter(t, WriteConfig()).write(pa.table({"id": [1, 2], "day": ["d1", "d2"], "v": ["a", "b"]}))
    (base / "plain" / "day=d1").mkdir(parents=True)
    pq.write_table(pa.table({"id": [9], "day": ["d1"]}), base / "plain" / "day=d1" / "part-0.parquet")
    before = {name: tree_snapshot(base / name) for name in ("table", "plain", "landing")}

    p = airflow_env.dags_test("hudi_occ_bad_runtime_input", "bad-runtime",
                              env={**bad_env, "HUDI_OCC_BAD_INPUT_DIR": str(base)})
    log = finish(p, timeout=600)
    assert "state=failed" in log or p.returncode != 0, log[-4000:]
    # The job's own words, verbatim in the task's exception text, with the fix.
    assert "SourceNotFoundError: the source '" in log and "/landing/" in log
    assert "does not exist (what to do: check the path" in log, log[-6000:]
    # refused by the operator itself, before a spark-submit, with the package's own error
    # (the retry policy fails it at once: provider/retry_policy.py)
    assert "TableLocationNotEmptyError: " + repr(str(base / "plain")) + " is not a Hudi table and not empty" in log
    assert "TableLocationNotEmptyError is not retryable" in log
    assert "write the table to a new or empty path" in log
    assert "unknown lock provider 'zookeepr'" in log and "did you mean 'zookeeper'?" in log
    # a partition value that would leave the table: refused in the job's driver, before begin
    assert "InvalidPartitionPathError: partition column 'day' has the value '../../escaped'" in log
    assert "read the job's log above" not in log and "UsageError: 2" not in log
    assert {name: tree_snapshot(base / name) for name in before} == before
    assert not list(tmp_path.rglob("escaped"))
