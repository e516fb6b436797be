"""What the metadata table's own compaction and clean buy a table written only by our writer.

Why: with ``hoodie.occ.metadata.files.maintain=true`` every commit of ours appends a log file to
Hudi's metadata table; without the compaction and clean of core/table/metadata_compaction.py and
metadata_clean.py the ``files`` partition grows a file per commit and every reader of the
listing merges them all. This script makes N commits of the core copy-on-write writer on a
files-only copy of the Java v9 fixture twice, the metadata table compacted at Hudi's default
trigger (``hoodie.metadata.compact.max.delta.commits=10``) and never (a trigger out of reach),
and prints per run: the median commit time of the last 20 commits, the files in the metadata
table's ``files`` folder (base files among them) and the time to read the listing
(``read_metadata_listing``, mean of 5).

Usage: ``PYTHONPATH=. python scripts/measure_metadata_compaction.py /tmp/measure 100``
"""

from __future__ import annotations

import os
import pathlib
import shutil
import statistics
import sys
import time

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.metadata_listing import read_metadata_listing
from airflow_hudi_occ.core.table.metadata_table import PARTITIONS_KEY
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, java_fixture
from tests.core.table.test_metadata_table import _v9_rows


def main(workdir: str, commits: int) -> None:
    for label, trigger in (("compacted at Hudi's default (10)", "10"), ("never compacted", "1000000")):
        root = pathlib.Path(workdir) / ("compacted" if trigger == "10" else "never")
        shutil.rmtree(root, ignore_errors=True)
        path = java_fixture("v9_txns_simple_overwrite", root)
        Table.open(str(path)).update_properties({PARTITIONS_KEY: "files"})
        before = hudi_read(str(path))
        opts = {**FAST_WRITE_OPTIONS, "hoodie.occ.metadata.files.maintain": "true",
                "hoodie.metadata.compact.max.delta.commits": trigger}
        times = []
        for i in range(commits):
            t0 = time.perf_counter()
            ArrowTableWriter(Table.open(str(path)), WriteConfig.from_options(opts)).write(_v9_rows(before, [(f"N{i}", "us")]))
            times.append(time.perf_counter() - t0)
        folder = os.path.join(path, ".hoodie", "metadata", "files")
        names = [n for n in os.listdir(folder) if not n.startswith(".hoodie_partition")]
        t0 = time.perf_counter()
        for _ in range(5):
            read_metadata_listing(Table.open(str(path)))
        listing_s = (time.perf_counter() - t0) / 5
        print(f"{label}: {commits} commits, median commit {statistics.median(times[-20:]) * 1000:.0f} ms "
              f"(last 20), {len(names)} files in the metadata table's files folder "
              f"({sum(n.endswith('.hfile') for n in names)} base), listing read {listing_s * 1000:.0f} ms")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 100)
