"""Every shell and HTTP example of the README, docs/getting-started.md, docs/identity.md,
docs/http-api.md, docs/clients.md and docs/library.md, run in order and as written against the
e2e tier's local stack (the session's ``api_url``: no second stack), by ``tests.docs_runner`` (its
docstring says how blocks are marked, what ``make local`` maps to, and how outputs and responses
are compared).

The session stack is served in-process, so ``make token`` finds it the way it finds ``make
local``'s: by the identity provider's ``auth.json`` in ``.local/<PORT>/``, written here for the
session's port and removed afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlparse

import pytest

from local.identity import AuthConfig, auth_file
from tests import docs_runner

# Pages and the fewest blocks each must run: a page whose marks were lost would run nothing.
PAGES = {
    "README.md": 2,
    "docs/getting-started.md": 2,
    "docs/identity.md": 2,
    "docs/http-api.md": 24,
    "docs/clients.md": 2,
    "docs/library.md": 3,  # the install from the clone, the wheel, the exports (no stack needed)
}


@pytest.fixture(scope="module")
def page_environment(
    api_url: str, identity: AuthConfig, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    port = urlparse(api_url).port
    assert port is not None
    state = auth_file(port)
    identity.write(state)
    try:
        with docs_runner.page_environment(port) as environment:
            # What the pages make in a temporary folder (docs/library.md's venv) goes with the
            # test's own
            environment["TMPDIR"] = str(tmp_path_factory.mktemp("docs-pages"))
            yield environment
    finally:
        state.unlink(missing_ok=True)
        state.parent.rmdir()


def test_the_pages_are_the_ones_the_runner_runs():
    assert set(PAGES) == set(docs_runner.PAGES)


@pytest.mark.parametrize("page", list(PAGES))
def test_the_pages_examples_run_as_written(page, page_environment, record_property, show):
    # When every marked block of the page runs against the local stack, in order
    report = docs_runner.run_page(page, page_environment)
    # Then none failed or printed what the page does not show (run_page raises), and the page ran
    # at least what it is known to hold; what was skipped says why
    show(f"{page}: {report.executed} executed, {len(report.skipped)} skipped")
    record_property("executed", report.executed)
    record_property("skipped", len(report.skipped))
    assert report.executed >= PAGES[page]
    assert all(": " in skipped for skipped in report.skipped)
