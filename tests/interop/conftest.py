import pytest


@pytest.fixture(scope="session")
def java_hudi(tmp_path_factory):
    """Java Hudi (the harness of airflow_hudi_occ.testing.java_hudi) for the whole session.
    A machine without the set-up fails here, naming scripts/install-java-hudi.sh: these tests
    never skip."""
    from airflow_hudi_occ.testing.java_hudi import JavaHudi
    # One JVM answers every test's java_hudi.run() (a start costs 10-20 s of CPU); the
    # tests that need JVMs of their own (races, kills) call start(), which still spawns one.
    java = JavaHudi(tmp_path_factory.mktemp("java-hudi"), keep_jvm=True)
    yield java
    java.close()
