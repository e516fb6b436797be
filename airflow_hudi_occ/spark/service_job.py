"""The spark-submit entry point for table services: clean, rollback, clustering, compaction, archival.

::

    python -m airflow_hudi_occ.spark.service_job --table PATH --service clean|rollback|cluster|compact|archive \
        [--option k=v ...] [--schedule-only | --instant T] [--dry-run]

- ``clean``: LAZY rollback of dead writers, then one clean (``--dry-run``: plan only).
- ``archive``: move old completed instants to the LSM history (``--dry-run``: plan only).
- ``rollback``: ``--instant T`` rolls back that pending instant; without it, every pending
  write whose heartbeat expired (newest first).
- ``cluster``: ``--schedule-only`` plans (under the lock) and exits; ``--instant T`` executes
  that plan; neither: executes the earliest pending plan, scheduling one if none is pending.
  Only execution starts Spark.
- ``compact`` (merge-on-read): ``--schedule-only`` plans under the lock when Hudi's trigger
  says so (``hoodie.compact.inline.trigger.strategy``...); ``--instant T`` executes that plan;
  neither: executes the earliest pending compaction, scheduling one if none is pending.
  ``--executor spark`` (the default, as clustering runs on Spark) executes the plan as Spark
  tasks, one per file slice (spark/compaction.py); ``--executor arrow`` runs core's Arrow
  executor in the driver without starting Spark (small tables). Both complete the compaction
  with core's completion under the lock.

Exit codes and output as ``job.py``: ``0`` done (also "nothing to do"), ``75`` a retryable
conflict (the clustering lost to another writer and was rolled back: schedule again later),
``1`` any other error, ``2`` usage. The last ``HUDI_OCC_RESULT {...}`` line is the result.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

if __package__ in (None, ""):  # run as a file by spark-submit
    sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

from airflow_hudi_occ.core.commit.archival import run_archival  # noqa: E402
from airflow_hudi_occ.core.commit.rollback import rollback_failed_writes, rollback_instant  # noqa: E402
from airflow_hudi_occ.core.config import WriteConfig  # noqa: E402
from airflow_hudi_occ.core.errors import RetryableError  # noqa: E402
from airflow_hudi_occ.core.job_protocol import ArgumentParser, EXIT_OK, emit_result, exit_code_for  # noqa: E402
from airflow_hudi_occ.core.services.clean import run_clean  # noqa: E402
from airflow_hudi_occ.core.services.clustering import pending_clustering, schedule_clustering  # noqa: E402
from airflow_hudi_occ.core.services.compaction import execute_compaction, schedule_compaction  # noqa: E402
from airflow_hudi_occ.core.table.table import Table  # noqa: E402
from airflow_hudi_occ.spark.submit.options import SparkWriteOptions  # noqa: E402
from airflow_hudi_occ.spark.job import conflict_result, error_result, parse_command_line  # noqa: E402

SERVICES = ("clean", "rollback", "cluster", "compact", "archive")


def parse_args(argv=None) -> argparse.Namespace:
    p = ArgumentParser(prog="airflow_hudi_occ.spark.service_job", description=__doc__.split("\n")[0])
    p.add_argument("--table", required=True)
    p.add_argument("--service", required=True, choices=SERVICES)
    p.add_argument("--option", action="append", default=[], metavar="K=V")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--schedule-only", action="store_true")
    g.add_argument("--instant", default=None)
    p.add_argument("--dry-run", action="store_true", help="clean, archive: plan only")
    p.add_argument("--executor", choices=("spark", "arrow"), default="spark",
                   help="compact: run the plan as Spark tasks (default) or with Arrow in the driver")
    p.add_argument("--writer-id", default=None)
    p.add_argument("--master", default=None)
    p.add_argument("--remote", default=None, metavar="sc://HOST:PORT",
                   help="a Spark Connect server (default: $SPARK_REMOTE)")
    return p.parse_args(argv)


def _spark(args):
    from airflow_hudi_occ.spark.session import job_session
    return job_session(f"hudi-occ {args.service} {os.path.basename(args.table)}", args.master,
                       remote=args.remote)


def run(args, options: dict, *, before_commit=None) -> dict:
    SparkWriteOptions.from_options(options)  # a misspelt key must not fall back to a default
    storage_options = getattr(args, "storage_options", None)
    table = Table.open(args.table, storage_options)
    if args.service == "clean":
        return {"outcome": "ok", **run_clean(table, options, dry_run=args.dry_run).to_json()}
    if args.service == "archive":
        return {"outcome": "ok", **run_archival(table, options, dry_run=args.dry_run).to_json()}
    if args.service == "rollback":
        cfg = WriteConfig.from_options(options)
        if args.instant:
            res = [rollback_instant(table, args.instant, cfg, reason="requested by service job")]
        else:
            res = rollback_failed_writes(table, cfg)
        return {"outcome": "ok", "rolled_back": [r.to_json() for r in res]}
    if args.service == "compact":
        return _compact(table, args, options, before_commit=before_commit)
    if args.schedule_only:
        return {"outcome": "ok", "scheduled": schedule_clustering(table, options)}
    instant, scheduled = args.instant, None
    if instant is None and not pending_clustering(table.timeline()):
        scheduled = instant = schedule_clustering(table, options)
        if instant is None:
            return {"outcome": "ok", "scheduled": None, "message": "nothing to cluster"}
    spark = _spark(args)
    try:
        from airflow_hudi_occ.spark.clustering import SparkClusteringExecutor
        res = SparkClusteringExecutor(spark, args.table, options, writer_id=args.writer_id,
                                      storage_options=storage_options) \
            .execute(instant, before_commit=before_commit)
        return {**res.to_json(), "scheduled": scheduled}
    finally:
        try:
            spark.stop()
        except Exception:  # pragma: no cover
            pass


def _compact(table, args, options: dict, *, before_commit=None) -> dict:
    if args.schedule_only:
        return {"outcome": "ok", "scheduled": schedule_compaction(table, options)}
    instant, scheduled = args.instant, None
    if instant is None and not table.timeline().pending_compactions():
        scheduled = instant = schedule_compaction(table, options)
        if instant is None:
            return {"outcome": "ok", "scheduled": None,
                    "message": "nothing to compact (trigger not reached or no log files)"}
    if getattr(args, "executor", "spark") == "arrow":
        res = execute_compaction(table, options, instant, writer_id=args.writer_id,
                                 before_commit=before_commit)
        return {**res.to_json(), "scheduled": scheduled, "executor": "arrow"}
    spark = _spark(args)  # only execution starts Spark
    try:
        from airflow_hudi_occ.spark.compaction import SparkCompactionExecutor
        res = SparkCompactionExecutor(spark, args.table, options, writer_id=args.writer_id,
                                      storage_options=getattr(args, "storage_options", None)) \
            .execute(instant, before_commit=before_commit)
        return {**res.to_json(), "scheduled": scheduled, "executor": "spark"}
    finally:
        try:
            spark.stop()
        except Exception:  # pragma: no cover
            pass


def main(argv=None, *, before_commit=None) -> int:
    """Run one service; ``before_commit(tx)`` is the clustering's seam before its commit."""
    parsed = parse_command_line(parse_args, argv)
    if isinstance(parsed, int):
        return parsed
    args, options = parsed
    t0 = time.time()
    base = {"table": args.table, "service": args.service}
    try:
        emit_result({**base, **run(args, options, before_commit=before_commit)})
        return EXIT_OK
    except RetryableError as e:
        emit_result({**base, **conflict_result(e, t0)})
        return exit_code_for(e)
    except Exception as e:  # noqa: BLE001 - every failure ends with a result line
        emit_result({**base, **error_result(e)})
        return exit_code_for(e)


if __name__ == "__main__":
    sys.exit(main())
