"""The demo's summary (``testing/airflow_demo.contention_lines``) from attempt records that real
writes left: a write that really waited for admission behind a live backfill (the write
operator's own admission, ``provider/admission.py``, in this process), and a write that really
lost a conflict and committed on its retry (``run_with_conflict_retries``). Each line is
checked against the records, never against a number or instant written here.

Then ``scripts/demo.sh --ui`` itself (slow: Airflow standalone and two Spark jobs, about five
minutes on two cores): its printed addresses and login, the timeline page in headless Chromium
showing the forced conflict and its retry (screenshot ``demo_ui_timeline.png`` in
``HUDI_OCC_SCREENSHOT_DIR``, default the test's tmp), and Ctrl-C stopping every process."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.commit.retry import RetryPolicy, run_with_conflict_retries
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.inspection.attempt_history import list_attempts
from airflow_hudi_occ.core.concurrency import admission as core_admission
from airflow_hudi_occ.core.config import HeartbeatConfig, WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider import admission
from airflow_hudi_occ.testing.airflow_demo import contention_lines
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS

OPTS = {**FAST_WRITE_OPTIONS, "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts"}
HB = HeartbeatConfig(interval_ms=1000, tolerable_misses=2)


def _writer(table, dag_id, task_id, run_id, **extra) -> ArrowTableWriter:
    labels = dict(dag_id=dag_id, task_id=task_id, run_id=run_id, try_number="1", **extra)
    return ArrowTableWriter(table, WriteConfig.from_options({**OPTS, attempt_log.LABELS_OPTION: json.dumps(labels)}),
                            writer_id=f"{dag_id}-{run_id}")


def _rows(ids, v):
    return pa.Table.from_pylist([{"id": i, "p": f"p{i % 2}", "ts": 1, "v": v} for i in ids])


def _contended_table(tmp_path):
    """Seed; a backfill live while an ingestion run waits for admission behind it; two
    ingestion runs colliding, the loser retried."""
    table = Table.create(str(tmp_path / "orders"), "orders", record_key_fields=["id"],
                         partition_fields=["p"], precombine_field="ts")
    _writer(table, "seed", "load", "r0").write(_rows(range(8), "seed"))

    # the backfill holds its instant live (inflight, file groups planned) until released
    began, release, out = threading.Event(), threading.Event(), {}

    def hold(tx):
        out["backfill"] = tx.instant_time
        began.set()
        release.wait(60)
    backfill = threading.Thread(target=lambda: _writer(table, "hudi_occ_backfill", "rewrite", "bf").write(
        _rows(range(8), "backfill"), before_commit=hold))
    backfill.start()
    assert began.wait(60)
    src = tmp_path / "ingest.parquet"
    pq.write_table(_rows([0, 2], "ingest"), src)  # partition p0 only
    fp = admission.batch_footprint(table, str(src), "parquet", owner="hudi_occ_ingestion.upsert",
                                   kind="ingestion", storage_options=None, operation="upsert", options=OPTS)
    req = admission.file_request(table, fp, {"dag_id": "hudi_occ_ingestion", "run_id": "i1", "task_id": "upsert"})
    threading.Timer(1.0, release.set).start()
    res = admission.wait_on_worker(table, req, HB, admission.AdmissionSettings("wait", 60.0, poll_s=0.1),
                                   logging.getLogger("test"))
    backfill.join(60)
    assert res.waited_for and not res.timed_out, res
    admission.withdraw(table.base_uri, None, req.request_id)
    out["waiter"] = _writer(table, "hudi_occ_ingestion", "upsert", "i1",
                            **core_admission.wait_labels(res.seconds, res.waited_for)
                            ).write(pq.read_table(src)).instant.requested_time

    def collide(tx):  # another run commits the same file group in the middle of attempt 1
        out["loser"] = tx.instant_time
        out["winner"] = _writer(table, "hudi_occ_ingestion", "upsert", "i3").write(
            _rows([1], "i3")).instant.requested_time

    def attempt(n):
        return _writer(table, "hudi_occ_ingestion", "upsert", "i2").write(
            _rows([1, 3], f"i2-{n}"), batch_key="i2", attempt=n,
            before_commit=collide if n == 1 else None).instant.requested_time
    out["retry"] = run_with_conflict_retries(attempt, RetryPolicy(max_conflict_retries=2, sleep=lambda s: None))
    return table, out


def test_the_summary_names_each_admission_wait_and_each_conflict_with_its_retry(tmp_path):
    table, got = _contended_table(tmp_path)
    records = {r.instant: r for r in attempt_log.read_records(table)}
    lines = contention_lines(table)
    text = "\n".join(lines)

    # the wait: who waited, for which instant of whose task, on what, how long
    wait = core_admission.wait_from_labels(records[got["waiter"]].labels)
    assert wait["seconds"] >= 0.9 and wait["waited_for"], wait
    [wait_line] = [ln for ln in lines if " waited " in ln]
    assert wait_line.startswith("  hudi_occ_ingestion.upsert run i1 waited "), wait_line
    assert f"waited {wait['seconds']:.1f} s for {got['backfill']} (hudi_occ_backfill.rewrite) on partitions p0" \
        in wait_line, wait_line
    assert wait_line.endswith(f"then began {got['waiter']}")

    # the conflict: the loser, whom it lost to, on which file groups, and its retry
    loser = records[got["loser"]]
    assert loser.outcome == attempt_log.CONFLICT and loser.other_instant == got["winner"] and loser.file_groups
    [conflict_line] = [ln for ln in lines if " lost to " in ln]
    assert conflict_line.startswith(f"  {got['loser']} hudi_occ_ingestion.upsert run i2 attempt 1 lost to "
                                    f"{got['winner']} (hudi_occ_ingestion.upsert run i3) on "
                                    f"{len(loser.file_groups)} file group(s) {', '.join(loser.file_groups)}: "), conflict_line
    assert conflict_line.endswith(f"retried as {got['retry']} (committed)"), conflict_line
    assert records[got["retry"]].outcome == attempt_log.COMMITTED and records[got["retry"]].attempt == 2

    commits = sum(r.outcome == attempt_log.COMMITTED for r in records.values())
    assert (f"commits {commits}, conflicts 1, retried attempts 1, admission waits 1 "
            f"({wait['seconds']:.1f} s)") in text, text


def test_a_quiet_table_says_none_waited_and_none_lost(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    _writer(table, "seed", "load", "r0").write(_rows(range(4), "seed"))
    lines = contention_lines(table)
    for head in ("admission waits", "conflicts and retries"):
        i = next(i for i, ln in enumerate(lines) if ln.startswith(head))
        assert lines[i + 1] == "  none", lines
    assert lines[-1] == "commits 1, conflicts 0, retried attempts 0, admission waits 0 (0.0 s)"


# --- scripts/demo.sh --ui, end to end ----------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]


class _Output:
    """The demo's stdout, read on a thread so its pipe never fills."""

    def __init__(self, proc):
        self.lines: list[str] = []
        self._t = threading.Thread(target=lambda: [self.lines.append(ln.rstrip("\n")) for ln in proc.stdout],
                                   daemon=True)
        self._t.start()

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, pattern: str, proc, seen: set, timeout_s: float) -> re.Match:
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            m = re.search(pattern, self.text, re.M)
            if m:
                return m
            assert proc.poll() is None, f"the demo exited ({proc.returncode}):\n{self.text[-6000:]}"
            seen.update(_tree(proc.pid))
            time.sleep(1)
        raise AssertionError(f"{pattern!r} never printed in {timeout_s:.0f} s:\n{self.text[-6000:]}")


def _tree(pid: int) -> set[int]:
    try:
        root = psutil.Process(pid)
        return {root.pid} | {c.pid for c in root.children(recursive=True)}
    except psutil.NoSuchProcess:
        return set()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # about 5 min: airflow standalone, two DAG runs with Spark jobs, the services
@pytest.mark.timeout(1800)
def test_demo_ui_shows_the_forced_conflict_and_its_retry_in_chromium_and_stops_on_ctrl_c(tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.provider.test_ui_server import _chrome, _full_page_shot, _open_page

    port, home = _free_port(), tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    proc = subprocess.Popen(["bash", str(REPO / "scripts" / "demo.sh"), "--ui", "--port", str(port),
                             "--home", str(home)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    out, seen = _Output(proc), set()
    try:
        ui = out.wait_for(r"^Airflow UI: +(http://\S+)/ +\(login: (\S+) / (\S+);", proc, seen, 600)
        page = out.wait_for(r"^timeline page: +(http://\S+)", proc, seen, 60).group(1)
        base, user, password = ui.groups()
        assert base == f"http://127.0.0.1:{port}" and page == f"{base}/hudi-occ/?table=orders"
        assert json.loads((home / "simple_auth_manager_passwords.json.generated").read_text())[user] == password
        out.wait_for(r"^Airflow stays up until Ctrl-C$", proc, seen, 1500)
        assert re.search(r"^OK in \d+ s$", out.text, re.M), out.text[-6000:]

        # the table's attempt records: the forced conflict, its winner and its retry
        table = Table.open(str(home / "hudi_occ" / "orders"))
        rows = list_attempts(table, table.timeline())["attempts"]
        by = {r["instant"]: r for r in rows}
        losers = [r for r in rows if r["outcome"] == attempt_log.CONFLICT]
        assert losers, rows
        for r in losers:
            winner, retry = by[r["other_instant"]], by[r["retried_by"]]
            assert retry["outcome"] == attempt_log.COMMITTED and retry["instant"] > r["instant"]
            # the scheduler ran both writers at once: the loser's attempt overlapped its winner's
            assert r["started_at_ms"] < winner["ended_at_ms"] and winner["started_at_ms"] < r["ended_at_ms"]
            assert {r["dag_id"], winner["dag_id"]} == {"hudi_occ_backfill", "hudi_occ_ingestion"}
            # the summary printed by the demo names it the same way
            assert re.search(rf"^  {r['instant']} {r['dag_id']}\.{r['task_id']} run \S+ attempt \d+ lost to "
                             rf"{winner['instant']} \({winner['dag_id']}\.{winner['task_id']} run \S+\) .*"
                             rf"retried as {retry['instant']} \(committed\)$", out.text, re.M), out.text[-6000:]

        # open the printed page: Airflow's login form first, filled with the printed login
        driver = _chrome(tmp_path)
        try:
            driver.get(page)
            WebDriverWait(driver, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "input[name=password]"))
            assert "/auth/login" in driver.current_url, driver.current_url
            driver.find_element(By.CSS_SELECTOR, "input[name=username]").send_keys(user)
            driver.find_element(By.CSS_SELECTOR, "input[name=password]").send_keys(password)
            driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
            WebDriverWait(driver, 60).until(lambda d: d.get_cookie("_token"))
            _open_page(driver, SimpleNamespace(base=base), driver.get_cookie("_token")["value"],
                       page.split("?", 1)[1])
            assert driver.find_element(By.TAG_NAME, "body").get_attribute("data-loaded") == "orders"
            shots = Path(os.environ.get("HUDI_OCC_SCREENSHOT_DIR") or tmp_path)
            shots.mkdir(parents=True, exist_ok=True)
            _full_page_shot(driver, shots / "demo_ui_timeline.png", 1400)
            bars = lambda outcome: {e.get_attribute("data-instant") for e in  # noqa: E731
                                    driver.find_elements(By.CSS_SELECTOR, f"#gantt rect.bar.outcome-{outcome}")}
            assert bars("conflict") == {r["instant"] for r in losers}
            assert {r["retried_by"] for r in losers} <= bars("committed")
            edges = lambda kind: {(e.get_attribute("data-from"), e.get_attribute("data-to")) for e in  # noqa: E731
                                  driver.find_elements(By.CSS_SELECTOR, f"#gantt line.{kind}-edge")}
            assert {(r["instant"], r["other_instant"]) for r in losers} <= edges("conflict")
            assert {(r["instant"], r["retried_by"]) for r in losers} <= edges("retry")
            conflict_rows = driver.find_elements(By.CSS_SELECTOR, "#conflicts tbody tr.row")
            cells = sorted([td.text for td in tr.find_elements(By.TAG_NAME, "td")] for tr in conflict_rows)
            assert [(c[0], c[2], c[7]) for c in cells] == sorted(
                (r["instant"], r["other_instant"], r["retried_by"]) for r in losers)
            retry_text = " ".join(tr.text for tr in driver.find_elements(By.CSS_SELECTOR, "#retries tbody tr.row"))
            for r in losers:
                assert f"{r['instant']}: conflict" in retry_text and f"{r['retried_by']}: committed" in retry_text
        finally:
            driver.quit()
        seen.update(_tree(proc.pid))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the foreground group
        try:
            rc = proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    text = out.text
    assert rc == 0, text[-6000:]
    assert "stopped; processes left: none" in text and text.rstrip().endswith("exit 0 (the table is exact)"), text[-3000:]
    left = [p for p in seen if p != proc.pid and psutil.pid_exists(p)
            and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert not left, [(p, psutil.Process(p).cmdline()) for p in left]
    assert len(seen) > 5  # Airflow's components, its task processes and their Spark jobs were seen
