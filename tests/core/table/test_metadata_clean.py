"""The metadata table's clean (core/table/metadata_clean.py): when the timeline alone rules a
clean out, the plan made from the listings would have found nothing either."""

from __future__ import annotations

from airflow_hudi_occ.core.commit import metadata_services
from airflow_hudi_occ.core.config import CleanConfig, CleanPolicy
from airflow_hudi_occ.core.table.metadata_clean import may_clean, plan_clean
from airflow_hudi_occ.core.table.metadata_compaction import open_metadata_table
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import hudi_read
from tests.core.table.test_metadata_commit import MAINTAIN, files_only_v9
from tests.core.table.test_metadata_compaction import _write_one


def test_a_clean_the_timeline_rules_out_is_one_the_listings_would_not_plan(tmp_path, fast_options, monkeypatch):
    """Commits with the metadata table compacted every 2 deltacommits and its clean switched
    off, so old slices pile up: after each, under both policies, ``may_clean`` is True whenever
    ``plan_clean`` (which lists every metadata partition) plans something; under the default
    policy it rules the listing out on some of the commits (what it saves; the fixture's own
    base files leave a clean always possible under the other)."""
    monkeypatch.setattr(metadata_services, "clean_if_needed", lambda *a, **k: None)
    path = files_only_v9(tmp_path)
    before = hudi_read(str(path))
    opts = {**fast_options, **MAINTAIN, "hoodie.metadata.compact.max.delta.commits": "2",
            "hoodie.archive.automatic": "false"}
    policies = {"commits": CleanConfig(),  # Java's floor: 20 commits retained
                "versions": CleanConfig(policy=CleanPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=3)}
    met = set()
    for i in range(26):
        _write_one(path, opts, i, before)
        table = Table.open(str(path))
        data_times = {x.requested_time for x in table.timeline()}
        mdt = open_metadata_table(table)
        timeline = mdt.timeline()
        for name, config in policies.items():
            planned = plan_clean(mdt, timeline, config) is not None
            ruled_in = may_clean(timeline, config, data_times)
            assert ruled_in or not planned, f"{name}: a clean ruled out after write {i} would have deleted files"
            met.add((name, ruled_in, planned))
    assert ("commits", False, False) in met and ("commits", True, True) in met, sorted(met)
    assert ("versions", True, True) in met, sorted(met)
