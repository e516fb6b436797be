"""scripts/install-spark-lines.sh in a copy of the scripts with a stand-in Python (no download):
a line's venv is built once, a second run only checks, and it is rebuilt when the pin of a
package installed in it changes, not when constraints.txt gains a pin for something else (a
new extra's dependency must not rebuild every line)."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[2]

#: the stand-in for python3.11: ``-m venv DIR`` makes DIR/bin/python, a stand-in for the
#: venv's interpreter whose ``-m pip install ... pkg==v ...`` leaves pkg-v.dist-info folders
#: (the pins of the constraints file for the unpinned names, as pip would choose)
FAKE_PY = r"""#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  mkdir -p "$3/bin" "$3/lib/python3.11/site-packages"
  cp "$0" "$3/bin/python"
  exit 0
fi
site=$(dirname "$0")/../lib/python3.11/site-packages
[ "$2" = "pip" ] && [ "$3" = "install" ] || exit 3
shift 3
cons=""
for a in "$@"; do
  case "$a" in
    --upgrade|--progress-bar|off|pip) ;;
    -c) next=c ;;
    *) if [ "${next:-}" = c ]; then cons=$a; next=""; continue; fi
       name=${a%%==*}; name=${name%%<*}
       version=$(sed -n "s/^$name==//p" "$cons")
       [ -n "$version" ] || version=${a#*==}
       mkdir -p "$site/$name-$version.dist-info"; echo "installed $name $version" ;;
  esac
done
"""


def _checkout(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    (root / "constraints").mkdir()
    for f in ("scripts/install-spark-lines.sh", "scripts/steps.sh", "constraints.txt", "constraints/spark-3.5.txt"):
        shutil.copy(REPO / f, root / f)
    fake = tmp_path / "python3.11"
    fake.write_text(FAKE_PY)
    fake.chmod(0o755)
    return root


def _run(root: pathlib.Path, tmp_path: pathlib.Path) -> list[str]:
    env = {**os.environ, "PYTHON": str(tmp_path / "python3.11"), "HUDI_OCC_SETUP_LOG": str(tmp_path / "setup.log"),
           "HUDI_OCC_SPARK_LINES_DIR": str(tmp_path / "lines")}
    p = subprocess.run(["bash", str(root / "scripts" / "install-spark-lines.sh"), "3.5"], capture_output=True,
                       text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr + (tmp_path / "setup.log").read_text()
    return p.stdout.splitlines()


def test_a_line_is_rebuilt_only_when_a_pin_of_its_own_packages_changes(tmp_path):
    root = _checkout(tmp_path)
    site = tmp_path / "lines" / "3.5" / "venv" / "lib" / "python3.11" / "site-packages"
    built = _run(root, tmp_path)
    assert len(built) == 1 and "Spark 3.5: pyspark 3.5.5 venv" in built[0], built
    assert (site / "pyspark-3.5.5.dist-info").is_dir() and any(site.glob("pandas-*.dist-info"))

    assert _run(root, tmp_path) == ["install-spark-lines: Spark lines up to date (3.5: pyspark 3.5.5)"]

    cons = root / "constraints.txt"
    cons.write_text(cons.read_text() + "some-new-extras-dependency==1.0\n")
    assert "up to date" in _run(root, tmp_path)[0]  # nothing of the line's changed

    pandas = next(line for line in cons.read_text().splitlines() if line.startswith("pandas=="))
    cons.write_text(cons.read_text().replace(pandas + "\n", "pandas==2.0.0\n"))
    rebuilt = _run(root, tmp_path)
    assert "Spark 3.5: pyspark 3.5.5 venv" in rebuilt[0], rebuilt
    assert (site / "pandas-2.0.0.dist-info").is_dir()
