"""A year of backfill through the real scheduler (issue 43, item 5): ``scripts/scale-backfill.sh``.

What runs: ``airflow standalone`` (LocalExecutor) on a private PostgreSQL
(:mod:`.postgres`), the loopback S3 server behind the latency proxy (:mod:`.s3`,
:mod:`.latency_proxy`: every request delayed ``--latency-ms``), the storage lock (RFC-91) on
that store, and the DAGs of ``testing/scale_dags/hudi_occ_scale.py``:

1. **mixed**: one run of ``hudi_scale_backfill`` (``--days`` daily partitions, one mapped
   ``HudiWriteOperator`` per day, ``--parallelism`` at a time, Spark ``local[1]`` each) while
   ``hudi_scale_ingestion`` is unpaused (a run every minute: new keys of the live day and late
   updates of backfilled days) into the same table; both admitted before each spark-submit
   (``on_overlap=wait``, ingestion first);
2. **alone**: the same backfill into another table with nothing beside it (``--no-alone``
   skips it): the makespan the mixed one is compared with;
3. the timeline page of the mixed table opened in headless Chromium (:mod:`.browser`):
   seconds from navigation to the page's ``data-loaded`` (the Gantt chart drawn) and to its
   trends, the bars drawn, a screenshot;
4. every partition of both tables read with hudi-rs and with Java Hudi (:mod:`.java_hudi`,
   Hadoop's s3a) and compared with the model of the staged batches (per key, the row of the
   largest ``ts``: ``provider.examples.expected_table``);
5. the attempt log (``core/inspection/attempt_history``): attempts, lost attempts (conflicts,
   aborts), admission waits (how many, seconds, by DAG).

The summary at the end prints those figures; exit 0 only if every DAG run succeeded, every
partition of both tables is exact in both readers and no attempt was lost.

Batches (:func:`stage_backfill`, :func:`stage_ingestion`) are parquet files in a staging
folder per table, deterministic per DAG run, as the example DAGs' (``provider/examples.py``).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import random
import shutil
import signal
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

from airflow_hudi_occ.provider import examples

REPO = Path(__file__).resolve().parents[2]
DAGS_FOLDER = Path(__file__).resolve().with_name("scale_dags")
FIRST_DAY = date(2025, 1, 1)
BUCKET = "lake"
TABLES = {"mixed": f"s3://{BUCKET}/mixed", "alone": f"s3://{BUCKET}/alone"}
DAG_MIXED, DAG_INGESTION, DAG_ALONE = "hudi_scale_backfill", "hudi_scale_ingestion", "hudi_scale_backfill_alone"
#: an ingestion batch: new keys of the live day, and late updates of backfilled days
INGEST_NEW, INGEST_LATE = 4, 4

#: the example table's options (bucket index, early conflict detection), under its own name
#: and with a lock wait long enough for a queue of writers on a store that costs tens of ms a request
TABLE_OPTIONS = {**examples.TABLE_OPTIONS,
                 "hoodie.datasource.write.table.name": "scale_orders",
                 "hoodie.write.lock.wait_time_ms": "300000"}


@dataclass(frozen=True)
class Settings:
    """What the DAG file reads from the environment the harness gives Airflow."""

    days: int = 365
    parallelism: int = 16
    rows_per_day: int = 50
    table_mixed: str = TABLES["mixed"]
    table_alone: str = TABLES["alone"]
    staging_mixed: str = "/tmp/hudi-scale/staging/mixed"
    staging_alone: str = "/tmp/hudi-scale/staging/alone"

    @classmethod
    def from_env(cls, environ=None) -> "Settings":
        e = os.environ if environ is None else environ
        d = cls()
        return cls(days=int(e.get("HUDI_OCC_SCALE_DAYS", d.days)),
                   parallelism=int(e.get("HUDI_OCC_SCALE_PARALLELISM", d.parallelism)),
                   rows_per_day=int(e.get("HUDI_OCC_SCALE_ROWS_PER_DAY", d.rows_per_day)),
                   table_mixed=e.get("HUDI_OCC_SCALE_TABLE_MIXED", d.table_mixed),
                   table_alone=e.get("HUDI_OCC_SCALE_TABLE_ALONE", d.table_alone),
                   staging_mixed=e.get("HUDI_OCC_SCALE_STAGING_MIXED", d.staging_mixed),
                   staging_alone=e.get("HUDI_OCC_SCALE_STAGING_ALONE", d.staging_alone))

    def env(self) -> dict[str, str]:
        return {"HUDI_OCC_SCALE_DAYS": str(self.days), "HUDI_OCC_SCALE_PARALLELISM": str(self.parallelism),
                "HUDI_OCC_SCALE_ROWS_PER_DAY": str(self.rows_per_day),
                "HUDI_OCC_SCALE_TABLE_MIXED": self.table_mixed, "HUDI_OCC_SCALE_TABLE_ALONE": self.table_alone,
                "HUDI_OCC_SCALE_STAGING_MIXED": self.staging_mixed,
                "HUDI_OCC_SCALE_STAGING_ALONE": self.staging_alone}


def day(i: int) -> str:
    """The partition of day ``i`` (0-based from 2025-01-01); day ``days`` is the live one."""
    return (FIRST_DAY + timedelta(days=i)).isoformat()


SCHEMA_FIELDS = (("id", "int64"), ("day", "string"), ("ts", "int64"), ("v", "string"), ("amount", "int64"))


def _write(rows: list[dict], path: str) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq
    if not os.path.exists(path):  # a re-run of the task finds and reuses its batch
        os.makedirs(os.path.dirname(path), exist_ok=True)
        schema = pa.schema([(n, getattr(pa, t)()) for n, t in SCHEMA_FIELDS])
        tmp = f"{path}.tmp{os.getpid()}"
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)
        os.replace(tmp, path)
    return path


def _safe(run_id: str) -> str:
    return "".join(c if c.isalnum() or c in "_.-" else "_" for c in run_id)


def stage_backfill(staging: str, run_id: str, days: int, rows_per_day: int) -> list[dict]:
    """One batch per day (every key of the day, a full rewrite); the mapped tasks' arguments
    (``HudiWriteOperator`` keyword arguments: ``[{"source": ".../<day>.parquet"}, ...]``; the
    operator's admission reads the batch's partitions from the source itself)."""
    ts = time.time_ns()
    rnd = random.Random(int(hashlib.sha256(run_id.encode()).hexdigest()[:12], 16))
    out = []
    for i in range(days):
        rows = [{"id": i * rows_per_day + j, "day": day(i), "ts": ts, "v": f"backfill:{run_id}",
                 "amount": rnd.randint(1, 999)} for j in range(rows_per_day)]
        path = _write(rows, os.path.join(staging, "backfill", _safe(run_id), f"{day(i)}.parquet"))
        out.append({"source": path})
    return out


def stage_ingestion(staging: str, run_id: str, days: int, rows_per_day: int) -> str:
    """``INGEST_NEW`` new keys of the live day (after the backfilled ones) and ``INGEST_LATE``
    late updates of keys of backfilled days, newer than the backfill's rows (``ts`` now)."""
    rnd = random.Random(int(hashlib.sha256(f"ingestion/{run_id}".encode()).hexdigest()[:12], 16))
    ts = time.time_ns()
    live_base = days * rows_per_day
    rows = [{"id": live_base + rnd.randrange(10 * rows_per_day), "day": day(days), "ts": ts,
             "v": f"ingestion:{run_id}", "amount": rnd.randint(1, 999)} for _ in range(INGEST_NEW)]
    for key in rnd.sample(range(days * rows_per_day), min(INGEST_LATE, days * rows_per_day)):
        rows.append({"id": key, "day": day(key // rows_per_day), "ts": ts, "v": f"ingestion:{run_id}",
                     "amount": rnd.randint(1, 999)})
    rows = list({r["id"]: r for r in rows}.values())  # one row a key
    return _write(rows, os.path.join(staging, "ingestion", f"{_safe(run_id)}.parquet"))


def model(staging: str) -> dict[int, dict]:
    return examples.expected_table(sorted(glob.glob(os.path.join(staging, "**", "*.parquet"), recursive=True)))


def compare_partitions(got: dict[int, dict], want: dict[int, dict]) -> tuple[int, int, list[str]]:
    """(exact partitions, partitions, the first wrong ones): a partition is exact when it holds
    exactly the model's keys, each with the model's ``v`` and ``ts``."""
    def by_day(rows):
        out: dict[str, set] = {}
        for k, r in rows.items():
            out.setdefault(r["day"], set()).add((k, r["v"], r["ts"]))
        return out
    g, w = by_day(got), by_day(want)
    wrong = sorted(d for d in set(g) | set(w) if g.get(d) != w.get(d))
    return len(set(w) - set(wrong)), len(w), wrong[:10]


# --- the run ----------------------------------------------------------------------------------


def _say(*lines: str) -> None:
    print("\n".join(lines), flush=True)


def _iso(s: str | None) -> float | None:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() if s else None


def wait_run(af, dag_id: str, run_id: str, timeout_s: float) -> dict:
    """Until the run is finished; its API record."""
    deadline = time.time() + timeout_s
    while True:
        af.check_alive()
        af.processes()
        run = af.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")
        if run["state"] in ("success", "failed"):
            return run
        if time.time() > deadline:
            raise RuntimeError(f"{dag_id} {run_id} not finished in {timeout_s:.0f} s (state {run['state']})")
        time.sleep(3)


def makespan(run: dict) -> float:
    return _iso(run["end_date"]) - _iso(run["start_date"])


def attempt_figures(table_uri: str, storage_options: dict) -> dict:
    """From the table's attempt log: attempts, commits, lost attempts, admission waits."""
    from airflow_hudi_occ.core.commit import attempt_log
    from airflow_hudi_occ.core.concurrency import admission
    from airflow_hudi_occ.core.inspection.attempt_history import list_attempts
    from airflow_hudi_occ.core.table.table import Table

    t = Table.open(table_uri, storage_options)
    tl = t.timeline()
    rows = list_attempts(t, tl)["attempts"]
    waits = [(r, w) for r in rows if (w := admission.wait_from_labels(r["labels"]))]
    by_dag: dict[str, list[float]] = {}
    for r, w in waits:
        by_dag.setdefault(r.get("dag_id") or "?", []).append(w["seconds"])
    lost = [r for r in rows if r["outcome"] in (attempt_log.CONFLICT, attempt_log.ABORTED)]
    return {"attempts": len(rows),
            "commits": sum(1 for r in rows if r["outcome"] == attempt_log.COMMITTED),
            "lost": len(lost), "lost_rows": lost,
            "waits": {d: {"n": len(s), "total_s": sum(s), "median_s": statistics.median(s), "max_s": max(s)}
                      for d, s in sorted(by_dag.items())},
            "pending": len(tl.pending()), "completed": len(tl.completed())}


def check_tables(tables: dict[str, tuple[str, str]], s3, workdir: Path) -> tuple[bool, list[str], dict]:
    """Every partition of each table (name -> (uri, staging)) against its model, with hudi-rs
    and with Java Hudi (one JVM reads both)."""
    from airflow_hudi_occ.provider.java_job import hadoop_store_settings
    from airflow_hudi_occ.testing.java_hudi import JavaHudi, JavaHudiSetup, Read
    from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key

    so = s3.storage_options
    ok, lines, figs = True, [], {}
    models = {name: model(staging) for name, (_uri, staging) in tables.items()}
    for name, (uri, _staging) in tables.items():
        got = rows_by_key(hudi_read(uri, storage_options=s3.hudi_rs_options))
        exact, total, wrong = compare_partitions(got, models[name])
        ok &= exact == total and total > 0
        figs[f"{name}.hudi_rs"] = (exact, total)
        lines.append(f"  {name}: hudi-rs {exact}/{total} partitions exact ({len(got)} rows, model "
                     f"{len(models[name])})" + (f"; wrong: {wrong}" if wrong else ""))
    setup = JavaHudiSetup.load()
    conf, env = hadoop_store_settings(next(iter(tables.values()))[0], so)
    java = JavaHudi(workdir / "java", jars=list(setup.s3a_jars), env=env, spark_conf=conf, master="local[1]",
                    timeout_s=1200)
    reads = java.run(*(Read(uri) for uri, _ in tables.values()))
    for (name, _), res in zip(tables.items(), reads):
        got = rows_by_key(res.rows, columns=[n for n, _t in SCHEMA_FIELDS])
        exact, total, wrong = compare_partitions(got, models[name])
        ok &= exact == total and total > 0
        figs[f"{name}.java"] = (exact, total)
        lines.append(f"  {name}: Java Hudi {exact}/{total} partitions exact ({len(got)} rows)"
                     + (f"; wrong: {wrong}" if wrong else ""))
    return ok, lines, figs


def render_page(af, table: str, workdir: Path) -> dict:
    """The timeline page of ``table`` in headless Chromium: seconds to the Gantt chart
    (``body[data-loaded]``) and to the trends, bars drawn, and a full-page screenshot."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from airflow_hudi_occ.testing.browser import headless_chrome

    t0 = time.monotonic()
    status, raw = af.http("GET", f"/hudi-occ/api/tables/{table}/timeline", timeout=600)
    api_s = time.monotonic() - t0
    if status != 200:
        raise RuntimeError(f"the timeline API answered {status}: {raw[:500]!r}")
    driver = headless_chrome(workdir / "chrome", "1600,1000")
    try:
        driver.set_page_load_timeout(600)
        driver.get(af.base_url + "/hudi-occ/api/tables")  # the cookie's origin
        driver.add_cookie({"name": "_token", "value": af.token(), "path": "/"})
        body = lambda d: d.find_element(By.TAG_NAME, "body")  # noqa: E731
        t0 = time.monotonic()
        driver.get(af.base_url + f"/hudi-occ/?table={table}")
        WebDriverWait(driver, 600, poll_frequency=0.05).until(lambda d: body(d).get_attribute("data-loaded"))
        loaded_s = time.monotonic() - t0
        WebDriverWait(driver, 600, poll_frequency=0.05).until(lambda d: body(d).get_attribute("data-trends"))
        trends_s = time.monotonic() - t0
        state = body(driver).get_attribute("data-loaded")
        bars = len(driver.find_elements(By.CSS_SELECTOR, "#gantt rect.bar"))
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": 1600, "height": min(int(height), 16000), "deviceScaleFactor": 1, "mobile": False})
        time.sleep(0.6)  # the charts redraw on resize (debounced)
        png = workdir / "timeline-page.png"
        driver.save_screenshot(str(png))
    finally:
        driver.quit()
    return {"api_s": api_s, "loaded_s": loaded_s, "trends_s": trends_s, "state": state, "bars": bars,
            "png": str(png), "api_bytes": len(raw)}


def run(args) -> int:
    from airflow_hudi_occ.testing.airflow_standalone import AirflowStandalone, standalone_env
    from airflow_hudi_occ.testing.jvm import spark_submit_opts
    from airflow_hudi_occ.testing.latency_proxy import LatencyProxy
    from airflow_hudi_occ.testing.postgres import PostgresServer
    from airflow_hudi_occ.testing.s3 import S3Server
    from airflow_hudi_occ.testing.spark_cluster import free_port

    t_start = time.time()
    work = Path(args.workdir).resolve()
    for d in ("airflow", "staging", "java", "chrome"):
        shutil.rmtree(work / d, ignore_errors=True)
    home = work / "airflow"
    home.mkdir(parents=True)
    settings = Settings(days=args.days, parallelism=args.parallelism, rows_per_day=args.rows_per_day,
                        staging_mixed=str(work / "staging" / "mixed"),
                        staging_alone=str(work / "staging" / "alone"))
    pg = PostgresServer(work / "postgres")
    s3 = proxy = af = None
    summary: list[str] = []
    ok = True
    try:
        pg.start()
        db_url = pg.url(pg.fresh_database("airflow_scale"))
        s3 = S3Server().start()
        s3.create_bucket(BUCKET)
        proxy = LatencyProxy(s3.endpoint, delay_ms=args.latency_ms).start()
        store = proxy.storage_options(s3.storage_options)
        port = args.port or free_port()
        users = home / "passwords.json"
        users.write_text(json.dumps({"admin": "scale-admin"}))
        env = dict(os.environ)
        env.update(standalone_env(home, port, database_url=db_url, parallelism=args.parallelism + 4))
        env.update(settings.env())
        jvm = os.environ.get("SPARK_SUBMIT_OPTS") or ("" if args.default_jvm else spark_submit_opts())
        if jvm:
            env["SPARK_SUBMIT_OPTS"] = jvm
        env.update({
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "True",  # the ingestion DAG's runs every minute
            "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": str(args.parallelism + 2),
            # 16 Spark tasks on a small machine: a task's parse of the DAG file and its calls to
            # Airflow's execution API wait for a core, not for a fault. At Airflow's defaults
            # (30 s, 5 s) a 90-day run at 16 at a time on 2 cores failed mapped tasks with "Dag
            # not found during start up" (the parse timed out) and "API_SERVER_ERROR ...
            # ReadTimeout", none for the table's sake. What a platform team gives a busy worker:
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "300",
            "AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT": "300",
            "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
            "AIRFLOW__WORKERS__EXECUTION_API_RETRIES": "10",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(users),
            "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
            "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[1]"}),
            "AIRFLOW_CONN_HUDI_OCC_DEFAULT": json.dumps({"conn_type": "hudi_occ", "extra": {
                "lock_provider": "storage", "storage_options": store}}),
            # the timeline page: both tables, through the proxy as the writers see them
            "HUDI_OCC_TABLES": ",".join(f"{n}={u}" for n, u in TABLES.items()),
            "AIRFLOW__HUDI_OCC__STORAGE_OPTIONS": json.dumps(store),
        })
        af = AirflowStandalone(home, env, port, bin_dir=os.path.dirname(sys.executable),
                               log_path=work / "airflow-standalone.log", password="scale-admin")
        _say(f"scale backfill: {args.days} days, {args.parallelism} at a time, {args.rows_per_day} rows a day, "
             f"{args.latency_ms:g} ms a storage request; work in {work}",
             f"spark-submit JVM options: {jvm or 'the JDK defaults'}",
             f"PostgreSQL {pg.bin.parent.name} on 127.0.0.1:{pg.port}; S3 {s3.endpoint} behind the proxy "
             f"{proxy.endpoint}; starting airflow standalone (LocalExecutor) ...")
        af.start(timeout_s=600)
        af.wait_for_dags([DAG_MIXED, DAG_INGESTION, DAG_ALONE], timeout_s=600)
        _say(f"Airflow up in {time.time() - t_start:.0f} s on {af.base_url}")

        # 1. the backfill with ingestion every minute beside it
        af.api("PATCH", f"/api/v2/dags/{DAG_INGESTION}", {"is_paused": False})
        af.trigger(DAG_MIXED, "scale_mixed")
        mixed = wait_run(af, DAG_MIXED, "scale_mixed", args.timeout)
        af.api("PATCH", f"/api/v2/dags/{DAG_INGESTION}", {"is_paused": True})
        ingest_runs = af.wait_for_runs([DAG_INGESTION], args.timeout)[DAG_INGESTION]
        mixed_s = makespan(mixed)
        ingest_ok = sum(r["state"] == "success" for r in ingest_runs)
        _say(f"mixed: backfill {mixed['state']} in {mixed_s:.0f} s; ingestion runs {ingest_ok}/{len(ingest_runs)} "
             "succeeded")
        ok &= mixed["state"] == "success" and ingest_ok == len(ingest_runs)

        # 2. the same backfill alone
        alone_s = None
        if not args.no_alone:
            af.trigger(DAG_ALONE, "scale_alone")
            alone = wait_run(af, DAG_ALONE, "scale_alone", args.timeout)
            alone_s = makespan(alone)
            _say(f"alone: backfill {alone['state']} in {alone_s:.0f} s")
            ok &= alone["state"] == "success"

        # 3. the timeline page of the mixed table
        page = render_page(af, "mixed", work)
        _say(f"timeline page: {page['state']}, {page['bars']} bars; Gantt in {page['loaded_s']:.1f} s, "
             f"trends in {page['trends_s']:.1f} s (API {page['api_s']:.1f} s, {page['api_bytes']} bytes); "
             f"screenshot {page['png']}")
        ok &= page["state"] == "mixed"
        af.stop()
        left = af.survivors
        af = None

        # 4. every partition, both readers; 5. the attempt log
        direct = s3.storage_options
        tables = {"mixed": (TABLES["mixed"], settings.staging_mixed)}
        if not args.no_alone:
            tables["alone"] = (TABLES["alone"], settings.staging_alone)
        tables_ok, lines, _figs = check_tables(tables, s3, work)
        _say("partitions against the model:", *lines)
        ok &= tables_ok
        att = attempt_figures(TABLES["mixed"], direct)
        ok &= att["lost"] == 0 and att["pending"] == 0 and not left
        waits = "; ".join(f"{d}: {w['n']} waits, {w['total_s']:.0f} s in all, median {w['median_s']:.1f} s, "
                          f"max {w['max_s']:.1f} s" for d, w in att["waits"].items()) or "none"
        counts = proxy.counts()
        summary = [
            "=" * 78,
            f"scale backfill summary ({args.days} days, {args.parallelism} at a time, {args.latency_ms:g} ms a "
            f"request; PostgreSQL, LocalExecutor, Spark local[1] a task, storage lock; JVM "
            f"{'defaults' if not jvm else 'start-up ' + ' '.join(o for o in jvm.split() if 'Archive' not in o)})",
            f"  makespan: backfill with ingestion every minute {mixed_s:.0f} s; alone "
            + (f"{alone_s:.0f} s (mixed / alone {mixed_s / alone_s:.2f}x)" if alone_s else "not run"),
            f"  ingestion runs beside it: {ingest_ok}/{len(ingest_runs)} succeeded",
            f"  attempts {att['attempts']}, commits {att['commits']}, lost attempts {att['lost']}"
            + "".join(f" [{r['instant']} {r['dag_id']}.{r['task_id']} {r['outcome']}]" for r in att["lost_rows"][:5]),
            f"  admission waits: {waits}",
            "  partitions exact: " + ", ".join(f"{k} {e}/{t}" for k, (e, t) in _figs.items()),
            f"  timeline page ({att['attempts']} attempts): Gantt drawn in {page['loaded_s']:.1f} s, trends in "
            f"{page['trends_s']:.1f} s, {page['bars']} bars; {page['png']}",
            f"  storage requests through the proxy: {sum(counts.values())} "
            f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items(), key=lambda kv: -kv[1])[:5])})",
            f"  processes left: {left or 'none'}; total {time.time() - t_start:.0f} s",
            f"{'OK' if ok else 'FAILED'}",
        ]
    except RuntimeError as e:
        ok = False
        summary = [f"FAILED: {e}"]
    finally:
        if af is not None:
            af.stop()
        if proxy is not None:
            proxy.stop()
        if s3 is not None:
            s3.stop()
        pg.stop()
    _say(*summary)
    return 0 if ok else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=365, help="daily partitions the backfill rewrites (365)")
    ap.add_argument("--parallelism", type=int, default=16, help="mapped write tasks at once (16)")
    ap.add_argument("--latency-ms", type=float, default=20.0, help="delay of every storage request (20 ms)")
    ap.add_argument("--rows-per-day", type=int, default=50)
    ap.add_argument("--workdir", default=str(REPO / ".work" / "scale-backfill"),
                    help="Airflow home, staging, PostgreSQL cluster, logs, screenshot (kept between runs)")
    ap.add_argument("--timeout", type=float, default=6 * 3600.0, help="seconds each phase may take")
    ap.add_argument("--no-alone", action="store_true", help="skip the backfill-alone run (no makespan ratio)")
    ap.add_argument("--port", type=int, default=0, help="the Airflow API's port on 127.0.0.1 (default: free)")
    ap.add_argument("--default-jvm", action="store_true",
                    help="start each task's spark-submit JVM with the JDK's defaults, not the tests' cheaper "
                         "start-up (C1 only, serial GC, the class-data archive when built: about half the "
                         "CPU of a short job; SPARK_SUBMIT_OPTS of your own always wins)")
    args = ap.parse_args(argv)
    if args.days < 1 or args.parallelism < 1 or args.rows_per_day < 1:
        ap.error("--days, --parallelism and --rows-per-day must be at least 1")
    # stopped (kill, timeout): leave through run()'s clean-up, which stops Airflow, its Spark
    # tasks, the store and PostgreSQL (a plain SIGTERM would leave them running)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
