"""Which S3 options obstore is told, and when s3fs keeps every request (format/object_store)."""

import datetime
import errno

import pytest

from airflow_hudi_occ.core.format.object_store import ObjectStore, s3_client_config
from airflow_hudi_occ.core.format.storage import Storage, fsspec_options, with_s3_defaults

ENDPOINT = "http://127.0.0.1:9000"


def _config(options, environ=None):
    return s3_client_config(with_s3_defaults(fsspec_options(options)), environ or {})


def test_the_options_the_tests_and_users_give_reach_obstore_with_the_same_bounds():
    got = _config({"key": "k", "secret": "s", "client_kwargs": {"endpoint_url": ENDPOINT, "region_name": "eu-west-1"}})
    assert got["access_key_id"] == "k" and got["secret_access_key"] == "s"
    assert got["endpoint"] == ENDPOINT and got["region"] == "eu-west-1"
    assert got["client_options"] == {"allow_http": True, "connect_timeout": "5s", "timeout": "20s"}
    assert got["retry_config"]["max_retries"] == 1  # total_max_attempts 2, as botocore is told
    assert got["retry_config"]["retry_timeout"] == datetime.timedelta(seconds=2 * (5 + 20))
    assert got["conditional_put"] == "etag"
    mine = _config({"key": "k", "secret": "s", "endpoint_url": "https://s3.example",
                    "config_kwargs": {"read_timeout": 60, "retries": {"max_attempts": 4},
                                      "s3": {"addressing_style": "virtual"}}})
    assert mine["client_options"] == {"allow_http": False, "connect_timeout": "5s", "timeout": "120s"}
    assert mine["retry_config"]["max_retries"] == 4 and mine["virtual_hosted_style_request"] is True
    assert _config({"anon": True, "endpoint_url": ENDPOINT})["skip_signature"] is True
    assert _config({"token": "t", "key": "k", "secret": "s", "endpoint_url": ENDPOINT})["session_token"] == "t"


def test_credentials_from_the_environment_are_used_a_profile_is_botocores():
    env = {"AWS_ACCESS_KEY_ID": "ek", "AWS_SECRET_ACCESS_KEY": "es", "AWS_REGION": "us-west-2"}
    got = _config({}, env)
    assert (got["access_key_id"], got["secret_access_key"], got["region"]) == ("ek", "es", "us-west-2")
    assert _config({}, {**env, "AWS_PROFILE": "dev"}) is None
    assert _config({}, {"AWS_REGION": "us-west-2"}) is None  # an instance role, SSO: botocore's chain


@pytest.mark.parametrize("options", [
    {"profile": "dev"},
    {"key": "k", "secret": "s", "s3_additional_kwargs": {"ServerSideEncryption": "aws:kms"}},
    {"key": "k", "secret": "s", "requester_pays": True},
    {"key": "k", "secret": "s", "client_kwargs": {"verify": "/etc/ca.pem", "region_name": "r"}},
    {"key": "k", "secret": "s", "config_kwargs": {"signature_version": "s3"}},
    {"key": "k", "secret": "s"},  # AWS itself with no region: botocore follows the bucket's redirect
], ids=["profile", "sse", "requester-pays", "ca-bundle", "signature", "no-region"])
def test_an_option_only_botocore_takes_keeps_s3fs_for_every_request(options, monkeypatch):
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    assert _config(options) is None
    storage = Storage("s3://bucket/t", options)
    assert storage.objects is None


def test_a_table_on_s3_gets_the_client_and_a_local_one_none(tmp_path):
    s3 = Storage("s3://bucket/t", {"key": "k", "secret": "s", "endpoint_url": ENDPOINT})
    assert isinstance(s3.objects, ObjectStore)
    assert Storage(str(tmp_path)).objects is None


def test_every_request_a_table_makes_goes_through_obstore_and_reads_back(tmp_path):
    """Writes, conditional creates and replaces, listings, tails, deletes: through obstore,
    against the loopback S3 server, each answered as fsspec would."""
    from airflow_hudi_occ.core.format.versioned import (VersionConflictError, current_version, put_if_version,
                                                        read_versioned)
    from airflow_hudi_occ.testing.s3 import S3Server
    with S3Server() as server:
        server.create_bucket("objects")
        s = Storage("s3://objects/t", server.storage_options)
        assert s.objects is not None
        s.create_if_absent(s.path(".hoodie", "1.commit"), b"whole")
        with pytest.raises(FileExistsError):
            s.create_if_absent(s.path(".hoodie", "1.commit"), b"again")
        s.write(s.path("p", "a.parquet"), b"0123456789")
        s.touch(s.path("p", "sub", "b"))
        assert s.read(s.path(".hoodie", "1.commit")) == b"whole"
        assert s.read_tail(s.path("p", "a.parquet"), 4) == b"6789"
        assert s.read_tail(s.path("p", "a.parquet"), 400) == b"0123456789"
        assert sorted(s.list_names(s.path("p"))) == ["a.parquet", "sub"]
        assert s.list_dirs(s.path("p")) == ["sub"] and s.list_sizes(s.path("p")) == {"a.parquet": 10}
        assert s.size(s.path("p", "a.parquet")) == 10 and s.mtime(s.path("p", "a.parquet")) > 0
        assert s.exists(s.path("p")) and s.exists(s.path("p", "a.parquet")) and not s.exists(s.path("q"))
        assert s.isdir(s.path("p")) and not s.isdir(s.path("q"))
        assert sorted(s.walk_files(s.path("p"))) == ["a.parquet", "sub/b"]
        with pytest.raises(FileNotFoundError):
            s.read(s.path("missing"))
        with pytest.raises(FileNotFoundError):
            s.size(s.path("missing"))
        lease = s.path(".locks", "lease")
        v1 = put_if_version(s, lease, b"one", None)
        data, v = read_versioned(s, lease)
        assert (data, v) == (b"one", v1) and current_version(s, lease) == v1
        v2 = put_if_version(s, lease, b"two", v1)
        with pytest.raises(VersionConflictError):
            put_if_version(s, lease, b"stale", v1)
        with pytest.raises(VersionConflictError):
            put_if_version(s, lease, b"again", None)
        assert read_versioned(s, lease) == (b"two", v2)
        s.delete(lease)
        assert current_version(s, lease) is None
        with pytest.raises(VersionConflictError):  # If-Match on a deleted key
            put_if_version(s, lease, b"gone", v2)
        s.delete_many([s.path("p", "a.parquet"), s.path("p", "never")])
        assert s.list_names(s.path("p")) == ["sub"]
        s.delete_dir(s.path("p"))
        assert s.walk_files(s.path("p")) == [] and not s.exists(s.path("p"))


def test_a_store_refusing_our_credentials_is_a_storage_error_naming_it_not_an_unanswering_store():
    """A LIST answered 403 comes from obstore as a generic error whose debug text names its
    retry timeout: it must read as refused credentials, not as a store that did not answer."""
    from airflow_hudi_occ.core.errors import StorageError, StorageUnavailableError
    from airflow_hudi_occ.testing.s3 import S3Server
    with S3Server(check_credentials=True) as server:
        server.create_bucket("creds")
        storage = Storage("s3://creds/t", {**server.storage_options, "key": "not-ours"})
        assert storage.objects is not None
        with pytest.raises(StorageError) as exc:
            storage.check_access()
        assert not isinstance(exc.value, StorageUnavailableError)
        assert f"the s3 store at {server.endpoint} refused access to s3://creds/t" in exc.value.message
        with pytest.raises(PermissionError):
            storage.read(storage.path("x"))


@pytest.mark.parametrize("message, raised", [
    ("Generic S3 error: Error performing PUT http://h/b/k in 3ms - Server returned non-2xx status code: "
     "503 Service Unavailable: <Code>SlowDown</Code>\n\nDebug source:\nretry_timeout: 10s", OSError),
    ("Generic S3 error: Error performing list request: Server returned non-2xx status code: 403 Forbidden: "
     "<Code>InvalidAccessKeyId</Code>\n\nDebug source:\nretry_timeout: 180s", PermissionError),
    ("Generic S3 error: Error performing GET http://h/b/k - HTTP error: error sending request\n\nDebug "
     "source:\nkind: Timeout,\nsource: TimedOut", ConnectionError),
    ("Generic S3 error: Error performing PUT http://h/b/k in 103.412756ms, after 1 retries - Server returned "
     "non-2xx status code: 501 Not Implemented: <Code>NotImplemented</Code>", OSError),
    ("Generic S3 error: Error performing GET http://h/b/501/k in 3ms - Server returned non-2xx status code: "
     "500 Internal Server Error", OSError),
], ids=["503", "403", "timeout", "501-in-412ms", "500-under-501"])
def test_what_the_store_answered_is_raised_as_fsspec_would(message, raised):
    """Every failure of a request is an OSError of the kind fsspec raises: callers that take a
    storage OSError as "cannot tell now" (a lock's validity check, a best-effort delete) keep
    doing so; a 503 is not mistaken for a store that did not answer, nor a 403."""
    from obstore import exceptions as ox
    from airflow_hudi_occ.core.format.object_store import NoAnswerError, as_fsspec_error
    got = as_fsspec_error(ox.GenericError(message), "b/k")
    assert type(got) is raised or isinstance(got, raised)
    assert isinstance(got, OSError) and "b/k" in str(got)
    assert isinstance(got, NoAnswerError) == (raised is ConnectionError)
    # the status is the store's word for it, not any three digits of the text
    assert (got.errno == errno.ENOSYS) == ("status code: 501" in message)
    assert not isinstance(got, FileExistsError)
