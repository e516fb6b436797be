import json
import os
import stat

import pytest

from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.job_secrets import (SECRETS_ENV, SECRETS_FILE_ENV, JobSecrets,
                                               is_secret_key, read_job_secrets, read_secrets_file,
                                               secret_values,
                                               split_secret_options, write_secrets_file)


@pytest.mark.parametrize("key", ["hoodie.write.lock.zookeeper.auth", "hoodie.aws.secret.key", "key",
                                 "secret", "token", "aws_secret_access_key", "account_key",
                                 "client_secret", "sas_token", "password"])
def test_credentials_are_secret(key):
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["hoodie.write.lock.zookeeper.lock_key", "hoodie.write.lock.zookeeper.url",
                                 "hoodie.datasource.write.recordkey.field", "endpoint_url", "region_name",
                                 "client_kwargs", "hoodie.write.lock.zookeeper.base_path"])
def test_names_and_addresses_are_not(key):
    assert not is_secret_key(key)


def test_split_and_the_values_a_masker_needs():
    public, secret = split_secret_options({"hoodie.write.lock.zookeeper.auth": "u:pw",
                                           "hoodie.write.lock.zookeeper.url": "zk:2181"})
    assert public == {"hoodie.write.lock.zookeeper.url": "zk:2181"}
    assert secret == {"hoodie.write.lock.zookeeper.auth": "u:pw"}
    assert secret_values(secret, {"key": "AK", "client_kwargs": {"aws_session_token": "T",
                                                                  "endpoint_url": "http://x"}}) == \
        ["AK", "T", "pw", "u:pw"]


def test_the_file_is_private_read_once_and_deleted(tmp_path):
    s = JobSecrets({"hoodie.write.lock.zookeeper.auth": "u:pw"}, {"key": "AK", "endpoint_url": "http://e"})
    path = write_secrets_file(s, str(tmp_path))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert read_job_secrets({SECRETS_FILE_ENV: path}) == s
    assert not os.path.exists(path)
    with pytest.raises(ConfigError) as e:  # named, but gone: the fix, not the content
        read_job_secrets({SECRETS_FILE_ENV: path})
    assert e.value.key == SECRETS_FILE_ENV


def test_inline_for_drivers_on_the_cluster_and_none():
    assert read_job_secrets({SECRETS_ENV: json.dumps({"options": {"a": 1}})}) == JobSecrets({"a": "1"}, {})
    assert not read_job_secrets({})
    with pytest.raises(ConfigError):
        read_job_secrets({SECRETS_ENV: "[1]"})


def test_a_file_that_is_not_json_says_where_it_broke_not_what_it_holds(tmp_path):
    """Issue 40: the error named no position, so a missing brace or a Python dict with single
    quotes took a hunt; the content (credentials) is still never quoted."""
    path = tmp_path / "s.json"
    path.write_text('{"storage_options": {"secret": "s3cr3t"}')
    with pytest.raises(ConfigError) as exc:
        read_secrets_file(str(path), where="--secrets-file")
    assert exc.value.message == (f"--secrets-file names {str(path)!r}, which is not valid JSON "
                                 "(Expecting ',' delimiter: line 1 column 41 (char 40))")
    assert "double quotes" in exc.value.remedy and "s3cr3t" not in str(exc.value)
