"""``make wheel`` needs nothing but a build backend: not the development venv, Node or Java.

The target is run as a user runs it, with ``VENV`` naming a folder that does not exist: were any
set-up step a prerequisite, it would create that venv (a dry run prints it) or install
node_modules and Java.
"""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import turnstile_ddb
from tests.helpers import REPO


def make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_make_wheel_plans_no_set_up_step(tmp_path: Path) -> None:
    # Given a venv path where nothing is installed
    absent = tmp_path / "no-venv"
    # When make is asked what it would run for the wheel
    planned = make("-n", "wheel", f"VENV={absent}", f"DIST={tmp_path / 'dist'}")
    # Then it plans the wheel's build alone: no venv of the project, no lock, no npm, no Java
    assert planned.returncode == 0, planned.stderr
    for step in (str(absent), "requirements", "npm", "java", "node_modules"):
        assert step not in planned.stdout, (step, planned.stdout)


def test_make_wheel_builds_the_wheel_without_the_development_venv(tmp_path: Path) -> None:
    # Given a venv path where nothing is installed, and an empty output folder
    absent, dist = tmp_path / "no-venv", tmp_path / "dist"
    # When the wheel is built
    done = make("wheel", f"VENV={absent}", f"DIST={dist}")
    # Then it is there, holding the package, and no venv was made on the way
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = dist.glob("turnstile_ddb-*.whl")
    assert wheel.name == f"turnstile_ddb-{turnstile_ddb.__version__}-py3-none-any.whl"
    assert "turnstile_ddb/py.typed" in zipfile.ZipFile(wheel).namelist()
    assert not absent.exists()
