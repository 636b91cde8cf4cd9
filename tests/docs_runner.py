"""Runs the shell and HTTP examples of the documentation, in order and as written, against a running
local stack, and checks the outputs and responses the pages show.

    python -m tests.docs_runner            # start a local stack, run every page, report
    python -m tests.docs_runner --update   # the same, and write what was captured into the pages

Why hand-written: the maintained Markdown runners run Python blocks (pytest-markdown-docs,
phmdoctest, pytest-examples, mktestdocs' default) or run each shell block alone in a fresh
subprocess (pytest-codeblocks, mktestdocs' bash executor). None carries a page's shell variables
from one block to the next (a token fetched in one block, used in the next), maps ``make local`` to
a stack that is already running, sends a request written as an ``http`` block, or compares a
captured response by its shape. Parsing is markdown-it-py's (CommonMark, already in the lock);
running is bash and requests; what is left here is the marking, the mapping and the comparison.

**Marking.** Every fenced block whose language is ``sh``, ``bash``, ``shell``, ``console`` or
``http`` carries an HTML comment on the line before it (invisible on the site, visible in the
source), or the page fails:

* ``<!-- docs: run -->``: a shell block runs in bash (``set -eo pipefail``; a failing command
  fails the page), in the repository's root; an ``http`` block (``METHOD /path``, headers, a blank
  line, a body; ``$NAME`` is the page's shell variable) is sent to ``http://127.0.0.1:$PORT``.
  ``<!-- docs: run NAME=key -->`` on an ``http`` block also sets the page variable ``NAME`` to the
  response body's ``key`` (an id the server chose, which a later request names).
* ``<!-- docs: skip REASON -->``: not run here; the reason is required (e.g. needs AWS).
* ``<!-- docs: output -->`` (any language): what the shell block before it prints.
* ``<!-- docs: response -->`` (an ``http`` block): the response to the request before it: status
  line, the headers in :data:`SHOWN_HEADERS`, a blank line and the JSON body.

**As written.** A block's text is run unchanged. The only thing the runner provides is the
environment: ``PORT`` (the running stack's API port; pages read it as ``${PORT:-3000}``, so a
reader without it gets the Makefile's default) and ``PATH`` with a ``make`` of its own in front
(:func:`make_shim`): ``make local`` is satisfied by the stack already running (it prints so and
returns), every other target is the real ``make``, told that the venv and node_modules are
installed (``-o``), so a run never reinstalls the shared venv. Variables a block sets are seen by
the page's later blocks (each block starts from the variables the earlier ones left).

**Comparing.** Status and headers exactly; bodies by shape: the same keys, the same types, the
same values once ids (UUIDs, tokens) and times (ISO dates, epoch numbers under keys named
``...At``) are replaced by placeholders (:func:`normalise`), and a registration request's
``PENDING`` / ``ACCEPTED`` (decided by a stream consumer in the background, whenever it runs) is
one value. ``--update`` rewrites every
``output``/``response`` block from what was captured, adding a ``response`` block after an
``http`` block that has none.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parent.parent
PAGES = (
    "README.md",
    "docs/getting-started.md",
    "docs/identity.md",
    "docs/http-api.md",
    "docs/clients.md",
    "docs/library.md",
)
RUNNABLE = {"sh", "bash", "shell", "console", "http"}
SHOWN_HEADERS = ("ETag", "Location", "Retry-After", "Allow", "Idempotent-Replayed")
MARK = re.compile(r"^<!--\s*docs:\s*(run|skip|output|response)\b\s*(.*?)\s*-->\s*$", re.S)
TIMEOUT = 300

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_JWT = re.compile(r"eyJ[\w-]+\.[\w-]+\.[\w-]+")
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?")
_HEX_ID = re.compile(r"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])")
_RESERVATION = re.compile(r"\b\d{6}-\d{13}-[0-9a-f]{16}\b")  # lead unit, expiry (ms), random
_UNIT = re.compile(r"\d{6}")  # a unit of a sku, picked at random by a reservation
_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
_UNDECIDED = {"PENDING", "ACCEPTED"}  # a registration request before and after the decider ran


class DocsError(AssertionError):
    """A page's block did not run, or did not print or answer what the page shows."""


@dataclass
class Block:
    """One fenced block of a page; ``start``/``end``: its fence lines (0-based, end exclusive)."""

    page: str
    start: int
    end: int
    lang: str
    text: str
    mark: str | None
    reason: str = ""

    @property
    def where(self) -> str:
        return f"{self.page}:{self.start + 1}"


@dataclass
class Report:
    """What running one page did: blocks run and skipped (with reasons), and the pages' text after
    ``--update``."""

    page: str
    executed: int = 0
    skipped: list[str] = field(default_factory=list)
    captured: dict[int, str] = field(default_factory=dict)  # block start line -> new block text
    inserted: dict[int, str] = field(default_factory=dict)  # http block end line -> new block


def blocks(page: str, text: str) -> list[Block]:
    """Every fenced block of ``text``, with the ``docs:`` mark on the line before it, if any."""
    tokens = MarkdownIt("commonmark").parse(text)
    found = []
    for index, token in enumerate(tokens):
        if token.type != "fence" or token.map is None:
            continue
        mark, reason = None, ""
        previous = tokens[index - 1] if index else None
        if previous is not None and previous.type == "html_block":
            matched = MARK.match(previous.content.strip())
            if matched:
                mark, reason = matched.group(1), matched.group(2)
        lang = token.info.split()[0] if token.info.strip() else ""
        found.append(Block(page, token.map[0], token.map[1], lang, token.content, mark, reason))
    return found


def unmarked(found: list[Block]) -> list[str]:
    """Shell and HTTP blocks without a ``docs:`` mark, and skips without a reason."""
    problems = [
        f"{b.where}: a ```{b.lang} block without <!-- docs: run|skip REASON -->"
        for b in found
        if b.lang in RUNNABLE and b.mark is None
    ]
    problems += [
        f"{b.where}: docs: skip needs a reason" for b in found if b.mark == "skip" and not b.reason
    ]
    return problems


def normalise(value: Any, key: str = "") -> Any:
    """``value`` with ids and times replaced by placeholders (what varies from run to run)."""
    if isinstance(value, dict):
        return {k: normalise(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v, key) for v in value]
    if key == "status" and value in _UNDECIDED:
        return "<decided in the background>"
    if isinstance(value, str) and key == "units" and _UNIT.fullmatch(value):
        return "<unit>"
    if isinstance(value, str):
        return normalise_text(value)
    if key.endswith("At") and isinstance(value, int | float) and not isinstance(value, bool):
        return "<time>"
    return value


def normalise_text(text: str) -> str:
    for pattern, placeholder in (
        (_JWT, "<token>"),
        (_RESERVATION, "<reservation>"),
        (_UUID, "<uuid>"),
        (_ISO, "<time>"),
        (_HEX_ID, "<id>"),
    ):
        text = pattern.sub(placeholder, text)
    return re.sub(r'("\w+At"): ?-?\d+(\.\d+)?', r"\1: <time>", text)


@dataclass
class HttpMessage:
    """A request (``first`` = ``METHOD /path``) or a response (``first`` = ``HTTP/1.1 200 OK``)."""

    first: str
    headers: dict[str, str]
    body: str

    @classmethod
    def parse(cls, text: str) -> HttpMessage:
        head, _, body = text.replace("\r\n", "\n").partition("\n\n")
        first, *lines = head.strip("\n").split("\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip()] = value.strip()
        return cls(first.strip(), headers, body.strip())

    def comparable(self) -> tuple[Any, ...]:
        status = self.first.split()[1]
        headers = {k.lower(): normalise_text(v) for k, v in self.headers.items()}
        body = normalise(json.loads(self.body)) if self.body else None
        return status, headers, body


def render(response: requests.Response) -> str:
    lines = [f"HTTP/1.1 {response.status_code} {response.reason}"]
    lines += [
        f"{name}: {response.headers[name]}" for name in SHOWN_HEADERS if name in response.headers
    ]
    body = json.dumps(response.json()) if response.content else ""
    return "\n".join(lines) + "\n\n" + body + ("\n" if body else "")


SAVE = r"""__baseline=" $(compgen -v | tr '\n' ' ') "
__save() { for __v in $(compgen -v); do case "$__baseline" in *" $__v "*) ;; *)
  case "$__v" in __*) ;; *) declare -p "$__v" ;; esac ;; esac; done > "$__DOCS_STATE"; }
[ -s "$__DOCS_STATE" ] && . "$__DOCS_STATE"
trap __save EXIT
set -eo pipefail
"""


class Page:
    """One page's run: its blocks in order, sharing one file of shell variables."""

    def __init__(self, page: str, root: Path, environment: Mapping[str, str], state: Path) -> None:
        self.page, self.root, self.state = page, root, state
        self.environment = {**environment, "__DOCS_STATE": str(state)}
        self.text = (root / page).read_text()
        self.blocks = blocks(page, self.text)

    def variables(self, names: list[str]) -> dict[str, str]:
        """The page's shell variables ``names`` as its blocks left them."""
        script = (
            '[ -s "$__DOCS_STATE" ] && . "$__DOCS_STATE"; for n; do printf "%s\\0" "${!n}"; done'
        )
        out = subprocess.run(
            ["bash", "-c", script, "_", *names],
            env=self.environment,
            capture_output=True,
            text=True,
            check=True,
        )
        return dict(zip(names, out.stdout.split("\0")[:-1], strict=True))

    def expand(self, text: str) -> str:
        names = sorted({a or b for a, b in _VARIABLE.findall(text)})
        values = self.variables(names)
        return _VARIABLE.sub(lambda m: values.get(m.group(1) or m.group(2), ""), text)

    def shell(self, block: Block) -> str:
        done = subprocess.run(
            ["bash", "-c", SAVE + block.text],
            cwd=self.root,
            env=self.environment,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        if done.returncode != 0:
            raise DocsError(
                f"{block.where}: exit {done.returncode}\n{block.text}\n"
                f"stdout: {done.stdout[-3000:]}\nstderr: {done.stderr[-3000:]}"
            )
        return done.stdout

    def send(self, block: Block) -> requests.Response:
        request = HttpMessage.parse(self.expand(block.text))
        method, path = request.first.split()[:2]
        port = self.variables(["PORT"])["PORT"] or self.environment.get("PORT", "3000")
        return requests.request(
            method,
            f"http://127.0.0.1:{port}{path}",
            headers=request.headers,
            data=request.body.encode() or None,
            timeout=60,
        )

    def remember(self, block: Block, response: requests.Response) -> None:
        """``docs: run NAME=key``: the page variable ``NAME`` is the response body's ``key``."""
        for assignment in block.reason.split():
            name, _, key = assignment.partition("=")
            if not re.fullmatch(r"[A-Za-z_]\w*", name) or not key:
                raise DocsError(f"{block.where}: docs: run takes NAME=key, not {assignment!r}")
            body = response.json() if response.content else {}
            if key not in body:
                raise DocsError(f"{block.where}: the response has no {key!r}: {response.text}")
            with self.state.open("a") as state:
                state.write(f"{name}={shlex.quote(str(body[key]))}\n")

    def run(self, update: bool = False) -> Report:
        report = Report(self.page)
        problems = unmarked(self.blocks)
        if problems:
            raise DocsError("\n".join(problems))
        last: tuple[Block, str] | None = None  # the last run block and what it printed/answered
        for block in self.blocks:
            if block.mark == "skip":
                report.skipped.append(f"{block.where}: {block.reason}")
            elif block.mark == "run" and block.lang == "http":
                response = self.send(block)
                report.executed += 1
                self.remember(block, response)
                last = (block, render(response))
                following = self.blocks.index(block) + 1
                if update and (
                    following == len(self.blocks) or self.blocks[following].mark != "response"
                ):
                    report.inserted[block.end] = last[1]
            elif block.mark == "run":
                report.executed += 1
                last = (block, self.shell(block))
            elif block.mark in ("output", "response"):
                if last is None:
                    raise DocsError(
                        f"{block.where}: docs: {block.mark} with no block run before it"
                    )
                ran, got = last
                if update:
                    report.captured[block.start] = got
                elif block.mark == "response":
                    expected, actual = HttpMessage.parse(block.text), HttpMessage.parse(got)
                    if expected.comparable() != actual.comparable():
                        raise DocsError(
                            f"{ran.where}: the response differs from {block.where}'s\n"
                            f"page:\n{block.text}\nserver:\n{got}"
                        )
                elif normalise_text(block.text.strip()) != normalise_text(got.strip()):
                    raise DocsError(
                        f"{ran.where}: the output differs from {block.where}'s\n"
                        f"page:\n{block.text}\nprinted:\n{got}"
                    )
                last = None
        return report

    def updated(self, report: Report) -> str:
        """The page's text with the captured outputs and responses written in."""
        lines = self.text.splitlines(keepends=True)
        edits: list[tuple[int, int, str]] = []
        for block in self.blocks:
            if block.start in report.captured:
                fence = lines[block.start].rstrip("\n")
                edits.append(
                    (block.start, block.end, f"{fence}\n{report.captured[block.start]}```\n")
                )
        for end, got in report.inserted.items():
            edits.append((end, end, f"\n<!-- docs: response -->\n```http\n{got}```\n"))
        for start, end, new in sorted(edits, reverse=True):
            lines[start:end] = [new]
        return "".join(lines)


# The Makefile's install steps into the venv, by the file each leaves there (VENV's rules).
VENV_STAMPS = (".uv", ".installed", ".installed-dev", "checkov/.installed")


def assume_installed(venv: str = sys.prefix) -> list[str]:
    """``make`` options saying every install step of ``venv`` is done (``-o``): a make run by a
    test never reinstalls the venv the tests run in."""
    return [arg for stamp in VENV_STAMPS for arg in ("-o", f"{venv}/{stamp}")]


def make_shim(folder: Path, venv: str = sys.prefix) -> Path:
    """A ``make`` for the pages' blocks: ``make local`` is the stack already running; anything
    else is the real make, told the venv and node_modules are installed (never rebuilt)."""
    real = shutil.which("make") or "/usr/bin/make"
    shim = folder / "make"
    stamps = " ".join(f'-o "{venv}/{stamp}"' for stamp in VENV_STAMPS)
    shim.write_text(
        "#!/usr/bin/env bash\n"
        "# The docs runner's make: `make local` is the local stack the runner already started.\n"
        'for a in "$@"; do if [ "$a" = local ]; then\n'
        '  echo "make local: already running on port ${PORT:-3000} (the docs runner\'s stack)"\n'
        "  exit 0; fi; done\n"
        f"exec {real} {stamps} -o node_modules/.installed "
        f'"VENV={venv}" "$@"\n'
    )
    shim.chmod(0o755)
    return shim


@contextmanager
def page_environment(port: int, venv: str = sys.prefix) -> Iterator[dict[str, str]]:
    """The environment the pages run in: this one, plus ``PORT`` and the ``make`` shim first on
    ``PATH``."""
    with tempfile.TemporaryDirectory(prefix="docs-runner-") as folder:
        make_shim(Path(folder), venv)
        environment = {
            k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MAKELEVEL", "MFLAGS"}
        }
        environment.update(PORT=str(port), PATH=f"{folder}:{environment.get('PATH', '')}")
        yield environment


def run_page(
    page: str, environment: Mapping[str, str], root: Path = ROOT, update: bool = False
) -> Report:
    """Run ``page``'s marked blocks in order; ``update``: write what was captured into the page."""
    with tempfile.TemporaryDirectory(prefix="docs-page-") as folder:
        running = Page(page, root, environment, Path(folder) / "state.sh")
        report = running.run(update)
        if update:
            (root / page).write_text(running.updated(report))
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="*", default=list(PAGES))
    parser.add_argument(
        "--update", action="store_true", help="write captured outputs into the pages"
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "functions"))
    from local import run, template
    from local.dynamodb_local import free_port
    from local.identity import auth_file

    if not template.TEMPLATE.exists():
        template.synthesize()
    port = free_port()
    with run.running(port=port, auth_file=auth_file(port)), page_environment(port) as environment:
        for page in args.pages:
            report = run_page(page, environment, update=args.update)
            print(f"{page}: {report.executed} executed, {len(report.skipped)} skipped")
            for skipped in report.skipped:
                print(f"    skipped {skipped}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
