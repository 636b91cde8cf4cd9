"""Generate the API's clients from its OpenAPI document, and type-check the programs that use them.

    python -m clients.generate            # what ``make clients`` runs: build/clients/

Both generators are maintained projects, pinned (openapi-python-client in requirements.lock,
openapi-typescript and typescript in package-lock.json), and read the document the server serves
(``local.docs.document()``), written first to ``build/clients/openapi.json``:

* ``build/clients/python/turnstile_client``: openapi-python-client's typed package (httpx + attrs);
* ``build/clients/ts/turnstile.d.ts``: openapi-typescript's ``paths`` / ``components`` types.

Nothing there is edited by hand or committed (``build/`` is ignored): change the document (the
functions' route declarations), then ``make clients`` again. A generator run prints nothing but its
banner; any other line it prints is a warning (a schema it dropped, a reference it could not
follow) and fails the run (:func:`warnings`).

The checks, which ``make clients`` runs after generating and the tests run too:

* :func:`typescript`: ``tsc --noEmit`` over ``clients/ts/walkthrough.ts`` against the generated
  types (a tsconfig written next to them extends ``clients/ts/tsconfig.json``);
* :func:`mypy`: ``mypy --strict`` over ``clients/walkthrough.py`` (the generated package on its
  path, its own code not reported); ``any_expr=True`` adds ``--disallow-any-expr``: no ``Any``
  reaches the walkthrough on a success path that has a body. A line ending ``# 204`` calls a
  204 route, whose empty body the generator types ``Any`` (its answer is
  ``Response[Any | <Op>Error]``): that one error is excused there, every other is reported
  (:func:`unexcused`), and so is a marked line whose answer no longer has that ``Any``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "clients"
SOURCES = ROOT / "clients"
PACKAGE = "turnstile_client"
TYPES = "turnstile.d.ts"
NO_BODY = "# 204"
# The one error a ``# 204`` line is excused: the generator types a 204's empty body ``Any``
# (``cast(Any, None)``), so the call's answer is ``Response[Any | <Op>Error]``.
EMPTY_BODY_ANY = re.compile(
    r'error: Expression type contains "Any" \(has type "Response\[Any \| \w+Error\]"\)'
)
WALKTHROUGH_TS = SOURCES / "ts" / "walkthrough.ts"
# Every success answer with a body typed (none ``unknown``): fails, naming them, while one is not.
TYPED_TS = SOURCES / "ts" / "typed.ts"
# What a clean run prints; any other non-blank line is a warning.
_CLEAN = (
    re.compile(r"Generating .*"),  # openapi-python-client
    re.compile(r"✨ openapi-typescript \S+"),
    re.compile(r"🚀 .+ → .+ \[[\d.]+m?s\]"),
)


class GenerationError(RuntimeError):
    """A generator or a type checker failed (its output is the message)."""


@dataclass(frozen=True)
class Generated:
    """Where one run wrote its outputs, and the warnings its generators printed."""

    folder: Path
    warnings: list[str]

    @property
    def document(self) -> Path:
        return self.folder / "openapi.json"

    @property
    def python(self) -> Path:
        """The folder holding the package (what goes on ``sys.path`` / ``MYPYPATH``)."""
        return self.folder / "python"

    @property
    def typescript(self) -> Path:
        return self.folder / "ts" / TYPES


def warnings(output: str) -> list[str]:
    """The lines of a generator's output that are not its clean-run banner."""
    lines = (line.strip() for line in output.splitlines())
    return [line for line in lines if line and not any(p.fullmatch(line) for p in _CLEAN)]


def _run(command: Sequence[str], cwd: Path = ROOT) -> str:
    done = subprocess.run(
        list(command), cwd=cwd, capture_output=True, text=True, check=False, timeout=300
    )
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise GenerationError(f"{' '.join(command)}: exit {done.returncode}\n{output}")
    return output


def python_client(document: Path, package: Path) -> list[str]:
    """openapi-python-client: ``package`` (a folder named as the package) from ``document``; the
    warnings it printed."""
    return warnings(
        _run(
            [
                *(sys.executable, "-m", "openapi_python_client", "generate"),
                *("--path", str(document), "--meta", "none", "--overwrite"),
                *("--output-path", str(package), "--config", str(SOURCES / "python.yaml")),
            ]
        )
    )


def typescript_types(document: Path, types: Path) -> list[str]:
    """openapi-typescript: the ``types`` file from ``document``; the warnings it printed."""
    types.parent.mkdir(parents=True, exist_ok=True)
    return warnings(
        _run(
            [
                str(ROOT / "node_modules" / ".bin" / "openapi-typescript"),
                *(str(document), "--output", str(types)),
                # A default is what the server fills in: the field stays optional in a request.
                "--default-non-nullable=false",
            ]
        )
    )


def generate(folder: Path = BUILD, document: dict[str, Any] | None = None) -> Generated:
    """Write ``document`` (default: the served one) into ``folder`` and both clients from it."""
    if document is None:
        from local import docs

        document = docs.document()
    folder.mkdir(parents=True, exist_ok=True)
    out = Generated(folder, [])
    out.document.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    out.warnings.extend(python_client(out.document, out.python / PACKAGE))
    out.warnings.extend(typescript_types(out.document, out.typescript))
    return out


def typescript(generated: Generated, programs: Sequence[Path] = (WALKTHROUGH_TS,)) -> str:
    """``tsc --noEmit`` over ``programs`` against ``generated``'s types."""
    config = generated.typescript.parent / "tsconfig.json"
    config.write_text(
        json.dumps(
            {
                "extends": str(SOURCES / "ts" / "tsconfig.json"),
                "compilerOptions": {
                    "paths": {"turnstile-api": [str(generated.typescript.resolve())]}
                },
                "files": [str(program.resolve()) for program in programs],
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    return _run([str(ROOT / "node_modules" / ".bin" / "tsc"), "--noEmit", "-p", str(config)])


def mypy(generated: Generated, any_expr: bool = False) -> str:
    """``mypy --strict`` over clients/walkthrough.py with the generated package on its path;
    ``any_expr``: also ``--disallow-any-expr``, the empty 204 bodies' ``Any`` excused."""
    config = generated.folder / "mypy.ini"
    config.write_text(
        "[mypy]\nstrict = True\n"
        f"mypy_path = {generated.python}\n"
        f"cache_dir = {generated.folder / '.mypy_cache'}\n"
        f"[mypy-{PACKAGE}.*]\nfollow_imports = silent\n",
        encoding="utf-8",
    )
    command = [sys.executable, "-m", "mypy", "--config-file", str(config)]
    command += ["--disallow-any-expr"] if any_expr else []
    walkthrough = SOURCES / "walkthrough.py"
    done = subprocess.run(
        [*command, str(walkthrough)], cwd=ROOT, capture_output=True, text=True, check=False
    )
    source = walkthrough.read_text(encoding="utf-8").splitlines()
    errors = [line for line in done.stdout.splitlines() if ": error: " in line]
    if any_expr:
        errors = unexcused(errors, source, str(walkthrough))
    if errors or done.returncode not in (0, 1):
        raise GenerationError("\n".join(errors) or done.stdout + done.stderr)
    return done.stdout


def unexcused(
    errors: list[str], source: list[str], path: str = "clients/walkthrough.py"
) -> list[str]:
    """mypy's ``errors`` over ``source`` but the empty body's ``Any`` on lines ending ``# 204``
    (:data:`EMPTY_BODY_ANY`); and a line so marked that has no such error (its body typed now)."""
    marked = {n for n, line in enumerate(source, 1) if line.rstrip().endswith(NO_BODY)}
    excused: set[int] = set()
    left = []
    for error in errors:
        number = int(error.split(":")[1])
        if number in marked and EMPTY_BODY_ANY.search(error):
            excused.add(number)
        else:
            left.append(error)
    stale = sorted(marked - excused)
    left += [
        f"{path}:{n}: marked {NO_BODY} but its answer has no Any body: drop the marker"
        for n in stale
    ]
    return left


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=BUILD, help="where to write (build/clients)")
    parser.add_argument(
        "--no-check", action="store_true", help="generate only: no tsc, no mypy on the programs"
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "functions"))
    generated = generate(args.out)
    print(f"{generated.python / PACKAGE}\n{generated.typescript}")
    if generated.warnings:
        print("generator warnings:\n" + "\n".join(generated.warnings), file=sys.stderr)
        return 1
    if not args.no_check:
        typescript(generated)
        print("tsc --noEmit clients/ts/walkthrough.ts: no error")
        mypy(generated)
        print("mypy --strict clients/walkthrough.py: no error")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
