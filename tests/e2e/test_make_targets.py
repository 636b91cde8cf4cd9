"""Make targets a user is told about, run as a user runs them: ``make <target>`` in a subprocess.

``make test-deployed`` is the post-deploy tier's only entry point (docs/deploy.md). It cannot reach
AWS here, so it runs with ``LOCAL=1`` against a local stack started by the same ``local.run`` code
as ``make local``, which writes its outputs file in a deployed stack's shape (``infra.outputs``).
The target itself is what runs: its Make recipe, ``python -m pytest tests/deployed --outputs``.
``make token`` runs against that same stack, and against a port where nothing runs. ``make
first-hour`` runs in its short form (warm, the library path).

Every ``make`` here is ``tests.helpers.make``: it never rebuilds the venv the tests run in.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra import outputs
from local import preflight
from local.identity import auth_file
from tests.helpers import make
from tests.scenarios import SCENARIOS


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def local_stack(
    assembly: Any, template: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[int, dict[str, str], Any]]:
    """A stack started as ``make local`` starts it, on a port of its own, its files where ``make
    local`` writes them (``.local/<PORT>/``); with the environment to run ``make`` in (running()
    exports its endpoints into ``os.environ``: restored afterwards)."""
    from local import run
    from service import runtime

    saved = dict(os.environ)
    template_path = tmp_path_factory.mktemp("make-local") / "Turnstile.template.json"
    template_path.write_text(json.dumps(template))
    port = free_port()
    try:
        with run.running(
            port=port,
            template_path=template_path,
            assembly_dir=Path(assembly.directory),
            auth_file=auth_file(port),
            outputs_file=run.outputs_file(port),
        ) as stack:
            yield port, saved, stack.auth.verifier()
    finally:
        os.environ.clear()
        os.environ.update(saved)
        runtime.Lazy.reset_all()


def test_make_test_deployed_runs_the_post_deploy_tier_against_a_local_stack(local_stack):
    port, environment, _ = local_stack
    # Given a running local stack, whose outputs file has a deployed stack's keys
    written = preflight.state_dir(port) / "outputs.json"
    assert set(outputs.STACK_OUTPUTS) <= set(outputs.load(written))
    # When the post-deploy tier runs through its make target with LOCAL=1 and that stack's PORT
    done = make("test-deployed", "LOCAL=1", f"PORT={port}", env=environment)
    # Then it read that stack's outputs file, ran every test of the tier against it, and they passed
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert f"tests/deployed -p no:cacheprovider --outputs .local/{port}/outputs.json" in done.stdout
    assert f" {len(SCENARIOS) + 1} passed" in done.stdout  # each scenario, and an anonymous call
    # And without LOCAL=1 the target first asks CloudFormation for the stack's outputs
    dry = make("-n", "test-deployed", "STACK=Other", env=environment)
    assert "-m infra.outputs --stack Other --out .local/stack-outputs.json" in dry.stdout


def test_make_token_prints_the_token_alone_and_says_whose_it_is(local_stack):
    port, environment, verifier = local_stack
    # When a script captures make -s token's output, as docs/identity.md does
    done = make("-s", "token", f"PORT={port}", "USER=make-root", "ADMIN=1", env=environment)
    assert done.returncode == 0, done.stderr
    # Then stdout is the token alone, and stderr names the user, their id and groups
    token = done.stdout.strip()
    assert done.stdout == token + "\n"
    claims = verifier.verify_claims(token)  # a token of that stack's pool
    assert claims["cognito:username"] == "make-root"
    assert done.stderr.strip() == f"user make-root  sub (user id) {claims['sub']}  groups admins"


def test_make_token_with_no_stack_running_says_to_start_make_local():
    port = free_port()
    done = make("-s", "token", f"PORT={port}", "USER=nobody")
    assert done.returncode != 0 and done.stdout == ""
    assert f"no make local is running on port {port}" in done.stderr
    assert f"start it with `make local` PORT={port}" in done.stderr


def test_make_test_deployed_local_with_no_stack_running_says_to_start_make_local():
    # Given a port where no make local runs (so no .local/<PORT>/outputs.json)
    port = free_port()
    # When the post-deploy tier is asked to run against it
    done = make("-s", "test-deployed", "LOCAL=1", f"PORT={port}")
    # Then it fails with one line saying what to start (then make's own), no test nor traceback
    assert done.returncode != 0
    assert done.stdout == ""
    # (make's own "*** ... Error 2" line, "make[1]: ***" when run from make test)
    said = [
        line for line in done.stderr.splitlines() if not re.match(r"make(\[\d+\])?: \*\*\* ", line)
    ]
    assert said == [
        f"no make local is running on port {port} (.local/{port}/outputs.json not found): "
        f"start it with `make local` PORT={port}"
    ], done.stderr


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


def test_make_first_hour_prints_each_steps_time():
    # When the first hour runs in its short form: warm, the library path only (make test runs
    # the whole of it as tests/e2e/test_first_hour.py; make first-hour alone runs it cold)
    done = make("first-hour", "COLD=0", "PART=library")
    # Then it passed, and printed its table: each step, its time, and whether it was warm
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    print(done.stdout[-2000:])
    assert re.search(r"first hour \(\d+ cores, load [0-9. ]+\):", done.stdout)
    assert re.search(r"library: pip install \. \(from the clone\) +[0-9.]+ s +warm", done.stdout)
    assert re.search(r"library: clone to first call .* +[0-9.]+ s", done.stdout)


def test_make_sim_runs_the_simulator_then_the_drift_workloads_through_both_front_doors():
    # When make sim runs a few seeds (SEEDS=2000 is the long run docs/sim.md describes)
    done = make("sim", "SEEDS=2")
    # Then the simulator judged its seeds, and the drift workloads ran through both drivers
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"^sim: 2 seeds, .* 0 violations", done.stdout, re.MULTILINE)
    assert re.search(r"through sync and async: 0 violations, 0 drifts over 2 seeds", done.stdout), (
        done.stdout[-2000:]
    )
