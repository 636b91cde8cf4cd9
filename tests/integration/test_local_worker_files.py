"""``make local``'s workers keep their configuration files (each holds a function's role policy)
in the stack's folder, ``.local/<PORT>/workers/``: what a killed stack left there is cleared when
a stack starts, and the folder is gone once the stack stops."""

from __future__ import annotations

import json
import os
from pathlib import Path

from local import run


def test_the_worker_files_live_in_the_stacks_folder_and_go_with_it(
    assembly, template, tmp_path, monkeypatch
):
    from service import runtime

    # Given a stack folder holding a worker file a killed stack left behind
    monkeypatch.setattr(os, "environ", dict(os.environ))  # running() exports its endpoints
    template_path = tmp_path / "Turnstile.template.json"
    template_path.write_text(json.dumps(template))
    folder = tmp_path / "state" / "workers"
    folder.mkdir(parents=True)
    stale = folder / "turnstile-worker-left.json"
    stale.write_text('{"policy": "a killed stack\'s"}')
    try:
        # When a stack starts with that folder
        with run.running(
            port=0,
            template_path=template_path,
            assembly_dir=Path(assembly.directory),
            worker_dir=folder,
        ) as stack:
            # Then the stale file is gone, and each function's configuration is there
            files = set(folder.iterdir())
            assert stale not in files
            configs = {worker._config for worker in stack.functions.values()}
            assert configs == files and len(files) == len(stack.functions) > 0
    finally:
        runtime.Lazy.reset_all()
    # And once it stopped, neither the files nor their folder (nor its emptied parent) is left
    assert not folder.exists() and not folder.parent.exists()
