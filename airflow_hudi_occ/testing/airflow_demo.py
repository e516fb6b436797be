"""The Airflow demo: ingestion and backfill DAG runs at the same time on one table, then the
table services, then what happened, checked with the independent ``hudi`` reader.

Run ``scripts/demo.sh`` (or ``python -m airflow_hudi_occ.testing.airflow_demo``). Each DAG run
is its own ``airflow dags test`` process (SQLite in a fresh AIRFLOW_HOME, the repository's
``dags/``, Spark ``local[1]`` per job), so the writers really are concurrent processes. The
lock is the file-system lock, or ZooKeeper with ``--zookeeper HOST:PORT``. At the end, from
the table's attempt records (:func:`contention_lines`): every attempt, every admission wait
(who waited, for which instant of whose task, on which partitions, how long), every conflict
(which instant won, on which file groups, where the loser stopped, seconds discarded) and its
retry; then the final table read with hudi-rs compared with the model rebuilt from the
batches (every key once, with the row of the largest ``ts``).
Exit 0 when every DAG run succeeded and the table matches the model, else 1.

``--ui`` (:func:`run_ui`): the same DAGs through ``airflow standalone``'s scheduler, with one
conflict forced, so the timeline page (``/hudi-occ/``) has a conflict and its retry to show;
Airflow stays up until Ctrl-C, which stops every process it started.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from airflow_hudi_occ.core.config import ADMISSION_ON_OVERLAP

REPO = Path(__file__).resolve().parents[2]


def _env(home: Path, zookeeper: str | None, window: bool, on_overlap: str | None = None) -> dict:
    bin_dir = os.path.dirname(sys.executable)
    env = dict(os.environ)
    env.update({
        "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "false",
        "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "HUDI_OCC_TABLE": str(home / "hudi_occ" / "orders"),
        "HUDI_OCC_STAGING": str(home / "hudi_occ" / "staging"),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[1]"}),
        "HUDI_OCC_WRITE_WINDOW": "on" if window else "off",
    })
    extra: dict = {}
    if zookeeper:
        env["AIRFLOW_CONN_HUDI_ZOOKEEPER_DEFAULT"] = json.dumps(
            {"conn_type": "hudi_zookeeper", "host": zookeeper, "schema": "/hudi/locks"})
        extra.update(lock_provider="zookeeper", zookeeper_conn_id="hudi_zookeeper_default")
    if on_overlap:  # the table connection's policy (the DAGs' operators do not set one)
        extra["options"] = {ADMISSION_ON_OVERLAP.key: on_overlap}
    if extra:
        env["AIRFLOW_CONN_HUDI_OCC_DEFAULT"] = json.dumps({"conn_type": "hudi_occ", "extra": extra})
    return env


def _start(env, home: Path, dag_id: str, name: str, logical_date: str | None = None):
    log = open(home / f"{name}.log", "w")
    cmd = [os.path.join(os.path.dirname(sys.executable), "airflow"), "dags", "test", dag_id]
    if logical_date:
        cmd.append(logical_date)
    p = subprocess.Popen(cmd, env=env, cwd=home, stdout=log, stderr=subprocess.STDOUT)
    p.name, p.log_path = name, home / f"{name}.log"
    return p


def _ok(p) -> bool:
    text = Path(p.log_path).read_text(errors="replace")
    return p.returncode == 0 and "state=success" in text


STOPPED_AT_COMMIT = "caught at commit"


def stop_point(row: dict) -> str:
    """Where a lost attempt (an ``attempt_history`` row) learnt it had lost: the earlier, the
    less cluster time burnt."""
    if row["error"] == "EarlyConflictError":
        return "stopped early (early conflict detection)"
    if row["error"] == "WriteAbortedError" or row["outcome"] == "aborted":
        return "stopped early (abort signal)"
    if row["error"] == "PendingClusteringConflictError":
        return "refused before writing (pending clustering)"
    return STOPPED_AT_COMMIT


def _who(row: dict) -> str:
    """``dag.task run R`` (the spelling of an admission wait's owner), else the writer id."""
    if row.get("dag_id") or row.get("task_id"):
        return (f"{row.get('dag_id') or '?'}.{row.get('task_id') or '?'}"
                + (f" run {row['run_id']}" if row.get("run_id") else ""))
    return f"writer {row['writer_id']}" if row.get("writer_id") else "an unlabelled writer"


#: file groups named per lost attempt (a backfill loses on every one: `hudi-occ attempts` lists all)
SHOWN_FILE_GROUPS = 3


def contention_lines(table, timeline=None) -> list[str]:
    """Every attempt, each admission wait (who waited, for which instant of whose task, on
    which partitions, how long), each lost attempt (to whom, on which file groups, where it
    stopped, what it threw away, its retry) and the totals, read from the table's attempt
    records through ``core/inspection/attempt_history`` (the read model ``hudi-occ attempts``
    and the timeline page use), so the demo's story is the page's."""
    from airflow_hudi_occ.core.commit import attempt_log
    from airflow_hudi_occ.core.concurrency import admission
    from airflow_hudi_occ.core.inspection.attempt_history import list_attempts

    rows = list_attempts(table, timeline if timeline is not None else table.timeline())["attempts"]
    by = {r["instant"]: r for r in rows}
    lines = ["attempts (from the table's attempt log):"]
    for r in rows:
        lines.append(f"  {r['instant']} {r['outcome']:9s} attempt {r['attempt']}  {_who(r)}"
                     f" try {r['try_number'] or '?'}")
    waits = [(r, w) for r in rows if (w := admission.wait_from_labels(r["labels"]))]
    lines.append("admission waits (before spark-submit, while a live writer could touch the batch's file groups):")
    for r, w in waits:
        lines.append(f"  {_who(r)} waited {w['seconds']:.1f} s for "
                     f"{'; '.join(w['waited_for']) or 'nothing named'}, then began {r['instant']}")
    if not waits:
        lines.append("  none")
    lost = [r for r in rows if r["outcome"] in (attempt_log.CONFLICT, attempt_log.ABORTED)]
    lines.append("conflicts and retries:")
    for r in lost:
        winner = by.get(r["other_instant"] or "")
        retry = by.get(r["retried_by"] or "")
        groups = r["file_groups"]
        shown = ", ".join(groups[:SHOWN_FILE_GROUPS]) + (
            f", ... {len(groups) - SHOWN_FILE_GROUPS} more" if len(groups) > SHOWN_FILE_GROUPS else "")
        lines.append(
            f"  {r['instant']} {_who(r)} attempt {r['attempt']} lost to {r['other_instant'] or '?'}"
            f" ({_who(winner) if winner else 'no attempt record'}) on {len(groups)} file group(s)"
            f"{' ' + shown if groups else ''}: {stop_point(r)}, "
            f"{r['seconds_discarded']:.1f} s and {r['files_discarded']} file(s) discarded; "
            + (f"retried as {retry['instant']} ({retry['outcome']})" if retry else "not retried"))
    if not lost:
        lines.append("  none")
    if lost:
        early = [r for r in lost if stop_point(r) != STOPPED_AT_COMMIT]
        secs = sorted(r["seconds_discarded"] for r in lost)
        lines.append(f"lost attempts: {len(lost)}, {len(early)} stopped before commit; seconds "
                     f"discarded per lost attempt: median {secs[len(secs) // 2]:.1f}, max "
                     f"{secs[-1]:.1f}; files discarded: {sum(r['files_discarded'] for r in lost)}")
    lines.append(f"commits {sum(1 for r in rows if r['outcome'] == attempt_log.COMMITTED)}, conflicts "
                 f"{sum(1 for r in rows if r['outcome'] == attempt_log.CONFLICT)}, retried attempts "
                 f"{sum(1 for r in rows if r['retry_of'])}, admission waits {len(waits)} "
                 f"({sum(w['seconds'] for _r, w in waits):.1f} s)")
    return lines


def report(table_path: str, staging: str) -> tuple[bool, list[str]]:
    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.provider.examples import expected_table
    from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key

    t = Table.open(table_path)
    lines = contention_lines(t)
    tl = t.timeline()
    lines.append(f"timeline: {len(tl.completed())} completed instants "
                 f"({Counter(i.action.value for i in tl.completed())}), {len(tl.pending())} pending")
    want = expected_table(sorted(glob.glob(os.path.join(staging, "*", "*.parquet"))))
    try:
        got = rows_by_key(hudi_read(table_path))
    except AssertionError as e:
        lines.append(f"FAIL: {e}")
        return False, lines
    lost = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    wrong = sorted(k for k in set(got) & set(want) if (got[k]["v"], got[k]["ts"]) != (want[k]["v"], want[k]["ts"]))
    ok = not lost and not extra and not wrong
    lines.append(f"hudi-rs reads {len(got)} rows, the model expects {len(want)}: "
                 f"{'OK, no duplicate, no lost row, every value as expected' if ok else 'MISMATCH'}")
    if not ok:
        lines.append(f"  lost {lost[:10]} extra {extra[:10]} wrong {wrong[:10]}")
    return ok, lines


WRITERS = ("hudi_occ_backfill", "hudi_occ_ingestion")
SERVICES = "hudi_occ_table_services"
#: the name the timeline page knows the demo's table by (``HUDI_OCC_TABLES``)
UI_TABLE = "orders"


def _say(*lines: str) -> None:
    print("\n".join(lines), flush=True)


def ui_env(home: Path, port: int, zookeeper: str | None, writers: int) -> dict:
    """The demo's environment for ``airflow standalone``, with the conflict forced: no write
    window and admission ``go`` (both writers start at once), and the Spark jobs wrapped in the
    test harness's commit barrier (``testing/spark_job.py``, ``begin`` mode): no attempt
    commits before ``writers`` attempts have begun, so they overlap on the example table's
    buckets and at least one loses (with two writers, exactly one), each loser retried on a
    fresh instant (a retry passes the barrier at once)."""
    from airflow_hudi_occ.provider.spark_jobs import APPLICATION_ENV
    from airflow_hudi_occ.testing import spark_job
    from airflow_hudi_occ.testing.airflow_standalone import standalone_env

    env = _env(home, zookeeper, window=False, on_overlap="go")
    env.update(standalone_env(home, port))
    env.update({
        # the login standalone prints: admin, with a password SimpleAuthManager generates
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "HUDI_OCC_TABLES": f"{UI_TABLE}={env['HUDI_OCC_TABLE']}",
        APPLICATION_ENV: spark_job.PATH,
        spark_job.BARRIER_ENV: f"{home / 'barrier'}:{writers}:begin",
    })
    return env


def ui_addresses(af) -> list[str]:
    from airflow_hudi_occ.testing.airflow_standalone import GENERATED_PASSWORDS
    return [f"Airflow UI:    {af.base_url}/  (login: {af.user} / {af.password()}; SimpleAuthManager, "
            f"the password is in {af.home / GENERATED_PASSWORDS})",
            f"timeline page: {af.base_url}/hudi-occ/?table={UI_TABLE}  "
            f"(in the UI: Browse > Hudi timeline, {af.base_url}/plugin/hudi-occ-timeline)"]


def run_ui(home: Path, port: int, zookeeper: str | None, ingestion_runs: int, timeout_s: float) -> int:
    """``--ui``: the same DAGs through ``airflow standalone``'s scheduler, one conflict forced,
    the table checked as the headless run checks it; then Airflow stays up for a person to
    look until Ctrl-C (or SIGTERM), which stops it and every process it started. Exit 0 when
    every run succeeded, the table is exact and no process outlived the demo."""
    from airflow_hudi_occ.testing.airflow_standalone import AirflowStandalone

    def interrupted(signum, frame):
        raise KeyboardInterrupt
    # both, explicitly: a shell starting this in the background hands it SIGINT ignored
    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)
    t0 = time.time()
    writers = 1 + ingestion_runs
    env = ui_env(home, port, zookeeper, writers)
    af = AirflowStandalone(home, env, port, bin_dir=os.path.dirname(sys.executable),
                           log_path=home / "airflow-standalone.log")
    ok = False
    try:
        _say(f"AIRFLOW_HOME {home}; lock: {'zookeeper ' + zookeeper if zookeeper else 'file system'}",
             f"starting airflow standalone (LocalExecutor on SQLite; log {af.log_path}) ...")
        af.start()
        _say(f"Airflow is up in {time.time() - t0:.0f} s", *ui_addresses(af))
        af.wait_for_dags([*WRITERS, SERVICES])
        run_ids = [("hudi_occ_backfill", "demo_backfill")] + [
            ("hudi_occ_ingestion", f"demo_ingestion_{i + 1}") for i in range(ingestion_runs)]
        for dag_id, run_id in run_ids:
            af.trigger(dag_id, run_id)
        _say(f"triggered {len(run_ids)} DAG runs at once through the scheduler: {[r for _d, r in run_ids]}; "
             f"no attempt commits before {writers} have begun, so they overlap and at least one "
             "loses a conflict and retries on a fresh instant (watch the timeline page)")
        runs = af.wait_for_runs(WRITERS, timeout_s)
        af.trigger(SERVICES, "demo_services")
        runs.update(af.wait_for_runs([SERVICES], timeout_s))
        ok = True
        for dag_id, rs in runs.items():
            for r in rs:
                ok &= r["state"] == "success"
                _say(f"  {dag_id} {r['dag_run_id']}: {r['state']} {af.task_states(dag_id, r['dag_run_id'])}")
        table_ok, lines = report(env["HUDI_OCC_TABLE"], env["HUDI_OCC_STAGING"])
        ok &= table_ok
        _say(*lines, f"{'OK' if ok else 'FAILED'} in {time.time() - t0:.0f} s", *ui_addresses(af),
             "Airflow stays up until Ctrl-C")
        while af.alive():
            time.sleep(1)
        _say(f"airflow standalone exited on its own: {af.log_tail(2000)}")
        ok = False
    except KeyboardInterrupt:
        _say("stopping Airflow and every process it started ...")
    except RuntimeError as e:
        _say(f"FAILED: {e}")
        ok = False
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        af.stop()
        left = af.survivors
        _say(f"stopped; processes left: {left or 'none'}")
    status = 0 if ok and not left else 1
    _say(f"exit {status} ({'the table is exact' if ok else 'the runs or the table were not right, or not checked'})")
    return status


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", default=os.path.join(".work", "airflow-demo"), help="fresh AIRFLOW_HOME (wiped)")
    ap.add_argument("--ingestion-runs", type=int, default=None,
                    help="ingestion runs beside the backfill (default 2; 1 with --ui)")
    ap.add_argument("--zookeeper", default=None, help="HOST:PORT of ZooKeeper for the table lock")
    ap.add_argument("--no-window", action="store_true", help="backfill without a write window")
    ap.add_argument("--on-overlap", choices=["wait", "go", "fail"], default=None,
                    help="the table connection's admission policy (default: the operators' own, wait); "
                         "go is the behaviour before admission, for a before/after comparison")
    ap.add_argument("--ui", action="store_true",
                    help="run the DAGs through `airflow standalone` with one conflict forced, print the "
                         "UI's and the timeline page's addresses and stay up until Ctrl-C")
    ap.add_argument("--port", type=int, default=8080, help="--ui: the UI's port on 127.0.0.1")
    ap.add_argument("--timeout", type=float, default=1500.0, help="--ui: seconds the runs may take")
    args = ap.parse_args(argv)
    if args.ui and (args.no_window or args.on_overlap):
        ap.error("--ui forces a conflict (no write window, admission go): leave out --no-window and --on-overlap")
    home = Path(args.home).resolve()
    if args.ui:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", args.port))
            except OSError as e:
                ap.error(f"port {args.port} on 127.0.0.1 is taken ({e.strerror}): choose another with --port")
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        return run_ui(home, args.port, args.zookeeper,
                      1 if args.ingestion_runs is None else args.ingestion_runs, args.timeout)
    if args.ingestion_runs is None:
        args.ingestion_runs = 2
    home = Path(args.home).resolve()
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    env = _env(home, args.zookeeper, not args.no_window, args.on_overlap)
    t0 = time.time()
    print(f"AIRFLOW_HOME {home}; lock: {'zookeeper ' + args.zookeeper if args.zookeeper else 'file system'}")
    mig = subprocess.run([os.path.join(os.path.dirname(sys.executable), "airflow"), "db", "migrate"],
                         env=env, cwd=home, capture_output=True, text=True)
    if mig.returncode != 0:
        print(mig.stdout[-2000:], mig.stderr[-2000:])
        return 1
    # Parallel `dags test` processes each insert every DAG of the folder into SQLite on first
    # sight and collide (UNIQUE constraint failed: dag.dag_id); serialize them once, serially.
    ser = subprocess.run([os.path.join(os.path.dirname(sys.executable), "airflow"), "dags", "reserialize"],
                         env=env, cwd=home, capture_output=True, text=True)
    if ser.returncode != 0:
        print(ser.stdout[-2000:], ser.stderr[-2000:])
        return 1
    t_runs = time.time()
    procs = [_start(env, home, "hudi_occ_backfill", "backfill")]
    for i in range(args.ingestion_runs):
        time.sleep(2)  # distinct run ids; still concurrent with the backfill and each other
        procs.append(_start(env, home, "hudi_occ_ingestion", f"ingestion-{i + 1}"))
    print(f"running {len(procs)} DAG runs at once: {[p.name for p in procs]}")
    for p in procs:
        p.wait()
        print(f"  {p.name}: {'success' if _ok(p) else 'FAILED'} (log {p.log_path})")
    print(f"makespan of the concurrent DAG runs: {time.time() - t_runs:.0f} s")
    svc = _start(env, home, "hudi_occ_table_services", "table-services")
    svc.wait()
    print(f"  table services: {'success' if _ok(svc) else 'FAILED'} (log {svc.log_path})")
    ok, lines = report(env["HUDI_OCC_TABLE"], env["HUDI_OCC_STAGING"])
    print("\n".join(lines))
    all_ok = ok and all(_ok(p) for p in procs) and _ok(svc)
    print(f"{'OK' if all_ok else 'FAILED'} in {time.time() - t0:.0f} s")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
