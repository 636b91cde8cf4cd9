"""Make targets a user is told about, run as a user runs them: ``make <target>`` in a subprocess.

``make test-deployed`` is the post-deploy tier's only entry point (docs/deploy.md). It cannot reach
AWS here, so it runs with ``LOCAL=1`` against a local stack started by the same ``local.run`` code
as ``make local``, which writes its outputs file in a deployed stack's shape (``infra.outputs``).
The target itself is what runs: its Make recipe, ``python -m pytest tests/deployed --outputs``.

Every ``make`` here gets ``VENV`` (this interpreter's venv) and ``-o $(VENV)/.installed``: the
test runs inside that venv, and must never make it rebuild itself underneath.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from infra import outputs
from local import preflight
from tests.scenarios import SCENARIOS

ROOT = Path(__file__).resolve().parents[2]


def make(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    venv = sys.prefix
    return subprocess.run(
        ["make", "--no-print-directory", "-o", f"{venv}/.installed", f"VENV={venv}", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


@pytest.fixture
def local_stack_outputs(
    assembly: Any, template: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Any:
    from local import run
    from service import runtime

    environment = dict(os.environ)
    monkeypatch.setattr(os, "environ", dict(os.environ))  # running() exports its endpoints
    template_path = tmp_path / "Turnstile.template.json"
    template_path.write_text(json.dumps(template))
    written = tmp_path / "outputs.json"
    try:
        with run.running(
            port=0,
            template_path=template_path,
            assembly_dir=Path(assembly.directory),
            outputs_file=written,
        ):
            yield written, environment
    finally:
        runtime.Lazy.reset_all()


def test_make_test_deployed_runs_the_post_deploy_tier_against_a_local_stack(local_stack_outputs):
    written, environment = local_stack_outputs
    # Given a local stack's outputs file, in a deployed stack's shape
    assert set(outputs.STACK_OUTPUTS) <= set(outputs.load(written))
    # When the post-deploy tier runs through its make target, pointed at that file
    done = make("test-deployed", "LOCAL=1", f"OUTPUTS={written}", env=environment)
    # Then it ran every scenario of the tier against that stack, and they passed
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "tests/deployed" in done.stdout and f"--outputs {written}" in done.stdout
    assert f" {len(SCENARIOS) + 1} passed" in done.stdout  # each scenario, and an anonymous call
    # And without LOCAL=1 the target first asks CloudFormation for the stack's outputs
    dry = make("-n", "test-deployed", "STACK=Other", env=environment)
    assert "-m infra.outputs --stack Other --out .local/stack-outputs.json" in dry.stdout


def test_make_local_on_a_busy_port_fails_before_any_set_up_and_leaves_that_stack_alone():
    with socket.socket() as held, socket.socket() as other:
        # Given a port held by a running stack (this process), whose state folder holds its files
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        other.bind(("127.0.0.1", 0))  # two more ports, free once closed below
        spare = other.getsockname()[1]
        state = preflight.state_dir(port)
        state.mkdir(parents=True)
        try:
            (state / "auth.json").write_text('{"the": "running stack\'s"}\n')
            other.close()
            # When make local is asked for that port
            done = make("local", f"PORT={port}", f"DYNAMODB_PORT={spare}", "IDENTITY_PORT=0")
            # Then it fails naming the process that holds the port, having set nothing up
            assert done.returncode != 0
            assert f"PORT={port} is in use: pid {os.getpid()}: " in done.stderr
            assert "==>" not in done.stdout + done.stderr  # no set-up step started
            # And the running stack's files are as they were
            assert (state / "auth.json").read_text() == '{"the": "running stack\'s"}\n'
        finally:
            (state / "auth.json").unlink(missing_ok=True)
            state.rmdir()
