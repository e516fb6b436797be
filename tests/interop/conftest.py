import pytest


@pytest.fixture(scope="session")
def java_hudi(tmp_path_factory):
    """Java Hudi (the harness of airflow_hudi_occ.testing.java_hudi) for the whole session.
    A machine without the set-up fails here, naming scripts/install-java-hudi.sh: these tests
    never skip."""
    from airflow_hudi_occ.testing.java_hudi import JavaHudi
    return JavaHudi(tmp_path_factory.mktemp("java-hudi"))
