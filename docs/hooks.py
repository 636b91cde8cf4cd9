"""mkdocs hook: the HTTP API operations page, rendered from the OpenAPI document.

The document is the one ``GET /openapi.json`` serves locally (``local.docs.document()``, merged
from every function's resolver), so the page cannot drift from the routes. The JSON itself is
written beside the site as ``openapi.json``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
PAGE = "openapi.md"


def _document() -> dict[str, Any]:
    for path in (ROOT, ROOT / "functions"):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    from local import docs

    return docs.document()


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(document: dict[str, Any]) -> str:
    lines = [
        "# HTTP API operations",
        "",
        f"Rendered at build time from the OpenAPI document (version "
        f"`{document['info']['version']}`, {len(document['paths'])} paths) that `make local` "
        "serves at `GET /openapi.json`; the same JSON is [here](openapi.json). What each route "
        "guarantees is on the [HTTP API](http-api.md) page.",
        "",
        "| method | path | summary | responses |",
        "|---|---|---|---|",
    ]
    for path, item in sorted(document["paths"].items()):
        for method, operation in item.items():
            summary = operation.get("summary") or operation.get("description") or ""
            codes = ", ".join(sorted(str(code) for code in operation.get("responses", {})))
            first = _cell(summary.splitlines()[0]) if summary else ""
            lines.append(f"| `{method.upper()}` | `{path}` | {first} | {codes} |")
    return "\n".join(lines) + "\n"


# A snippet include that is not one (a formatter rewrote it, a typo) renders as literal text.
_MANGLED_SNIPPET = re.compile(r"^-+\s*8\s*<\s*-+", re.MULTILINE)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    for match in _MANGLED_SNIPPET.finditer(markdown):
        line = markdown[match.start() :].split("\n", 1)[0]
        if not line.startswith('--8<-- "'):
            raise ValueError(f"{page.file.src_path}: not a snippet include: {line!r}")
    return markdown


def on_files(files: Files, config: Any) -> Files:
    document = _document()
    files.append(File.generated(config, PAGE, content=render(document)))
    files.append(File.generated(config, "openapi.json", content=json.dumps(document, indent=2)))
    return files
