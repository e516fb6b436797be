"""How the package is pinned: ranges in pyproject.toml (what a user's environment resolves
within), exact versions in constraints.txt (what the scripts and CI install, tested together).
A venv that drifted from constraints.txt would make a green run say nothing about them."""

from __future__ import annotations

import importlib.metadata as md
import pathlib
import re
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not an exact pin"
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def test_the_extras_give_ranges_not_exact_pins():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for extra, reqs in project["optional-dependencies"].items():
        exact = [r for r in reqs if "==" in r]
        assert not exact, f"extra {extra!r} pins {exact}: give a range; exact versions go to constraints.txt"


def test_the_venv_running_the_tests_holds_the_constrained_versions():
    pins = _constraints()
    assert {"pyspark", "apache-airflow", "hudi", "pyarrow"} <= set(pins)
    drift = {}
    for name, version in pins.items():
        try:
            installed = md.version(name)
        except md.PackageNotFoundError:
            drift[name] = (version, None)
            continue
        if installed != version:
            drift[name] = (version, installed)
    assert not drift, f"installed versions differ from constraints.txt (wanted, installed): {drift}"
