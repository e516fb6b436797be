"""The private PostgreSQL cluster of the scale backfill (``testing/postgres.py``): made once,
started, a fresh database served over loopback TCP with the generated password, adopted by a
second handle (left running by it), stopped by the one that started it, and started again on
the same data (idempotent: no second initdb, the data kept)."""

import os
import shutil
import tempfile

import pytest

from airflow_hudi_occ.testing.postgres import PostgresServer, bin_dir


@pytest.fixture
def open_dir():
    """A folder the ``postgres`` user can enter (pytest's tmp_path is closed to others; as root
    the server runs as ``postgres``)."""
    d = tempfile.mkdtemp(prefix="hudi-occ-pg-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_cluster_starts_serves_a_fresh_database_and_stops(open_dir):
    bin_dir()  # a missing PostgreSQL fails here, naming the package to install
    pg = PostgresServer(os.path.join(open_dir, "pg"))
    try:
        pg.start()
        assert pg.running() and pg.started_here
        db = pg.fresh_database("scale_test")
        pg.psql("CREATE TABLE t (x int); INSERT INTO t VALUES (42)", db)
        assert pg.url(db) == f"postgresql+psycopg2://airflow:{pg.password}@127.0.0.1:{pg.port}/scale_test"
        other = PostgresServer(os.path.join(open_dir, "pg")).start()  # adopts the running cluster
        assert not other.started_here and other.port == pg.port
        other.stop()
        assert pg.running()
        pg.stop()
        assert not pg.running()
        pg.start()  # the same data folder: started again, the table still there
        assert pg.psql("SELECT x FROM t", db).strip() == "42"
        assert pg.fresh_database("scale_test") and pg.psql("SELECT count(*) FROM pg_tables WHERE tablename = 't'",
                                                           db).strip() == "0"
        with pytest.raises(ValueError):
            pg.fresh_database("x; DROP")
    finally:
        pg.stop(force=True)
    assert not pg.running()
