"""One stress writer process: ``n_tx`` random upserts, each retried until it commits.

Run as ``python stress_worker.py '<json job>'``. Every batch is appended (before its first
attempt) to ``log`` as one JSON line ``{"batch_key", "rows"}`` and, once committed, a line
``{"batch_key", "committed": instant, "attempts": n}``; the test rebuilds the serial replay
from these lines and the commit metadata (which records each commit's batch key).

Retries: a conflict (any RetryableError) is retried by core.retry with full-jitter backoff, as
a production writer would. With ``retry_lock_errors`` a LockLostError / StorageError (a
ZooKeeper outage) is retried too, as the orchestrator's task retry would.
"""

from __future__ import annotations

import json
import random
import sys
import time


def main(job: dict) -> int:
    import pyarrow as pa

    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.errors import LockError, StorageError
    from airflow_hudi_occ.core.commit.retry import RetryPolicy, run_with_conflict_retries
    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter

    rng = random.Random(job["seed"])
    name = job["name"]
    cfg = WriteConfig.from_options(job["options"])
    table = Table.open(job["table"], job.get("storage_options"))
    policy = RetryPolicy(max_conflict_retries=job.get("max_retries", 500), base_delay_s=0.02,
                         max_delay_s=job.get("max_delay_s", 0.5))
    lock_errors = 0
    with open(job["log"], "a") as log:
        for t in range(job["n_tx"]):
            keys = rng.sample(range(job["key_space"]), rng.randint(1, job.get("max_keys", 3)))
            rows = [{"id": k, "p": f"p{k % job.get('partitions', 2)}", "value": f"{name}-{t}",
                     "ts": rng.randint(0, 5)} for k in keys]
            batch_key = f"{name}-{t}"
            log.write(json.dumps({"batch_key": batch_key, "rows": rows}) + "\n")
            log.flush()

            def attempt(n, rows=rows, batch_key=batch_key):
                w = ArrowTableWriter(table, cfg, writer_id=name)
                return w.write(pa.Table.from_pylist(rows), "upsert", batch_key=batch_key, attempt=n)

            while True:
                try:
                    res = run_with_conflict_retries(attempt, policy)
                    break
                except (LockError, StorageError):
                    if not job.get("retry_lock_errors"):
                        raise
                    lock_errors += 1
                    time.sleep(0.2)
            log.write(json.dumps({"batch_key": batch_key, "committed": res.instant.requested_time,
                                  "completion": res.instant.completion_time}) + "\n")
            log.flush()
    print(json.dumps({"name": name, "lock_errors": lock_errors}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
