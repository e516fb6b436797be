"""scripts/bootstrap.sh on a set-up that is complete (scripts/test.sh runs it before the tests):
a second run only checks, and says so in a few short "up to date" lines (issue 44: a fresh
clone's demo shows at most 20 lines before its own first line; a cached one, these)."""

from __future__ import annotations

import hashlib
import os
import pathlib
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[2]
EXTRAS = os.environ.get("HUDI_OCC_EXTRAS", "test,spark,airflow,bench,hive")  # scripts/bootstrap.sh's default


def _stamp_is_current() -> bool:
    """bootstrap.sh's own test for an up-to-date .venv (the hash of pyproject.toml and
    constraints.txt, and the extras), so that this test never starts an install."""
    digest = hashlib.sha256((REPO / "pyproject.toml").read_bytes() + (REPO / "constraints.txt").read_bytes())
    stamp = REPO / ".venv" / ".airflow_hudi_occ-installed"
    return stamp.exists() and stamp.read_text().strip() == f"{digest.hexdigest()[:16]}-{EXTRAS}"


def test_a_second_run_prints_only_short_up_to_date_lines(tmp_path):
    assert _stamp_is_current(), "the .venv stamp is stale: run scripts/bootstrap.sh first"
    # Installers that fail loudly: a run that would install anything fails here instead.
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for tool in ("apt-get", "mvn", "sudo"):
        (stubs / tool).write_text(f"#!/bin/sh\necho 'stub {tool}: the set-up was not complete' >&2\nexit 97\n")
        (stubs / tool).chmod(0o755)
    log = tmp_path / "bootstrap.log"
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "HUDI_OCC_SETUP_LOG": str(log),
           "HUDI_OCC_EXTRAS": EXTRAS}
    p = subprocess.run(["bash", str(REPO / "scripts" / "bootstrap.sh")], capture_output=True,
                       text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    # one per step: the system packages, ZooKeeper, the venv, the class archive, Java Hudi, the
    # Spark lines; with HUDI_OCC_SLOW=1 the same-Spark bench's too
    assert len(lines) == (7 if os.environ.get("HUDI_OCC_SLOW") == "1" else 6), lines
    assert all(" up to date" in line and len(line) <= 100 for line in lines), lines
    assert p.stderr == ""
    assert not log.exists()  # no step ran, so nothing was logged
