"""The project's own dependency layer, built from ``requirements.lock`` without Docker.

Lambda loads Powertools, pydantic, the X-Ray SDK and boto3/botocore from this layer, so the
versions deployed are the versions the tests ran (the public Powertools layer hides its version
behind a bare layer number; layer 27 was 3.23.0 while the tests ran 3.37.0). Two builds from the
same lock, the same pins and the same hashes:

* ``build/layer/arm64``: what ``cdk deploy`` ships (``infra.functions`` makes it a
  ``LayerVersion`` asset); wheels for ``manylinux2014_aarch64``, CPython 3.12.
* ``build/layer/x86_64``: the same pins for this host, for running the deployed artifact locally.

Each directory holds ``python/`` (what Lambda mounts at ``/opt/python``). Which lock entries go in:
the closure of the packages ``requirements.txt`` names, read from the lock's ``# via``
annotations; uv's ``--require-hashes`` refuses the build if that closure missed a dependency.
uv installs them (``install_command``): the lock's own uv, from the venv running this module.

The build is deterministic (same lock, same files, same CDK asset hash): no ``bin/`` scripts
(their shebang names the building interpreter) nor their lines in the wheels' ``RECORD``, no
bytecode but the layer's own. Its bytecode is compiled for the runtime's Python (3.12) by
``compileall`` in ``unchecked-hash`` mode, each module's path recorded as Lambda mounts it
(``/opt/python/...``, :data:`MOUNTED_AT`): no timestamps and no build path inside, so one lock
gives the same bytes on every machine. Lambda's ``/opt`` is read-only: without it every cold start
compiled boto3, botocore, Powertools and pydantic from source and threw the result away (about
60% of an API function's cold-start CPU, docs/benchmarks.md, "coldstart").

A build is skipped when ``build/layer/<arch>.stamp`` holds the fingerprint of the entries and the
recipe; uv's cache lets a rebuild run offline.

    python -m infra.layer --arch arm64|x86_64|all [--force]
"""

from __future__ import annotations

import argparse
import hashlib
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
RUNTIME_INPUT = "requirements.txt"  # the lock names it in ``# via -r requirements.txt``
LAYER_ROOT = ROOT / "build" / "layer"
PYTHON_VERSION = "3.12"  # Lambda's python3.12 runtime (infra.functions.RUNTIME)
PLATFORMS = {"arm64": "aarch64-manylinux2014", "x86_64": "x86_64-manylinux2014"}  # uv's names
_MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}
RECIPE = "3"  # change when the way a layer is built changes: every stamp goes stale

MOUNTED_AT = "/opt/python"  # where Lambda mounts a layer's ``python/``
RUNTIME_VERSION = (3, 12)

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==(\S+)")
_VIA = re.compile(r"^\s*#\s+(?:via\s+)?(-r \S+|[A-Za-z0-9][A-Za-z0-9._-]*)\s*$")


class LayerMissing(RuntimeError):
    """The layer directory for an architecture has not been built."""


@dataclass(frozen=True)
class Pin:
    """One entry of the lock: ``name==version`` with its hashes, and what pulled it in."""

    name: str  # canonical (PEP 503)
    version: str
    requirement: str  # the entry's lines without its comments: name==version and --hash lines
    parents: tuple[str, ...]  # canonical names, or "-r <file>" for an input file


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_lock(text: str) -> dict[str, Pin]:
    """Every pin of a lock written by ``uv pip compile --generate-hashes --annotation-style
    split`` (or pip-compile's equivalent), by canonical name."""
    pins: dict[str, Pin] = {}
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text)
    for block in blocks:
        match = _PIN.match(block)
        if match is None:
            continue
        lines = block.splitlines()
        requirement = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
        parents = []
        for line in lines[1:]:
            via = _VIA.match(line)
            if via and via.group(1) != "via":
                value = via.group(1)
                parents.append(value if value.startswith("-r ") else canonical(value))
        name = canonical(match.group(1))
        pins[name] = Pin(name, match.group(3), requirement.rstrip(), tuple(parents))
    if not pins:
        raise ValueError("no pins found in the lock")
    return pins


def runtime_pins(lock_text: str | None = None) -> dict[str, Pin]:
    """The lock's entries Lambda needs: what ``requirements.txt`` names, and their dependencies
    (transitively, by the lock's annotations)."""
    pins = parse_lock(LOCK.read_text() if lock_text is None else lock_text)
    return closure(pins, [f"-r {RUNTIME_INPUT}"])


def closure(pins: dict[str, Pin], roots: list[str]) -> dict[str, Pin]:
    """The pins ``roots`` reach (input files as ``-r <file>``, or canonical names): the roots
    themselves, and what the lock's ``# via`` annotations say they pull in, transitively."""
    wanted = {name for name, pin in pins.items() if name in roots or set(roots) & set(pin.parents)}
    if not wanted:
        raise ValueError(f"the lock names nothing from {', '.join(roots)}: relock with `make lock`")
    grew = True
    while grew:
        grew = False
        for name, pin in pins.items():
            if name not in wanted and any(parent in wanted for parent in pin.parents):
                wanted.add(name)
                grew = True
    return {name: pins[name] for name in sorted(wanted)}


def layer_requirements(pins: dict[str, Pin]) -> str:
    """A requirements file of exactly these pins with their hashes (``--require-hashes``)."""
    return "".join(pin.requirement + "\n" for pin in pins.values())


def fingerprint(arch: str, requirements: str) -> str:
    """What a build of ``arch`` from ``requirements`` is stamped with."""
    recipe = f"{RECIPE}\n{arch}\n{PLATFORMS[arch]}\n{PYTHON_VERSION}\n{requirements}"
    return hashlib.sha256(recipe.encode()).hexdigest()


def stamp_path(arch: str) -> Path:
    return LAYER_ROOT / f"{arch}.stamp"


def _check_arch(arch: str) -> None:
    if arch not in PLATFORMS:
        raise ValueError(f"unknown architecture {arch!r}: one of {sorted(PLATFORMS)}")


def host_arch() -> str:
    """The layer architecture of this machine (``arm64`` or ``x86_64``): what local runs load."""
    return _MACHINES[platform.machine().lower()]


def layer_dir(arch: str) -> Path:
    """``build/layer/<arch>``: its ``python/`` is the layer's content. Raises
    :class:`LayerMissing` (saying to run ``make layers``) when it has not been built."""
    _check_arch(arch)
    directory = LAYER_ROOT / arch
    if not (directory / "python").is_dir() or not stamp_path(arch).exists():
        raise LayerMissing(
            f"{directory} is not built: run `make layers` "
            f"(or `python -m infra.layer --arch {arch}`)"
        )
    return directory


def distributions(directory: Path) -> dict[str, str]:
    """Canonical name -> version of every distribution installed in ``directory`` (a layer's
    ``python/``), read from the ``*.dist-info/METADATA`` files there."""
    found: dict[str, str] = {}
    for dist in metadata.distributions(path=[str(directory)]):
        name = canonical(dist.metadata["Name"])
        if name in found:
            raise ValueError(f"{name} is installed twice in {directory}")
        found[name] = dist.version
    return found


def _normalize(python: Path) -> None:
    """Remove what would make two builds of one lock differ, or is of no use to Lambda."""
    for cache in sorted(python.rglob("__pycache__"), reverse=True):
        shutil.rmtree(cache)
    for compiled in python.rglob("*.py[co]"):
        compiled.unlink()
    shutil.rmtree(python / "bin", ignore_errors=True)
    (python / ".lock").unlink(missing_ok=True)  # uv's, held on the target while it installs
    for record in python.glob("*.dist-info/RECORD"):
        lines = record.read_text().splitlines(keepends=True)
        kept = [
            line
            for line in lines
            if not line.startswith(("../../bin/", "bin/")) and "__pycache__" not in line
        ]
        if kept != lines:
            record.write_text("".join(kept))


def interpreter(version: tuple[int, int] = RUNTIME_VERSION) -> str:
    """A Python of the runtime's version: this one, else ``python3.12`` on the PATH."""
    if sys.version_info[:2] == version:
        return sys.executable
    name = f"python{version[0]}.{version[1]}"
    candidate = shutil.which(name)
    if candidate and Path(candidate).exists():
        return candidate
    raise RuntimeError(f"{name} is needed to compile bytecode for the runtime")


def compile_command(python: str, tree: Path, mounted_at: str | None = None) -> list[str]:
    """``compileall`` of ``tree`` by ``python``: bytecode that is never checked against its sources
    (``unchecked-hash``: nothing can edit a deployed tree) and holds no timestamp. With
    ``mounted_at``, each module's recorded path is ``mounted_at`` in place of ``tree``."""
    relocated = ["-s", str(tree), "-p", mounted_at] if mounted_at is not None else []
    return [
        python,
        "-m",
        "compileall",
        "-q",
        "--invalidation-mode",
        "unchecked-hash",
        *relocated,
        str(tree),
    ]


def install_command(arch: str, requirements: Path, target: Path) -> list[str]:
    """uv (the lock's, run from this interpreter's environment) installing ``requirements`` into
    ``target`` as Lambda's ``arch`` would load them: its platform's wheels only, every hash
    checked. Files are copied out of uv's cache (its default place, or ``UV_CACHE_DIR``), not
    hard-linked: the build then edits RECORD files, which must not be the cache's."""
    _check_arch(arch)
    return [
        sys.executable,
        "-m",
        "uv",
        "pip",
        "install",
        "--quiet",
        "--require-hashes",
        "--python",
        sys.executable,
        "--only-binary",
        ":all:",
        "--python-platform",
        PLATFORMS[arch],
        "--python-version",
        PYTHON_VERSION,
        "--link-mode",
        "copy",
        "--target",
        str(target),
        "-r",
        str(requirements),
    ]


def build(arch: str, *, force: bool = False, log: bool = True) -> bool:
    """Build ``build/layer/<arch>`` from the lock unless its stamp is current; True if built."""
    _check_arch(arch)
    requirements = layer_requirements(runtime_pins())
    stamp = fingerprint(arch, requirements)
    target = LAYER_ROOT / arch
    current = stamp_path(arch).read_text().strip() if stamp_path(arch).exists() else None
    if not force and current == stamp and (target / "python").is_dir():
        if log:
            print(f"layer {arch}: up to date ({target.relative_to(ROOT)})")
        return False
    LAYER_ROOT.mkdir(parents=True, exist_ok=True)
    work = LAYER_ROOT / f".{arch}.building"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    pinned = work / "requirements.txt"
    pinned.write_text(requirements)
    command = install_command(arch, pinned, work / "layer" / "python")
    if log:
        print(f"layer {arch}: uv pip install {len(requirements.splitlines())} lines from the lock")
    subprocess.run(command, check=True)
    _normalize(work / "layer" / "python")
    if log:
        print(f"layer {arch}: compiling its bytecode for Python {PYTHON_VERSION}")
    python = work / "layer" / "python"
    subprocess.run(compile_command(interpreter(), python.resolve(), MOUNTED_AT), check=True)
    stamp_path(arch).unlink(missing_ok=True)
    shutil.rmtree(target, ignore_errors=True)
    (work / "layer").rename(target)
    shutil.rmtree(work)
    stamp_path(arch).write_text(stamp + "\n")
    if log:
        print(f"layer {arch}: built {target.relative_to(ROOT)} ({size_mb(target):.1f} MB)")
    return True


def size_mb(directory: Path) -> float:
    """Unzipped size, what counts against Lambda's 250 MB (function code plus layers)."""
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file()) / 1_000_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=[*PLATFORMS, "all"], default="all")
    parser.add_argument("--force", action="store_true", help="rebuild even if the stamp matches")
    args = parser.parse_args(argv)
    for arch in PLATFORMS if args.arch == "all" else [args.arch]:
        build(arch, force=args.force)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
