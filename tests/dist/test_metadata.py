"""The wheel's metadata is what PyPI shows: a licence it can name, links that work, and a project
page that renders.

The long description is ``functions/README-pypi.md`` (``readme`` in pyproject.toml), read back
from the built wheel's ``METADATA``. PyPI renders Markdown with a CommonMark parser (cmarkgfm,
through readme_renderer); neither readme_renderer nor twine is in the dev venv, so the page is
parsed here with markdown-it-py, also CommonMark, with GFM tables on as on PyPI.
"""

from __future__ import annotations

import email.parser
import email.policy
import re
import zipfile
from email.message import Message
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

import turnstile_ddb
from examples.run import ROOT, build_wheel

DIST_INFO = f"turnstile_ddb-{turnstile_ddb.__version__}.dist-info"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def metadata(wheel: Path) -> Message:
    text = zipfile.ZipFile(wheel).read(f"{DIST_INFO}/METADATA").decode()
    return email.parser.Parser(policy=email.policy.compat32).parsestr(text)


def _urls(metadata: Message) -> dict[str, str]:
    return dict(value.split(", ", 1) for value in metadata.get_all("Project-URL") or [])


def _tokens(markdown: str) -> list[Token]:
    """Every token, inline children included, of a CommonMark parse with GFM tables."""
    flat: list[Token] = []
    for token in MarkdownIt("commonmark").enable("table").parse(markdown):
        flat.append(token)
        flat.extend(token.children or [])
    return flat


def test_the_licence_is_an_spdx_expression_with_its_files_in_the_wheel(
    wheel: Path, metadata: Message
) -> None:
    # Given the built wheel's metadata: PEP 639's expression, not a free-text License field
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["License"] is None
    assert sorted(metadata.get_all("License-File") or []) == ["LICENSE", "NOTICE"]
    # and no licence classifier beside it (PEP 639 forbids the two together)
    assert not [c for c in metadata.get_all("Classifier") or [] if c.startswith("License ::")]
    # Then the wheel carries both files, the licence being the Apache 2.0 text itself
    archive = zipfile.ZipFile(wheel)
    licence = archive.read(f"{DIST_INFO}/licenses/LICENSE").decode()
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert licence == (ROOT / "LICENSE").read_text()
    notice = archive.read(f"{DIST_INFO}/licenses/NOTICE").decode()
    assert "the turnstile authors" in notice and "Apache License, Version 2.0" in notice


def test_the_project_names_its_urls_keywords_and_classifiers(metadata: Message) -> None:
    urls = _urls(metadata)
    assert set(urls) >= {"Source", "Documentation", "Changelog", "Issues"}
    assert all(urlsplit(url).scheme == "https" and urlsplit(url).netloc for url in urls.values())
    # every link into the project is under its Source address: one home, named once
    source = urls["Source"]
    assert all(url.startswith(source) for url in urls.values())
    keywords = (metadata["Keywords"] or "").split(",")
    assert "dynamodb" in keywords and "concurrency" in keywords
    classifiers = metadata.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers
    assert "Requires-Python" in metadata and metadata["Requires-Python"] == ">=3.11"


def test_the_long_description_is_self_contained_markdown(metadata: Message) -> None:
    # Given the description as PyPI receives it
    assert metadata["Description-Content-Type"] == "text/markdown"
    description = metadata.get_payload()
    assert isinstance(description, str) and description.startswith("# turnstile-ddb")
    # Then no mkdocs snippet include would be shown raw, and no link is relative to the repository
    assert "--8<--" not in description
    assert "](../" not in description
    links = [
        str(token.attrs["href"]) for token in _tokens(description) if token.type == "link_open"
    ]
    assert links, "the page links to its documentation"
    assert all(urlsplit(link).scheme == "https" for link in links), links
    source = _urls(metadata)["Source"]
    own = [link for link in links if urlsplit(link).netloc == urlsplit(source).netloc]
    assert own and all(link.startswith(source) for link in own), own


def test_the_long_description_renders_as_headings_tables_and_closed_code_blocks(
    metadata: Message,
) -> None:
    description = metadata.get_payload()
    assert isinstance(description, str)
    tokens = _tokens(description)
    kinds = {token.type for token in tokens}
    # Then it parses into the structure it was written as: headings, the two tables, code
    headings = [t.tag for t in tokens if t.type == "heading_open"]
    assert headings[0] == "h1" and headings.count("h1") == 1 and "h2" in headings
    assert [t.type for t in tokens].count("table_open") == 2
    fences = [t for t in tokens if t.type == "fence"]
    assert {t.info for t in fences} == {"sh", "python"}
    # and no fence was left open (an unclosed one swallows the rest of the page as code)
    assert not any("```" in t.content for t in fences)
    assert "html_block" not in kinds and "html_inline" not in kinds
    rendered = MarkdownIt("commonmark").enable("table").render(description)
    assert "<table>" in rendered and "--8&lt;--" not in rendered


def test_the_quick_start_on_the_page_is_the_example_the_tests_run(metadata: Message) -> None:
    # Given the Python code block of the page (the only one)
    description = metadata.get_payload()
    assert isinstance(description, str)
    (code,) = [t.content for t in _tokens(description) if t.type == "fence" and t.info == "python"]
    # Then it is examples/quickstart.py as make examples runs it, to the character
    assert code == (ROOT / "examples" / "quickstart.py").read_text()
    assert re.search(r"^from turnstile_ddb import ", code, re.MULTILINE)
