import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    """ONE local[2] session for the whole run: start-up costs about 5 s."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from airflow_hudi_occ.spark.session import local_session
    s = local_session("local[2]", "airflow_hudi_occ-tests")
    yield s
    s.stop()
