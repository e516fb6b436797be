"""A TCP proxy in front of a loopback S3 server that delays every request and counts it by kind.

Why: every concurrency figure measured on loopback hides what a request costs on S3 or GCS
(20 to 50 ms). Under a table lock, the requests made while holding it set the ceiling of the
whole table, so the scale bench (issue 43) runs the writers against a store that costs what a
real one does, and counts what they ask of it.

What it does: one process (``python -m airflow_hudi_occ.testing.latency_proxy --target
HOST:PORT --delay-ms 20``) accepts HTTP/1.1 connections, parses each request's line and headers
(a keep-alive connection carries many requests: each one is parsed, delayed and counted, not
the connection), waits ``delay_ms``, then forwards the request and streams its body
(Content-Length, or chunked to its last chunk) to the target; the answers flow back untouched.
Because the delay is paid before the request reaches the store, a client's round trip is at
least the delay, as on a distant store, and ``Expect: 100-continue`` still works (the body is
streamed after the headers, not buffered).

Counting: :func:`request_kind` names each request from its method, path-style address, query and
headers (``get``, ``list``, ``head``, ``put``, ``put.if_none_match`` (create-if-absent),
``put.if_match`` (compare-and-swap), ``copy``, ``delete``, ``delete.batch``, ``multipart``,
``bucket``). A control port answers ``GET /counts`` and ``GET /events`` (each with ``?reset=1``
to read and clear at once) in JSON: counts by kind, and every request's wall-clock arrival time,
kind, method, path and signer (the access key). The events are how requests are matched to intervals measured in other
processes (a lock held from t0 to t1, say): the proxy cannot see who sends a request, so the
caller records its intervals with ``time.time()`` on the same machine and counts the events in
them (:func:`events_between`).

Usage::

    with S3Server() as s3, LatencyProxy(s3.endpoint, delay_ms=20) as proxy:
        fs = s3fs.S3FileSystem(**proxy.storage_options(s3.storage_options))
        proxy.counts(reset=True)
        fs.cat("tables/t/x")
        assert proxy.counts() == {"get": 1}
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import re
import socket
import sys
import time
import urllib.request
from collections import Counter
from urllib.parse import parse_qs, unquote, urlsplit

from airflow_hudi_occ.testing.server_process import ServerProcess

#: the largest request head (line + headers) accepted; S3 clients send a few KiB at most
MAX_HEAD = 64 * 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request_kind(method: str, target: str, headers: dict[str, str]) -> str:
    """The kind of an S3 request, from its method, path-style target and (lower-case) headers."""
    parts = urlsplit(target)
    query = parse_qs(parts.query, keep_blank_values=True)
    path = unquote(parts.path).lstrip("/")
    has_key = "/" in path and path.split("/", 1)[1] != ""
    method = method.upper()
    if "uploads" in query or "uploadId" in query:
        return "multipart"
    if not has_key:
        if method == "GET" and not {"location", "versioning", "policy", "acl"} & set(query):
            return "list"
        if method == "POST" and "delete" in query:
            return "delete.batch"
        return "bucket"
    if method == "GET":
        return "get"
    if method == "HEAD":
        return "head"
    if method == "DELETE":
        return "delete"
    if method == "PUT":
        if "x-amz-copy-source" in headers:
            return "copy"
        if "if-none-match" in headers:
            return "put.if_none_match"
        if "if-match" in headers:
            return "put.if_match"
        return "put"
    return method.lower()


#: the access key of a SigV4 ``Authorization`` header (``Credential=<key>/<date>/...``)
_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/")


def request_signer(headers: dict[str, str]) -> str:
    """The access key that signed a request (``""`` if unsigned or signed otherwise). Why: the
    proxy cannot see which process sent a request, but a bench that gives each writer process
    its own access key (loopback stores accept any) can count each writer's requests apart,
    the requests made while *that* writer holds the table lock among everyone's polling."""
    m = _CREDENTIAL.search(headers.get("authorization", ""))
    return m.group(1) if m else ""


def events_between(events: list[dict], start: float, end: float) -> Counter:
    """Counts by kind of the events that arrived at the proxy within ``[start, end]``."""
    return Counter(e["kind"] for e in events if start <= e["t"] <= end)


def round_trips(events: list[dict], delay_ms: float) -> int:
    """How many round trips the requests of ``events`` took one after another: arrivals
    grouped in waves, a request arriving within half a delay of its wave's first joining it
    (a request sent only after an answer arrives a full delay after the one answered).
    Meaningful where the delay is far above the time a thread takes to send: requests sent
    together then arrive within it (issue 43: a single writer's commit is as long as its
    round trips in a row, not its requests)."""
    waves, first = 0, None
    for e in sorted(events, key=lambda e: e["t"]):
        if first is None or (e["t"] - first) * 1000 >= delay_ms / 2:
            waves, first = waves + 1, e["t"]
    return waves


# --- the proxy process ---------------------------------------------------------------------------


class _State:
    def __init__(self, delay_s: float):
        self.delay_s = delay_s
        self.counts: Counter = Counter()
        self.events: list[dict] = []


async def _read_head(reader: asyncio.StreamReader) -> bytes | None:
    """The request line and headers up to the blank line, or None at a clean end of stream."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if e.partial.strip():
            raise ConnectionError("connection closed inside a request head") from e
        return None
    except asyncio.LimitOverrunError as e:
        raise ConnectionError("request head too large") from e
    return head


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return method, target, headers


async def _forward_body(reader, writer, headers: dict[str, str]) -> None:
    """Stream the request body to the target: Content-Length bytes, or chunks to the last one."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = await reader.readuntil(b"\r\n")
            writer.write(size_line)
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:  # trailers, then the blank line
                while True:
                    line = await reader.readuntil(b"\r\n")
                    writer.write(line)
                    if line == b"\r\n":
                        return
            writer.write(await reader.readexactly(size + 2))
            await writer.drain()
    remaining = int(headers.get("content-length", "0") or 0)
    while remaining:
        chunk = await reader.read(min(remaining, 1 << 16))
        if not chunk:
            raise ConnectionError("client closed inside a request body")
        writer.write(chunk)
        remaining -= len(chunk)
        await writer.drain()


async def _pipe(reader, writer) -> None:
    try:
        while True:
            data = await reader.read(1 << 16)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        _close(writer)


def _close(writer) -> None:
    try:
        writer.close()
    except (ConnectionError, OSError, RuntimeError):
        pass


async def _serve_client(state: _State, host: str, port: int, c_reader, c_writer) -> None:
    try:
        u_reader, u_writer = await asyncio.open_connection(host, port)
    except OSError:
        _close(c_writer)
        return
    answers = asyncio.ensure_future(_pipe(u_reader, c_writer))
    try:
        while True:
            head = await _read_head(c_reader)
            if head is None:
                break
            method, target, headers = _parse_head(head)
            kind = request_kind(method, target, headers)
            state.counts[kind] += 1
            state.events.append({"t": time.time(), "kind": kind, "method": method,
                                 "path": urlsplit(target).path, "who": request_signer(headers)})
            if state.delay_s > 0:
                await asyncio.sleep(state.delay_s)
            u_writer.write(head)
            await _forward_body(c_reader, u_writer, headers)
            await u_writer.drain()
    except (ConnectionError, OSError, asyncio.IncompleteReadError, ValueError):
        pass
    finally:
        # let the last answer reach the client before closing both ends
        try:
            u_writer.write_eof()
        except (OSError, RuntimeError):
            pass
        try:
            await asyncio.wait_for(answers, timeout=30)
        except asyncio.TimeoutError:
            answers.cancel()
        _close(u_writer)
        _close(c_writer)


async def _serve_control(state: _State, reader, writer) -> None:
    """``GET /counts[?reset=1]``, ``GET /events[?reset=1]``, ``GET /delay?ms=N``: JSON answers."""
    try:
        head = await _read_head(reader)
        if head is None:
            return
        _method, target, _headers = _parse_head(head)
        parts = urlsplit(target)
        query = parse_qs(parts.query)
        reset = query.get("reset", ["0"])[0] == "1"
        status, body = "200 OK", None
        if parts.path == "/counts":
            body = dict(state.counts)
            if reset:
                state.counts.clear()
        elif parts.path == "/events":
            body = state.events
            if reset:
                state.events = []
        elif parts.path == "/delay" and "ms" in query:
            state.delay_s = float(query["ms"][0]) / 1000.0
            body = {"delay_ms": state.delay_s * 1000.0}
        else:
            status, body = "404 Not Found", {"error": f"unknown control path {parts.path}"}
        data = json.dumps(body).encode()
        writer.write(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
        await writer.drain()
    except (ConnectionError, OSError, ValueError):
        pass
    finally:
        _close(writer)


async def _main(port: int, control_port: int, target: str, delay_ms: float) -> None:
    host, _, tport = target.rpartition(":")
    state = _State(delay_ms / 1000.0)
    proxy = await asyncio.start_server(
        lambda r, w: _serve_client(state, host or "127.0.0.1", int(tport), r, w),
        "127.0.0.1", port, limit=MAX_HEAD, backlog=1024)
    control = await asyncio.start_server(lambda r, w: _serve_control(state, r, w),
                                         "127.0.0.1", control_port, limit=MAX_HEAD)
    async with proxy, control:
        await asyncio.gather(proxy.serve_forever(), control.serve_forever())


# --- the handle for tests and benches ------------------------------------------------------------


class LatencyProxy:
    """The proxy process, started and stopped like :class:`~airflow_hudi_occ.testing.s3.S3Server`.

    ``target`` is ``host:port`` or an endpoint URL (``http://127.0.0.1:PORT``).
    """

    def __init__(self, target: str, *, delay_ms: float = 20.0, port: int | None = None,
                 control_port: int | None = None, start_timeout_s: float = 30.0):
        self.target = urlsplit(target).netloc if "://" in target else target
        self.delay_ms = delay_ms
        self.port = port or _free_port()
        self.control_port = control_port or _free_port()
        self.start_timeout_s = start_timeout_s
        self._server: ServerProcess | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def storage_options(self, options: dict) -> dict:
        """``options`` (an s3fs storage-options dict) with its endpoint replaced by the proxy's."""
        out = copy.deepcopy(options)
        out.setdefault("client_kwargs", {})["endpoint_url"] = self.endpoint
        return out

    def start(self) -> "LatencyProxy":
        args = [sys.executable, "-m", "airflow_hudi_occ.testing.latency_proxy",
                "--target", self.target, "--delay-ms", str(self.delay_ms),
                "--port", str(self.port), "--control-port", str(self.control_port)]
        self._server = ServerProcess(args, what="latency proxy", ready=lambda: self._control("/counts"),
                                     timeout_s=self.start_timeout_s, poll_s=0.05)
        self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def errors(self) -> str:
        """What the proxy process wrote to stderr."""
        return self._server.errors() if self._server is not None else ""

    def _control(self, path: str):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.control_port}{path}", timeout=10) as r:
            return json.loads(r.read())

    def counts(self, *, reset: bool = False) -> dict[str, int]:
        """Requests by kind since the start or the last reset (``reset=True`` reads and clears)."""
        return self._control("/counts?reset=1" if reset else "/counts")

    def events(self, *, reset: bool = False) -> list[dict]:
        """Every request since the start or the last reset: ``{"t", "kind", "method", "path",
        "who"}``, ``t`` the wall-clock time (``time.time()``) it arrived at the proxy, before its
        delay, ``who`` the access key that signed it (:func:`request_signer`)."""
        return self._control("/events?reset=1" if reset else "/events")

    def set_delay(self, delay_ms: float) -> None:
        """Change the delay of the requests that arrive from now on."""
        self._control(f"/delay?ms={delay_ms}")
        self.delay_ms = delay_ms

    def __enter__(self) -> "LatencyProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


if __name__ == "__main__":  # pragma: no cover
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", required=True, help="HOST:PORT of the S3 server")
    p.add_argument("--delay-ms", type=float, default=20.0)
    p.add_argument("--port", type=int, default=0, help="default: a free port")
    p.add_argument("--control-port", type=int, default=0, help="default: a free port")
    a = p.parse_args()
    a.port, a.control_port = a.port or _free_port(), a.control_port or _free_port()
    print(f"proxy http://127.0.0.1:{a.port} -> {a.target}, {a.delay_ms:g} ms a request; "
          f"control http://127.0.0.1:{a.control_port}/counts", flush=True)
    try:
        asyncio.run(_main(a.port, a.control_port, a.target, a.delay_ms))
    except KeyboardInterrupt:
        pass
