"""How a job receives what must not be on its command line: secret options and storage options.

Why not argv: every user of the machine can read every process's command line (``ps``,
``/proc/*/cmdline``), and spark-submit forwards it to the driver's command line too. A
ZooKeeper digest credential or an object-store key given as ``--option k=v`` is visible to all.
The environment and a file are not: ``/proc/<pid>/environ`` is readable by the process's
owner only, and the file is created ``0600`` in a private folder.

The channel (the runner writes, the job reads, both through this module):

- ``HUDI_OCC_JOB_SECRETS_FILE``: the path of a JSON file ``{"options": {hoodie key: value},
  "storage_options": {...}}``, mode 0600. The job deletes it as soon as it has read it; the
  runner deletes it again when the job ends (whichever comes first), so it lives for seconds.
- ``HUDI_OCC_JOB_SECRETS``: the same JSON inline, for drivers that run on the cluster
  (``--deploy-mode cluster``), where no local file reaches: set it from the cluster's own
  secret store (``spark.kubernetes.driver.secretKeyRef.HUDI_OCC_JOB_SECRETS=<secret>:<key>``
  on Kubernetes, ``spark.yarn.appMasterEnv.HUDI_OCC_JOB_SECRETS`` from a protected properties
  file on YARN).

The table's storage options (endpoint, credentials, region) always travel this way, whole:
which of their keys is a credential depends on the backend.

The ``hudi-occ`` command line reads the same format from a file a person keeps
(``--secrets-file PATH`` or ``HUDI_OCC_SECRETS_FILE``, :func:`read_secrets_file`), which is
never deleted.

Errors: a file that is named but unreadable or not a JSON object raises
:class:`~airflow_hudi_occ.core.errors.ConfigError` naming the variable; never the content.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from airflow_hudi_occ.core.errors import ConfigError

SECRETS_FILE_ENV = "HUDI_OCC_JOB_SECRETS_FILE"
SECRETS_ENV = "HUDI_OCC_JOB_SECRETS"

#: ``hoodie.*`` keys that hold a credential (Hudi's own names) ...
SECRET_OPTION_KEYS = frozenset({
    "hoodie.write.lock.zookeeper.auth",
    "hoodie.aws.access.key", "hoodie.aws.secret.key", "hoodie.aws.session.token",
})
#: ... and any key whose name says so. Deliberately narrower than "contains key": a lock key or
#: a record key field is a name, and masking names would blank table names out of every log.
_SECRET_WORDS = re.compile(r"password|passwd|secret|token|credential|connection_string", re.IGNORECASE)
_SECRET_NAMES = frozenset({"auth", "key", "account_key", "access_key", "access_key_id",
                           "aws_access_key_id", "private_key", "sas"})


def is_secret_key(key: str) -> bool:
    key = str(key)
    return (key in SECRET_OPTION_KEYS or bool(_SECRET_WORDS.search(key))
            or key.rsplit(".", 1)[-1].lower() in _SECRET_NAMES)


def split_secret_options(options: Mapping[str, Any]) -> tuple[dict, dict]:
    """``(public, secret)``: the options that may go on a command line, and the rest."""
    public, secret = {}, {}
    for k, v in options.items():
        (secret if is_secret_key(str(k)) else public)[k] = v
    return public, secret


def secret_values(options: Mapping[str, Any] | None = None,
                  storage_options: Mapping[str, Any] | None = None) -> list[str]:
    """The strings a log masker must hide: values of secret keys (nested ones included) and,
    for ``user:password`` credentials, the password alone as well."""
    out: list[str] = []

    def walk(d: Mapping[str, Any]) -> Iterator[str]:
        for k, v in d.items():
            if isinstance(v, Mapping):
                yield from walk(v)
            elif v not in (None, "") and is_secret_key(str(k)):
                yield str(v)
                user, sep, password = str(v).partition(":")
                if sep and password and k == "hoodie.write.lock.zookeeper.auth":
                    yield password

    for d in (options or {}, storage_options or {}):
        out.extend(walk(d))
    return sorted(set(out))


@dataclass(frozen=True)
class JobSecrets:
    """What the runner handed over off the command line."""

    options: dict = field(default_factory=dict)
    storage_options: dict = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.options or self.storage_options)

    def to_json(self) -> str:
        return json.dumps({"options": self.options, "storage_options": self.storage_options},
                          sort_keys=True)


def write_secrets_file(secrets: JobSecrets, directory: str | None = None) -> str:
    """A new 0600 file holding ``secrets``; the caller deletes it (:func:`remove_quietly`)."""
    fd, path = tempfile.mkstemp(prefix="hudi-occ-job-", suffix=".json", dir=directory)
    try:
        os.fchmod(fd, 0o600)  # mkstemp does this already; stated because it is the point
        with os.fdopen(fd, "w") as f:
            f.write(secrets.to_json())
    except BaseException:
        remove_quietly(path)
        raise
    return path


def remove_quietly(path: str | None) -> None:
    if path:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def read_job_secrets(environ: Mapping[str, str] | None = None, *, remove: bool = True) -> JobSecrets:
    """The secrets handed to this job (none: an empty :class:`JobSecrets`); the file is
    deleted once read unless ``remove`` is false."""
    env = os.environ if environ is None else environ
    path = env.get(SECRETS_FILE_ENV)
    if path:
        return read_secrets_file(path, where=SECRETS_FILE_ENV, remove=remove,
                                 remedy="the runner deletes the file when the job ends: start the "
                                        "job through the hook, or unset the variable")
    if env.get(SECRETS_ENV):
        return _decode(env[SECRETS_ENV], SECRETS_ENV)
    return JobSecrets()


def read_secrets_file(path: str, *, where: str, remove: bool = False,
                      remedy: str | None = None) -> JobSecrets:
    """The secrets in the JSON file at ``path`` (the format above); ``where`` names the flag or
    variable that named it, for errors, which never quote the content."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise ConfigError(f"{where} names {path!r}, which cannot be read ({e.strerror})", key=where,
                          remedy=remedy or "check the path and that this user may read it") from None
    finally:
        if remove:
            remove_quietly(path)
    return _decode(text, where, path)


def _decode(text: str, where: str, path: str | None = None) -> JobSecrets:
    try:
        d = json.loads(text)
    except ValueError as e:
        # where it broke (json's message holds the position, never the text), not the content
        named = f"{where} names {path!r}, which" if path else where
        raise ConfigError(f"{named} is not valid JSON ({e})", key=where,
                          remedy='write it as JSON, {"options": {...}, "storage_options": {...}}, '
                                 "with double quotes around keys and strings (not a Python dict "
                                 "with single quotes)") from None
    if not isinstance(d, dict) or not all(isinstance(d.get(k, {}), dict)
                                          for k in ("options", "storage_options")):
        raise ConfigError(f"{where} does not hold a JSON object with 'options' and "
                          "'storage_options' objects", key=where,
                          remedy='write it as {"options": {...}, "storage_options": {...}}')
    return JobSecrets({str(k): str(v) for k, v in (d.get("options") or {}).items()},
                      dict(d.get("storage_options") or {}))
