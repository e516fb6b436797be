"""Services that cannot be reached, for the bounded-wait tests: a loopback port nothing
listens on (refused at once), one that accepts connections and never says a word (a hung
server or proxy, a firewall's tarpit: the case a connect timeout alone does not catch), and one
whose connects never complete (a host that drops packets)."""

from __future__ import annotations

import socket
import threading
from contextlib import contextmanager
from typing import Iterator

from airflow_hudi_occ.testing.zookeeper import free_port

__all__ = ["refusing_port", "silent_listener", "unanswered_connect"]


def refusing_port() -> int:
    """A loopback port nothing listens on: a connection to it is refused."""
    return free_port()


@contextmanager
def silent_listener() -> Iterator[int]:
    """A loopback port that accepts every connection and never answers; closed on exit."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(2)
        for conn in accepted:
            conn.close()
        server.close()


@contextmanager
def unanswered_connect() -> Iterator[int]:
    """A loopback port where a TCP connect hangs, as to a host that drops packets: a listener
    that never accepts, its backlog (one connection) filled, so Linux drops further SYNs."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    queued: list[socket.socket] = []
    try:
        while len(queued) < 8:
            client = socket.socket()
            client.settimeout(0.3)
            try:
                client.connect(("127.0.0.1", port))
            except socket.timeout:
                client.close()
                break
            queued.append(client)
        else:
            raise RuntimeError("the listener's backlog never filled: connects do not hang here")
        yield port
    finally:
        for client in queued:
            client.close()
        server.close()
