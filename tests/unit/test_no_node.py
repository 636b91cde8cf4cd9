"""The unit tier needs neither Node nor a CDK synth (tests/unit/conftest.py): its modules import
without aws-cdk-lib, and the stubs every unit test runs under do stop a synth.

A synth, in this process or a child, runs Node: jsii starts ``$JSII_NODE`` (default ``node``) the
first time ``aws_cdk`` is imported, and ``cdk``/``npx`` are Node programs. Each unit test runs
with those names pointing at stubs that fail (the conftest's ``_without_node``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

UNIT = Path(__file__).resolve().parent
ROOT = UNIT.parents[1]
# What a synth would bring in: the CDK, its JavaScript bridge, the stack and the app.
SYNTH_MODULES = ("aws_cdk", "jsii", "constructs", "cdk_nag", "infra", "app", "turnstile_ddb.cdk")


def _python(script: str) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter on the source tree, with this test's environment (the stubs)."""
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "functions"), str(ROOT)]),
    }
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=environment, capture_output=True, text=True
    )


def test_every_unit_test_module_imports_without_the_cdk_or_node() -> None:
    # Given every test module of the unit tier, and its conftest
    names = ["tests.unit.conftest"] + [
        f"tests.unit.{path.stem}" for path in sorted(UNIT.glob("test_*.py"))
    ]
    assert len(names) > 30
    # When a fresh interpreter, with node/npx/cdk stubbed out, imports them all
    script = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {SYNTH_MODULES!r} "
        f"or m in {SYNTH_MODULES!r}))\n"
    )
    result = _python(script)
    # Then they imported, and none of the CDK, jsii or the stack came with them
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", result.stdout


def test_the_stubs_stop_a_synth_in_this_tier() -> None:
    # Given this test's environment: every unit test runs with node, npx and cdk stubbed
    stubs = Path(os.environ["JSII_NODE"]).parent
    assert os.environ["PATH"].split(os.pathsep)[0] == str(stubs)
    # When a fresh interpreter in it imports aws-cdk-lib (the first step of any synth)
    result = _python("import aws_cdk")
    # Then it fails, because jsii could not start Node
    assert result.returncode != 0
    assert "the unit tier ran node" in result.stderr
    # And a Node program started through PATH fails the same way
    npx = subprocess.run(["npx", "cdk", "--version"], capture_output=True, text=True)
    assert npx.returncode == 97 and "the unit tier ran npx" in npx.stderr
