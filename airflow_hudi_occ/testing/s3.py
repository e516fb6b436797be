"""A loopback S3 server for tests: moto's server, in its own process, reached through s3fs.

Why its own process: writer processes, the test and hudi-rs all talk HTTP to it, and a server
thread inside the pytest process would compete with the test for the GIL.

Conditional writes: moto answers ``PutObject`` with ``If-None-Match: *`` by 412 when the key
exists, but checks and stores in two steps without a lock (``moto/s3/responses.py``,
``put_object``), so two concurrent creates of one key can both succeed, which real S3
(and LocalStack, which locks around the check and the write) never allows. With
``atomic_conditional_writes=True`` (the default) this harness serialises every mutating
request (PUT/POST/DELETE), which makes the check-and-store atomic as on S3; reads stay
concurrent. ``False`` runs moto as shipped, to measure the race.

Usage::

    with S3Server() as s3:
        s3.create_bucket("tables")
        Table.create("s3://tables/t", "t", record_key_fields=["id"], storage_options=s3.storage_options)
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time

ACCESS_KEY = "testing"
SECRET_KEY = "testing"
REGION = "us-east-1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Server:
    def __init__(self, *, port: int | None = None, atomic_conditional_writes: bool = True,
                 start_timeout_s: float = 60.0):
        self.port = port or _free_port()
        self.atomic = atomic_conditional_writes
        self.start_timeout_s = start_timeout_s
        self._proc: subprocess.Popen | None = None

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
        self._proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"moto server exited: {self._proc.stderr.read().decode()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"moto server did not listen on {self.endpoint}")

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None

    def create_bucket(self, name: str) -> None:
        import boto3
        boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                     aws_secret_access_key=SECRET_KEY, region_name=REGION).create_bucket(Bucket=name)

    def __enter__(self) -> "S3Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def hudi_read_s3(base_uri: str, storage_options: dict):
    """hudi-rs snapshot read of an S3 table, given the s3fs options of :class:`S3Server`."""
    import pyarrow as pa
    from hudi import HudiReadOptions, HudiTableBuilder
    ck = storage_options.get("client_kwargs", {})
    opts = {"aws_endpoint_url": ck["endpoint_url"], "aws_allow_http": "true",
            "aws_access_key_id": storage_options["key"],
            "aws_secret_access_key": storage_options["secret"],
            "aws_region": ck.get("region_name", REGION)}
    uri = base_uri if base_uri.startswith("s3://") else "s3://" + base_uri.lstrip("/")
    table = HudiTableBuilder.from_base_uri(uri).with_storage_options(opts).build()
    batches = table.read(HudiReadOptions())
    return pa.Table.from_batches(batches) if batches else pa.table({})


def _serve(port: int, atomic: bool) -> None:  # pragma: no cover - runs in the server process
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
                import io
                n = int(environ.get("CONTENT_LENGTH") or 0)
                environ["wsgi.input"] = io.BytesIO(environ["wsgi.input"].read(n) if n else b"")
                with lock:
                    return list(inner(environ, start_response))
            return inner(environ, start_response)
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    make_server("127.0.0.1", port, app, threaded=True, request_handler=MotoRequestHandler).serve_forever()


if __name__ == "__main__":  # pragma: no cover
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--atomic", action="store_true")
    a = p.parse_args()
    _serve(a.port, a.atomic)
