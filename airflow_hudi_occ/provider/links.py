"""The "Hudi timeline" extra link: from a write task instance to its table's timeline page.

In Airflow 3 an operator's extra links are computed on the worker when the task ends (success
or failure) and stored in XCom; the UI only reads that XCom. So this link may use what the
task knows: the operator's table and the instant the task committed. The page then highlights
this task run's attempts (found through the labels every attempt records: dag_id, task_id,
run_id), so the link is useful even when the task failed before committing.

What the link reads from the operator, first found wins:

- ``timeline_table`` or ``table_name``: the table's name in ``[hudi_occ] tables``;
- ``table_path``: the table's base path, matched against the configured paths;
- the XCom ``return_value`` of the task (a dict with ``table_path``/``base_path`` and
  ``instant``/``instant_time``/``requested_time``, or the instant as a string).
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import quote

from airflow_hudi_occ.provider.version_compat import BaseOperatorLink

URL_PREFIX = "/hudi-occ"
_INSTANT_KEYS = ("instant", "instant_time", "requested_time", "committed_instant")
_PATH_KEYS = ("table_path", "base_path")


def _xcom(ti_key, key: str) -> Any:
    try:
        from airflow.sdk.execution_time.xcom import XCom
        return XCom.get_value(ti_key=ti_key, key=key)
    except Exception:  # no XCom backend here (or nothing pushed): the link still works
        return None


def _first(d: Any, keys) -> str | None:
    if isinstance(d, dict):
        for k in keys:
            if d.get(k):
                return str(d[k])
    return None


def table_name_for(operator, result: Any = None) -> str | None:
    from airflow_hudi_occ.provider import tables_config
    for attr in ("timeline_table", "table_name"):
        name = getattr(operator, attr, None)
        if isinstance(name, str) and name:
            return name
    path = getattr(operator, "table_path", None) or _first(result, _PATH_KEYS)
    if not path:
        return None
    name = tables_config.name_for_path(tables_config.load(), str(path))
    return name or os.path.basename(str(path).rstrip("/")) or None


def build_url(table: str | None, **params: Any) -> str:
    """Absolute when ``[api] base_url`` is set (as Airflow's own links are), else root-relative."""
    try:
        from airflow.sdk import conf
        base = conf.get("api", "base_url", fallback="/") or "/"
    except Exception:
        base = "/"
    q = {"table": table, **params}
    qs = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in q.items() if v not in (None, ""))
    return base.rstrip("/") + f"{URL_PREFIX}/" + (f"?{qs}" if qs else "")


class HudiTimelineLink(BaseOperatorLink):
    """Links a write task instance to the timeline page of the operator's table."""

    name = "Hudi timeline"

    def get_link(self, operator, *, ti_key) -> str:
        result = _xcom(ti_key, "return_value")
        instant = result if isinstance(result, str) and result.isdigit() else _first(result, _INSTANT_KEYS)
        return build_url(table_name_for(operator, result), dag_id=ti_key.dag_id,
                         task_id=ti_key.task_id, run_id=ti_key.run_id, instant=instant)
