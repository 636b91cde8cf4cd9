"""The functions' dependency layer, built from the pinned requirements (stand-in).

``layer_dir(arch)`` is ``<repo>/build/layer/<arch>``; its ``python/`` folder is the layer's content
(what Lambda unpacks into ``/opt/python``). Built with pip for the target platform
(``--platform manylinux2014_<machine> --python-version 3.12 --only-binary=:all: --target``), so no
Docker is needed and the host-arch build (``x86_64`` here) holds the very versions the arm64 build
deploys.

    python -m infra.layer --arch x86_64

This is a minimal stand-in so the local runtime (``local.workers``) has a layer to load; the
artifact branch's module (hashed lock, CDK asset) replaces it with the same signature.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "requirements.txt"
ARCHES = {"arm64": "aarch64", "x86_64": "x86_64"}
# What the functions import at run time; the rest of requirements.txt is deploy-time tooling.
RUNTIME_PACKAGES = ("aws-lambda-powertools", "pydantic", "boto3", "botocore", "aws-xray-sdk")
STAMP = ".requirements.sha256"


def layer_dir(arch: str) -> Path:
    if arch not in ARCHES:
        raise ValueError(f"arch must be one of {sorted(ARCHES)}, not {arch!r}")
    return ROOT / "build" / "layer" / arch


def runtime_requirements(text: str) -> list[str]:
    """The pinned lines of ``RUNTIME_PACKAGES`` in a requirements file."""
    pins = []
    for line in text.splitlines():
        name = re.split(r"[=<>!~\[ ;]", line.strip(), maxsplit=1)[0].lower()
        if name in RUNTIME_PACKAGES:
            pins.append(line.split("#", 1)[0].strip())
    return pins


def build(arch: str, *, force: bool = False) -> Path:
    """Install the runtime requirements for ``arch`` into ``layer_dir(arch)/python`` (skipped when
    the requirements did not change since the last build)."""
    pins = runtime_requirements(REQUIREMENTS.read_text())
    digest = hashlib.sha256("\n".join(pins).encode()).hexdigest()
    target = layer_dir(arch)
    stamp = target / STAMP
    if not force and stamp.exists() and stamp.read_text() == digest:
        return target
    content = target / "python"
    if content.exists():
        subprocess.run(["rm", "-rf", str(content)], check=True)
    content.mkdir(parents=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--platform",
            f"manylinux2014_{ARCHES[arch]}",
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
            "--only-binary=:all:",
            "--target",
            str(content),
            *pins,
        ],
        check=True,
    )
    stamp.write_text(digest)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="build the functions' dependency layer")
    parser.add_argument("--arch", choices=sorted(ARCHES), required=True)
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    print(build(args.arch, force=args.force))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
