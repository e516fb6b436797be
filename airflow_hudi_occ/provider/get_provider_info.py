"""What Airflow's ProvidersManager learns about this package (the ``apache_airflow_provider``
entry point): ``provider.yaml`` beside this file, as Airflow's own providers keep it, plus the
package's version.

Kept importable without Airflow (PyYAML is the only import, and it comes with Airflow): the
providers manager calls it while Airflow itself is starting. A missing or unreadable yaml is
a broken installation (the file is package data in pyproject.toml): it raises, naming the
file, rather than registering a provider with nothing in it.
"""

from __future__ import annotations

import functools
import os

PROVIDER_YAML = os.path.join(os.path.dirname(os.path.abspath(__file__)), "provider.yaml")


@functools.lru_cache(maxsize=1)
def _load() -> dict:
    import yaml

    with open(PROVIDER_YAML, encoding="utf-8") as f:
        info = yaml.safe_load(f)
    if not isinstance(info, dict) or "package-name" not in info:
        raise RuntimeError(f"{PROVIDER_YAML} is not a provider description (no package-name); "
                           "reinstall airflow-hudi-occ")
    return info


def get_provider_info() -> dict:
    from airflow_hudi_occ.provider import __version__
    return {**_load(), "versions": [__version__]}


def connection_type(conn_type: str) -> dict:
    """One connection type's entry (its form fields and field behaviour)."""
    for c in get_provider_info().get("connection-types", []):
        if c["connection-type"] == conn_type:
            return c
    raise KeyError(conn_type)
