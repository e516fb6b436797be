"""The MOR crash matrix under non-blocking concurrency control: an NBCC deltacommit (log files
only, the buckets' fixed fileIds) SIGKILLed at the MOR kill points. The same checks as
``test_crash_matrix.crash_and_recover``: readers (hudi-rs) see exactly the committed rows, the
lock is free, lazy rollback deletes the dead instant's log files (and only them: the seed's log
files share the file groups), the next NBCC write commits, a compaction leaves nothing pending.
"""

from __future__ import annotations

import pytest

from airflow_hudi_occ.core.table.table import MERGE_ON_READ
from airflow_hudi_occ.testing.crash import MOR_POINTS

from .conftest import lock_options
from .test_crash_matrix import MOR_DEFAULT, _fresh_table, crash_and_recover

#: NBCC: the bucket index, no early conflict detection (Hudi refuses it with NBCC)
NBCC = {"hoodie.write.concurrency.mode": "NON_BLOCKING_CONCURRENCY_CONTROL",
        "hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2",
        "hoodie.write.concurrency.early.conflict.detection.enable": "false"}


@pytest.mark.parametrize("point", ("mid_log_file", "torn_log_file", "commit_lock_held"))
def test_nbcc_crash_point(point, tmp_path):
    crash_and_recover(_fresh_table(tmp_path, table_type=MERGE_ON_READ),
                      lock_options("filesystem", **NBCC), point)


@pytest.mark.slow
@pytest.mark.parametrize("point", sorted(set(MOR_POINTS) | set(MOR_DEFAULT)))
def test_nbcc_crash_point_all(point, tmp_path):
    crash_and_recover(_fresh_table(tmp_path, table_type=MERGE_ON_READ),
                      lock_options("filesystem", **NBCC), point)
