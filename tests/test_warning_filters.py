"""tests/conftest.py's WARNING_FILTERS: a deprecation whose caller is this project's code fails
the test; a third-party one is left to the default; the ignored third-party ones stay quiet."""

from __future__ import annotations

import warnings

import pytest


@pytest.mark.parametrize("module", ["airflow_hudi_occ.core.commit.writer", "tests.core.test_x", "dags.x"])
@pytest.mark.parametrize("category", [DeprecationWarning, PendingDeprecationWarning, FutureWarning])
def test_a_deprecation_from_our_code_is_an_error(module, category):
    with pytest.raises(category, match="use the new name"):
        warnings.warn_explicit("old name: use the new name", category, "x.py", 1, module=module)


def test_a_deprecation_from_a_library_is_not():
    with warnings.catch_warnings(record=True) as seen:
        warnings.warn_explicit("old name", DeprecationWarning, "x.py", 1, module="somelib.x")
    assert [str(w.message) for w in seen] == ["old name"]


def test_the_ignored_third_party_warning_is_quiet():
    from hypothesis.errors import HypothesisDeprecationWarning
    with warnings.catch_warnings(record=True) as seen:
        warnings.warn_explicit("Do not use the `random` module inside strategies; instead consider ...",
                               HypothesisDeprecationWarning, "contextlib.py", 144, module="contextlib")
    assert seen == []
