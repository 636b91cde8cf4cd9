"""The functions' dependency layer, built from the project's pins (stand-in).

STAND-IN: the deploy-fidelity work (branch ``artifact``) builds the real layer from a hashed lock
with ``make layers``; its ``infra/layer.py`` replaces this one at merge. This one keeps the same
signature, :func:`layer_dir`, so the cold-start bench can load every function as deployed
(its cdk.out asset + ``layer_dir(arch) / "python"``) before that lands.

It installs the runtime pins of ``requirements.txt`` (the Lambda code's imports, nothing of CDK)
with ``pip install --target`` for the host's platform; ``arm64`` cross-installs manylinux wheels.
"""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "layer"
# What the Lambda code imports at run time (requirements.txt pins them).
RUNTIME_PACKAGES = ("aws-lambda-powertools", "pydantic", "boto3", "botocore", "aws-xray-sdk")


def host_arch() -> str:
    return "arm64" if platform.machine().lower() in ("aarch64", "arm64") else "x86_64"


def pins(requirements: Path = ROOT / "requirements.txt") -> list[str]:
    """The ``name==version`` lines of ``requirements`` for :data:`RUNTIME_PACKAGES`."""
    found = []
    for line in requirements.read_text().splitlines():
        name = line.split("==")[0].split("[")[0].strip().lower()
        if name in RUNTIME_PACKAGES and "==" in line:
            found.append(line.strip())
    return found


def layer_dir(arch: str) -> Path:
    """``build/layer/<arch>``, built if missing; its ``python/`` is the layer's content."""
    if arch not in ("arm64", "x86_64"):
        raise ValueError(f"unknown architecture {arch!r}")
    target = BUILD / arch
    content = target / "python"
    marker = target / ".built"
    wanted = "\n".join(pins())
    if marker.exists() and marker.read_text() == wanted:
        return target
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    command += ["--target", str(content), "--upgrade", *pins()]
    if arch != host_arch():
        platform_tag = "manylinux2014_aarch64" if arch == "arm64" else "manylinux2014_x86_64"
        command += ["--platform", platform_tag, "--python-version", "3.12"]
        command += ["--only-binary=:all:", "--implementation", "cp"]
    subprocess.run(command, check=True)
    marker.write_text(wanted)
    return target


if __name__ == "__main__":
    print(layer_dir(sys.argv[1] if len(sys.argv) > 1 else host_arch()))
