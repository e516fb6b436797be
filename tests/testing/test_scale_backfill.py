"""The scale backfill's pieces that cost no Airflow run (the run itself is
``scripts/scale-backfill.sh``: minutes to hours, never in the test suite): its DAG file parses
with the mapped backfill over N days, its batches are one partition a day, and the partition
check finds a wrong partition."""

import json
import os
import subprocess
import sys

import pyarrow.parquet as pq

from airflow_hudi_occ.testing import scale_backfill as scale


def test_the_dag_file_parses_with_the_backfill_mapped_over_the_days(tmp_path):
    code = (
        "import json, sys\n"
        "from airflow.dag_processing.dagbag import DagBag\n"
        "from airflow_hudi_occ.core.config import WriteConfig\n"
        "bag = DagBag(sys.argv[1])\n"
        "assert not bag.import_errors, bag.import_errors\n"
        "out = {}\n"
        "for dag_id, dag in sorted(bag.dags.items()):\n"
        "    tasks = {t.task_id: t for t in dag.tasks}\n"
        "    write = tasks.get('rewrite_day') or tasks['upsert']\n"
        "    kw = getattr(write, 'partial_kwargs', None) or {}\n"
        "    options = kw.get('options') or getattr(write, 'options', None)\n"
        "    WriteConfig.from_options(options)\n"
        "    out[dag_id] = {'tasks': sorted(tasks), 'mapped': type(write).__name__ == 'MappedOperator',\n"
        "                   'kind': (kw.get('admission') or getattr(write, 'admission', None)).kind,\n"
        "                   'at_once': write.max_active_tis_per_dagrun, 'table': kw.get('table_path') or\n"
        "                   getattr(write, 'table_path', None), 'schedule': str(dag.schedule)}\n"
        "print(json.dumps(out))\n")
    env = dict(os.environ, AIRFLOW_HOME=str(tmp_path / "home"), AIRFLOW__CORE__LOAD_EXAMPLES="false",
               HUDI_OCC_SCALE_DAYS="30", HUDI_OCC_SCALE_PARALLELISM="6")
    out = subprocess.run([sys.executable, "-c", code, str(scale.DAGS_FOLDER)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(got) == {scale.DAG_MIXED, scale.DAG_ALONE, scale.DAG_INGESTION}, got
    for dag_id, table in ((scale.DAG_MIXED, scale.TABLES["mixed"]), (scale.DAG_ALONE, scale.TABLES["alone"])):
        assert got[dag_id] == {"tasks": ["rewrite_day", "stage_days"], "mapped": True, "kind": "backfill",
                               "at_once": 6, "table": table, "schedule": "None"}, got[dag_id]
    ing = got[scale.DAG_INGESTION]
    assert (ing["tasks"], ing["mapped"], ing["kind"], ing["table"]) == (
        ["stage_ingestion", "upsert"], False, "ingestion", scale.TABLES["mixed"]), ing
    assert ing["schedule"] == "0:01:00", ing


def test_batches_are_one_partition_a_day_and_ingestion_updates_backfilled_keys(tmp_path):
    import inspect

    from airflow_hudi_occ.provider.operators.write import HudiWriteOperator
    mapped = scale.stage_backfill(str(tmp_path / "b"), "manual__1", 30, 5)
    assert [os.path.basename(m["source"]) for m in mapped] == [f"{scale.day(i)}.parquet" for i in range(30)]
    # each mapped task's arguments are the operator's own (Airflow refuses any other when it
    # unmaps the task: a 90-day run failed every task on a "partitions" argument the operator
    # had dropped)
    accepted = set(inspect.signature(HudiWriteOperator.__init__).parameters)
    assert all(set(m) <= accepted for m in mapped), (mapped[0], sorted(accepted))
    assert scale.day(0) == "2025-01-01" and scale.day(364) == "2025-12-31"
    for i, m in enumerate(mapped):
        rows = pq.read_table(m["source"]).to_pylist()
        assert {r["day"] for r in rows} == {scale.day(i)} and len(rows) == 5
    # a re-run of the task reuses its batch (same file, same rows)
    again = scale.stage_backfill(str(tmp_path / "b"), "manual__1", 30, 5)
    assert pq.read_table(again[3]["source"]).equals(pq.read_table(mapped[3]["source"]))
    rows = pq.read_table(scale.stage_ingestion(str(tmp_path / "b"), "scheduled__x", 30, 5)).to_pylist()
    late = [r for r in rows if r["day"] != scale.day(30)]
    assert late and all(r["day"] == scale.day(r["id"] // 5) and r["id"] < 150 for r in late)
    assert all(r["id"] >= 150 for r in rows if r["day"] == scale.day(30))
    # the model: the ingestion's newer rows win over the backfill's
    want = scale.model(str(tmp_path / "b"))
    assert all(want[r["id"]]["v"] == "ingestion:scheduled__x" for r in rows)
    assert scale.compare_partitions(want, want) == (len({r["day"] for r in want.values()}),) * 2 + ([],)
    k = late[0]["id"]
    wrong = {**want, k: {**want[k], "v": "backfill:manual__1"}}
    exact, total, bad = scale.compare_partitions(wrong, want)
    assert (exact, bad) == (total - 1, [late[0]["day"]])
