"""Is the Spark master there? A quick TCP probe of a ``spark://`` URL before submitting.

Why: against an address where no master listens, spark-submit does not fail. The driver's
standalone client retries the master three times, 20 s apart, logs "All masters are
unresponsive", and the application then waits for executors that never come: a task that
should fail in a second holds its slot for minutes and its error names no fix. A TCP connect
to each ``host:port`` of the URL (a standalone HA URL lists several) answers the question in
well under a second.

Only ``spark://`` is probed: ``local[*]`` has no master, and YARN and Kubernetes resolve
their endpoints from configuration files and credentials that spark-submit, not we, reads.

Errors: :class:`~airflow_hudi_occ.spark.submit.errors.SparkMasterUnreachableError` when no address
of the URL accepts a connection, naming the URL and the fix. Raised before any instant is
requested, so the table is untouched.
"""

from __future__ import annotations

import socket

from airflow_hudi_occ.spark.submit.errors import SparkMasterUnreachableError

DEFAULT_PORT = 7077


def master_addresses(master: str) -> list[tuple[str, int]]:
    """The ``(host, port)`` pairs of a ``spark://h1:p1,h2:p2`` URL; [] for other masters."""
    if not master.startswith("spark://"):
        return []
    out = []
    for part in master[len("spark://"):].split(","):
        part = part.strip().rstrip("/")
        if not part:
            continue
        host, sep, port = part.rpartition(":")
        if not sep or not port.isdigit():
            host, port = part, str(DEFAULT_PORT)
        out.append((host.strip("[]"), int(port)))
    return out


def check_master_reachable(master: str, *, timeout_s: float = 3.0) -> None:
    """Return when one address of ``master`` accepts a TCP connection (or it is not a
    ``spark://`` URL); raise SparkMasterUnreachableError otherwise."""
    addresses = master_addresses(master)
    errors = []
    for host, port in addresses:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return
        except OSError as e:
            errors.append(f"{host}:{port}: {e.strerror or e}")
    if addresses:
        raise SparkMasterUnreachableError(
            f"no Spark master answers at {master} ({'; '.join(errors)}); nothing was submitted",
            master=master, cause="; ".join(errors),
            remedy="start the master (spark-class org.apache.spark.deploy.master.Master), or fix "
                   "the host and port of the Spark connection (Admin > Connections, or "
                   "AIRFLOW_CONN_<ID>): they must be the master's spark:// URL, port 7077 "
                   "unless the master was started with another --port")


def is_local_master(master: str | None) -> bool:
    """Local mode: executors are threads of the driver's JVM and start the driver's Python."""
    return bool(master) and str(master).strip().startswith("local")
