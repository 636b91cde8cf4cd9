"""Code speaks to a stranger with only the repository: no comment, docstring or string in the
shipped code (the library, the service, the local stack, chaos, benchmarks, infrastructure,
examples) points at the work's internal numbering (issues, source articles, numbered rules) or at
a file outside the repository. What to write instead is each pattern's reason.

The patterns are the ones ``tests/unit/test_docs_text.py`` applies to the documentation, less the
prose-only ones ("below", "v2"), which are ordinary words in code.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("functions", "local", "chaos", "bench", "infra", "examples", "clients")

# pattern -> why it is refused (what to write instead)
JARGON = {
    r"\bissue('s)? \d+|\bthe issue('s)?\b": "the project's issues: say what was changed and why",
    r"\bseeds? 0\d\d\b": "the source articles' numbers: say what the workload or pattern is",
    r"\brule \d+\b": "a numbered rule of an internal list: say the rule itself",
    r"(?<![\w-])API\.md\b": "a file outside the repository: the contract is docs/http-api.md",
    r"\.\./shared|/work/shared": "a path outside the repository: a reader does not have it",
}
# (path, pattern) -> why that file may use it. Empty: every use found was jargon, and was fixed.
ALLOWED: dict[tuple[str, str], str] = {}


def jargon(text: str, path: str) -> list[str]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern, why in JARGON.items():
            if (path, pattern) not in ALLOWED and re.search(pattern, line, re.IGNORECASE):
                found.append(f"{path}:{number}: {why}: {line.strip()[:120]}")
    return found


def sources() -> list[Path]:
    return sorted(path for top in SCANNED for path in (ROOT / top).rglob("*.py"))


def test_the_patterns_catch_what_they_are_for() -> None:
    # Given lines written the way the code used to be
    bad = [
        "# issue 13.6: a key on a route that cannot honour it is refused",
        '"""Issue 22\'s adversarial audit, one test per finding."""',
        "Write skew (seed 001): count the members, and add one if there is room",
        '"""Every use of Powertools beyond its public API, in one place (rule 16)."""',
        "the authorization rules of API.md v2",
        "every check follows the HTTP contract (/work/shared/API.md)",
        "the snapshot of ../shared's route table",
    ]
    # Then each one is caught
    assert [line for line in bad if not jargon(line, "x.py")] == []
    # And what the code says instead is not, nor a chaos run's seed or the repository's contract
    clean = (
        "# Purchases (optimistic): under the flash-sale workload (100 users on 100 units)\n"
        "the HTTP contract (docs/http-api.md); chaos: 3 operations, seed 42; pydantic 2\n"
    )
    assert jargon(clean, "x.py") == []


def test_the_shipped_code_has_no_internal_jargon() -> None:
    # Given every Python file of the shipped code
    files = sources()
    assert len(files) > 50  # the scan sees the tree, not an empty glob
    # Then none of them uses the project's internal shorthand
    found = [hit for path in files for hit in jargon(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == [], "\n".join(found)
