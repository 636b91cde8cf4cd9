"""Where ``make local`` keeps its files: every one under ``.local/<PORT>/``, the workers'
configurations (each holds a function's role policy) included, and none left once it stops."""

from __future__ import annotations

import json
from pathlib import Path

from local import preflight, run, workers


def test_the_workers_configurations_live_in_the_stacks_state_folder():
    # The folder of the stack on a port, beside its auth.json and outputs.json
    assert run.worker_dir(3001) == preflight.state_dir(3001) / "workers"
    assert run.worker_dir(3001).parent == run.outputs_file(3001).parent


def test_a_workers_configuration_is_written_where_it_is_told_and_removed_when_it_stops(
    tmp_path: Path,
):
    # Given a function (its code a folder with no handler: the process fails its init, which is
    # not what is under test) and a folder for the configurations
    function = workers.FunctionDef(
        logical_id="Fn",
        handler="absent.handler",
        asset=tmp_path / "asset",
        environment={},
        timeout_seconds=3,
        memory_mb=128,
        role="Role",
    )
    function.asset.mkdir()
    folder = tmp_path / "state" / "workers"
    policy = {"Statement": [{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": "t"}]}
    # When its worker is spawned with that folder
    worker = workers.Worker(function, [], {}, policy, config_dir=folder).spawn()
    try:
        # Then its configuration, with the role's policy, is there
        (written,) = folder.glob("*.json")
        assert json.loads(written.read_text())["policy"] == policy
        assert written.stat().st_mode & 0o077 == 0  # the owner's alone
    finally:
        worker.stop()
    # And once stopped, nothing of it is left
    assert list(folder.iterdir()) == []
