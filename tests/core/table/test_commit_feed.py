"""``core/table/commit_feed``: the completed commits after a cursor, in completion order, a page
at a time, against real tables (our writer, a clustering, a clean, Java's v6/v8/v9 fixtures)."""

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.services.clean import run_clean
from airflow_hudi_occ.core.services.clustering import execute_clustering, schedule_clustering
from airflow_hudi_occ.core.table.commit_feed import (BEGINNING, commits_after, latest_cursor, open_table)
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import java_fixture


def _write(table, opts, i):
    ArrowTableWriter(table, WriteConfig.from_options(opts)).write(
        pa.Table.from_pylist([{"id": i, "p": "a", "ts": i, "v": str(i)}]), "insert")


def test_commits_after_a_cursor_in_completion_order_a_page_at_a_time(table, fast_options):
    assert latest_cursor(table) == BEGINNING and commits_after(table, BEGINNING).commits == []
    for i in range(3):
        _write(table, fast_options, i)
    done = table.timeline().completed_by_completion_time()
    page = commits_after(table, BEGINNING, limit=2)
    assert [c.requested_time for c in page.commits] == [i.requested_time for i in done[:2]] and page.more
    rest = commits_after(table, page.cursor, limit=2)
    assert [c.requested_time for c in rest.commits] == [done[2].requested_time] and not rest.more
    assert rest.cursor == latest_cursor(table) == f"{done[2].completion_time}_{done[2].requested_time}"
    assert commits_after(table, rest.cursor).commits == []  # nothing twice
    c = rest.commits[0]
    assert c.to_json() == {"instant": c.requested_time, "completion_time": done[2].completion_time,
                           "action": "commit", "cursor": rest.cursor}
    with pytest.raises(ValueError):
        commits_after(table, BEGINNING, limit=0)


def test_a_clustering_is_a_commit_a_clean_is_not(table, fast_options):
    for i in range(3):
        _write(table, fast_options, i)
    cursor = latest_cursor(table)
    assert schedule_clustering(table, fast_options)
    execute_clustering(table, fast_options)
    run_clean(table, WriteConfig.from_options({**fast_options, "hoodie.cleaner.commits.retained": "1"}))
    new = commits_after(table, cursor).commits
    assert [c.action for c in new] == ["replacecommit"]
    cleans = [i.requested_time for i in table.timeline().completed() if i.action.value == "clean"]
    assert cleans, "the clean must have made an instant for this test to mean anything"
    assert [c.requested_time for c in commits_after(table, cursor, actions={"clean"}).commits] == cleans


@pytest.mark.parametrize("name", ["v6_simplekeygen_nonhivestyle", "v8_simplekeygen_nonhivestyle",
                                  "v9_txns_simple_overwrite"])
def test_java_written_tables(tmp_path, name):
    t = Table.open(str(java_fixture(name, tmp_path)))
    writes = [i.requested_time for i in t.timeline().completed_by_completion_time()
              if i.action.value in ("commit", "deltacommit", "replacecommit")]
    assert [c.requested_time for c in commits_after(t, BEGINNING).commits] == writes and writes


def test_a_table_not_created_yet_is_none(tmp_path):
    assert open_table(str(tmp_path / "nothing")) is None
