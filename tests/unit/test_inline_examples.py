"""docs/library.md and docs/examples.md show the example programs' text itself (what GitHub and an
editor show), equal to the files ``make examples`` runs (tests/inline_examples.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import inline_examples

PAGE = """# A page

<!-- example: examples/a.py -->
```python
print("a")
```

<!-- example: examples/b.py -->
```python
print("b")
```
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "a.py").write_text('print("a")\n')
    (tmp_path / "examples" / "b.py").write_text('print("b")\n')
    (tmp_path / "page.md").write_text(PAGE)
    return tmp_path


def test_a_page_showing_its_files_as_they_are_passes(root: Path) -> None:
    assert inline_examples.differences("page.md", root) == []


def test_a_file_edited_and_not_its_page_is_named_then_updated(root: Path) -> None:
    # Given an example whose file changed after the page was written
    (root / "examples" / "b.py").write_text('print("b, changed")\n')
    # Then the page's block for it is named as different, and only that one
    assert inline_examples.differences("page.md", root) == ["page.md:9: differs from examples/b.py"]
    # And once updated the page shows the file's text, the other block as it was
    text = inline_examples.updated("page.md", root)
    assert 'print("b, changed")\n```\n' in text and 'print("a")\n```\n' in text
    (root / "page.md").write_text(text)
    assert inline_examples.differences("page.md", root) == []


def test_a_snippet_include_and_a_missing_file_are_named(root: Path) -> None:
    # Given a page that still includes a file, and a block whose file is gone
    (root / "page.md").write_text(PAGE + '\n```python\n--8<-- "examples/a.py"\n```\n')
    (root / "examples" / "a.py").unlink()
    # Then both are named
    assert inline_examples.differences("page.md", root) == [
        "page.md:14: a snippet include: show the file's text, marked <!-- example: FILE -->",
        "page.md:4: examples/a.py does not exist",
    ]


@pytest.mark.parametrize("page", inline_examples.PAGES)
def test_the_page_shows_each_example_as_its_file_is(page: str) -> None:
    # Given the page, when its marked blocks are compared with the files in examples/
    problems = inline_examples.differences(page)
    # Then each is its file's text, and no snippet include is left (it renders as that line)
    assert problems == [], "\n".join(problems) + "\n(python -m tests.inline_examples --update)"
    # And the page shows at least one example
    assert inline_examples.shown(page, (inline_examples.ROOT / page).read_text())
