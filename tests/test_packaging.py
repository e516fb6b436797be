"""How the package is pinned: ranges in pyproject.toml (what a user's environment resolves
within), exact versions in constraints.txt (what the scripts and CI install, tested together).
A venv that drifted from constraints.txt would make a green run say nothing about them."""

from __future__ import annotations

import importlib.metadata as md
import pathlib
import re
import tomllib

import pytest

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


def _declared_pythons() -> list[str]:
    """Every minor version ``requires-python`` admits, among those Airflow 3.3 supports."""
    from packaging.specifiers import SpecifierSet
    spec = SpecifierSet(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"])
    return [v for v in ("3.10", "3.11", "3.12", "3.13", "3.14") if spec.contains(v + ".0")]


def test_requires_python_matches_the_classifiers():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    classified = sorted(c.rsplit(" :: ", 1)[1] for c in project["classifiers"]
                        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c))
    assert classified == _declared_pythons()


#: Pins published only as source distributions (pure Python): ``pip --python-version`` cannot
#: check those by installing, so their index entry's Requires-Python is checked instead.
SDIST_ONLY = ("pyspark", "pyspark-client")


@pytest.mark.slow
@pytest.mark.parametrize("python", [v for v in _declared_pythons() if v != "3.11"])
def test_the_pinned_dependency_set_installs_on_each_declared_python(python, tmp_path):
    """No second interpreter can be installed on these machines (python.org and GitHub are out
    of reach; Debian ships 3.11 only), so each Python that ``requires-python`` declares beyond the
    one the tests run on is checked by resolution: every exact pin of constraints.txt has a
    wheel pip would install on that Python, and the source-only ones declare a Requires-Python
    that admits it. Needs PyPI (about 45 s per version with an empty pip cache)."""
    import json
    import ssl
    import subprocess
    import sys
    import urllib.request

    from packaging.specifiers import SpecifierSet

    pins = _constraints()
    reqs = tmp_path / "pins.txt"
    reqs.write_text("".join(f"{n}=={v}\n" for n, v in pins.items() if n not in SDIST_ONLY))
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps",
                          "--ignore-installed", "--python-version", python, "--only-binary=:all:",
                          "-r", str(reqs)], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, f"Python {python}: a pin has no installable wheel:\n{out.stderr[-3000:]}"
    assert "Would install" in out.stdout
    ctx = ssl.create_default_context(cafile="/etc/ssl/certs/ca-certificates.crt")
    for name in SDIST_ONLY:
        req = urllib.request.Request(f"https://pypi.org/simple/{name}/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        with urllib.request.urlopen(req, timeout=60, context=ctx) as resp:
            files = json.load(resp)["files"]
        wanted = f"{name.replace('-', '_')}-{pins[name]}.tar.gz"
        entry = [f for f in files if f["filename"].replace("-", "_").lower() == wanted.replace("-", "_").lower()]
        assert entry, f"{wanted} not on the index"
        assert SpecifierSet(entry[0].get("requires-python") or "").contains(python + ".0"), \
            f"{wanted} requires Python {entry[0].get('requires-python')}, not {python}"


def test_each_spark_line_pins_a_pyspark_its_extras_admit():
    """constraints/spark-<line>.txt (scripts/install-spark-lines.sh) pins the tested PySpark of
    each line the engine supports: within the ``spark`` extra's range and its own
    ``spark<line>`` extra's; 4.2's is constraints.txt's own."""
    from packaging.requirements import Requirement
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]

    def pyspark_range(extra):
        return next(Requirement(r).specifier for r in extras[extra] if Requirement(r).name == "pyspark")
    lines = sorted(p.stem.removeprefix("spark-") for p in (ROOT / "constraints").glob("spark-*.txt"))
    assert lines == ["3.5", "4.0", "4.1", "4.2"]
    for line in lines:
        pins = [x.split("==")[1].strip() for x in (ROOT / "constraints" / f"spark-{line}.txt").read_text().splitlines()
                if x.startswith("pyspark==")]
        assert len(pins) == 1 and pins[0].startswith(line + "."), (line, pins)
        assert pyspark_range("spark").contains(pins[0]) and pyspark_range("spark" + line.replace(".", "")).contains(pins[0])
    assert (ROOT / "constraints" / "spark-4.2.txt").read_text().count(f"pyspark=={_constraints()['pyspark']}") == 1
