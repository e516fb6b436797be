"""A loopback S3 server for tests: moto's server, in its own process, reached through s3fs.

Why its own process: writer processes, the test and hudi-rs all talk HTTP to it, and a server
thread inside the pytest process would compete with the test for the GIL.

Conditional writes: moto answers ``PutObject`` with ``If-None-Match: *`` by 412 when the key
exists, but checks and stores in two steps without a lock (``moto/s3/responses.py``,
``put_object``), so two concurrent creates of one key can both succeed, which real S3
(and LocalStack, which locks around the check and the write) never allows. With
``atomic_conditional_writes=True`` (the default) this harness serialises every mutating
request (PUT/POST/DELETE), which makes the check-and-store atomic as on S3; reads stay
concurrent. ``False`` runs moto as shipped, to measure the race. The wrapper reads each body
whole first (Content-Length, or chunked to its end); a client that dies mid-body gets
400 IncompleteBody and nothing is stored, as on S3.

Stores as they are met in the field: ``conditional_writes=False`` answers every PUT carrying
``If-None-Match`` with ``501 NotImplemented`` (what some S3-compatible stores without
conditional writes answer); ``check_credentials=True`` answers a
request signed with another access key (or not signed) with ``403`` (moto itself accepts any).

Diagnosis: ``S3Server(request_log=path)`` (or ``HUDI_OCC_S3_LOG=path``) appends one JSON line
per request (method, path, Range / Content-Length / Transfer-Encoding headers, status,
seconds); :meth:`S3Server.server_errors` returns what the server wrote to stderr.

Usage::

    with S3Server() as s3:
        s3.create_bucket("tables")
        Table.create("s3://tables/t", "t", record_key_fields=["id"], storage_options=s3.storage_options)
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
import time

from airflow_hudi_occ.testing.server_process import ServerProcess

ACCESS_KEY = "testing"
SECRET_KEY = "testing"
REGION = "us-east-1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Server:
    def __init__(self, *, port: int | None = None, atomic_conditional_writes: bool = True,
                 start_timeout_s: float = 60.0, request_log: str | None = None,
                 conditional_writes: bool = True, check_credentials: bool = False):
        self.conditional_writes = conditional_writes
        self.check_credentials = check_credentials
        self.request_log = request_log or os.environ.get("HUDI_OCC_S3_LOG") or None
        self.port = port or _free_port()
        self.atomic = atomic_conditional_writes
        self.start_timeout_s = start_timeout_s
        self._server: ServerProcess | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def storage_options(self) -> dict:
        """fsspec / s3fs options (listing cache off: the timeline must be listed fresh)."""
        return {"key": ACCESS_KEY, "secret": SECRET_KEY, "use_listings_cache": False,
                "client_kwargs": {"endpoint_url": self.endpoint, "region_name": REGION}}

    @property
    def hudi_rs_options(self) -> dict:
        return {"aws_endpoint_url": self.endpoint, "aws_allow_http": "true",
                "aws_access_key_id": ACCESS_KEY, "aws_secret_access_key": SECRET_KEY,
                "aws_region": REGION}

    def start(self) -> "S3Server":
        args = [sys.executable, "-m", "airflow_hudi_occ.testing.s3", "--port", str(self.port)]
        if self.atomic:
            args.append("--atomic")
        if self.request_log:
            args += ["--log", self.request_log]
        if not self.conditional_writes:
            args.append("--no-conditional-writes")
        if self.check_credentials:
            args.append("--check-credentials")
        self._server = ServerProcess(
            args, what="moto server", timeout_s=self.start_timeout_s,
            ready=lambda: socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close())
        self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def server_errors(self) -> str:
        """What the server process wrote to stderr (tracebacks of requests moto failed)."""
        return self._server.errors() if self._server is not None else ""

    def create_bucket(self, name: str) -> None:
        import boto3
        boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                     aws_secret_access_key=SECRET_KEY, region_name=REGION).create_bucket(Bucket=name)

    def __enter__(self) -> "S3Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def hudi_read_s3(base_uri: str, storage_options: dict, filters: list[tuple[str, str, str]] | None = None):
    """hudi-rs snapshot read of an S3 table, given the s3fs options of :class:`S3Server`;
    ``filters``: hudi-rs's, e.g. ``[("region", "IN", "d00001,d00002")]`` (a partition column's
    filter reads only those partitions: a table of 10,000 is otherwise minutes of requests)."""
    import pyarrow as pa
    from hudi import HudiReadOptions, HudiTableBuilder
    ck = storage_options.get("client_kwargs", {})
    opts = {"aws_endpoint_url": ck["endpoint_url"], "aws_allow_http": "true",
            "aws_access_key_id": storage_options["key"],
            "aws_secret_access_key": storage_options["secret"],
            "aws_region": ck.get("region_name", REGION)}
    uri = base_uri if base_uri.startswith("s3://") else "s3://" + base_uri.lstrip("/")
    table = HudiTableBuilder.from_base_uri(uri).with_storage_options(opts).build()
    options = HudiReadOptions() if not filters else HudiReadOptions().with_filters(filters)
    batches = table.read(options)
    return pa.Table.from_batches(batches) if batches else pa.table({})


def _serve(port: int, atomic: bool, log_path: str | None = None, *, conditional_writes: bool = True,
           check_credentials: bool = False) -> None:  # pragma: no cover
    import io
    import logging
    from moto.moto_server.werkzeug_app import (DomainDispatcherApplication, MotoRequestHandler,
                                               create_backend_app)
    from werkzeug.serving import make_server
    app = DomainDispatcherApplication(create_backend_app)
    if atomic:
        lock = threading.Lock()
        inner = app

        def app(environ, start_response):  # noqa: F811 - the serialising wrapper
            if environ.get("REQUEST_METHOD") in ("PUT", "POST", "DELETE"):
                # Read the body before taking the lock: a client killed mid-upload must not
                # leave the lock held by a thread waiting for bytes that never come.
                body = _whole_body(environ)
                if body is None:  # the client went away mid-body: S3 stores nothing
                    start_response("400 Bad Request", [("Content-Type", "application/xml")])
                    return [_INCOMPLETE_BODY]
                environ["wsgi.input"] = io.BytesIO(body)
                environ["CONTENT_LENGTH"] = str(len(body))
                with lock:
                    return list(inner(environ, start_response))
            return inner(environ, start_response)
    if not conditional_writes or check_credentials:
        app = _refusing(app, conditional_writes=conditional_writes,
                        check_credentials=check_credentials)
    if log_path:
        app = _logged(app, log_path)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log: errors only
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    make_server("127.0.0.1", port, app, threaded=True, request_handler=MotoRequestHandler).serve_forever()


_INCOMPLETE_BODY = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>IncompleteBody</Code>'
                    b"<Message>You did not provide the number of bytes specified by the "
                    b"Content-Length HTTP header</Message></Error>")


def _whole_body(environ) -> bytes | None:  # pragma: no cover - runs in the server process
    """The request body, or None if the client sent fewer bytes than it announced.

    A body without Content-Length (``Transfer-Encoding: chunked``; werkzeug de-chunks it and
    sets ``wsgi.input_terminated``) is read to its end, not taken as empty. s3fs/aiobotocore
    send Content-Length for every PUT/POST of this suite (checked with ``request_log``).
    """
    stream = environ["wsgi.input"]
    length = environ.get("CONTENT_LENGTH")
    try:
        if length:
            n = int(length)
            data = stream.read(n)
            return data if len(data) == n else None
        if environ.get("wsgi.input_terminated"):
            return stream.read()
    except (OSError, ValueError):
        return None
    return b""


def _s3_error(start_response, status: str, code: str, message: str, method: str = "GET") -> list[bytes]:
    """An S3 error document; a HEAD gets the headers only, as from S3 (a body after the headers
    of a HEAD answer is a protocol error that aiohttp reports, now and then, as "Data after
    `Connection: close`" instead of the status)."""
    body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
            f"<Message>{message}</Message></Error>").encode()
    start_response(status, [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
    return [] if method == "HEAD" else [body]


def _refusing(inner, *, conditional_writes: bool, check_credentials: bool):  # pragma: no cover
    """The answers of a stricter or a more limited store than moto: 403 for a foreign or
    missing access key, 501 for a conditional PUT."""
    import re
    cred = re.compile(r"Credential=([^/,\s]+)/")

    def app(environ, start_response):
        if check_credentials:
            m = cred.search(environ.get("HTTP_AUTHORIZATION", ""))
            if m is None:
                return _s3_error(start_response, "403 Forbidden", "AccessDenied", "Access Denied",
                                 environ.get("REQUEST_METHOD", "GET"))
            if m.group(1) != ACCESS_KEY:
                return _s3_error(start_response, "403 Forbidden", "InvalidAccessKeyId",
                                 "The AWS Access Key Id you provided does not exist in our records.",
                                 environ.get("REQUEST_METHOD", "GET"))
        if (not conditional_writes and environ.get("REQUEST_METHOD") == "PUT"
                and environ.get("HTTP_IF_NONE_MATCH")):
            environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            return _s3_error(start_response, "501 Not Implemented", "NotImplemented",
                             "A header you provided implies functionality that is not implemented")
        return inner(environ, start_response)
    return app


def _logged(inner, log_path: str):  # pragma: no cover - runs in the server process
    """One JSON line per request (method, path, interesting headers, status, seconds): what a
    client really sent and got, for diagnosing a stalled reader."""
    import json
    out = open(log_path, "a", buffering=1)
    out_lock = threading.Lock()
    headers = ("CONTENT_LENGTH", "HTTP_TRANSFER_ENCODING", "HTTP_CONTENT_ENCODING",
               "HTTP_X_AMZ_CONTENT_SHA256", "HTTP_X_AMZ_DECODED_CONTENT_LENGTH", "HTTP_RANGE",
               "HTTP_IF_NONE_MATCH", "HTTP_USER_AGENT", "HTTP_CONNECTION")

    def app(environ, start_response):
        t0 = time.time()
        seen = {}

        def sr(status, response_headers, exc_info=None):
            seen["status"] = status
            return start_response(status, response_headers, exc_info)
        rec = {"t": round(t0, 3), "m": environ.get("REQUEST_METHOD"),
               "path": environ.get("PATH_INFO"), "q": environ.get("QUERY_STRING"),
               "peer": environ.get("REMOTE_PORT"),
               **{h: environ[h] for h in headers if environ.get(h)}}
        try:
            body = list(inner(environ, sr))
        except BaseException as e:
            rec.update(error=repr(e), s=round(time.time() - t0, 3))
            with out_lock:
                out.write(json.dumps(rec) + "\n")
            raise
        rec.update(status=seen.get("status"), bytes=sum(len(b) for b in body),
                   s=round(time.time() - t0, 3))
        with out_lock:
            out.write(json.dumps(rec) + "\n")
        return body
    return app


if __name__ == "__main__":  # pragma: no cover
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--atomic", action="store_true")
    p.add_argument("--log", default=None)
    p.add_argument("--no-conditional-writes", action="store_true")
    p.add_argument("--check-credentials", action="store_true")
    a = p.parse_args()
    _serve(a.port, a.atomic, a.log, conditional_writes=not a.no_conditional_writes,
           check_credentials=a.check_credentials)
