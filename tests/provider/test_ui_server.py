"""The timeline page against a REAL Airflow api-server (SQLite, SimpleAuthManager).

One api-server per module (about 20 s to start): the plugin is loaded the way users load it,
from the ``airflow.plugins`` entry point, with tables configured through ``HUDI_OCC_TABLES``.
Tokens come from the server's own ``POST /auth/token`` with the passwords it generated. The
page is then opened in headless Chromium (Debian's chromium + chromedriver via Selenium)
with the UI's ``_token`` cookie, after a run with a real conflict and retry, and the rendered
DOM is checked; the screenshot is kept (``HUDI_OCC_SCREENSHOT_DIR``, default the test's tmp).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import pytest


from tests.core.inspection.test_timeline_view import (_cfg, make_compacting_table, make_concurrent_runs_table,  # noqa: E402
                                                      make_contended_table)
from tests.core.inspection.test_trends import make_history  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SECRET_INSTANT_MARK = "secret-backfill"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http(method, url, *, token=None, cookie=None, body=None, accept="application/json"):
    headers = {"Accept": accept}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if cookie:
        headers["Cookie"] = f"_token={cookie}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with opener.open(req, timeout=30) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


class Server:
    def __init__(self, home: Path, port: int, tables: dict, proc: subprocess.Popen, env: dict):
        self.home, self.port, self.tables, self.proc, self.env = home, port, tables, proc, env
        self.base = f"http://127.0.0.1:{port}"

    def token(self, user: str = "admin") -> str:
        pw = json.loads((self.home / "simple_auth_manager_passwords.json.generated").read_text())[user]
        status, body, _ = _http("POST", f"{self.base}/auth/token",
                                body={"username": user, "password": pw})
        assert status in (200, 201), body
        return json.loads(body)["access_token"]

    def get(self, path, **kw):
        return _http("GET", self.base + path, **kw)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow_home")
    lake = tmp_path_factory.mktemp("lake")
    got = make_contended_table(str(lake / "events"))
    orders = make_compacting_table(str(lake / "orders"))  # merge-on-read, with compactions
    # twelve days of conflicts between three DAGs, ending now, for the trends
    history = make_history(str(lake / "history"), now=time.time())
    # two runs of one task at once, and an old conflict a clean pruned
    runs = make_concurrent_runs_table(str(lake / "runs"))
    # A table that is NOT configured, beside the configured one, and a symlink to it: no
    # request may reach either.
    secret = make_contended_table(str(lake / "secret"))
    os.symlink(lake / "secret", lake / "events_link")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer,ingest_viewer:viewer",
        # SimpleAuthManager plus per-DAG grants (FAB is not installed): ingest_viewer may read
        # the DAG "ingest" only
        "AIRFLOW__CORE__AUTH_MANAGER": "tests.provider.dag_scoped_auth.DagScopedAuthManager",
        "HUDI_OCC_TEST_DAG_GRANTS": json.dumps({"ingest_viewer": ["ingest"]}),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "HUDI_OCC_TABLES": f"events={lake / 'events'},history={lake / 'history'},orders={lake / 'orders'},"
                           f"runs={lake / 'runs'}",
        "PYTHONPATH": os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    })
    airflow = [sys.executable, "-m", "airflow"]
    subprocess.run([*airflow, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    log = open(home / "api-server.log", "wb")
    proc = subprocess.Popen([*airflow, "api-server", "--host", "127.0.0.1", "-p", str(port), "-w", "1"],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    srv = Server(home, port, {"events": got, "secret": secret, "history": history, "orders": orders,
                              "runs": runs}, proc, env)
    try:
        deadline = time.time() + 180
        while True:
            if proc.poll() is not None:
                raise RuntimeError("api-server exited: " + (home / "api-server.log").read_text()[-3000:])
            try:
                if srv.get("/api/v2/monitor/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("api-server did not answer: " + (home / "api-server.log").read_text()[-3000:])
            time.sleep(0.5)
        yield srv
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        log.close()


PROTECTED = ["/hudi-occ/", "/hudi-occ/api/tables", "/hudi-occ/api/tables/events/timeline",
             "/hudi-occ/static/timeline.js", "/hudi-occ/api/tables/history/trends?window=30d",
             "/hudi-occ/static/trends.js", "/hudi-occ/static/dom.js"]


def test_plugin_paths_need_credentials(server):
    # The control: Airflow's own API refuses too, so 401 is the server's answer, not a typo.
    assert server.get("/api/v2/dags")[0] == 401
    for path in PROTECTED:
        status, body, _ = server.get(path)
        assert status == 401, (path, body)
        assert b"events" not in body and b"instant" not in body


def test_a_browser_without_a_session_is_sent_to_login(server):
    status, _, headers = server.get("/hudi-occ/", accept="text/html")
    assert status == 303
    assert "/auth/login" in headers["location"] and "hudi-occ" in headers["location"]


def test_a_forged_token_is_refused(server):
    for path in PROTECTED:
        assert server.get(path, token="not-a-jwt")[0] == 403
        assert server.get(path, cookie="not-a-jwt")[0] == 403


@pytest.mark.parametrize("user", ["admin", "viewer"])
def test_readers_get_the_page_and_api(server, user):
    token = server.token(user)
    for path in PROTECTED:
        assert server.get(path, token=token)[0] == 200, path
        assert server.get(path, cookie=token)[0] == 200, path
    status, body, headers = server.get("/hudi-occ/", token=token)
    assert headers["content-type"].startswith("text/html") and b"static/timeline.js" in body
    doc = json.loads(server.get("/hudi-occ/api/tables", token=token)[1])
    assert [t["name"] for t in doc["tables"]] == ["events", "history", "orders", "runs"] and doc["config_errors"] == []


def test_timeline_json_shows_the_conflict_and_the_retry(server):
    got = server.tables["events"]
    view = json.loads(server.get("/hudi-occ/api/tables/events/timeline", token=server.token())[1])
    [c] = view["conflicts"]
    assert (c["instant"], c["other_instant"], c["retried_by"]) == (got["loser"], got["winner"], got["retry"])
    assert c["file_groups"] and c["lane"] == "ingest \u203a upsert" and c["other_lane"] == "backfill \u203a rewrite"
    [r] = view["retries"]
    assert [a["instant"] for a in r["attempts"]] == [got["loser"], got["retry"]]


def test_trends_json_counts_the_weeks_conflicts(server):
    got = server.tables["history"]
    status, body, _ = server.get("/hudi-occ/api/tables/history/trends?window=7d", token=server.token())
    assert status == 200, body
    tr = json.loads(body)
    assert tr["window"]["bucket"] == "day" and len(tr["buckets"]) == 8
    assert tr["totals"]["conflicts"] == 3 and tr["totals"]["retries"] == 3 and not tr["filtered"]
    assert {d["dag_id"] for d in tr["dags"]} == {"ingest", "backfill", "report", None}
    assert {(f["loser_dag"], f["winner_dag"]): f["conflicts"] for f in tr["fights"]} == \
        {("ingest", "backfill"): 2, ("report", "ingest"): 1}
    month = json.loads(server.get("/hudi-occ/api/tables/history/trends?window=30d", token=server.token())[1])
    assert month["totals"]["conflicts"] == 4 and got["old"]["loser"] < got["d3"]["loser"]
    status, body, _ = server.get("/hudi-occ/api/tables/history/trends?window=7w", token=server.token())
    assert status == 400 and b"1d" in body
    assert server.get("/hudi-occ/api/tables/secret/trends", token=server.token())[0] == 404


def test_a_user_granted_one_dag_sees_only_its_attempts(server):
    token = server.token("ingest_viewer")
    # the control: Airflow's own API refuses this user another DAG too (the grant is the auth
    # manager's, not the plugin's invention), and lets it past auth for its own (no such DAG)
    assert server.get("/api/v2/dags/backfill", token=token)[0] == 403
    assert server.get("/api/v2/dags/ingest", token=token)[0] == 404
    status, body, _ = server.get("/hudi-occ/api/tables/history/trends?window=30d", token=token)
    assert status == 200, body
    tr = json.loads(body)
    assert tr["filtered"] is True and [d["dag_id"] for d in tr["dags"]] == ["ingest"]
    assert tr["totals"]["conflicts"] == 3  # ingest's own three losses to backfill
    assert b"backfill" not in body and b"report" not in body
    assert [(f["loser_dag"], f["winner_dag"], f["winner_hidden"]) for f in tr["fights"]] == \
        [("ingest", None, True)]
    # an explicit DAG: 403 for one the user may not read, 200 for its own
    for dag in ("backfill", "report", "no_such_dag"):
        status, body, _ = server.get(f"/hudi-occ/api/tables/history/trends?dag_id={dag}", token=token)
        assert status == 403 and b"instant" not in body, (dag, body)
    status, body, _ = server.get("/hudi-occ/api/tables/history/trends?dag_id=ingest", token=token)
    assert status == 200 and json.loads(body)["dag_id"] == "ingest"
    # an unrestricted viewer may ask for any DAG
    status, body, _ = server.get("/hudi-occ/api/tables/history/trends?dag_id=backfill",
                                 token=server.token("viewer"))
    assert status == 200 and [d["dag_id"] for d in json.loads(body)["dags"]] == ["backfill"]


@pytest.mark.parametrize("name", [
    "..", "..%2F..%2Fetc", "%2e%2e", "%2e%2e%2fsecret", "..%2Fsecret", "events%2F..%2Fsecret",
    "events_link", "secret", "%2Fetc%2Fpasswd", "%252e%252e%252fsecret", "events%00", "EVENTS",
])
def test_request_paths_cannot_escape_the_configured_tables(server, name, tmp_path):
    token = server.token()
    status, body, _ = server.get(f"/hudi-occ/api/tables/{name}/timeline", token=token)
    assert status == 404, (name, status, body)
    for instant in server.tables["secret"].values():
        assert instant.encode() not in body


def test_absolute_and_traversing_urls_do_not_reach_other_tables(server):
    token = server.token()
    secret = server.tables["secret"]
    for path in ["/hudi-occ/api/tables/../tables/secret/timeline",
                 "/hudi-occ/static/..%2Findex.html", "/hudi-occ/static/%2e%2e%2f%2e%2e%2fpyproject.toml",
                 "/hudi-occ/static/timeline.js%2F..%2F..%2F..%2Fplugins%2Ftimeline.py"]:
        status, body, _ = server.get(path, token=token)
        assert status in (404, 401) or not any(i.encode() in body for i in secret.values()), path
        assert b"HudiOccTimelinePlugin" not in body and b"[project]" not in body, path


def test_airflow_lists_the_plugin_and_its_nav_entry(server):
    doc = json.loads(server.get("/api/v2/plugins", token=server.token())[1])
    [p] = [p for p in doc["plugins"] if p["name"] == "hudi_occ"]
    assert [a["url_prefix"] for a in p["fastapi_apps"]] == ["/hudi-occ"]
    # the nav entry and the tabs of the DAG, task and task instance pages (the UI fills the ids)
    assert [(v["destination"], v["href"]) for v in p["external_views"]] == [
        ("nav", "/hudi-occ/"), ("dag", "/hudi-occ/?dag_id={DAG_ID}"),
        ("task", "/hudi-occ/?dag_id={DAG_ID}&task_id={TASK_ID}"),
        ("task_instance", "/hudi-occ/?dag_id={DAG_ID}&task_id={TASK_ID}&run_id={RUN_ID}")]
    assert any("HudiTimelineLink" in link for link in p["operator_extra_links"])


# --- the extra link, from a real task run ---------------------------------------------------------

LINK_DAG = """
import json

import pyarrow as pa
from airflow.sdk import DAG, BaseOperator

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.provider.links import HudiTimelineLink


class LabelledWrite(BaseOperator):
    # A stand-in for the provider's write operator: the attributes the link reads, a real
    # write labelled with the task instance, and the committed instant as return value.
    operator_extra_links = (HudiTimelineLink(),)
    template_fields = ("table_path",)

    def __init__(self, table_path, **kw):
        super().__init__(**kw)
        self.table_path = table_path

    def execute(self, context):
        ti = context["ti"]
        labels = {"dag_id": ti.dag_id, "task_id": ti.task_id, "run_id": ti.run_id,
                  "try_number": str(ti.try_number)}
        cfg = WriteConfig.from_options({"hoodie.write.lock.provider": "filesystem",
                                        attempt_log.LABELS_OPTION: json.dumps(labels)})
        res = ArrowTableWriter(Table.open(self.table_path), cfg, writer_id="link-test").write(
            pa.table({"id": [1000], "p": ["p9"], "value": ["from airflow"], "ts": [5]}))
        return {"instant": res.instant.requested_time, "table_path": self.table_path}


with DAG("hudi_link_check", schedule=None, catchup=False):
    LabelledWrite(task_id="write", table_path=%r)
"""


def test_write_task_links_to_its_table_page(server):
    token = server.token()
    path = json.loads(server.get("/hudi-occ/api/tables", token=token)[1])["tables"][0]["path"]
    dags = Path(server.env["AIRFLOW__CORE__DAGS_FOLDER"])
    dags.mkdir(exist_ok=True)
    (dags / "hudi_link_check.py").write_text(LINK_DAG % path)
    out = subprocess.run([sys.executable, "-m", "airflow", "dags", "test", "hudi_link_check"],
                         env=server.env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    runs = json.loads(server.get("/api/v2/dags/hudi_link_check/dagRuns", token=token)[1])["dag_runs"]
    [run] = runs
    status, body, _ = server.get(f"/api/v2/dags/hudi_link_check/dagRuns/{quote(run['dag_run_id'], safe='')}"
                                 "/taskInstances/write/links", token=token)
    assert status == 200, body
    url = json.loads(body)["extra_links"]["Hudi timeline"]
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}" == server.base and parts.path == "/hudi-occ/"
    q = {k: v[0] for k, v in parse_qs(parts.query).items()}
    assert (q["table"], q["dag_id"], q["task_id"], q["run_id"]) == ("events", "hudi_link_check", "write",
                                                                    run["dag_run_id"])
    # The instant in the link is the one the task committed, and the page's API shows it on
    # the task's own lane.
    view = json.loads(server.get("/hudi-occ/api/tables/events/timeline", token=token)[1])
    row = next(r for r in view["instants"] if r["instant"] == q["instant"])
    assert row["outcome"] == "committed" and row["lane"] == "hudi_link_check \u203a write"
    assert row["writer"]["run_id"] == run["dag_run_id"]
    # Following the link with a session gives the page.
    assert server.get(parts.path + "?" + parts.query, token=token)[0] == 200


# --- the page in a real browser ------------------------------------------------------------------


def _chrome(tmp_path, size="1400,1100"):
    from airflow_hudi_occ.testing.browser import headless_chrome
    return headless_chrome(tmp_path / "chrome", size)


def test_page_in_headless_chromium_shows_conflict_retry_and_live_writer(server, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.core.commit.transaction import WriteTransaction
    got = server.tables["events"]
    table = Table.open(json.loads(server.get("/hudi-occ/api/tables", token=server.token())[1])
                       ["tables"][0]["path"])
    live = WriteTransaction(table, _cfg(dag_id="backfill", task_id="rewrite", run_id="bf__2",
                                        try_number="1"), writer_id="backfill")
    live.begin()
    driver = _chrome(tmp_path)
    try:
        live.create_marker("p3", f"fg-live-0_0-0-0_{live.instant_time}.parquet", "CREATE")
        driver.get(server.base + "/hudi-occ/api/tables")  # the cookie's origin
        driver.add_cookie({"name": "_token", "value": server.token(), "path": "/"})
        driver.get(server.base + "/hudi-occ/?table=events&dag_id=ingest&task_id=upsert&run_id=manual__1")
        WebDriverWait(driver, 60).until(
            lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-loaded"))
        assert driver.find_element(By.TAG_NAME, "body").get_attribute("data-loaded") == "events", \
            driver.find_element(By.ID, "errors").text
        shots = Path(os.environ.get("HUDI_OCC_SCREENSHOT_DIR") or tmp_path)
        shots.mkdir(parents=True, exist_ok=True)
        png = shots / "hudi_timeline.png"
        assert driver.save_screenshot(str(png)) and png.stat().st_size > 10_000
        print(f"screenshot: {png}")

        bar = lambda outcome: [e.get_attribute("data-instant") for e in
                               driver.find_elements(By.CSS_SELECTOR, f"#gantt rect.bar.outcome-{outcome}")]
        assert bar("conflict") == [got["loser"]]
        assert set(bar("committed")) >= {got["seed"], got["winner"], got["retry"]}
        assert bar("running") == [live.instant_time]
        edges = [(e.get_attribute("data-from"), e.get_attribute("data-to"))
                 for e in driver.find_elements(By.CSS_SELECTOR, "#gantt line.conflict-edge")]
        assert edges == [(got["loser"], got["winner"])]
        retry_edges = [(e.get_attribute("data-from"), e.get_attribute("data-to"))
                       for e in driver.find_elements(By.CSS_SELECTOR, "#gantt line.retry-edge")]
        assert (got["loser"], got["retry"]) in retry_edges
        # the linked task's attempts are highlighted
        assert {e.get_attribute("data-instant") for e in
                driver.find_elements(By.CSS_SELECTOR, "#gantt rect.task-match")} == {got["loser"], got["retry"]}

        [conflict_row] = driver.find_elements(By.CSS_SELECTOR, "#conflicts tbody tr.row")
        cells = [td.text for td in conflict_row.find_elements(By.TAG_NAME, "td")]
        assert cells[0] == got["loser"] and cells[2] == got["winner"] and cells[7] == got["retry"]
        assert "ingest \u203a upsert" in cells[1] and "p0/" in cells[4]
        [retry_row] = driver.find_elements(By.CSS_SELECTOR, "#retries tbody tr.row")
        text = retry_row.text
        assert f"{got['loser']}: conflict" in text and f"{got['retry']}: committed" in text
        assert "highlight" in retry_row.get_attribute("class")
        # the retry waited for admission (its attempt record's labels): for whom, how long
        waited = f"waited 12.5 s for {got['winner']} (backfill.rewrite) on partitions p0"
        assert f"{got['retry']}: committed; {waited} before it began" in text, text
        assert [e.get_attribute("data-instant") for e in
                driver.find_elements(By.CSS_SELECTOR, "#gantt rect.bar[data-waited-s]")] == [got["retry"]]
        driver.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))",
                              driver.find_element(By.CSS_SELECTOR, f"#gantt rect.bar[data-instant='{got['retry']}']"))
        assert f"{waited} before it began" in driver.find_element(By.ID, "detail").text
        [live_row] = driver.find_elements(By.CSS_SELECTOR, "#live-writers tbody tr.row")
        assert live.instant_time in live_row.text and "p3" in live_row.text
        # Until attempts are recorded when they begin, a live writer's DAG is not known yet:
        # the row shows what the API says, whatever that is.
        api_view = json.loads(server.get("/hudi-occ/api/tables/events/timeline", token=server.token())[1])
        [api_live] = api_view["live_writers"]
        assert api_live["instant"] == live.instant_time and api_live["lane"] in live_row.text
        labels = [t.text for t in driver.find_elements(By.CSS_SELECTOR, "#gantt text.lane-label")]
        assert {"ingest \u203a upsert", "backfill \u203a rewrite", "seed \u203a load"} <= set(labels)

        # The same page inside the Airflow UI, through the nav entry (an iframe at /plugin/...).
        driver.get(server.base + "/plugin/hudi-occ-timeline")
        frame = WebDriverWait(driver, 60).until(lambda d: d.find_elements(By.TAG_NAME, "iframe"))[0]
        assert frame.get_attribute("src").rstrip("/").endswith("/hudi-occ")
        driver.switch_to.frame(frame)
        WebDriverWait(driver, 60).until(
            lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-loaded") == "events")
        assert [e.get_attribute("data-instant") for e in
                driver.find_elements(By.CSS_SELECTOR, "#gantt rect.bar.outcome-conflict")] == [got["loser"]]
        driver.switch_to.default_content()
        time.sleep(1)  # let the UI's nav finish drawing for the picture
        driver.save_screenshot(str(shots / "hudi_timeline_in_airflow.png"))
    finally:
        driver.quit()
        live.abort(reason="test over")


def test_page_in_headless_chromium_shows_compactions(server, tmp_path):
    """A merge-on-read table with a completed compaction an upsert appended to meanwhile, one
    an ingestion attempt lost to (then retried), and one only scheduled, with a writer
    appending to its file group."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    got = server.tables["orders"]
    api_view = json.loads(server.get("/hudi-occ/api/tables/orders/timeline", token=server.token())[1])
    assert [c["instant"] for c in api_view["compactions"]] == [got["done"], got["won"], got["pending"]]
    driver = _chrome(tmp_path)
    try:
        driver.get(server.base + "/hudi-occ/api/tables")
        driver.add_cookie({"name": "_token", "value": server.token(), "path": "/"})
        driver.get(server.base + "/hudi-occ/?table=orders&instant=" + got["pending"])
        WebDriverWait(driver, 60).until(
            lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-loaded"))
        assert driver.find_element(By.TAG_NAME, "body").get_attribute("data-loaded") == "orders", \
            driver.find_element(By.ID, "errors").text
        shots = Path(os.environ.get("HUDI_OCC_SCREENSHOT_DIR") or tmp_path)
        shots.mkdir(parents=True, exist_ok=True)
        assert driver.save_screenshot(str(shots / "hudi_timeline_compaction.png"))

        bars = {e.get_attribute("data-instant"): (e.get_attribute("data-compaction"),
                                                 e.get_attribute("data-outcome"))
                for e in driver.find_elements(By.CSS_SELECTOR, "#gantt rect.bar.compaction")}
        assert bars == {got["done"]: ("completed", "committed"), got["won"]: ("completed", "committed"),
                        got["pending"]: ("requested", "service")}
        edges = {(e.get_attribute("data-from"), e.get_attribute("data-to"))
                 for e in driver.find_elements(By.CSS_SELECTOR, "#gantt line.compaction-edge")}
        assert edges == {(got["appended"], got["done"]), (got["appended_pending"], got["pending"])}
        conflict_edges = [(e.get_attribute("data-from"), e.get_attribute("data-to"))
                          for e in driver.find_elements(By.CSS_SELECTOR, "#gantt line.conflict-edge")]
        assert conflict_edges == [(got["loser"], got["won"])]
        labels = {t.text for t in driver.find_elements(By.CSS_SELECTOR, "#gantt text.lane-label")}
        assert {"services \u203a compact", "table service: compaction", "ingest \u203a upsert"} <= labels

        rows = driver.find_elements(By.CSS_SELECTOR, "#compactions tbody tr.row")
        cells = [[td.text for td in r.find_elements(By.TAG_NAME, "td")] for r in rows]
        assert [c[0] for c in cells] == [got["done"], got["won"], got["pending"]]
        assert [c[1] for c in cells] == ["completed", "completed", "requested"]
        assert got["appended"] in cells[0][5] and cells[0][6] == "\u2014"
        assert got["loser"] in cells[1][6] and f"retried as {got['retry']}" in cells[1][6]
        assert got["appended_pending"] in cells[2][5] and "p1/" in cells[2][3]
        assert driver.find_element(By.ID, "compaction-count").text == "3"
        # scheduled, not running: not a live writer, and its detail names what met it
        assert got["pending"] not in driver.find_element(By.ID, "live-writers").text
        detail = driver.find_element(By.ID, "detail").text
        assert "compaction requested" in detail and got["appended_pending"] in detail
    finally:
        driver.quit()


#: every label of an SVG (class tick-label): its box, the picture's width, and the labels that
#: overlap another or leave the picture
_LABEL_BOXES = """
var svg = document.getElementById(arguments[0]);
var w = svg.getBoundingClientRect(), out = [];
svg.querySelectorAll("text.tick-label").forEach(function (t) {
  var b = t.getBoundingClientRect();
  out.push({text: t.textContent, x0: b.left - w.left, x1: b.right - w.left, y0: b.top, y1: b.bottom});
});
return {width: w.width, labels: out};
"""


def _label_problems(driver, svg_id):
    got = driver.execute_script(_LABEL_BOXES, svg_id)
    labels, problems = got["labels"], []
    for i, a in enumerate(labels):
        if a["x0"] < -0.5 or a["x1"] > got["width"] + 0.5:
            problems.append(("cut off", a["text"]))
        for b in labels[i + 1:]:
            if a["x0"] < b["x1"] and b["x0"] < a["x1"] and a["y0"] < b["y1"] and b["y0"] < a["y1"]:
                problems.append(("overlap", a["text"], b["text"]))
    return labels, problems


def _open_page(driver, server, token, query):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    driver.get(server.base + "/hudi-occ/api/tables")  # the cookie's origin
    driver.delete_all_cookies()
    driver.add_cookie({"name": "_token", "value": token, "path": "/"})
    driver.get(server.base + "/hudi-occ/?" + query)
    body = lambda d: d.find_element(By.TAG_NAME, "body")  # noqa: E731
    WebDriverWait(driver, 60).until(lambda d: body(d).get_attribute("data-loaded")
                                    and body(d).get_attribute("data-trends"))
    assert body(driver).get_attribute("data-loaded") != "error", driver.find_element(By.ID, "errors").text
    assert body(driver).get_attribute("data-trends") != "error", driver.find_element(By.ID, "trend-errors").text


def _viewport(driver, width: int, height: int = 1000):
    # Chromium will not make a window narrower than 500 px (a "480 px" window lays the page
    # out at 500 and crops the picture); the device metrics are the layout viewport itself.
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})


def _full_page_shot(driver, png: Path, width: int):
    # Selenium draws the viewport only: make the viewport the page's height, then draw.
    _viewport(driver, width, driver.execute_script("return document.documentElement.scrollHeight"))
    time.sleep(0.6)  # the charts redraw on resize (debounced)
    assert driver.save_screenshot(str(png)) and png.stat().st_size > 10_000
    print(f"screenshot: {png}")


@pytest.mark.parametrize("width", [480, 1600])
def test_trends_in_headless_chromium(server, tmp_path, width):
    from selenium.webdriver.common.by import By
    shots = Path(os.environ.get("HUDI_OCC_SCREENSHOT_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    driver = _chrome(tmp_path, f"{max(width, 500)},1000")
    try:
        _viewport(driver, width)
        _open_page(driver, server, server.token(), "table=history&window=30d")
        assert driver.execute_script("return window.innerWidth") == width
        assert driver.find_element(By.TAG_NAME, "body").get_attribute("data-trends") == "history 30d"
        buckets = driver.find_elements(By.CSS_SELECTOR, "#trend-chart g.bucket")
        assert len(buckets) == 31
        assert sum(int(b.get_attribute("data-conflicts")) for b in buckets) == 4
        assert sum(int(b.get_attribute("data-retries")) for b in buckets) == 4
        # one bar a day with conflicts: 4 days, but 3 between 23:00 and 24:00 UTC, when the one
        # of 23 hours ago and the one of an hour ago fall on the same day
        from airflow_hudi_occ.core.format.instant_time import parse_ms
        days = {parse_ms(c["loser"]) // 86_400_000 for c in server.tables["history"]["conflicts"]}
        assert len(days) in (3, 4)
        assert len(driver.find_elements(By.CSS_SELECTOR, "#trend-chart rect.bar-conflicts")) == len(days)
        dags = [r.find_elements(By.TAG_NAME, "td")[0].text
                for r in driver.find_elements(By.CSS_SELECTOR, "#trend-dags tbody tr.row")]
        assert set(dags) == {"ingest", "backfill", "report", "seed", "(no DAG)"}
        fights = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "#trend-fights tbody tr.row")]
        assert fights[0].startswith("ingest backfill 3")
        hot = driver.find_elements(By.CSS_SELECTOR, "#trend-hot tbody tr.row")
        assert hot[0].text.startswith("p0/")
        for svg in ("trend-chart", "gantt"):
            labels, problems = _label_problems(driver, svg)
            assert len(labels) >= 3 and problems == [], (svg, labels, problems)
        # nothing wider than the window but the boxes that scroll on purpose
        assert driver.execute_script("return document.documentElement.scrollWidth") <= width
        for wrap in ("gantt-wrap", "trend-chart-wrap"):
            assert driver.execute_script(f"var e = document.getElementById('{wrap}');"
                                         "return e.scrollWidth <= e.clientWidth"), (wrap, width)
        _full_page_shot(driver, shots / f"hudi_trends_{width}.png", width)
        for svg in ("trend-chart", "gantt"):  # and after the redraw at the new size
            assert _label_problems(driver, svg)[1] == [], svg

        # a week, hour by hour on the last day, and one DAG: the URL keeps the choice
        from selenium.webdriver.support.ui import Select, WebDriverWait
        Select(driver.find_element(By.ID, "trend-window")).select_by_value("1d")
        WebDriverWait(driver, 30).until(lambda d: d.find_element(By.TAG_NAME, "body")
                                        .get_attribute("data-trends") == "history 1d")
        assert len(driver.find_elements(By.CSS_SELECTOR, "#trend-chart g.bucket")) == 25
        assert _label_problems(driver, "trend-chart")[1] == []
        assert "window=1d" in driver.current_url
        if width == 1600:
            _full_page_shot(driver, shots / "hudi_trends_1d_1600.png", width)
    finally:
        driver.quit()


def test_trends_for_a_user_granted_one_dag_in_chromium(server, tmp_path):
    from selenium.webdriver.common.by import By
    shots = Path(os.environ.get("HUDI_OCC_SCREENSHOT_DIR") or tmp_path)
    driver = _chrome(tmp_path, "1600,1000")
    try:
        _open_page(driver, server, server.token("ingest_viewer"), "table=history&window=30d")
        page = driver.find_element(By.TAG_NAME, "body").text
        assert "backfill" not in page and "report" not in page
        assert "Attempts of DAGs you may not read are left out." in page
        dags = [r.find_elements(By.TAG_NAME, "td")[0].text
                for r in driver.find_elements(By.CSS_SELECTOR, "#trend-dags tbody tr.row")]
        assert dags == ["ingest"]
        [fight] = driver.find_elements(By.CSS_SELECTOR, "#trend-fights tbody tr.row")
        assert "(a DAG you may not read)" in fight.text
        lanes = {t.text for t in driver.find_elements(By.CSS_SELECTOR, "#gantt text.lane-label")}
        assert lanes and all(not lane.startswith(("backfill", "report", "seed")) for lane in lanes)
        _full_page_shot(driver, shots / "hudi_trends_ingest_viewer_1600.png", 1600)
    finally:
        driver.quit()


def test_page_in_headless_chromium_concurrent_runs_units_pruned_note_unknown_table(server, tmp_path):
    """One browser, four of issue 28's page cases: two runs of one task at once are drawn on
    two rows (the winner's bar inside the loser's was hidden under it); seconds thrown away
    carry their unit even when 0; the "clean pruned" note appears only where a clean pruned
    records the window reaches; a link to a table not configured says so and draws nothing."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    got = server.tables["runs"]
    shots = Path(os.environ.get("HUDI_OCC_SCREENSHOT_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    driver = _chrome(tmp_path, "1400,1000")
    text = lambda id_: driver.find_element(By.ID, id_).text  # noqa: E731
    try:
        token = server.token()
        _open_page(driver, server, token, "table=runs&window=90d")
        bars = {e.get_attribute("data-instant"): e for e in driver.find_elements(By.CSS_SELECTOR, "#gantt rect.bar")}
        loser, winner, retry = bars[got["loser"]], bars[got["winner"]], bars[got["retry"]]
        y = lambda e: float(e.get_attribute("y"))  # noqa: E731
        x = lambda e: (float(e.get_attribute("x")), float(e.get_attribute("x")) + float(e.get_attribute("width")))  # noqa: E731
        assert x(loser)[0] <= x(winner)[0] and x(winner)[1] <= x(loser)[1] + 0.5  # inside it in time
        assert y(winner) != y(loser) and y(retry) == y(loser)  # ... and drawn on a row of its own
        assert loser.get_attribute("data-outcome") == "conflict" and winner.get_attribute("data-outcome") == "committed"
        sub = driver.find_elements(By.CSS_SELECTOR, "#gantt text.lane-sub")
        assert [(t.get_attribute("data-lane"), t.text) for t in sub] == [("ingest \u203a upsert", "\u21b3 concurrent run 2")]
        edges = [(e.get_attribute("data-from"), e.get_attribute("data-to"))
                 for e in driver.find_elements(By.CSS_SELECTOR, "#gantt line.conflict-edge")]
        assert edges == [(got["loser"], got["winner"])]
        # the old conflict is beyond the attempt log's retention: a clean pruned it, and a
        # 90-day window reaches back to it, so the page says so
        note = driver.find_elements(By.CSS_SELECTOR, "#trend-summary .pruned-note")
        assert len(note) == 1 and "Clean pruned 1 attempt record " in note[0].text, text("trend-summary")
        assert _label_problems(driver, "gantt")[1] == []
        _full_page_shot(driver, shots / "hudi_timeline_concurrent_runs.png", 1400)
        _viewport(driver, 1400)

        # 30 days: the pruned record is older than the window, which is whole: no note
        _open_page(driver, server, token, "table=runs&window=30d")
        assert "pruned" not in text("trend-summary") and "1 conflict" in text("trend-summary")

        # a table no clean ever touched (its log starts inside the window) and a DAG that lost
        # nothing: no note, and 0 of work has its unit
        _open_page(driver, server, token, "table=history&window=30d&trend_dag=seed")
        summary = text("trend-summary")
        assert "0 s of work and 0 files thrown away" in summary and "prune" not in summary, summary

        # a link to a table that is not configured: said, and nothing else drawn
        driver.get(server.base + "/hudi-occ/?table=nope")
        WebDriverWait(driver, 60).until(
            lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-loaded"))
        assert driver.find_element(By.TAG_NAME, "body").get_attribute("data-loaded") == "unknown-table"
        err = text("errors")
        assert "Table nope is not configured" in err and "events, history, orders, runs" in err
        assert driver.find_elements(By.CSS_SELECTOR, "#gantt rect.bar") == []
        assert driver.find_element(By.ID, "table-select").get_attribute("value") == ""
        assert text("table-info") == "" and driver.find_element(By.TAG_NAME, "body").get_attribute("data-trends") is None
        assert driver.save_screenshot(str(shots / "hudi_timeline_unknown_table.png"))
        # choosing a table from there loads it
        from selenium.webdriver.support.ui import Select
        Select(driver.find_element(By.ID, "table-select")).select_by_value("runs")
        WebDriverWait(driver, 60).until(
            lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-loaded") == "runs")
        assert driver.find_elements(By.CSS_SELECTOR, "#gantt rect.bar") and text("errors") == ""
    finally:
        driver.quit()


def test_page_in_headless_chromium_names_a_running_clustering_by_its_dag_and_task(server, tmp_path):
    """A clustering whose job runs is drawn on its DAG's task lane and listed among the live
    writers by its DAG and task (its executor's running record, written when it adopts the
    plan), as a write is; not as an unlabelled table service. Runs last on this table: it
    adds a partition and leaves the plan pending."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    import pyarrow as pa

    from airflow_hudi_occ.core.commit.attempt_log import LABELS_OPTION
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.services.clustering import ClusteringTransaction, schedule_clustering
    from airflow_hudi_occ.core.table.table import Table
    table = Table.open(json.loads(server.get("/hudi-occ/api/tables", token=server.token())[1])
                       ["tables"][0]["path"])
    opts = {"hoodie.write.lock.provider": "filesystem", "hoodie.parquet.small.file.limit": "0",
            "hoodie.clustering.plan.strategy.partition.selected": "pc"}
    for i in range(2):  # two small file groups in a partition of their own: work to cluster
        ArrowTableWriter(table, WriteConfig.from_options(opts)).write(
            pa.table({"id": [100 + i], "p": ["pc"], "value": ["c"], "ts": [1]}), "insert")
    t = schedule_clustering(table, opts)
    assert t is not None
    labels = {"dag_id": "maint", "task_id": "cluster", "run_id": "m__1", "try_number": "1"}
    tx = ClusteringTransaction(table, WriteConfig.from_options({**opts, LABELS_OPTION: json.dumps(labels)}))
    tx.adopt(t)
    driver = _chrome(tmp_path)
    try:
        driver.get(server.base + "/hudi-occ/api/tables")  # the cookie's origin
        driver.add_cookie({"name": "_token", "value": server.token(), "path": "/"})
        driver.get(server.base + "/hudi-occ/?table=events")
        WebDriverWait(driver, 60).until(
            lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-loaded") == "events")
        rows = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "#live-writers tbody tr.row")]
        [mine] = [r for r in rows if t in r]
        assert "maint \u203a cluster" in mine and "run m__1" in mine, rows
        labels_drawn = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#gantt text.lane-label")]
        assert "maint \u203a cluster" in labels_drawn and "table service: clustering" not in labels_drawn
        assert [e.get_attribute("data-outcome") for e in
                driver.find_elements(By.CSS_SELECTOR, f"#gantt rect.bar[data-instant='{t}']")] == ["running"]
    finally:
        driver.quit()
        tx.abort(reason="test over")


def test_the_pages_windows_are_the_ones_the_attempt_log_keeps():
    """The window list on the page is static HTML; it must offer what trends.WINDOWS names,
    whose longest the attempt log keeps whatever clean retains."""
    import re

    from airflow_hudi_occ.core.inspection import trends
    html = (ROOT / "airflow_hudi_occ" / "provider" / "www" / "index.html").read_text()
    select = re.search(r'<select id="trend-window">(.*?)</select>', html, re.S).group(1)
    assert tuple(re.findall(r'<option value="([^"]+)"', select)) == trends.WINDOWS
