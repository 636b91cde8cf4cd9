"""The example programs that docs/library.md and docs/examples.md show, written out on the pages
(GitHub and an editor show a page's text: a snippet include would render as its own line), and
kept equal to their files in ``examples/`` (which ``make examples`` runs).

A page marks each such block with the file it shows, on the line before it (invisible on the
site)::

    <!-- example: examples/quickstart.py -->
    ```python
    ...the file's text...
    ```

    python -m tests.inline_examples            # exit 1, naming each block that differs
    python -m tests.inline_examples --update   # write the files' text into the pages
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("docs/library.md", "docs/examples.md")
MARK = re.compile(r"^<!--\s*example:\s*(\S+)\s*-->\s*$")


@dataclass(frozen=True)
class Shown:
    """A block of ``page`` marked as showing ``file``; ``start``/``end``: its fence lines."""

    page: str
    file: str
    start: int
    end: int
    text: str


def shown(page: str, text: str) -> list[Shown]:
    """Every block of ``text`` marked ``<!-- example: FILE -->``."""
    tokens = MarkdownIt("commonmark").parse(text)
    found = []
    for previous, token in itertools.pairwise(tokens):
        if token.type != "fence" or token.map is None or previous.type != "html_block":
            continue
        matched = MARK.match(previous.content.strip())
        if matched:
            found.append(Shown(page, matched.group(1), token.map[0], token.map[1], token.content))
    return found


def differences(page: str, root: Path = ROOT) -> list[str]:
    """What of ``page`` does not show its files as they are: a block that differs from its file,
    a file that is missing, a snippet include left in."""
    text = (root / page).read_text()
    problems = [
        f"{page}:{number}: a snippet include: show the file's text, marked <!-- example: FILE -->"
        for number, line in enumerate(text.splitlines(), 1)
        if line.lstrip().startswith("--8<--")
    ]
    for block in shown(page, text):
        source = root / block.file
        if not source.is_file():
            problems.append(f"{page}:{block.start + 1}: {block.file} does not exist")
        elif block.text != source.read_text():
            problems.append(f"{page}:{block.start + 1}: differs from {block.file}")
    return problems


def updated(page: str, root: Path = ROOT) -> str:
    """``page``'s text with each marked block replaced by its file's current text."""
    text = (root / page).read_text()
    lines = text.splitlines(keepends=True)
    for block in sorted(shown(page, text), key=lambda b: b.start, reverse=True):
        fence = lines[block.start]
        closing = lines[block.end - 1]
        lines[block.start : block.end] = [fence, (root / block.file).read_text(), closing]
    return "".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="write the files into the pages")
    args = parser.parse_args(argv)
    problems = []
    for page in PAGES:
        if args.update:
            (ROOT / page).write_text(updated(page))
        problems += differences(page)
    print("\n".join(problems) or "every example shown is its file", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
