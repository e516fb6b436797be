"""The application the write operator hands to spark-submit: the engine's job, plus one line.

``airflow_hudi_occ/spark/job.py`` reports its instant only when it ends. The operator needs it
as soon as the instant exists, to publish it (XCom ``hudi_occ_running_instant``) for the
early-conflict sensor and to say in the task log which instant a kill leaves behind. So this
wrapper prints ``HUDI_OCC_BEGIN {"instant", "attempt", "writer_id"}`` right after the
transaction has begun, then runs the job unchanged (same arguments, exit codes and
``HUDI_OCC_RESULT`` line). It imports neither Airflow nor the provider package.
"""

from __future__ import annotations

import json
import os
import sys

if __package__ in (None, ""):  # run as a file by spark-submit
    sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

BEGIN_PREFIX = "HUDI_OCC_BEGIN "


def _announce_begin() -> None:
    from airflow_hudi_occ.core.commit import transaction

    original = transaction.WriteTransaction.begin
    if getattr(original, "_announces", False):
        return

    def begin(self, *args, **kwargs):
        t = original(self, *args, **kwargs)
        print(BEGIN_PREFIX + json.dumps({"instant": t, "attempt": self.attempt,
                                         "writer_id": self.writer_id, "pid": os.getpid()}), flush=True)
        return t

    begin._announces = True
    transaction.WriteTransaction.begin = begin


def main(argv=None) -> int:
    _announce_begin()
    from airflow_hudi_occ.spark import job
    return job.main(argv)


if __name__ == "__main__":
    sys.exit(main())
