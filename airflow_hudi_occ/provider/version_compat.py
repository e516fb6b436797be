"""Where this provider gets Airflow's public classes, and which Airflow it is running on.

Airflow's own providers each keep a copy of this shim (``providers/*/version_compat.py``) so
that code depending on the Airflow version asks one place instead of importing ``airflow``
internals in many: when Airflow 3.x moves a class, only this file changes. Every provider
module imports ``BaseOperator``, ``BaseHook``, ``Asset``... from here, not from ``airflow.sdk``
directly (``tests/provider/test_version_compat.py`` checks it).

Imported only inside the provider: ``get_provider_info`` must stay importable without Airflow
and does not import this.
"""

from __future__ import annotations


def get_base_airflow_version_tuple() -> tuple[int, int, int]:
    from packaging.version import Version

    from airflow import __version__

    v = Version(__version__)
    return v.major, v.minor, v.micro


AIRFLOW_V_3_0_PLUS = get_base_airflow_version_tuple() >= (3, 0, 0)
AIRFLOW_V_3_1_PLUS = get_base_airflow_version_tuple() >= (3, 1, 0)
#: Airflow 3.2 reads connection forms from provider.yaml (``conn-fields``) and deprecates the
#: hooks' ``get_connection_form_widgets``/``get_ui_field_behaviour``
AIRFLOW_V_3_2_PLUS = get_base_airflow_version_tuple() >= (3, 2, 0)
#: Airflow 3.3 consults a task's ``retry_policy`` (AIP-105) and gives event triggers an asset
#: state store (the commit watcher's cursor)
AIRFLOW_V_3_3_PLUS = get_base_airflow_version_tuple() >= (3, 3, 0)

if not AIRFLOW_V_3_0_PLUS:  # pragma: no cover - pyproject pins Airflow 3
    raise ImportError("airflow-hudi-occ needs Airflow 3 (the Task SDK); found Airflow "
                      + ".".join(map(str, get_base_airflow_version_tuple())))

from airflow.sdk import (Asset, AssetAlias, AssetWatcher, BaseHook, BaseOperator,  # noqa: E402
                         BaseOperatorLink, BaseSensorOperator, Connection, PokeReturnValue,
                         RetryDecision, RetryPolicy)
from airflow.sdk.exceptions import AirflowException, AirflowFailException  # noqa: E402

__all__ = [
    "AIRFLOW_V_3_0_PLUS",
    "AIRFLOW_V_3_1_PLUS",
    "AIRFLOW_V_3_2_PLUS",
    "AIRFLOW_V_3_3_PLUS",
    "AirflowException",
    "AirflowFailException",
    "Asset",
    "AssetAlias",
    "AssetWatcher",
    "BaseHook",
    "BaseOperator",
    "BaseOperatorLink",
    "BaseSensorOperator",
    "Connection",
    "PokeReturnValue",
    "RetryDecision",
    "RetryPolicy",
]
