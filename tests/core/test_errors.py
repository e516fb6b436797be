"""errors.from_dict: another process's error document decodes to its own class and fields."""

from __future__ import annotations

import json

import pytest

from airflow_hudi_occ.core import errors
from airflow_hudi_occ.core.concurrency.abort_signal import error_for

SAMPLES = [
    errors.WriteConflictError(instant="20250101000000001", other_instant="20250101000000000",
                              file_groups=[("p=1", "f1"), ("", "f2")], other_action="commit",
                              strategy="simple"),
    errors.EarlyConflictError(instant="20250101000000002", other_instant="20250101000000001",
                              file_groups=["p=1/f1"]),
    errors.PendingClusteringConflictError(instant="20250101000000003", other_instant="20250101000000001",
                                          file_groups=["p=2/f9"], other_action="replacecommit"),
    errors.LockAcquireTimeoutError("lock not acquired in 60 s", lock="/hudi/t", owner="host:1"),
    errors.BatchAlreadyCommittedError(instant="20250101000000004", committed_instant="20250101000000003",
                                      batch_key="dag/run/task"),
    errors.ConfigError("bad value", key="hoodie.write.lock.provider", value="zk"),
    errors.CleanedInstantError("cannot read", as_of="20250101000000000", clean_instant="20250101000000009"),
]


@pytest.mark.parametrize("err", SAMPLES, ids=lambda e: type(e).__name__)
def test_round_trip_keeps_class_message_remedy_and_fields(err):
    doc = json.loads(json.dumps(err.to_dict()))
    back = errors.from_dict(doc)
    assert type(back) is type(err)
    assert back.message == err.message and back.remedy == err.remedy
    assert str(back) == str(err)
    assert back.to_dict() == err.to_dict()
    assert isinstance(back, errors.RetryableError) == isinstance(err, errors.RetryableError)


@pytest.mark.parametrize("doc", [{}, {"error": "ValueError", "message": "x"}, {"error": None},
                                 {"message": "no name"}, "not a dict", None])
def test_documents_naming_no_error_of_the_hierarchy_decode_to_none(doc):
    assert errors.from_dict(doc) is None


def test_a_signalled_conflict_of_any_conflict_class_becomes_an_early_conflict():
    for err in SAMPLES[:3]:
        got = error_for("20250101000000005", {"reason": json.dumps(err.to_dict())})
        assert type(got) is errors.EarlyConflictError
        assert got.other_instant == err.other_instant
        assert got.file_groups == err.file_groups


def test_a_signalled_non_conflict_error_is_an_abort_naming_it():
    got = error_for("20250101000000005", {"reason": json.dumps(SAMPLES[3].to_dict())})
    assert type(got) is errors.WriteAbortedError and got.reason == "LockAcquireTimeoutError"
