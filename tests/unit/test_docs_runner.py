"""The documentation runner (tests/docs_runner.py) on pages written for the test: which blocks run,
what a page's blocks share, what fails a page. No stack: the blocks are plain shell."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import docs_runner
from tests.docs_runner import DocsError, run_page


def page(tmp_path: Path, text: str) -> str:
    (tmp_path / "page.md").write_text(text)
    return "page.md"


@pytest.fixture
def environment(tmp_path: Path):
    with docs_runner.page_environment(port=1) as env:
        yield env


def test_blocks_run_in_order_sharing_variables_and_skips_are_counted(tmp_path, environment):
    name = page(
        tmp_path,
        "<!-- docs: run -->\n```sh\nGREETING=hello\nexport WHO=page\n```\n\n"
        "<!-- docs: skip needs AWS credentials -->\n```sh\nexit 1\n```\n\n"
        '<!-- docs: run -->\n```sh\necho "$GREETING $WHO $(printenv WHO)"\n```\n\n'
        "<!-- docs: output -->\n```text\nhello page page\n```\n\n"
        "```json\n{}\n```\n",
    )
    report = run_page(name, environment, root=tmp_path)
    assert report.executed == 2
    assert report.skipped == ["page.md:8: needs AWS credentials"]  # its fence line


@pytest.mark.parametrize(
    "text, message",
    [
        ("```sh\necho unmarked\n```\n", "without <!-- docs: run|skip REASON -->"),
        ("```http\nGET /x\n```\n", "without <!-- docs: run|skip REASON -->"),
        ("<!-- docs: skip -->\n```sh\ntrue\n```\n", "needs a reason"),
        ("<!-- docs: run -->\n```sh\nfalse\necho never\n```\n", "exit 1"),
        (
            "<!-- docs: run -->\n```sh\necho 41\n```\n<!-- docs: output -->\n```\n42\n```\n",
            "the output differs",
        ),
        ("<!-- docs: output -->\n```\n42\n```\n", "with no block run before it"),
    ],
)
def test_a_page_fails_on(tmp_path, environment, text, message):
    with pytest.raises(DocsError, match=message):
        run_page(page(tmp_path, text), environment, root=tmp_path)


def test_make_local_is_the_running_stack_and_other_targets_never_reinstall(tmp_path, environment):
    # `make local` returns at once, saying the stack is already running
    done = subprocess.run(
        ["make", "local", "PORT=1"], env=environment, capture_output=True, text=True, check=True
    )
    assert "already running" in done.stdout
    # Any other target is the real make, told that the venv and node_modules are installed
    shim = Path(environment["PATH"].split(os.pathsep)[0]) / "make"
    for installed in (".installed", ".installed-dev", "node_modules/.installed"):
        path = installed if "/" in installed else f"{sys.prefix}/{installed}"
        assert f'-o "{path}"' in shim.read_text() or f"-o {path}" in shim.read_text()


def test_every_install_stamp_of_the_venv_is_one_tests_tell_make_is_done():
    # Given the Makefile's rules for files in the venv (each an install step)
    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    stamps = set(re.findall(r"^\$\(VENV\)/(\S+):", makefile, flags=re.MULTILINE))
    assert {".installed", ".installed-dev"} <= stamps
    # Then the tests' make (and the pages' shim) marks each done: the venv the tests run in is
    # never reinstalled underneath them
    arguments = docs_runner.assume_installed("/v")
    assert {arguments[i + 1] for i in range(0, len(arguments), 2)} == {f"/v/{s}" for s in stamps}
    assert set(arguments[::2]) == {"-o"}


def test_ids_and_times_are_normalised_but_values_and_keys_are_not():
    a = {"id": "8bac3bc6-5ae3-482d-86c6-2fe5230ef43c", "registeredAt": "2026-11-26T12:27:23.428Z"}
    b = {"id": "1f2e3d4c-5ae3-482d-86c6-2fe5230ef43c", "registeredAt": "2027-01-01T00:00:00Z"}
    assert docs_runner.normalise(a) == docs_runner.normalise(b)
    assert docs_runner.normalise({"expiresAt": 1}) == docs_runner.normalise({"expiresAt": 2})
    assert docs_runner.normalise({"stock": 1}) != docs_runner.normalise({"stock": 2})
    assert docs_runner.normalise({"stock": 1}) != docs_runner.normalise({"stok": 1})


def test_update_writes_what_was_printed_into_the_page(tmp_path, environment):
    name = page(
        tmp_path,
        "<!-- docs: run -->\n```sh\necho '{\"a\": 1}'\n```\n\n"
        "<!-- docs: output -->\n```text\nold\n```\n",
    )
    run_page(name, environment, root=tmp_path, update=True)
    text = (tmp_path / name).read_text()
    assert '```text\n{"a": 1}\n```\n' in text and "old" not in text
    run_page(name, environment, root=tmp_path)  # and the page now passes as it is
