"""docs/glossary.md: one entry per word, each pointing at the reference page of the module that
owns it, and the page is in the site's navigation."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "docs" / "glossary.md"


def entries() -> dict[str, str]:
    """Each term (an ### heading) and its text."""
    parts = re.split(r"^### (.+)$", GLOSSARY.read_text(), flags=re.MULTILINE)
    terms = parts[1::2]
    assert len(terms) == len(set(terms)), "a term has two entries"
    return {term: text.split("\n## ")[0] for term, text in zip(terms, parts[2::2], strict=True)}


def test_every_term_links_to_the_reference_page_of_its_module() -> None:
    found = entries()
    # Given the words the team settled on, each has its entry
    for word in ("claim", "ticket", "fence", "InProgress", "claimable_at", "TTL attribute"):
        assert any(word in term for term in found), word
    for term, text in found.items():
        pages = re.findall(r"\]\((reference/[a-z_]+\.md)\)", text)
        if term != "token claims":  # the service's word, not the library's
            assert pages, f"{term}: no reference page"
        for page in pages:
            assert (ROOT / "docs" / page).is_file(), f"{term}: {page} does not exist"


def test_the_glossary_is_in_the_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text().split("\nnav:\n", 1)[1]
    assert re.search(r"^ +- Glossary: glossary\.md$", nav, flags=re.MULTILINE)
