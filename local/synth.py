"""``make synth``, skipped when nothing it reads changed: ``python -m local.synth [--force]``.

The synth (``python app.py``: the CDK app, its bundling of ``functions/`` and cdk-nag) takes
7-75 s on a shared 2-core machine, and ``make local`` needs it on every start. It is a pure
function of its inputs (:data:`INPUTS`: the app, its CDK context, ``infra/``, ``functions/``, the
requirements and the layers' build stamps), so a content hash of those is stamped into
``cdk.out/`` (:data:`STAMP`, with the synth's duration) after a successful synth, and the next
one is skipped while the hash matches. Anything changed runs the very same ``python app.py``:
what runs locally is always what ``cdk deploy`` would deploy.

A hand-written hash rather than a build tool's: make's timestamps miss a ``git checkout`` that
restores an older file, and nothing in the venv hashes a tree; :func:`fingerprint` is a few lines
of ``hashlib``. The stamp is removed before a synth starts, so a failed or interrupted one is never
mistaken for a current ``cdk.out/``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTDIR = "cdk.out"
STAMP = "turnstile-synth.sha256"  # in the output folder: deleting cdk.out/ deletes it too
TEMPLATE = "Turnstile.template.json"

# Everything ``python app.py`` reads from the tree, relative to the project root: a file, or a
# folder taken whole. A missing one is hashed as missing (creating it is a change).
INPUTS = (
    "app.py",
    "cdk.json",
    "cdk.context.json",
    "requirements.txt",
    "requirements-dev.txt",
    "requirements.lock",
    "infra",
    "functions",
    "build/layer/arm64.stamp",
    "build/layer/x86_64.stamp",
)
# Never inputs: bytecode and editors' or tools' droppings (the asset is compiled afresh anyway).
IGNORED_PARTS = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
IGNORED_SUFFIXES = (".pyc", ".pyo", ".swp", ".swx", "~", ".DS_Store")


def ignored(relative: Path) -> bool:
    """Whether a path under an input folder is not an input (bytecode, caches, editor files)."""
    return bool(IGNORED_PARTS.intersection(relative.parts)) or relative.name.endswith(
        IGNORED_SUFFIXES
    )


def _files(root: Path, entry: str) -> Iterator[Path]:
    path = root / entry
    if path.is_file():
        yield path
    elif path.is_dir():
        for each in sorted(path.rglob("*")):
            if each.is_file() and not ignored(each.relative_to(root)):
                yield each


def fingerprint(root: Path = ROOT, inputs: Iterable[str] = INPUTS) -> str:
    """sha256 over every input's relative path and content (missing inputs named as missing)."""
    digest = hashlib.sha256()
    for entry in inputs:
        found = False
        for path in _files(root, entry):
            found = True
            content = path.read_bytes()
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(len(content).to_bytes(8, "big") + content)
        if not found:
            digest.update(f"{entry}\0missing\0".encode())
    return digest.hexdigest()


def output_dir(root: Path = ROOT, outdir: Path | None = None) -> Path:
    """Where the synth of ``root`` writes: ``outdir``, or ``root/cdk.out`` (``make synth``'s)."""
    return root / OUTDIR if outdir is None else outdir


def stamp_path(root: Path = ROOT, outdir: Path | None = None) -> Path:
    return output_dir(root, outdir) / STAMP


def current(root: Path = ROOT, digest: str | None = None, outdir: Path | None = None) -> bool:
    """Whether the output folder (``cdk.out/`` under ``root`` unless ``outdir``) was
    synthesized from the inputs as they are now."""
    stamp = stamp_path(root, outdir)
    if not stamp.is_file() or not (output_dir(root, outdir) / TEMPLATE).is_file():
        return False
    recorded = stamp.read_text().split()
    return bool(recorded) and recorded[0] == (digest or fingerprint(root))


def last_seconds(root: Path = ROOT, outdir: Path | None = None) -> float | None:
    """How long the synth that wrote ``root``'s stamp (``outdir``'s) took (None: no stamp)."""
    stamp = stamp_path(root, outdir)
    recorded = stamp.read_text().split() if stamp.is_file() else []
    try:
        return float(recorded[1])
    except (IndexError, ValueError):
        return None


def run_app(root: Path = ROOT, outdir: Path | None = None) -> None:
    """``python app.py`` in ``root``, writing ``outdir`` (default ``root/cdk.out``: app.py's
    own, which it uses when ``CDK_OUTDIR`` is not set); CalledProcessError if it fails."""
    environment = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    environment.pop("CDK_OUTDIR", None)  # app.py would write there instead of root/cdk.out
    if outdir is not None:
        environment["CDK_OUTDIR"] = str(outdir)
    subprocess.run([sys.executable, str(root / "app.py")], cwd=root, check=True, env=environment)


def synthesize(
    root: Path = ROOT,
    *,
    force: bool = False,
    run: Callable[[Path, Path], None] = run_app,
    outdir: Path | None = None,
) -> bool:
    """Synthesize ``root``'s stack into ``outdir`` (default ``root/cdk.out``) with ``run``
    (``python app.py``: ``run(root, outdir)``) unless its stamp there matches the inputs
    (``force``: even then); True if it ran."""
    target = output_dir(root, outdir)
    digest = fingerprint(root)  # before the synth: a file saved meanwhile makes the next one run
    if not force and current(root, digest, target):
        return False
    target.mkdir(parents=True, exist_ok=True)
    stamp_path(root, target).unlink(missing_ok=True)
    started = time.monotonic()
    run(root, target)
    stamp_path(root, target).write_text(f"{digest}\n{time.monotonic() - started:.1f}\n")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m local.synth",
        description="Synthesize the stack into cdk.out/ (python app.py, cdk-nag included), "
        f"skipped when none of its inputs changed since the last synth: {', '.join(INPUTS)} "
        f"(their content hash is stamped in cdk.out/{STAMP}).",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="run python app.py even when the inputs are unchanged",
    )
    args = parser.parse_args(argv)
    if synthesize(force=args.force):
        print(f"synthesized; inputs stamped in {OUTDIR}/{STAMP}")
    else:
        print(f"skipped: no input changed since the last synth ({OUTDIR}/{STAMP})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
