"""SimpleAuthManager with per-DAG grants, for the api-server the UI tests start.

Why: Airflow's SimpleAuthManager grants by role only (a viewer reads every DAG), and the FAB
auth manager, which grants per DAG, is not installed here. The page must behave for users
who may read only some DAGs, whatever auth manager grants that; it asks only through
``BaseAuthManager.is_authorized_dag``, so this subclass answers that question the way FAB
does: with a DAG id, whether that DAG is granted; without one, a resource-level question
(``access_entity`` given) is the role's, and "every DAG" is refused.

``HUDI_OCC_TEST_DAG_GRANTS`` is a JSON object ``{"user": ["dag_id", ...]}``; users not in it
keep SimpleAuthManager's behaviour.
"""

from __future__ import annotations

import json
import os

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager


def _grants() -> dict[str, set[str]]:
    raw = json.loads(os.environ.get("HUDI_OCC_TEST_DAG_GRANTS") or "{}")
    return {user: set(dags) for user, dags in raw.items()}


class DagScopedAuthManager(SimpleAuthManager):
    def is_authorized_dag(self, *, method, user, access_entity=None, details=None) -> bool:
        allowed = _grants().get(user.get_name())
        if allowed is None:
            return super().is_authorized_dag(method=method, user=user, access_entity=access_entity,
                                             details=details)
        if details is not None and details.id:
            return details.id in allowed and super().is_authorized_dag(
                method=method, user=user, access_entity=access_entity, details=details)
        if access_entity is not None:
            return super().is_authorized_dag(method=method, user=user, access_entity=access_entity)
        return False
