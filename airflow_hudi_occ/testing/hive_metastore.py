"""A real Hive Metastore (thrift) for tests and benches, started from PySpark's own jars.

Catalog sync is only proven against the server that Spark SQL, Trino and Hive read: its
``alter_table`` is last-writer-wins, its partitions are unique by values, and it is the thing
that is down when a sync must fail without failing the commit. PySpark's wheel ships Hive
2.3's metastore, Derby and DataNucleus, so no download is needed: ``HiveMetaStore -p PORT``
with a ``hive-site.xml`` naming an embedded Derby database under ``workdir``
(docs/catalog-sync.md, /work/shared/design/stack-notes.md).

The database lives in ``workdir``, so :meth:`HiveMetastoreServer.stop` then
:meth:`HiveMetastoreServer.start` brings the same catalog back on the same port (a metastore
that was down and is back).

Usage::

    with HiveMetastoreServer(tmp_path) as hms:
        options["hoodie.datasource.hive_sync.metastore.uris"] = hms.uri
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path
from xml.sax.saxutils import escape

from airflow_hudi_occ.testing.server_process import ServerProcess
from airflow_hudi_occ.testing.zookeeper import free_port

#: Spark's log4j2 set-up asks for the LMAX disruptor, which the wheel does not ship
_LOG4J_SELECTOR = ("-Dlog4j2.contextSelector="
                   "org.apache.logging.log4j.core.selector.ClassLoaderContextSelector")


def pyspark_jars() -> Path:
    """The ``jars`` folder of the pyspark this interpreter imports."""
    import pyspark
    return Path(pyspark.__file__).parent / "jars"


def _site(props: dict[str, str]) -> str:
    rows = "".join(f"<property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
                   for k, v in props.items())
    return f'<?xml version="1.0"?>\n<configuration>\n{rows}</configuration>\n'


class HiveMetastoreServer:
    """One ``HiveMetaStore`` JVM on 127.0.0.1 with an embedded Derby database in ``workdir``."""

    def __init__(self, workdir: str | os.PathLike, *, port: int | None = None,
                 start_timeout_s: float = 120.0, java: str | None = None,
                 jars: str | os.PathLike | None = None):
        self.workdir = Path(workdir)
        self.port = port or free_port()
        self.start_timeout_s = start_timeout_s
        self.java = java or shutil.which("java") or "java"
        self.jars = Path(jars) if jars else pyspark_jars()
        self.warehouse = self.workdir / "warehouse"
        self._server: ServerProcess | None = None

    @property
    def uri(self) -> str:
        """What ``hoodie.datasource.hive_sync.metastore.uris`` and ``hive.metastore.uris`` take."""
        return f"thrift://127.0.0.1:{self.port}"

    def _write_conf(self) -> Path:
        conf = self.workdir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        self.warehouse.mkdir(parents=True, exist_ok=True)
        (conf / "hive-site.xml").write_text(_site({
            "javax.jdo.option.ConnectionURL":
                f"jdbc:derby:;databaseName={self.workdir / 'metastore_db'};create=true",
            "datanucleus.schema.autoCreateAll": "true",
            "hive.metastore.schema.verification": "false",
            "hive.metastore.warehouse.dir": str(self.warehouse),
            "hive.metastore.event.db.notification.api.auth": "false",
        }))
        return conf

    def _ready(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1.0):
            pass

    def start(self) -> "HiveMetastoreServer":
        if not (self.jars / "hive-metastore-2.3.10.jar").exists() and not list(self.jars.glob("hive-metastore-*.jar")):
            raise RuntimeError(f"no hive-metastore jar in {self.jars}: install pyspark")
        conf = self._write_conf()
        args = [self.java, "-Xmx512m", _LOG4J_SELECTOR, f"-Dderby.system.home={self.workdir}",
                "-cp", f"{conf}{os.pathsep}{self.jars}/*",
                "org.apache.hadoop.hive.metastore.HiveMetaStore", "-p", str(self.port)]
        self._server = ServerProcess(args, what=f"Hive Metastore on port {self.port}",
                                     ready=self._ready, timeout_s=self.start_timeout_s, poll_s=0.25)
        self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    @property
    def running(self) -> bool:
        return self._server is not None

    def __enter__(self) -> "HiveMetastoreServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


__all__ = ["HiveMetastoreServer", "pyspark_jars"]
