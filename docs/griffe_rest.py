"""The library's docstrings are reStructuredText (Sphinx roles, simple tables, ``::`` literal
blocks); the API reference renders Markdown. This griffe extension rewrites each docstring of the
package, once loaded, into Markdown the site renders:

* a role (``:class:`Held```, ``:meth:`~Leases.take```, ``:mod:`turnstile_ddb.lease```) becomes a
  cross-reference to the object, an *optional* one for mkdocs-autorefs: a link when the object is
  on the site, plain code otherwise (never a strict-build warning, never a raw role);
* a simple table (rows between ``=====  =====`` borders) becomes a Markdown table;
* ``text::`` followed by an indented block becomes ``text:`` and a fenced code block.

Hand-written because no maintained package does this for mkdocstrings: its Sphinx docstring
style parses the ``:param:`` fields only, and leaves inline roles and tables as text.
``tests/unit/test_docs_site.py`` builds the site and fails on any raw role or table border left.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|meth|func|mod|attr|data|exc|obj|const):`(~?)([^`<>]+)`")
BORDER = re.compile(r"^(\s*)(=+)((?: +=+)*)\s*$")


def _walk(obj: griffe.Object) -> Iterator[griffe.Object]:
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _walk(member)  # type: ignore[arg-type]


def _target(name: str, obj: griffe.Object, known: set[str]) -> str | None:
    """The full path of the object ``name`` refers to from ``obj``'s docstring, if known."""
    name = name.strip().rstrip("()")
    scopes = [obj, *obj.parents] if hasattr(obj, "parents") else [obj]
    candidates = [name] + [f"{scope.path}.{name}" for scope in scopes]
    return next((path for path in candidates if path in known), None)


def _roles(text: str, obj: griffe.Object, known: set[str]) -> str:
    def link(match: re.Match[str]) -> str:
        tilde, name = match.group(1), match.group(2).strip()
        shown = name.rsplit(".", 1)[-1] if tilde else name
        if name.endswith("()"):
            shown = shown if shown.endswith("()") else shown + "()"
        path = _target(name, obj, known)
        if path is None:
            return f"`{shown}`"
        return f'<autoref identifier="{path}" optional><code>{shown}</code></autoref>'

    return ROLE.sub(link, text)


def _cells(line: str, spans: list[tuple[int, int]]) -> list[str]:
    cells = []
    for index, (start, end) in enumerate(spans):
        stop = len(line) if index == len(spans) - 1 else end
        cells.append(line[start:stop].strip())
    return cells


def _tables(lines: list[str]) -> list[str]:
    """Simple tables: a border, rows (a header row and a second border optional), a border."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        border = BORDER.match(lines[i])
        if not border or not border.group(3):  # one column: a heading's underline, not a table
            out.append(lines[i])
            i += 1
            continue
        spans = [(m.start(), m.end()) for m in re.finditer(r"=+", lines[i])]
        rows: list[list[str]] = []
        header_rows = 0
        j = i + 1
        closed = False
        while j < len(lines):
            if BORDER.match(lines[j]):
                # a border after the first rows ends the header, unless the table ends here
                following = j + 1 < len(lines) and lines[j + 1].strip() != ""
                if header_rows == 0 and rows and following:
                    header_rows = len(rows)
                    j += 1
                    continue
                closed = True
                break
            if not lines[j].strip():
                j += 1
                continue
            cells = _cells(lines[j], spans)
            if rows and cells[0] == "":  # a continuation line of the row above
                rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells, strict=True)]
            else:
                rows.append(cells)
            j += 1
        if not closed or not rows:
            out.append(lines[i])
            i += 1
            continue
        indent = border.group(1)
        head = rows[:header_rows] if header_rows else [[""] * len(spans)]
        body = rows[header_rows:] if header_rows else rows
        header = [" ".join(column).strip() for column in zip(*head, strict=True)]
        out.append("")
        out.append(indent + "| " + " | ".join(header) + " |")
        out.append(indent + "|" + "---|" * len(spans))
        out.extend(
            indent + "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
            for row in body
        )
        out.append("")
        i = j + 1
    return out


def _literal_blocks(lines: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::") and not line.strip().startswith(".."):
            base = len(line) - len(line.lstrip())
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            block_indent = len(lines[j]) - len(lines[j].lstrip()) if j < len(lines) else 0
            if j < len(lines) and block_indent > base:
                stripped = line.rstrip()[:-2].rstrip()
                out.append(stripped + ":" if stripped.strip() else "")
                block: list[str] = []
                k = j
                while k < len(lines) and (
                    not lines[k].strip() or len(lines[k]) - len(lines[k].lstrip()) >= block_indent
                ):
                    block.append(lines[k][block_indent:])
                    k += 1
                while block and not block[-1].strip():
                    block.pop()
                pad = " " * base
                out.extend(["", pad + "```text", *(pad + b for b in block), pad + "```", ""])
                i = k
                continue
        out.append(line)
        i += 1
    return out


def to_markdown(text: str, obj: griffe.Object, known: set[str]) -> str:
    lines = _tables(_literal_blocks(text.split("\n")))
    fenced = False
    for index, line in enumerate(lines):
        if line.strip().startswith("```"):
            fenced = not fenced
        elif fenced:  # code shows the name alone
            lines[index] = ROLE.sub(lambda m: m.group(2).strip(), line)
        else:
            lines[index] = _roles(line, obj, known)
    return "\n".join(lines)


class RestToMarkdown(griffe.Extension):
    """Rewrite every docstring of a loaded package from reST to Markdown (module docstring)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        objects = list(_walk(pkg))
        known = {obj.path for obj in objects}
        for obj in objects:
            if obj.docstring is not None:
                obj.docstring.value = to_markdown(obj.docstring.value, obj, known)
