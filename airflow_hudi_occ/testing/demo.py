"""The library demo: concurrent writers on one local table, then the table as the CLI shows it.

Run with ``scripts/demo.sh`` (or ``python -m airflow_hudi_occ.testing.demo``). Several OS processes
upsert overlapping batches into one table with the file-system (or ZooKeeper) lock, early
conflict detection on, and bounded conflict retries, each attempt admitted first
(``core/commit/retry.run_admitted``: a batch waits while a live writer or an older request
meets its buckets, so losers do not starve; ``--no-admission``: plain retries). At the end the table is read back with
the independent ``hudi`` reader (when installed) and compared with what the writers committed:
every key once, with the value of the last committed write.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import shutil
import sys
import time


def _writer(args) -> dict:
    table_path, writer_no, batches, keys_per_batch, key_space, options, seed, admitted = args
    import json

    import pyarrow as pa

    from airflow_hudi_occ.core.commit.attempt_log import LABELS_OPTION
    from airflow_hudi_occ.core.concurrency.footprint import REQUEST_LABEL, batch_footprint
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.commit.retry import RetryPolicy, RetryRun, run_admitted, run_with_conflict_retries
    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter

    import logging
    logging.getLogger("airflow_hudi_occ").setLevel(logging.ERROR)  # conflicts are reported below
    rnd = random.Random(seed)
    table = Table.open(table_path)
    writer = ArrowTableWriter(table, WriteConfig.from_options(options), writer_id=f"demo-writer-{writer_no}")
    report = {"writer": writer_no, "batches": []}
    for b in range(batches):
        ids = rnd.sample(range(key_space), keys_per_batch)
        ts = time.time_ns()
        data = pa.table({"id": ids, "p": [f"p{i % 4}" for i in ids],
                         "value": [f"w{writer_no}-b{b}" for _ in ids], "ts": [ts] * len(ids)})
        run = RetryRun()
        policy = RetryPolicy(max_conflict_retries=8, base_delay_s=0.05, max_delay_s=1.0)
        key = f"w{writer_no}-b{b}"

        def admitted_attempt(n, request_id, data=data, key=key):
            # the instant names its admission request: others judge it by the request's reach
            labelled = WriteConfig.from_options({**options, LABELS_OPTION: json.dumps({REQUEST_LABEL: request_id})})
            return ArrowTableWriter(table, labelled, writer_id=f"demo-writer-{writer_no}").write(
                data, "upsert", attempt=n, batch_key=key)

        try:
            if admitted:
                footprint = batch_footprint(table, data, options, owner=f"demo-writer-{writer_no}")
                res = run_admitted(table, footprint, admitted_attempt, policy,
                                   heartbeat=writer.config.heartbeat, run=run)
            else:
                res = run_with_conflict_retries(
                    lambda n: writer.write(data, "upsert", attempt=n, batch_key=key), policy, run)
            report["batches"].append({"batch": b, "ids": ids, "instant": res.instant.requested_time,
                                      "completion": res.instant.completion_time,
                                      "attempts": run.to_json()})
        except Exception as e:  # reported, not hidden
            report["batches"].append({"batch": b, "failed": str(e), "attempts": run.to_json()})
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", default=os.path.join(".work", "demo_table"))
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--keys-per-batch", type=int, default=12)
    ap.add_argument("--buckets", type=int, default=8)
    ap.add_argument("--key-space", type=int, default=400)
    ap.add_argument("--lock", default="filesystem", help="filesystem | zookeeper (with --zk-hosts)")
    ap.add_argument("--zk-hosts", default="")
    ap.add_argument("--keep", action="store_true", help="append to an existing demo table")
    ap.add_argument("--no-admission", action="store_true",
                    help="writers retry conflicts without admission (core/commit/retry.run_admitted): "
                         "how overlapping writers starve")
    args = ap.parse_args(argv)

    from airflow_hudi_occ.core.table.table import Table

    if os.path.exists(args.table) and not args.keep:
        shutil.rmtree(args.table)
    Table.create(args.table, "demo", record_key_fields=["id"], partition_fields=["p"],
                 precombine_field="ts", exist_ok=True)
    options = {
        "hoodie.write.lock.provider": args.lock,
        "hoodie.write.lock.wait_time_ms": "5000",
        "hoodie.write.lock.client.wait_time_ms_between_retry": "100",
        "hoodie.write.concurrency.early.conflict.detection.enable": "true",
        # The bucket index makes a key's file group a function of the key, so two writers
        # inserting the same new key conflict instead of storing it twice (simple index hole).
        "hoodie.index.type": "BUCKET",
        "hoodie.bucket.index.num.buckets": str(args.buckets),
        "hoodie.client.heartbeat.interval_in_ms": "2000",
        "hoodie.time.generator.max_expected_clock_skew_ms": "20",
    }
    if args.lock == "zookeeper":
        options["hoodie.write.lock.zookeeper.url"] = args.zk_hosts
    jobs = [(os.path.abspath(args.table), w, args.batches, args.keys_per_batch, args.key_space,
             options, 1000 + w, not args.no_admission) for w in range(args.writers)]
    t0 = time.time()
    with mp.get_context("spawn").Pool(args.writers) as pool:
        reports = pool.map(_writer, jobs)
    elapsed = time.time() - t0

    committed = [b for r in reports for b in r["batches"] if "instant" in b]
    failed = [b for r in reports for b in r["batches"] if "failed" in b]
    conflicts = sum(1 for b in committed + failed for a in b["attempts"] if a["outcome"] == "conflict")
    print(f"{len(committed)} batches committed, {len(failed)} gave up, {conflicts} conflicts retried "
          f"with fresh instants, in {elapsed:.1f}s by {args.writers} processes "
          f"({'without admission' if args.no_admission else 'admitted before each attempt'}): "
          f"{len(committed) / elapsed:.2f} commits/s, "
          f"{conflicts / max(1, len(committed)):.2f} lost attempts per commit")
    for b in committed:
        if len(b["attempts"]) > 1:
            lost = [a["error"] for a in b["attempts"] if a["outcome"] == "conflict"]
            print(f"  batch committed as {b['instant']} after {len(lost)} conflict(s): "
                  + "; ".join(f"{e.get('error')} vs {e.get('other_instant')} on {len(e.get('file_groups', []))} file group(s)"
                              for e in lost))
    expected_keys = {i for b in committed for i in b["ids"]}
    ok = _verify(args.table, expected_keys)
    from airflow_hudi_occ.cli import main as cli_main
    print()
    cli_main(["show", args.table])
    return 0 if ok and not failed else 1


def _verify(table_path: str, expected_keys: set) -> bool:
    from airflow_hudi_occ.testing.tables import hudi_read
    try:
        t = hudi_read(table_path)
    except ImportError:
        print("(the hudi reader is not installed: skipped the independent check)")
        return True
    keys = t.column("id").to_pylist() if t.num_rows else []
    dupes = len(keys) - len(set(keys))
    missing = expected_keys - set(keys)
    extra = set(keys) - expected_keys
    print(f"independent hudi-rs reader: {t.num_rows} rows, {len(set(keys))} distinct keys, "
          f"{dupes} duplicates, {len(missing)} committed keys missing, {len(extra)} unexpected keys")
    return dupes == 0 and not missing and not extra


if __name__ == "__main__":
    sys.exit(main())
