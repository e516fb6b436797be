"""A real Hive Metastore for the catalog-sync tests: one per test session (worker), started
from PySpark's own jars (about 20 s on 2 cores)."""

import pytest

from airflow_hudi_occ.testing.hive_metastore import HiveMetastoreServer


@pytest.fixture(scope="session")
def hive_metastore(tmp_path_factory):
    try:
        import pymetastore  # noqa: F401
    except ImportError:
        pytest.fail("the catalog-sync tests need the 'hive' extra (pymetastore): "
                    "run scripts/bootstrap.sh, or pip install -e '.[hive]' -c constraints.txt")
    with HiveMetastoreServer(tmp_path_factory.mktemp("hive-metastore")) as hms:
        yield hms
