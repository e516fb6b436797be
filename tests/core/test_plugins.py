"""plugins.Registry: the one name-resolution rule behind lock providers and both strategy kinds."""

from __future__ import annotations

import subprocess
import sys

import pytest

from airflow_hudi_occ.core.plugins import Registry


class Base:
    pass


class Builtin(Base):
    pass


class Mine(Base):
    pass


class NotASubclass:
    pass


class PluginError(Exception):
    def __init__(self, value, why):
        super().__init__(f"{value!r}: {why}")
        self.value, self.why = value, why


def registry(**kw):
    reg = Registry(Base, PluginError, **kw)
    reg.add(Builtin, "builtin", "org.apache.hudi.BuiltinJava", None, "")
    reg.add(f"{__name__}:Mine", "lazy-one")
    return reg


def test_names_and_aliases_resolve_after_normalisation():
    reg = registry(normalize=lambda s: s.lower().replace("-", "").replace("_", ""))
    assert reg.resolve("builtin") is Builtin
    assert reg.resolve("  BUILT_IN ") is Builtin
    assert reg.resolve("org.apache.hudi.builtinjava") is Builtin
    assert reg.resolve("lazy_one") is Mine  # registered as a path, imported when chosen
    assert reg.lookup("lazy-one") == f"{__name__}:Mine" and reg.lookup("nothing") is None


@pytest.mark.parametrize("path", [f"{__name__}:Mine", f"{__name__}.Mine"])
def test_a_users_subclass_is_imported_by_dotted_path(path):
    assert registry().resolve(path) is Mine


@pytest.mark.parametrize("value, why", [
    (f"{__name__}:NotASubclass", "not a Base subclass"),
    ("no_such_module_xyz:Thing", "cannot import module"),
    (f"{__name__}:Missing", "has no"),
    ("plainword", "not a known name"),
])
def test_unknown_values_raise_the_points_own_error_with_the_reason(value, why):
    with pytest.raises(PluginError) as e:
        registry().resolve(value)
    assert e.value.value == value and why in e.value.why


def test_reserved_namespace_is_refused_without_an_import_and_empty_has_its_reason():
    reg = registry(reserved_prefix="org.apache.hudi.", reserved_reason="no Python implementation",
                   empty_reason="empty")
    before = set(sys.modules)
    with pytest.raises(PluginError, match="no Python implementation"):
        reg.resolve("org.apache.hudi.Other")
    assert set(sys.modules) == before
    with pytest.raises(PluginError, match="empty"):
        reg.resolve("  ")


def test_load_reports_a_failed_import_as_the_given_name():
    with pytest.raises(PluginError) as e:
        registry().load("no_such_module_xyz:Thing", "ThingProvider")
    assert e.value.value == "ThingProvider" and "cannot import module" in e.value.why
    assert registry().load(Builtin, "x") is Builtin


# --- the three plug-in points keep the name rules they had before the Registry -------------------

def test_kazoo_is_imported_only_when_the_zookeeper_provider_is_chosen():
    code = ("import sys\n"
            "from airflow_hudi_occ.core.concurrency import locks\n"
            "locks.resolve_provider_class('filesystem'); locks.resolve_provider_class('inprocess')\n"
            "assert 'kazoo' not in sys.modules, 'kazoo imported early'\n"
            "locks.resolve_provider_class('zookeeper')\n"
            "assert 'kazoo' in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_lock_provider_names_ignore_case_and_separators_java_names_only_case():
    from airflow_hudi_occ.core.concurrency.locks import resolve_provider_class
    from airflow_hudi_occ.core.concurrency.locks.inprocess import InProcessLockProvider
    from airflow_hudi_occ.core.errors import UnknownLockProviderError

    java = "org.apache.hudi.client.transaction.lock.InProcessLockProvider"
    for name in ("inprocess", " In_Process ", "in-process", java, java.upper().replace("ORG.", "org.")):
        assert resolve_provider_class(name) is InProcessLockProvider, name
    with pytest.raises(UnknownLockProviderError, match="no Python implementation") as e:
        resolve_provider_class(java.replace("InProcess", "In_Process"))
    assert e.value.value == java.replace("InProcess", "In_Process")
    with pytest.raises(UnknownLockProviderError, match="empty"):
        resolve_provider_class("  ")


def test_conflict_strategy_names_ignore_case_and_errors_name_the_stripped_value():
    from airflow_hudi_occ.core.concurrency.conflict import (PreferWriterConflictResolutionStrategy,
                                                            strategy_class)
    from airflow_hudi_occ.core.errors import UnknownStrategyError

    for name in ("prefer-writer", "PREFER_WRITER", " PreferWriterConflictResolutionStrategy ",
                 PreferWriterConflictResolutionStrategy.hudi_class):
        assert strategy_class(name) is PreferWriterConflictResolutionStrategy, name
    with pytest.raises(UnknownStrategyError) as e:
        strategy_class(" preferwriter ")  # "-" is not ignored here, as before
    assert e.value.value == "preferwriter"
    assert str(e.value).startswith("unknown conflict resolution strategy 'preferwriter' (")


def test_early_detection_names_ignore_case_and_hudis_namespace_is_reserved():
    from airflow_hudi_occ.core.concurrency.early_conflict.strategies import SimpleDirectMarkerBasedDetectionStrategy
    from airflow_hudi_occ.core.concurrency.early_conflict.detector import get_detection_strategy
    from airflow_hudi_occ.core.errors import UnknownStrategyError

    for name in ("SIMPLE", " simple ", SimpleDirectMarkerBasedDetectionStrategy.hudi_class.lower(),
                 "SimpleDirectMarkerBasedEarlyConflictDetectionStrategy"):
        assert get_detection_strategy(name) is SimpleDirectMarkerBasedDetectionStrategy, name
    with pytest.raises(UnknownStrategyError, match="not a known strategy"):
        get_detection_strategy("org.apache.hudi.table.marker.NoSuchStrategy")
