"""The CDK CLI that deploys is pinned in package.json (installed by ``npm ci``), and it reads the
cloud assembly aws-cdk-lib writes (the npm ``aws-cdk`` 3.0.0 line fails with "Cloud assembly schema
version mismatch"). Checked offline: ``cdk ls --app <assembly dir>`` reads the manifest only."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CDK = ROOT / "node_modules" / ".bin" / "cdk"


def cdk_ls(assembly_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "CI": "true"}
    return subprocess.run(
        [str(CDK), "ls", "--app", str(assembly_dir), "--no-notices"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def manifest_only(assembly: Any, into: Path) -> Path:
    """The assembly's JSON files (manifest, template, asset manifest) without the staged assets."""
    for path in Path(assembly.directory).glob("*.json"):
        shutil.copy(path, into / path.name)
    return into


def test_package_json_pins_an_exact_2x_cli_and_the_lock_agrees():
    wanted = json.loads((ROOT / "package.json").read_text())["dependencies"]["aws-cdk"]
    assert re.fullmatch(r"2\.\d+\.\d+", wanted), wanted  # exact, 2.x: never ^ nor the 3.0.0 tag
    locked = json.loads((ROOT / "package-lock.json").read_text())["packages"]
    assert locked["node_modules/aws-cdk"]["version"] == wanted
    installed = json.loads((ROOT / "node_modules" / "aws-cdk" / "package.json").read_text())
    assert installed["version"] == wanted


def test_pinned_cli_reads_the_assembly_aws_cdk_lib_writes(assembly, tmp_path):
    listed = cdk_ls(manifest_only(assembly, tmp_path))
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert listed.stdout.split() == ["Turnstile"]


def test_cli_refuses_an_assembly_schema_newer_than_it_knows(assembly, tmp_path):
    # Given the same assembly, claiming a schema version far past any 2.x CLI's
    directory = manifest_only(assembly, tmp_path)
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest["version"] = "999.0.0"
    (directory / "manifest.json").write_text(json.dumps(manifest))
    # Then the CLI refuses it: the check above is one that can fail
    refused = cdk_ls(directory)
    assert refused.returncode != 0
    assert "schema version mismatch" in refused.stdout + refused.stderr
