"""What ``make destroy`` leaves behind that the stack did not create: the CDK bootstrap stack
(``CDKToolkit``), its asset bucket and its image repository. After destroying the stack, make
prints them and how to remove them (``python -m infra.teardown``), and docs/teardown.md gives the
same commands, so the two cannot drift apart."""

from __future__ import annotations

import subprocess
import sys

from infra import teardown
from tests.helpers import REPO, make


def test_make_destroy_says_what_the_bootstrap_stack_left_after_destroying():
    # Given a dry run (destroying needs an AWS account)
    done = make("-n", "destroy")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    destroy = next(i for i, line in enumerate(lines) if "npx cdk destroy" in line)
    # Then, after the CLI's destroy, the leftovers are printed
    assert any("-m infra.teardown" in line for line in lines[destroy + 1 :])


def test_the_note_names_each_leftover_and_the_commands_that_remove_it():
    note = subprocess.run(
        [sys.executable, "-m", "infra.teardown"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for leftover in ("CDKToolkit", teardown.BUCKET, teardown.REPOSITORY):
        assert leftover in note
    assert teardown.COMMANDS and all(command in note for command in teardown.COMMANDS)


def test_docs_teardown_gives_the_same_commands():
    page = (REPO / "docs" / "teardown.md").read_text()
    missing = [command for command in teardown.COMMANDS if command not in page]
    assert missing == []
