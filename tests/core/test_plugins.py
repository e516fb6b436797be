"""plugins.Registry: the one name-resolution rule behind lock providers and both strategy kinds."""

from __future__ import annotations

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
