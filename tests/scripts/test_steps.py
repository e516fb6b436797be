"""scripts/steps.sh: a set-up step prints one line; its output goes to the log, whose end is
shown (with the step's name and the log's path) only when the step fails. Light: bash only."""

from __future__ import annotations

import pathlib
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[2]
STEPS = REPO / "scripts" / "steps.sh"


def run(tmp_path, body: str, **env) -> tuple[subprocess.CompletedProcess, pathlib.Path]:
    log = tmp_path / "setup.log"
    script = (f"set -euo pipefail\nSTEP_PREFIX=probe\nsource {STEPS}\n"
              "noisy() { for i in $(seq 1 200); do echo \"noise $i\"; done; }\n" + body)
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                       env={"PATH": "/usr/bin:/bin", "HUDI_OCC_SETUP_LOG": str(log), **env})
    return p, log


def test_a_step_prints_one_line_and_logs_its_output(tmp_path):
    p, log = run(tmp_path, 'step "a noisy step" noisy\necho after\n')
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 2 and lines[1] == "after", lines
    assert lines[0].startswith("probe: a noisy step  ") and lines[0].endswith(" s"), lines[0]
    assert p.stderr == ""
    text = log.read_text()
    assert "=== probe: a noisy step" in text and "noise 1\n" in text and "noise 200\n" in text


def test_a_failed_step_shows_the_end_of_its_output_and_stops_the_script(tmp_path):
    body = ('step "first" noisy\n'
            'broken() { echo "the step begins"; noisy; echo "E: Unable to locate package nope"; false; echo "not run"; }\n'
            'step "install nope" broken\n'
            'echo "script went on"\n')
    p, log = run(tmp_path, body)
    assert p.returncode == 1
    assert "script went on" not in p.stdout                     # the script stopped (set -e)
    assert p.stdout.splitlines()[0].startswith("probe: first  ")
    err = p.stderr.splitlines()
    assert err[0].startswith("probe: install nope FAILED (exit 1, after ")
    assert err[-1] == f"probe: install nope failed; its whole output is in {log}"
    shown = err[1:-1]
    assert len(shown) == 30 and all(s.startswith("  | ") for s in shown)
    assert shown[-1] == "  | E: Unable to locate package nope"
    assert "  | noise 200" in shown and "  | the step begins" not in shown  # only the end
    text = log.read_text()
    assert "the step begins" in text and "not run" not in text  # the step stopped at `false`


def test_the_tail_shows_only_the_failed_steps_output(tmp_path):
    body = 'step "first" noisy\nstep "second" false\n'
    p, _ = run(tmp_path, body, HUDI_OCC_SETUP_TAIL="50")
    assert p.returncode == 1
    assert "noise" not in p.stderr  # the first step's lines belong to the first step
    assert "=== probe: second" in p.stderr


def test_the_size_of_what_a_step_downloaded(tmp_path):
    body = ('pip_like() { echo "  Downloading pyspark-4.2.0.tar.gz (434.1 MB)"; echo "  Downloading a.whl (600 kB)"; }\n'
            'apt_like() { echo "Need to get 1,234 kB of archives."; }\n'
            f'fetch() {{ head -c 2500000 /dev/zero > {tmp_path}/x.jar; }}\n'
            'step "pip" pip_like\nstep "apt" apt_like\n'
            f'step --size-of {tmp_path}/x.jar "mvn" fetch\n'
            'step "nothing" true\nup_to_date "the rest" "detail"\n')
    p, _ = run(tmp_path, body)
    assert p.returncode == 0, p.stderr
    pip, apt, mvn, nothing, rest = p.stdout.splitlines()
    assert pip.startswith("probe: pip  434 MB  ")
    assert apt.startswith("probe: apt  1.2 MB  ")
    assert mvn.startswith("probe: mvn  2.5 MB  ")
    assert nothing.startswith("probe: nothing  ") and "MB" not in nothing
    assert rest == "probe: the rest up to date (detail)"
