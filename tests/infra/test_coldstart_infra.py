"""Cold start as deployed: SnapStart on every function, reached only through its ``live`` alias,
and one deterministic code asset carrying bytecode compiled for the runtime."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra import bytecode
from infra.functions import ALIAS
from local import template as cfn
from service import catalog

FUNCTIONS = catalog.API_FUNCTIONS + catalog.STREAM_CONSUMERS
ROOT = Path(__file__).resolve().parents[2]


def ours(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Logical id -> function resource, for every function of the catalog."""
    handlers = {spec.handler for spec in FUNCTIONS}
    found = {
        logical: resource
        for logical, resource in cfn.resources(template, "AWS::Lambda::Function").items()
        if resource["Properties"].get("Handler") in handlers
    }
    assert len(found) == len(FUNCTIONS)
    return found


def test_every_function_snapshots_its_published_versions(template):
    for logical, function in ours(template).items():
        assert function["Properties"]["SnapStart"] == {"ApplyOn": "PublishedVersions"}, logical
        # what SnapStart refuses: provisioned concurrency, EFS, ephemeral storage over 512 MB
        assert "FileSystemConfigs" not in function["Properties"], logical
        assert function["Properties"].get("EphemeralStorage", {}).get("Size", 512) <= 512


def test_every_function_has_one_published_version_and_a_live_alias_on_it(template):
    versions = cfn.resources(template, "AWS::Lambda::Version")
    aliases = cfn.resources(template, "AWS::Lambda::Alias")
    for logical in ours(template):
        (version,) = [
            v for v, r in versions.items() if r["Properties"]["FunctionName"] == {"Ref": logical}
        ]
        (alias,) = [
            r for r in aliases.values() if r["Properties"]["FunctionName"] == {"Ref": logical}
        ]
        assert alias["Properties"]["Name"] == ALIAS
        assert alias["Properties"]["FunctionVersion"] == {"Fn::GetAtt": [version, "Version"]}
        assert "ProvisionedConcurrencyConfig" not in alias["Properties"]


def test_api_gateway_may_invoke_only_the_aliases(template):
    aliases = cfn.resources(template, "AWS::Lambda::Alias")
    permissions = [
        p["Properties"]
        for p in cfn.resources(template, "AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
    ]
    assert permissions
    for permission in permissions:
        assert permission["FunctionName"]["Ref"] in aliases, permission["FunctionName"]
    for method in cfn.resources(template, "AWS::ApiGateway::Method").values():
        integration = method["Properties"].get("Integration") or {}
        if integration.get("Type") != "AWS_PROXY":
            continue
        uri = json.dumps(integration["Uri"])
        assert any(f'"{alias}"' in uri for alias in aliases), uri
        assert not any(f'"{f}"' in uri for f in ours(template)), uri


def test_every_event_source_mapping_invokes_the_consumers_alias(template):
    consumers = {spec.handler for spec in catalog.STREAM_CONSUMERS}
    mappings = cfn.resources(template, "AWS::Lambda::EventSourceMapping").values()
    assert len(mappings) == len(consumers)
    for mapping in mappings:
        name = mapping["Properties"]["FunctionName"]
        (ref,) = cfn._refs(name)
        assert template["Resources"][ref]["Type"] == "AWS::Lambda::Alias"
        assert json.dumps(name).endswith(f':{ALIAS}"]]}}'), name  # <function name>:live
        _, function = cfn.invoked_function(template, name)
        assert function["Properties"]["Handler"] in consumers


def _asset(assembly: Any, template: dict[str, Any]) -> tuple[str, Path]:
    keys = {f["Properties"]["Code"]["S3Key"] for f in ours(template).values()}
    assert len(keys) == 1, keys  # one asset for every function
    (key,) = keys
    digest = key.removesuffix(".zip")
    return digest, Path(assembly.directory) / f"asset.{digest}"


def test_the_asset_ships_bytecode_for_every_module_compiled_for_the_runtime(assembly, template):
    _, asset = _asset(assembly, template)
    sources = sorted(asset.rglob("*.py"))
    assert sources
    tag = "cpython-{}{}".format(*bytecode.RUNTIME_VERSION)
    for source in sources:
        compiled = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        assert compiled.is_file(), compiled
        flags = int.from_bytes(compiled.read_bytes()[4:8], "little")
        assert flags == 0b01, f"{compiled}: not an unchecked-hash pyc"  # hash-based, unchecked
    assert {p.name for p in asset.rglob("*.pyc")} == {
        f"{s.stem}.{tag}.pyc" for s in sources
    }  # nothing else: no stray bytecode of another version


def test_the_same_sources_give_the_same_asset_even_with_stray_bytecode(
    assembly, template, tmp_path_factory
):
    digest, _ = _asset(assembly, template)
    # Given a developer's tree with bytecode lying around (another version's, a deleted module's)
    stray = ROOT / "functions" / "service" / "__pycache__"
    stray.mkdir(exist_ok=True)
    planted = [stray / "coldstart_stray.cpython-311.pyc", stray / "gone.cpython-312.pyc"]
    for path in planted:
        path.write_bytes(b"not bytecode")
    try:
        import app

        # When the stack is synthesized again
        again = app.build(outdir=str(tmp_path_factory.mktemp("cdk.out.again"))).synth()
    finally:
        for path in planted:
            path.unlink()
    second = dict(again.get_stack_by_name(app.STACK_NAME).template)
    digest_again, asset_again = _asset(again, second)
    # Then the asset hash is the same, and the stray files are not in it
    assert digest_again == digest
    assert not list(asset_again.rglob("coldstart_stray*")) and not list(asset_again.rglob("gone*"))


@pytest.mark.parametrize("version", [(3, 12)])
def test_bytecode_is_compiled_by_the_runtimes_python(version):
    import subprocess

    found = subprocess.run(
        [bytecode.interpreter(version), "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert found == str(version)
