"""``make local``'s start-up runs side by side what does not depend on each other: while the
functions' workers start (the longest step), DynamoDB Local's tables are created and the
identity provider starts. Asserted on the order the steps were recorded in, never on times."""

from __future__ import annotations

import json
import os
from pathlib import Path

from local import run

WORKERS = "starting the functions' workers"
TABLES = "creating the template's tables"
IDENTITY = "starting the identity provider"


def position(steps: list[tuple[str, str]], event: str, name: str) -> int:
    (index,) = [i for i, (e, step) in enumerate(steps) if e == event and name in step]
    return index


def test_tables_and_the_identity_provider_start_while_the_workers_do(
    assembly, template, tmp_path, monkeypatch
):
    from service import runtime

    # Given the synthesized stack
    monkeypatch.setattr(os, "environ", dict(os.environ))  # running() exports its endpoints
    template_path = tmp_path / "Turnstile.template.json"
    template_path.write_text(json.dumps(template))
    steps: list[tuple[str, str]] = []
    try:
        # When it starts
        with run.running(
            port=0,
            template_path=template_path,
            assembly_dir=Path(assembly.directory),
            worker_dir=tmp_path / "workers",
            steps=steps,
        ) as stack:
            # Then everything is up: the tables exist and the user pool answers
            assert stack.dynamodb.client().list_tables()["TableNames"]
            assert stack.auth.user_pool_id
    finally:
        runtime.Lazy.reset_all()
    print("\nstart-up steps, in order:\n" + "\n".join(f"  {e:5} {s}" for e, s in steps))
    # And the tables and the identity provider were started before the workers were all up
    workers_done = position(steps, "done", WORKERS)
    assert position(steps, "start", TABLES) < workers_done
    assert position(steps, "start", IDENTITY) < workers_done
    # And each step was done once, after it started
    for name in (WORKERS, TABLES, IDENTITY):
        assert position(steps, "start", name) < position(steps, "done", name)
