"""The library as a distribution: the wheel holds only the package, and installs with only the SDK.

Builds the wheel the way ``make examples`` does (examples/run.py), then installs it into a fresh
venv, where nothing of the source tree is importable.
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

import pytest

import turnstile_ddb
from examples.run import build_wheel, fresh_venv

# boto3 and botocore, and what they depend on; nothing else may come in with turnstile.
SDK = {"turnstile-ddb", "boto3", "botocore", "jmespath", "s3transfer", "python-dateutil", "urllib3", "six"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("dist"))


def test_the_wheel_holds_the_package_its_types_marker_and_metadata_only(wheel: Path) -> None:
    # Given the built wheel, named after turnstile_ddb.__version__
    assert wheel.name == f"turnstile_ddb-{turnstile_ddb.__version__}-py3-none-any.whl"
    names = zipfile.ZipFile(wheel).namelist()
    # Then it carries the package with py.typed, and metadata, and nothing else (no service, tests)
    dist_info = f"turnstile_ddb-{turnstile_ddb.__version__}.dist-info/"
    strays = [n for n in names if not n.startswith(("turnstile_ddb/", dist_info))]
    assert strays == []
    assert "turnstile_ddb/py.typed" in names and "turnstile_ddb/__init__.py" in names
    assert "turnstile_ddb/lease.py" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    metadata = zipfile.ZipFile(wheel).read(f"{dist_info}METADATA").decode()
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    runtime = [line for line in requires if "extra ==" not in line]
    assert sorted(line.split()[1].split(">")[0] for line in runtime) == ["boto3", "botocore"]


def test_the_wheel_installs_in_a_fresh_venv_with_only_the_sdk(
    wheel: Path, tmp_path: Path
) -> None:
    # Given a fresh venv with the wheel installed
    python = fresh_venv(tmp_path / "venv", wheel)
    # Then only the SDK and its own dependencies came in
    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    )
    installed = {entry["name"].lower() for entry in json.loads(listed.stdout)} - {"pip", "setuptools"}
    assert installed == SDK
    # And the installed package (not the source tree) imports without loading boto3
    probe = (
        "import sys, turnstile_ddb; from turnstile_ddb import lease, versioned; "
        "print(turnstile_ddb.__file__, turnstile_ddb.__version__)"
    )
    out = subprocess.run(
        [str(python), "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    path, version = out.stdout.split()
    assert "site-packages" in path and version == turnstile_ddb.__version__
    # And every module but the CDK extra imports there, with only the SDK: none of them reaches
    # for the service, Powertools, pydantic or anything else of the app around the library
    every = (
        "import importlib, pkgutil, turnstile_ddb\n"
        "for m in pkgutil.iter_modules(turnstile_ddb.__path__):\n"
        "    if m.name != 'cdk':\n"
        "        importlib.import_module('turnstile_ddb.' + m.name)\n"
        "        print(m.name)\n"
    )
    out = subprocess.run(
        [str(python), "-c", every], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    imported = set(out.stdout.split())
    assert {"versioned", "idempotency", "lease", "lease_queue", "record_keys"} <= imported
