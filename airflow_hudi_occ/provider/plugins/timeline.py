"""The timeline page inside the Airflow UI: a FastAPI app mounted at ``/hudi-occ``.

What it serves: ``/hudi-occ/`` (a static HTML+JS+SVG page, no build step), ``/hudi-occ/static/
<file>``, and the JSON API behind it, ``/hudi-occ/api/tables`` and ``/hudi-occ/api/tables/
{name}/timeline`` (the document of :func:`airflow_hudi_occ.core.inspection.timeline_view.build_timeline_view`).
A nav entry (``external_views``) shows the page in the UI, and tabs on the DAG, task and task
instance pages show it with that DAG's (task's, run's) attempts marked; :class:`HudiTimelineLink`
links every write task instance to it.

Why auth is enforced here: Airflow mounts a plugin's FastAPI app as is; its own routes carry
their auth dependencies, a plugin's get none (measured: 200 without credentials while
``/api/v2`` answered 401). Every route of this app therefore depends on Airflow's
``get_user`` (the JWT from ``Authorization: Bearer`` or the UI's ``_token`` cookie: 401 when
missing or expired, 403 when forged) and then asks the configured auth manager whether the
user may read DAGs' task instances, since the page shows which DAG tasks wrote, conflicted
and retried. A browser that opens the page without a session is sent to Airflow's login.

Paths never come from requests: a request names a table configured in ``[hudi_occ] tables``
or ``HUDI_OCC_TABLES`` (see :mod:`airflow_hudi_occ.provider.tables_config`), and static files
are an allow-list of the files shipped in ``www/``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

from airflow.api_fastapi.core_api.security import GetUserDep
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException, Query, Request, status
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response

from airflow_hudi_occ.core.errors import ConfigError, HudiOccError
from airflow_hudi_occ.provider import tables_config
from airflow_hudi_occ.provider.links import HudiTimelineLink

log = logging.getLogger(__name__)

URL_PREFIX = "/hudi-occ"
WWW = Path(__file__).resolve().parent.parent / "www"
#: The only files the app serves besides the API: name -> media type.
STATIC = {"dom.js": "text/javascript", "timeline.js": "text/javascript", "trends.js": "text/javascript",
          "timeline.css": "text/css"}


# --- auth --------------------------------------------------------------------------------------


def _can_read_task_instances(user) -> bool:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    return get_auth_manager().is_authorized_dag(
        method="GET", access_entity=DagAccessEntity.TASK_INSTANCE, user=user)


def dag_access(user) -> Callable[[str | None], bool]:
    """Which DAGs' attempts ``user`` may see, as the core's ``may_read`` predicate.

    Per DAG, the question Airflow's own task-instance endpoints ask (FAB and Keycloak grant
    it per DAG); for attempts no DAG made (``None``), whether the user may read *every* DAG:
    such attempts belong to no DAG a restricted grant could name, and may come from anywhere.
    """
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
    manager = get_auth_manager()

    def may_read(dag_id: str | None) -> bool:
        if dag_id is None:
            return manager.is_authorized_dag(method="GET", user=user)
        return manager.is_authorized_dag(method="GET", access_entity=DagAccessEntity.TASK_INSTANCE,
                                         details=DagDetails(id=dag_id), user=user)
    return may_read


def require_reader(user: GetUserDep) -> None:
    """401 without a valid Airflow JWT (header or ``_token`` cookie), 403 without DAG read."""
    if not _can_read_task_instances(user):
        raise HTTPException(status.HTTP_403_FORBIDDEN,
                            "reading the Hudi timeline needs read access to DAG task instances")


# --- the app -----------------------------------------------------------------------------------


def _error(status_code: int, err: HudiOccError) -> JSONResponse:
    return JSONResponse(status_code=status_code, content={"detail": err.to_dict()})


def create_app() -> FastAPI:
    app = FastAPI(title="Hudi OCC timeline", dependencies=[Depends(require_reader)],
                  docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(HTTPException)
    async def login_redirect(request: Request, exc: HTTPException):
        # A person opening the page without a session goes to the login page and back;
        # API clients get the status code.
        wants_html = "text/html" in request.headers.get("accept", "")
        if exc.status_code == 401 and wants_html and request.url.path.rstrip("/") == URL_PREFIX:
            from airflow.api_fastapi.app import get_auth_manager
            return RedirectResponse(get_auth_manager().get_url_login(next_url=str(request.url)),
                                    status_code=status.HTTP_303_SEE_OTHER)
        return JSONResponse(status_code=exc.status_code, content={"detail": exc.detail},
                            headers=getattr(exc, "headers", None))

    @app.get("/", include_in_schema=False)
    def page() -> Response:
        return FileResponse(WWW / "index.html", media_type="text/html",
                            headers={"Cache-Control": "no-store"})

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str) -> Response:
        media = STATIC.get(name)
        if media is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no static file {name!r}")
        return FileResponse(WWW / name, media_type=media)

    @app.get("/api/tables")
    def tables() -> dict[str, Any]:
        cfg = tables_config.load()
        return {"tables": [{"name": n, "path": p} for n, p in sorted(cfg.tables.items())],
                "config_errors": cfg.errors}

    @app.get("/api/tables/{name}/timeline")
    def timeline(name: str, user: GetUserDep, limit: int = Query(500, ge=1, le=20000)):
        from airflow_hudi_occ.core.config import WriteConfig
        from airflow_hudi_occ.core.inspection.timeline_view import build_timeline_view
        may_read = dag_access(user)
        return _with_table(name, lambda table, cfg: build_timeline_view(
            table, config=WriteConfig.from_options(cfg.write_options), limit=limit, name=name,
            may_read=may_read))

    @app.get("/api/tables/{name}/trends")
    def trends(name: str, user: GetUserDep, window: str = Query("7d", max_length=8),
               dag_id: str | None = Query(None, min_length=1, max_length=250)):
        from airflow_hudi_occ.core.inspection.trends import build_trends, parse_window
        may_read = dag_access(user)
        # An explicit DAG the user may not read is refused, not answered with zeros: zeros
        # would be a lie, and an empty answer only for existing DAGs would tell which exist.
        if dag_id is not None and not may_read(dag_id):
            raise HTTPException(status.HTTP_403_FORBIDDEN, f"no read access to DAG {dag_id!r}")
        try:
            win = parse_window(window)
        except ConfigError as e:
            return _error(status.HTTP_400_BAD_REQUEST, e)
        return _with_table(name, lambda table, cfg: build_trends(
            table, window=win, may_read=may_read, dag_id=dag_id, name=name))

    return app


def _with_table(name: str, build: Callable[[Any, Any], Any]):
    """Open a configured table and build a document from it; the error answers every read
    route shares (404 not configured, 409 the table refuses, 503 storage unreachable)."""
    from airflow_hudi_occ.core.table.table import Table
    cfg = tables_config.load()
    try:
        path = tables_config.resolve(cfg, name)
    except ConfigError as e:
        return _error(status.HTTP_404_NOT_FOUND, e)
    try:
        return build(Table.open(path, cfg.storage_options or None), cfg)
    except HudiOccError as e:
        return _error(status.HTTP_409_CONFLICT if not isinstance(e, ConfigError)
                      else status.HTTP_500_INTERNAL_SERVER_ERROR, e)
    except OSError as e:
        log.warning("cannot read table %s at %s: %s", name, path, e)
        return JSONResponse(status_code=status.HTTP_503_SERVICE_UNAVAILABLE, content={"detail": {
            "error": type(e).__name__, "message": f"cannot read table {name!r}: {e}",
            "remedy": "check that the api-server can reach the table's storage"}})


def page_url(table: str | None = None, **params: str | None) -> str:
    """The page's URL (relative to the api-server root), selecting a table and a task."""
    q = {"table": table, **params}
    qs = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in q.items() if v)
    return f"{URL_PREFIX}/" + (f"?{qs}" if qs else "")


class HudiOccTimelinePlugin(AirflowPlugin):
    name = "hudi_occ"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Hudi OCC timeline"}]
    # The nav entry, and the same page as a tab of every DAG, task and task instance page: the
    # UI fills {DAG_ID}, {TASK_ID}, {RUN_ID} in the href, and the page marks that DAG's (task's,
    # run's) attempts. Airflow shows a plugin's tab on every DAG, Hudi writer or not.
    external_views = [
        {"name": "Hudi timeline", "href": f"{URL_PREFIX}/", "destination": "nav",
         "category": "browse", "url_route": "hudi-occ-timeline"},
        {"name": "Hudi timeline", "href": f"{URL_PREFIX}/?dag_id={{DAG_ID}}", "destination": "dag",
         "url_route": "hudi-occ-dag"},
        {"name": "Hudi timeline", "href": f"{URL_PREFIX}/?dag_id={{DAG_ID}}&task_id={{TASK_ID}}",
         "destination": "task", "url_route": "hudi-occ-task"},
        {"name": "Hudi timeline",
         "href": f"{URL_PREFIX}/?dag_id={{DAG_ID}}&task_id={{TASK_ID}}&run_id={{RUN_ID}}",
         "destination": "task_instance", "url_route": "hudi-occ-task-instance"},
    ]
    operator_extra_links = [HudiTimelineLink()]
