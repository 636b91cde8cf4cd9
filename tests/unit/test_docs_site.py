"""The documentation site as a reader gets it: built (strict) into a temporary folder, then read.

The library's docstrings are reStructuredText; ``docs/griffe_rest.py`` turns their roles, simple
tables and literal blocks into Markdown for the API reference. A raw role (``:class:`X```) or a
table border left in a page is a page a reader cannot use."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RAW_ROLE = re.compile(r":(?:class|meth|func|mod|attr|data|exc|obj|const):(?:`|&#x60;|&#96;)")
TABLE_BORDER = re.compile(r"^\s*={3,}(?: +={3,})+\s*$", re.MULTILINE)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=True,
    )
    return out


def text_of(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def test_no_page_shows_a_raw_role_or_a_table_border(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 20
    raw = {str(p.relative_to(site)): RAW_ROLE.findall(p.read_text()) for p in pages}
    assert {page: found for page, found in raw.items() if found} == {}
    borders = [str(p.relative_to(site)) for p in pages if TABLE_BORDER.search(text_of(p))]
    assert borders == []


def test_the_reference_links_roles_renders_tables_and_shows_constructors(site: Path) -> None:
    lease = (site / "reference" / "lease" / "index.html").read_text()
    # a role became a link to the object's own anchor
    assert re.search(
        r'<a class="autorefs autorefs-internal"[^>]*href="[^"]*#turnstile_ddb\.', lease
    )
    # the lease item's simple table became a table
    queue = (site / "reference" / "lease_queue" / "index.html").read_text()
    assert "<table>" in queue and "tickets" in text_of(
        site / "reference" / "lease_queue" / "index.html"
    )
    # a dataclass shows its constructor's parameters, typed
    assert re.search(
        r"safety_margin_ms\s*:\s*int", text_of(site / "reference" / "lease" / "index.html")
    )


def test_the_extension_module_is_not_published_as_a_page(site: Path) -> None:
    assert not list(site.rglob("*.py"))


def test_a_front_door_built_from_its_protocol_shows_as_a_function_with_its_doc(site: Path) -> None:
    versioned = text_of(site / "reference" / "versioned" / "index.html")
    assert re.search(r"decrement\(\s*client: DynamoDBClient,\s*\*,\s*table: str,", versioned)
    assert "Take amount from the number attr unless" in versioned
