"""Which tables the timeline page may show: a fixed, configured list of name -> path.

Why a list and not a path parameter: the page is served by the Airflow api-server, which can
read any path its process can. A request names a configured table; no part of a request ever
becomes part of a path, so ``..``, absolute paths and encoded traversal have nothing to act on.

Configuration (both are read; the environment variable wins for a name in both):

- ``[hudi_occ] tables = events=/data/lake/events, orders=s3://bucket/orders`` in airflow.cfg
  (so also ``AIRFLOW__HUDI_OCC__TABLES``);
- ``HUDI_OCC_TABLES`` with the same syntax (entries separated by commas or newlines).

``[hudi_occ] write_options`` (JSON object of ``hoodie.*`` keys) sets how heartbeats are judged
(interval and tolerable misses), as the writers judge them; ``[hudi_occ] storage_options``
(JSON object) is passed to fsspec for every table.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

from airflow_hudi_occ.core.errors import ConfigError

SECTION = "hudi_occ"
ENV = "HUDI_OCC_TABLES"
NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


@dataclass
class TablesConfig:
    tables: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    write_options: dict = field(default_factory=dict)
    storage_options: dict = field(default_factory=dict)


def parse_tables(raw: str, source: str) -> tuple[dict[str, str], list[str]]:
    tables: dict[str, str] = {}
    errors: list[str] = []
    for item in re.split(r"[,\n]", raw or ""):
        item = item.strip()
        if not item:
            continue
        name, sep, path = item.partition("=")
        name, path = name.strip(), path.strip()
        if not sep or not path:
            errors.append(f"{source}: {item!r} is not NAME=PATH")
        elif not NAME_RE.match(name) or name in (".", ".."):
            errors.append(f"{source}: table name {name!r} must be letters, digits, '_', '.', '-'")
        else:
            tables[name] = path
    return tables, errors


def _json_option(conf, key: str, errors: list[str]) -> dict:
    raw = conf.get(SECTION, key, fallback="") if conf is not None else ""
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError as e:
        errors.append(f"[{SECTION}] {key}: not JSON ({e})")
        return {}
    if not isinstance(value, dict):
        errors.append(f"[{SECTION}] {key}: expected a JSON object")
        return {}
    return value


def load(conf=None, environ=None) -> TablesConfig:
    """Read the configuration now (on every request: an edit to the env or airflow.cfg shows
    without a restart where Airflow re-reads its config)."""
    environ = os.environ if environ is None else environ
    if conf is None:
        try:
            from airflow.configuration import conf as airflow_conf
            conf = airflow_conf
        except ImportError:  # outside Airflow (CLI, tests of the parser)
            conf = None
    cfg = TablesConfig()
    if conf is not None:
        t, e = parse_tables(conf.get(SECTION, "tables", fallback="") or "", f"[{SECTION}] tables")
        cfg.tables.update(t)
        cfg.errors += e
    t, e = parse_tables(environ.get(ENV, ""), ENV)
    cfg.tables.update(t)
    cfg.errors += e
    cfg.write_options = _json_option(conf, "write_options", cfg.errors)
    cfg.storage_options = _json_option(conf, "storage_options", cfg.errors)
    return cfg


def resolve(cfg: TablesConfig, name: str) -> str:
    """The configured path of ``name``; the name is only ever a dictionary key."""
    path = cfg.tables.get(name)
    if path is None:
        known = ", ".join(sorted(cfg.tables)) or "none"
        raise ConfigError(f"no table named {name!r} is configured for the timeline page",
                          key=f"[{SECTION}] tables", value=name,
                          remedy=f"configured tables: {known}; add NAME=PATH to [{SECTION}] "
                                 f"tables or to {ENV}")
    return path


def name_for_path(cfg: TablesConfig, path: str) -> str | None:
    """The configured name of a table path (for links from tasks that know only the path)."""
    want = _norm(path)
    for name, p in cfg.tables.items():
        if _norm(p) == want:
            return name
    return None


def _norm(path: str) -> str:
    p = str(path).strip()
    if p.startswith("file://"):
        p = p[len("file://"):]
    if "://" not in p:
        p = os.path.normpath(os.path.abspath(p))
    return p.rstrip("/")
