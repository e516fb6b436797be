"""The latency proxy (airflow_hudi_occ/testing/latency_proxy.py): every request on a keep-alive
connection is delayed and counted by kind, and conditional writes pass through untouched."""

from __future__ import annotations

import time

import pytest

from airflow_hudi_occ.testing.latency_proxy import LatencyProxy, events_between, request_kind, round_trips
from airflow_hudi_occ.testing.s3 import S3Server

DELAY_MS = 50


@pytest.fixture(scope="module")
def stack():
    with S3Server() as s3, LatencyProxy(s3.endpoint, delay_ms=DELAY_MS) as proxy:
        s3.create_bucket("tables")
        yield s3, proxy


@pytest.fixture
def fs(stack):
    import s3fs
    s3, proxy = stack
    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem(skip_instance_cache=True, **proxy.storage_options(s3.storage_options))
    proxy.counts(reset=True)
    proxy.events(reset=True)
    return fs


def test_every_request_on_a_keep_alive_connection_is_delayed(stack, fs):
    _, proxy = stack
    n = 10
    fs.pipe_file("tables/delay/warm", b"x")  # the connection is opened here, then reused
    proxy.counts(reset=True)
    t0 = time.perf_counter()
    for i in range(n):
        fs.pipe_file(f"tables/delay/{i}", b"x")
    elapsed = time.perf_counter() - t0
    assert proxy.counts() == {"put": n}
    assert elapsed >= n * DELAY_MS / 1000.0


def test_counts_by_kind_for_a_known_sequence(stack, fs):
    _, proxy = stack
    fs.pipe_file("tables/kinds/a", b"a")                 # put
    fs.pipe_file("tables/kinds/b", b"b", mode="create")  # put.if_none_match
    assert fs.cat_file("tables/kinds/a") == b"a"          # head, then get (this s3fs's cat_file)
    fs.info("tables/kinds/a")                              # head
    assert sorted(fs.ls("tables/kinds", detail=False)) == ["tables/kinds/a", "tables/kinds/b"]  # list
    assert proxy.counts(reset=True) == {"put": 1, "put.if_none_match": 1, "get": 1, "head": 2,
                                        "list": 1}
    assert proxy.counts() == {}  # the reset cleared them


def test_a_second_create_if_absent_gets_412_through_the_proxy(stack, fs):
    _, proxy = stack
    fs.pipe_file("tables/cond/k", b"first", mode="create")
    with pytest.raises(FileExistsError):  # s3fs's name for S3's 412 PreconditionFailed
        fs.pipe_file("tables/cond/k", b"second", mode="create")
    assert fs.cat_file("tables/cond/k") == b"first"
    assert proxy.counts()["put.if_none_match"] == 2


def test_events_carry_arrival_times_to_match_against_intervals(stack, fs):
    _, proxy = stack
    fs.pipe_file("tables/win/before", b"x")
    start = time.time()
    fs.cat_file("tables/win/before")
    fs.info("tables/win/before")
    end = time.time()
    fs.pipe_file("tables/win/after", b"x")
    events = proxy.events(reset=True)
    assert [e["kind"] for e in events] == ["put", "head", "get", "head", "put"]
    assert events_between(events, start, end) == {"get": 1, "head": 2}
    assert proxy.events() == []


@pytest.mark.parametrize("method,target,headers,kind", [
    ("GET", "/tables?list-type=2&prefix=t%2F", {}, "list"),
    ("GET", "/tables/t/.hoodie/x.commit", {}, "get"),
    ("HEAD", "/tables/t/x", {}, "head"),
    ("PUT", "/tables/t/x", {}, "put"),
    ("PUT", "/tables/t/x", {"if-none-match": "*"}, "put.if_none_match"),
    ("PUT", "/tables/t/x", {"if-match": '"abc"'}, "put.if_match"),
    ("PUT", "/tables/t/x", {"x-amz-copy-source": "/tables/t/y"}, "copy"),
    ("DELETE", "/tables/t/x", {}, "delete"),
    ("POST", "/tables?delete", {}, "delete.batch"),
    ("POST", "/tables/t/x?uploads", {}, "multipart"),
    ("PUT", "/tables", {}, "bucket"),
    ("HEAD", "/tables", {}, "bucket"),
])
def test_request_kind(method, target, headers, kind):
    assert request_kind(method, target, headers) == kind


def test_events_name_the_access_key_that_signed_each_request(stack):
    import s3fs
    s3, proxy = stack
    clients = {}
    for key in ("writer-a", "writer-b"):  # the loopback store accepts any key
        options = proxy.storage_options(s3.storage_options)
        options["key"] = key
        clients[key] = s3fs.S3FileSystem(skip_instance_cache=True, **options)
    proxy.events(reset=True)
    clients["writer-a"].pipe_file("tables/who/a", b"a")
    clients["writer-b"].pipe_file("tables/who/b", b"b")
    clients["writer-a"].info("tables/who/b")
    events = proxy.events(reset=True)
    assert [(e["kind"], e["who"]) for e in events] == [
        ("put", "writer-a"), ("put", "writer-b"), ("head", "writer-a")]


@pytest.mark.parametrize("authorization,signer", [
    ("AWS4-HMAC-SHA256 Credential=w7/20261129/us-east-1/s3/aws4_request, SignedHeaders=host, "
     "Signature=ab", "w7"),
    ("", ""),
    ("Basic Zm9vOmJhcg==", ""),
])
def test_request_signer(authorization, signer):
    from airflow_hudi_occ.testing.latency_proxy import request_signer
    assert request_signer({"authorization": authorization} if authorization else {}) == signer


def test_requests_sent_together_are_one_round_trip_and_requests_sent_after_an_answer_another():
    """At 200 ms a request: two requests sent together (arrivals 1 ms apart), then one sent
    after their answers (a delay later), then two more together: three round trips in a row,
    whatever order the arrivals are listed in."""
    at = [0.0, 0.001, 0.205, 0.41, 0.4105]
    events = [{"t": 1000.0 + t, "kind": "get"} for t in reversed(at)]
    assert round_trips(events, 200) == 3
    assert round_trips(events, 0.5) == 5  # a delay shorter than the spread: each its own
    assert round_trips([], 200) == 0
