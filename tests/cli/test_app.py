"""The command line's own checks and its error paths: a negative count, an object store that
refuses or never answers (a normal error naming the endpoint, not "a bug in hudi-occ"), and
credentials that come from the environment or a file instead of argv."""

from __future__ import annotations

import json
import os
import time

import pyarrow as pa
import pytest

from airflow_hudi_occ.cli import main
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.job_secrets import JobSecrets, write_secrets_file
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Server
from airflow_hudi_occ.testing.unreachable import refusing_port, silent_listener


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("value", ["-1", "x", "1.5"])
def test_a_limit_that_is_not_a_count_is_a_usage_error_naming_it(table, capsys, value):
    rc, out, err = run(capsys, "timeline", table.base_uri, "--limit", value)
    assert rc == 2 and out == ""
    assert f"error: argument --limit: expected a whole number, 0 or more, got {value!r}" in err


def test_a_limit_of_zero_is_a_usage_error_as_in_attempts(table, capsys, fast_options):
    """Issue 40: `timeline --limit 0` printed "no instants" on a table that has some, which
    reads as an answer. Refused as `attempts --limit 0` is; --limit 1 keeps the last."""
    writer = ArrowTableWriter(table, WriteConfig.from_options(fast_options))
    for ts in (1, 2):
        writer.write(pa.table({"id": [1], "p": ["a"], "ts": [ts]}), "upsert")
    rc, out, err = run(capsys, "timeline", table.base_uri, "--limit", "0")
    assert rc == 2 and out == ""
    assert "error: --limit 0 lists nothing" in err
    assert ("remedy: give a positive number of instants (the last are kept), or leave --limit "
            "out for all of them") in err
    rc, out, _ = run(capsys, "timeline", table.base_uri, "--limit", "1", "--json")
    assert rc == 0 and len(json.loads(out)["instants"]) == 1


# -- storage options that are not what they look like -------------------------------------------


@pytest.mark.parametrize("item, says, fix", [
    ('client_kwargs={"endpoint_url": "http://127.0.0.1:1"',  # the closing brace forgotten
     "is not valid JSON (Expecting ',' delimiter: line 1 column 38 (char 37))",
     """--storage-option 'client_kwargs={"name": "value"}'"""),
    ("client_kwargs={'endpoint_url': 'http://127.0.0.1:1'}",  # a Python dict
     "is not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2",
     """--storage-option 'client_kwargs={"endpoint_url": "http://127.0.0.1:1"}'"""),
    ("anon=False",  # Python's spelling: the string "False" is true
     "False is Python's spelling, not JSON's", "--storage-option anon=false"),
])
def test_a_storage_option_that_is_not_json_is_a_usage_error_naming_it(capsys, item, says, fix):
    """Issue 40: these were `internal error: AttributeError: 'str' object has no attribute
    'copy'` ("a bug in hudi-occ"), exit 1; now exit 2 before any store is asked, naming the
    option, the value, the JSON error's position and the fix."""
    rc, out, err = run(capsys, "show", "s3://bucket/t", "--storage-option", item)
    assert rc == 2 and out == ""
    assert f"error: --storage-option {item}: " in err and says in err, err
    assert "remedy: " in err and fix in err, err
    assert "internal error" not in err


def test_a_storage_option_the_store_does_not_take_is_a_usage_error(capsys):
    """A misspelt key (`region` is s3fs's client_kwargs={"region_name": ...}) was `internal
    error: TypeError: AioSession.__init__() got an unexpected keyword argument 'region'`."""
    rc, out, err = run(capsys, "show", "s3://bucket/t", "--storage-option", "region=us-east-1")
    assert rc == 2 and "error: the s3 store does not take the storage option 'region'" in err, err
    assert 'client_kwargs={"region_name": ...}' in err and "internal error" not in err


def test_keyword_options_must_be_objects_wherever_they_come_from(capsys, tmp_path):
    """A JSON string where s3fs wants keyword arguments (`client_kwargs="{...}"` on the command
    line, or in a secrets file) was the same AttributeError; a secrets file that is not JSON
    now says where it broke (never its content)."""
    text = '{"endpoint_url": "http://127.0.0.1:1"}'
    rc, out, err = run(capsys, "show", "s3://bucket/t", "--storage-option", f"client_kwargs={json.dumps(text)}")
    assert rc == 2 and "storage option 'client_kwargs' must be an object of keyword arguments, not a str" in err
    secrets = tmp_path / "secrets.json"
    secrets.write_text(json.dumps({"storage_options": {"client_kwargs": text, "secret": "s3cr3t"}}))
    rc, out, err = run(capsys, "show", "s3://bucket/t", "--secrets-file", secrets)
    assert rc == 2 and "storage option 'client_kwargs' must be an object" in err, err
    assert "s3cr3t" not in err and "127.0.0.1" not in err
    secrets.write_text("{'storage_options': {'secret': 's3cr3t'}}")
    rc, out, err = run(capsys, "show", "s3://bucket/t", "--secrets-file", secrets)
    assert rc == 2 and (f"error: --secrets-file names {str(secrets)!r}, which is not valid JSON "
                        "(Expecting property name enclosed in double quotes: line 1 column 2") in err, err
    assert "s3cr3t" not in err and "internal error" not in err


# -- object stores that refuse or never answer ---------------------------------------------------


_refusing_port = refusing_port


@pytest.fixture
def silent_endpoint():
    """An endpoint that accepts connections and never answers (a hung proxy, a tarpit)."""
    with silent_listener() as port:
        yield f"http://127.0.0.1:{port}"


def _store_args(endpoint: str, *extra: str) -> list[str]:
    return ["--storage-option", f"endpoint_url={endpoint}", "--storage-option", "key=k",
            "--storage-option", "secret=s", *extra]


def test_a_refusing_store_is_an_error_naming_the_endpoint_not_a_bug(capsys):
    endpoint = f"http://127.0.0.1:{_refusing_port()}"
    start = time.monotonic()
    rc, out, err = run(capsys, "show", "s3://bucket/t", *_store_args(endpoint))
    assert time.monotonic() - start < 30
    assert rc == 2 and out == "", err
    assert f"error: the s3 store at {endpoint} did not answer" in err
    assert "ConnectionRefusedByStoreError" in err and "connection refused" in err
    assert "remedy: check that the store at" in err
    assert "bug" not in err and "Traceback" not in err
    rc, _, err = run(capsys, "show", "s3://bucket/t", *_store_args(endpoint), "--json")
    doc = json.loads(err)
    assert rc == 2 and doc["error"] == "StorageUnavailableError" and doc["endpoint"] == endpoint


def test_a_silent_store_fails_within_its_read_timeout(capsys, silent_endpoint):
    start = time.monotonic()
    rc, out, err = run(capsys, "show", "s3://bucket/t", *_store_args(
        silent_endpoint, "--storage-option", 'config_kwargs={"read_timeout": 1}'))
    took = time.monotonic() - start
    assert rc == 2 and out == "", err
    assert f"error: the s3 store at {silent_endpoint} did not answer" in err and "StoreTimeoutError" in err
    # 2 attempts of a request given 2 x 1 s (format/object_store), plus backoff: seconds, not
    # the 415 s of before (s3fs's side: tests/core/format/test_storage.py)
    assert took < 30, f"took {took:.0f}s"


# -- credentials off the command line ------------------------------------------------------------


@pytest.fixture(scope="module")
def strict_s3():
    """A loopback S3 store that refuses requests not signed with its access key."""
    with S3Server(check_credentials=True) as s3:
        s3.create_bucket("tables")
        Table.create("s3://tables/t", "t", record_key_fields=["id"], storage_options=s3.storage_options)
        yield s3


def test_without_credentials_the_store_refuses(strict_s3, capsys, monkeypatch):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    rc, out, err = run(capsys, "show", "s3://tables/t", "--storage-option",
                       f"endpoint_url={strict_s3.endpoint}", "--storage-option", "key=other",
                       "--storage-option", "secret=other")
    assert (rc, out) == (2, ""), (rc, out, err)
    assert "error: " in err and "Traceback" not in err


def test_credentials_from_the_standard_aws_environment(strict_s3, capsys, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", strict_s3.endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    rc, out, err = run(capsys, "show", "s3://tables/t", "--storage-option", "use_listings_cache=false")
    assert rc == 0, err
    assert "table        t " in out


@pytest.mark.parametrize("via", ["flag", "env"])
def test_credentials_from_a_secrets_file(strict_s3, capsys, monkeypatch, tmp_path, via):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(var, raising=False)
    path = write_secrets_file(JobSecrets({}, strict_s3.storage_options), str(tmp_path))
    argv = ["show", "s3://tables/t"]
    if via == "flag":
        argv += ["--secrets-file", path]
    else:
        monkeypatch.setenv("HUDI_OCC_SECRETS_FILE", path)
    rc, out, err = run(capsys, *argv)
    assert rc == 0, err
    assert "table        t " in out
    assert os.path.exists(path), "a person's secrets file is theirs: never deleted"


def test_an_unreadable_secrets_file_is_a_usage_error_naming_it(table, capsys, tmp_path):
    rc, out, err = run(capsys, "show", table.base_uri, "--secrets-file", tmp_path / "missing.json")
    assert rc == 2 and "error: --secrets-file names" in err and "missing.json" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"storage_options": "key=abc"}')
    rc, out, err = run(capsys, "show", table.base_uri, "--secrets-file", bad)
    assert rc == 2 and "does not hold a JSON object" in err and "abc" not in err
