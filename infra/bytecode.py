"""The functions' code asset: ``functions/`` with its bytecode compiled for Python 3.12.

Why ship bytecode: Lambda's ``/var/task`` is read-only, so a module without a ``.pyc`` next to it
is compiled from source at every cold start and the result thrown away. Measured on the dev
machine (Python 3.12, docs/benchmarks.md, "coldstart"): ``compile()`` of the 48 modules of
``functions/`` took 64 ms of CPU, unmarshalling their bytecode 2 ms, against about 260 ms of CPU
for the whole ``import boto3`` + one client baseline; a handler imports most of them. So the
asset carries ``__pycache__/*.cpython-312.pyc`` built by
``compileall`` for the runtime's version (3.12, ``infra.functions.RUNTIME``), in
``unchecked-hash`` mode: no timestamps inside, and nothing is checked against the sources at
import (the asset is immutable, so they cannot drift).

Deterministic: the asset's hash is the hash of its *sources* (``AssetHashType.SOURCE``) with
``__pycache__`` and ``*.pyc`` excluded, so the same sources give the same hash whatever bytecode a
developer's tree holds, and the bytecode is always compiled afresh from the sources (a stray
``.pyc`` is never copied). Local bundling (no Docker): CDK calls :class:`CompiledBytecode`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

from infra.layer import RUNTIME_VERSION as RUNTIME_VERSION  # the tests read it here
from infra.layer import compile_command, interpreter

EXCLUDE = ["**/__pycache__", "**/*.pyc", "**/.DS_Store"]
# The library's CDK constructs (turnstile-ddb[cdk]) are for deploy time: no function imports them.
DEPLOY_TIME_ONLY = ("turnstile_ddb/cdk",)


@jsii.implements(ILocalBundling)
class CompiledBytecode:
    """Copies the sources (no bytecode) and compiles them for the runtime's Python."""

    def __init__(self, source: str) -> None:
        self.source = Path(source)

    def _ignored(self, directory: str, names: list[str]) -> set[str]:
        ignored = set(shutil.ignore_patterns("__pycache__", "*.pyc", ".DS_Store")(directory, names))
        relative = Path(directory).relative_to(self.source)
        deploy_time = {n for n in names if (relative / n).as_posix() in DEPLOY_TIME_ONLY}
        return ignored | deploy_time

    def try_bundle(self, output_dir: str, *args: Any, **kwargs: Any) -> bool:
        out = Path(output_dir)
        shutil.copytree(
            self.source,
            out,
            dirs_exist_ok=True,
            ignore=self._ignored,
        )
        subprocess.run(compile_command(interpreter(), out), check=True)
        return True


def asset(code_path: str) -> lambda_.Code:
    """``code_path`` as a Lambda code asset, bytecode compiled, hashed by its sources."""
    return lambda_.Code.from_asset(
        code_path,
        exclude=[*EXCLUDE, *DEPLOY_TIME_ONLY],
        asset_hash_type=AssetHashType.SOURCE,
        bundling=BundlingOptions(
            # Never used: local bundling always succeeds or raises (Docker does not run here).
            image=DockerImage.from_registry("public.ecr.aws/sam/build-python3.12"),
            local=CompiledBytecode(code_path),
        ),
    )
