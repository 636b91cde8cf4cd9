"""The documentation speaks to a stranger with only the repository: no reference to a place on the
page that is not named ("below"), no path outside the repository, no internal numbering of the
work that produced it; and the HTTP contract page lists exactly the routes of the OpenAPI document
and shows each of them by example.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from local import docs
from tests import docs_runner

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])  # docs/patterns too

# pattern -> why it is refused (what to write instead)
JARGON = {
    r"\bbelow\b": "a dangling 'below': name the section or link it",
    r"\.\./shared": "a path outside the repository: a reader of the repository does not have it",
    r"(?<![\w-])API\.md\b": "a file outside the repository: the contract is docs/http-api.md",
    r"\bseeds? 0\d\d\b": "the project's internal task numbers: say what the workload or pattern is",
    r"\bissue('s)? \d+|\bthe issue('s)?\b": "the project's issues: say what was changed or planned",
    r"\brule \d+\b": "a numbered rule of an internal list: say the rule itself",
    r"\bv2\b": "a version of an internal document: say what it requires",
}
# (page, pattern) -> why that page may use it. Empty: every use found was jargon, and was fixed.
ALLOWED: dict[tuple[str, str], str] = {}


def jargon(text: str, page: str) -> list[str]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern, why in JARGON.items():
            if (page, pattern) not in ALLOWED and re.search(pattern, line, re.IGNORECASE):
                found.append(f"{page}:{number}: {why}: {line.strip()[:120]}")
    return found


def test_the_patterns_catch_what_they_are_for():
    # Given lines written the way the pages used to be
    bad = (
        "see the table below\nthe contract is ../shared/API.md\nseed 002's workload\n"
        "fixed by issue 13\nTTL (rule 5)\nAPI.md v2\n"
    )
    # Then each line is caught, and a clean one is not
    assert len(jargon(bad, "x.md")) == 8
    assert jargon("the next section says how; pydantic 2 models; stage v1", "x.md") == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_page_has_no_internal_jargon(page: Path):
    assert PAGES and len(PAGES) > 10
    assert jargon(page.read_text(), str(page.relative_to(ROOT))) == []


def document_routes() -> set[tuple[str, str]]:
    paths = docs.document()["paths"]
    return {(method.upper(), path) for path, item in paths.items() for method in item}


HTTP_API = ROOT / "docs" / "http-api.md"
ROW = re.compile(r"^\| `(GET|POST|PUT|PATCH|DELETE) (/[^` ]*)`", re.M)


def test_the_http_api_page_lists_exactly_the_routes_of_the_openapi_document():
    listed = ROW.findall(HTTP_API.read_text())
    # Each route once, and the same set the server documents
    assert len(listed) == len(set(listed))
    assert set(listed) == document_routes()


def test_the_http_api_page_shows_every_route_of_the_document_by_example():
    text = HTTP_API.read_text()
    examples = [b for b in docs_runner.blocks("docs/http-api.md", text) if b.lang == "http"]
    requests = [b for b in examples if b.mark == "run"]
    responses = [b for b in examples if b.mark == "response"]
    # Every request is followed by the response it got
    assert len(responses) == len(requests) > 0
    shown = set()
    for block in requests:
        method, path = block.text.split("\n", 1)[0].split()[:2]
        for known_method, template in document_routes():
            pattern = re.sub(r"\\\{\w+\\\}", r"[^/]+", re.escape(template))
            if known_method == method and re.fullmatch(pattern, path):
                shown.add((known_method, template))
    assert document_routes() - shown == set()


@pytest.mark.parametrize(
    ("page", "link"), [("README.md", "docs/glossary.md"), ("docs/index.md", "glossary.md")]
)
def test_the_front_pages_link_the_glossary(page: str, link: str):
    # The words the pages use (fence, lease, claim, ...) are defined in one place; a reader who
    # starts at the README or at the site's front page is told where
    assert f"]({link})" in (ROOT / page).read_text()
