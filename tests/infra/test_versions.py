"""What is tested is what is deployed: one lock (``requirements.lock``) for the dev venv and the
Lambda layer, and the template ships that layer.

The layer directories are the ones ``make layers`` built (``infra.layer``); these tests read them,
they do not build them (a stale layer fails ``test_layers_are_built_from_the_current_lock``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import marshal
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from infra import layer
from local import template as cfn

ROOT = Path(__file__).resolve().parents[2]

# Public Powertools layers (AWSLambdaPowertoolsPythonV3-python312-arm64:<n>) whose release is
# known, as Powertools' own SSM parameters (/aws/service/powertools/python/arm64/python3.12/<v>)
# map them. A public layer not listed here is an unknown version, which fails the check too.
PUBLIC_POWERTOOLS_LAYERS = {"27": "3.23.0"}
_PUBLIC_LAYER = re.compile(r"AWSLambdaPowertoolsPythonV3-python312-(?:arm64|x86_64):(\d+)")


@pytest.fixture(scope="module")
def locked() -> dict[str, layer.Pin]:
    return layer.parse_lock(layer.LOCK.read_text())


@pytest.fixture(scope="module")
def runtime() -> dict[str, str]:
    return {name: pin.version for name, pin in layer.runtime_pins().items()}


def tree(directory: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under ``directory``."""
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def pins_of(requirements: Path) -> dict[str, str]:
    pins = {}
    for line in requirements.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(\S+)", line)
        if match:
            pins[layer.canonical(match.group(1))] = match.group(2)
    return pins


def test_the_lock_pins_every_input_at_its_version(locked):
    # Given the human-edited inputs: a pin edited there without `make lock` fails here
    for requirements in ("requirements.txt", "requirements-local.txt", "requirements-dev.txt"):
        for name, version in pins_of(ROOT / requirements).items():
            assert name in locked, f"{name} ({requirements}) is not in the lock: run make lock"
            assert locked[name].version == version, (requirements, name)
        # And every entry carries hashes (pip --require-hashes needs them)
    assert all("--hash=sha256:" in pin.requirement for pin in locked.values())


def test_runtime_closure_holds_what_lambda_imports_and_no_build_tool(runtime):
    assert {"aws-lambda-powertools", "pydantic", "pydantic-core", "boto3", "botocore"} <= set(
        runtime
    )
    assert {"aws-xray-sdk", "wrapt", "jmespath", "typing-extensions"} <= set(runtime)
    assert not {"aws-cdk-lib", "constructs", "cdk-nag", "moto", "pytest", "uv"} & set(runtime)


def test_runtime_closure_follows_the_lock_annotations():
    # Given a lock where a input pulls in a dependency and a dev tool pulls in another
    lock = (
        "a==1 \\\n    --hash=sha256:00\n    # via -r requirements.txt\n"
        "b==2 \\\n    --hash=sha256:11\n    # via\n    #   a\n    #   tool\n"
        "c==3 \\\n    --hash=sha256:22\n    # via b\n"
        "tool==4 \\\n    --hash=sha256:33\n    # via -r requirements-dev.txt\n"
        "d==5 \\\n    --hash=sha256:44\n    # via tool\n"
    )
    # Then the runtime closure is a and what it needs, transitively, and only that
    pins = layer.runtime_pins(lock)
    assert {name: pin.version for name, pin in pins.items()} == {"a": "1", "b": "2", "c": "3"}
    assert layer.layer_requirements(pins).splitlines()[:2] == ["a==1 \\", "    --hash=sha256:00"]


@pytest.mark.parametrize("arch", sorted(layer.PLATFORMS))
def test_layers_are_built_from_the_current_lock(arch):
    # A layer left over from an older lock would ship versions nothing tested
    expected = layer.fingerprint(arch, layer.layer_requirements(layer.runtime_pins()))
    layer.layer_dir(arch)
    assert layer.stamp_path(arch).read_text().strip() == expected


def test_arm64_layer_holds_exactly_the_locked_runtime_versions(runtime):
    assert layer.distributions(layer.layer_dir("arm64") / "python") == runtime


def test_both_architectures_hold_the_same_versions():
    arm64 = layer.distributions(layer.layer_dir("arm64") / "python")
    x86_64 = layer.distributions(layer.layer_dir("x86_64") / "python")
    assert arm64 == x86_64


@pytest.mark.parametrize(("arch", "machine"), [("arm64", "aarch64"), ("x86_64", "x86_64")])
def test_each_layer_has_its_architectures_native_code(arch, machine):
    # pydantic-core and wrapt are compiled: the arm64 layer must carry aarch64 builds
    python = layer.layer_dir(arch) / "python"
    native = [p.name for p in python.rglob("*.so")]
    assert any("pydantic_core" in str(p) for p in python.rglob("*.so"))
    assert native and all(machine in name for name in native if "cpython-312" in name), native


def test_dev_venv_runs_the_locked_versions(locked):
    # The tests run in the dev venv: every locked package at its locked version
    installed = {name: metadata.version(name) for name in locked}
    assert installed == {name: pin.version for name, pin in locked.items()}


def test_layers_are_deterministic_and_hold_no_build_residue():
    for arch in layer.PLATFORMS:
        python = layer.layer_dir(arch) / "python"
        assert not list(python.rglob("*.pyo"))
        assert not (python / "bin").exists()
        assert not (python / ".lock").exists()  # uv's lock on its target while it installs
        for record in python.glob("*.dist-info/RECORD"):
            lines = record.read_text().splitlines()
            assert not [line for line in lines if line.startswith(("../../bin/", "bin/"))]


def compiled_modules(python: Path) -> dict[str, bytes]:
    """Each module of a layer's ``python/`` (its path there) -> its bytecode file's content,
    the bytecode Python 3.12 would load for it (``b""``: none)."""
    found = {}
    for source in python.rglob("*.py"):
        cached = source.parent / "__pycache__" / f"{source.stem}.cpython-312.pyc"
        found[source.relative_to(python).as_posix()] = (
            cached.read_bytes() if cached.is_file() else b""
        )
    return found


def test_layers_ship_bytecode_for_the_runtime_that_lambda_loads_as_it_is():
    # Lambda's /opt is read-only: a module without bytecode is compiled at every cold start
    x86_64 = compiled_modules(layer.layer_dir("x86_64") / "python")
    arm64 = compiled_modules(layer.layer_dir("arm64") / "python")
    missing = sorted(name for name, code in {**x86_64, **arm64}.items() if not code)
    assert not missing, missing[:5]
    for name, code in arm64.items():
        # unchecked-hash: never compared with the source (flags 0b01), so no timestamp inside
        assert code[:4] == importlib.util.MAGIC_NUMBER and code[4:8] == (1).to_bytes(4, "little")
        path = marshal.loads(code[16:]).co_filename
        assert path == f"{layer.MOUNTED_AT}/{name}", (name, path)  # where Lambda mounts it
    # Deterministic: a module both architectures hold in the same source has the same bytes
    shared = [name for name in arm64 if name in x86_64]
    same_source = [
        name
        for name in shared
        if (layer.layer_dir("arm64") / "python" / name).read_bytes()
        == (layer.layer_dir("x86_64") / "python" / name).read_bytes()
    ]
    assert len(same_source) > 500, len(same_source)
    assert [name for name in same_source if arm64[name] != x86_64[name]] == []


def test_the_bytecode_of_a_layer_is_relocated_to_where_lambda_mounts_it(tmp_path):
    command = layer.compile_command("python3.12", tmp_path, layer.MOUNTED_AT)
    assert command[1:3] == ["-m", "compileall"]
    assert command[command.index("--invalidation-mode") + 1] == "unchecked-hash"
    assert command[command.index("-s") + 1] == str(tmp_path)
    assert command[command.index("-p") + 1] == "/opt/python"
    assert command[-1] == str(tmp_path)


def test_layers_are_installed_by_uv_into_files_of_their_own():
    for arch in layer.PLATFORMS:
        python = layer.layer_dir(arch) / "python"
        installers = {p.read_text().strip() for p in python.glob("*.dist-info/INSTALLER")}
        assert installers == {"uv"}, (arch, installers)
        # And no file is a hard link into uv's cache: normalizing RECORD must not edit the cache
        linked = [p for p in python.rglob("*") if p.is_file() and p.stat().st_nlink > 1]
        assert not linked, (arch, linked[:5])


def test_the_layer_install_requires_hashes_and_the_lambda_platform(tmp_path):
    command = layer.install_command("arm64", tmp_path / "requirements.txt", tmp_path / "python")
    assert command[:4] == [sys.executable, "-m", "uv", "pip"]
    assert "--require-hashes" in command and "--only-binary" in command
    assert command[command.index("--python-platform") + 1] == "aarch64-manylinux2014"
    assert command[command.index("--python-version") + 1] == "3.12"
    assert command[command.index("--link-mode") + 1] == "copy"
    assert "--cache-dir" not in command  # uv's own default (or UV_CACHE_DIR): never the repo


def test_function_code_plus_layer_fits_lambdas_unzipped_limit():
    functions = sum(
        f.stat().st_size
        for f in (ROOT / "functions").rglob("*")
        if f.is_file() and "__pycache__" not in f.parts
    )
    total_mb = layer.size_mb(layer.layer_dir("arm64")) + functions / 1_000_000
    assert total_mb < 250, total_mb


# --- the template: what cdk deploy ships ---------------------------------------------------


def assets(assembly: Any) -> dict[str, Path]:
    """Asset hash -> its staged path in the cloud assembly (from ``<stack>.assets.json``)."""
    directory = Path(assembly.directory)
    staged = {}
    for manifest in directory.glob("*.assets.json"):
        for key, asset in json.loads(manifest.read_text()).get("files", {}).items():
            staged[key] = directory / asset["source"]["path"]
    return staged


def layer_hashes(resource: dict[str, Any]) -> str:
    key = resource["Properties"]["Content"]["S3Key"]
    assert isinstance(key, str) and key.endswith(".zip"), key
    return key.removesuffix(".zip")


def powertools_deployed(
    function: dict[str, Any], template: dict[str, Any], assembly: Any
) -> list[str]:
    """The Powertools version each of ``function``'s layers provides, as far as can be known:
    read from the shipped asset for the project's own layer, from the public layer's number
    otherwise ("unknown" when that number is not known)."""
    versions = []
    layer_versions = cfn.resources(template, "AWS::Lambda::LayerVersion")
    staged = assets(assembly)
    for ref in function["Properties"].get("Layers", []):
        if isinstance(ref, dict) and ref.get("Ref") in layer_versions:
            shipped = staged[layer_hashes(layer_versions[ref["Ref"]])]
            found = layer.distributions(shipped / "python").get("aws-lambda-powertools")
            if found:
                versions.append(found)
            continue
        public = _PUBLIC_LAYER.search(json.dumps(ref))
        if public:
            versions.append(PUBLIC_POWERTOOLS_LAYERS.get(public.group(1), "unknown"))
    return versions


def test_every_function_is_deployed_with_the_locked_powertools(template, assembly, runtime):
    functions = cfn.resources(template, "AWS::Lambda::Function")
    assert functions
    for logical, function in functions.items():
        # Then exactly one layer provides Powertools, and it is the version the tests ran
        assert powertools_deployed(function, template, assembly) == [
            runtime["aws-lambda-powertools"]
        ], logical


def test_the_check_sees_what_the_public_layer_27_would_deploy(template, assembly, runtime):
    # Given a function as the stack declared it before the project's own layer: public layer 27
    arn = "arn:aws:lambda:eu-west-1:017000801446:layer:AWSLambdaPowertoolsPythonV3-python312-arm64"
    old = {"Properties": {"Layers": [{"Fn::Join": ["", [f"{arn}:27"]]}]}}
    unknown = {"Properties": {"Layers": [{"Fn::Join": ["", [f"{arn}:99"]]}]}}
    # Then the check reads 3.23.0 there (not the locked version), and an unknown number as unknown
    assert powertools_deployed(old, template, assembly) == ["3.23.0"]
    assert runtime["aws-lambda-powertools"] != "3.23.0"
    assert powertools_deployed(unknown, template, assembly) == ["unknown"]


def test_every_function_takes_the_one_layer_built_from_the_lock(template, assembly):
    (logical, resource), *others = cfn.resources(template, "AWS::Lambda::LayerVersion").items()
    assert not others
    properties = resource["Properties"]
    assert properties["CompatibleRuntimes"] == ["python3.12"]
    assert properties["CompatibleArchitectures"] == ["arm64"]
    for function in cfn.resources(template, "AWS::Lambda::Function").values():
        assert function["Properties"]["Layers"] == [{"Ref": logical}]
        assert function["Properties"]["Architectures"] == ["arm64"]
    # And the shipped asset is, file for file, the arm64 layer make layers built
    shipped = assets(assembly)[layer_hashes(resource)]
    assert tree(shipped) == tree(layer.layer_dir("arm64"))


def test_a_missing_layer_says_to_run_make_layers(monkeypatch, tmp_path):
    monkeypatch.setattr(layer, "LAYER_ROOT", tmp_path)
    with pytest.raises(layer.LayerMissing, match="make layers"):
        layer.layer_dir("arm64")
    with pytest.raises(ValueError, match="unknown architecture"):
        layer.layer_dir("sparc")
