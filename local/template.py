"""Read the synthesized CloudFormation template: create its tables in DynamoDB Local, and give
each function the environment the stack gives it. Local tables therefore cannot drift from what
``cdk deploy`` creates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "cdk.out" / "Turnstile.template.json"

# CreateTable accepts these table properties as they appear in the template.
_CREATE_KEYS = (
    "AttributeDefinitions",
    "KeySchema",
    "GlobalSecondaryIndexes",
    "LocalSecondaryIndexes",
)


def synthesize() -> Path:
    """Run ``python app.py`` (offline) and return the template's path."""
    subprocess.run(
        [sys.executable, str(ROOT / "app.py")],
        cwd=ROOT,
        check=True,
        env={**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"},
    )
    return TEMPLATE


def load(path: Path = TEMPLATE) -> dict[str, Any]:
    return json.loads(path.read_text())


def resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {
        logical: resource
        for logical, resource in template["Resources"].items()
        if resource["Type"] == kind
    }


def table_request(logical_id: str, properties: dict[str, Any]) -> dict[str, Any]:
    """A CreateTable request for one ``AWS::DynamoDB::Table`` (physical name = logical id)."""
    request: dict[str, Any] = {"TableName": logical_id, "BillingMode": "PAY_PER_REQUEST"}
    for key in _CREATE_KEYS:
        if key in properties:
            request[key] = properties[key]
    stream = properties.get("StreamSpecification")
    if stream:
        request["StreamSpecification"] = {
            "StreamEnabled": True,
            "StreamViewType": stream["StreamViewType"],
        }
    return request


def create_tables(client: Any, template: dict[str, Any]) -> dict[str, str]:
    """Create every table of the template (if missing); returns logical id -> table name."""
    existing = set(client.list_tables()["TableNames"])
    created: dict[str, str] = {}
    for logical, resource in resources(template, "AWS::DynamoDB::Table").items():
        properties = resource["Properties"]
        if logical not in existing:
            client.create_table(**table_request(logical, properties))
        ttl = properties.get("TimeToLiveSpecification")
        if ttl and ttl.get("Enabled"):
            client.update_time_to_live(
                TableName=logical,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]},
            )
        created[logical] = logical
    return created


_INVOKABLE = ("AWS::Lambda::Function", "AWS::Lambda::Alias")


def _refs(value: Any) -> list[str]:
    if isinstance(value, dict):
        if set(value) == {"Ref"} and isinstance(value["Ref"], str):
            return [value["Ref"]]
        return [ref for inner in value.values() for ref in _refs(inner)]
    if isinstance(value, list):
        return [ref for inner in value for ref in _refs(inner)]
    return []


def invoked_function(template: dict[str, Any], target: Any) -> tuple[str, dict[str, Any]]:
    """The function (logical id, resource) that ``target`` invokes: a logical id, or a
    ``FunctionName`` that refers to the function or to one of its aliases (an event source
    mapping names an alias as ``<function name>:<alias>``, built from the alias's ``Ref``)."""
    resources_ = template["Resources"]
    named = [target] if isinstance(target, str) else _refs(target)
    found = [ref for ref in named if resources_.get(ref, {}).get("Type") in _INVOKABLE]
    if len(found) != 1:
        raise ValueError(f"{target!r} does not name one function or alias")
    logical = found[0]
    resource = resources_[logical]
    if resource["Type"] == "AWS::Lambda::Alias":
        logical = resource["Properties"]["FunctionName"]["Ref"]
        resource = resources_[logical]
    return logical, resource


def resolve(value: Any, names: dict[str, str]) -> str:
    """An environment value from the template: a literal, or a Ref to a table."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Ref" in value and value["Ref"] in names:
        return names[value["Ref"]]
    raise ValueError(f"cannot resolve {value!r} locally")


def function_environments(
    template: dict[str, Any], names: dict[str, str]
) -> dict[str, dict[str, str]]:
    """Handler path -> the environment variables the stack sets for that function."""
    environments: dict[str, dict[str, str]] = {}
    for resource in resources(template, "AWS::Lambda::Function").values():
        properties = resource["Properties"]
        variables = (properties.get("Environment") or {}).get("Variables") or {}
        environments[properties["Handler"]] = {
            key: resolve(value, names) for key, value in variables.items()
        }
    return environments


def table_names(template: dict[str, Any]) -> dict[str, str]:
    """Logical table name (``config.PRODUCTS``...) -> local physical name, as the functions see
    them: read back from the table variables the stack gives the functions."""
    physical = {logical: logical for logical in resources(template, "AWS::DynamoDB::Table")}
    environment = merged_environment(function_environments(template, physical))
    return {
        key.removesuffix("_TABLE").lower(): value
        for key, value in environment.items()
        if key.endswith("_TABLE")
    }


def merged_environment(environments: dict[str, dict[str, str]]) -> dict[str, str]:
    """One process serves every function locally, so their variables must agree."""
    merged: dict[str, str] = {}
    for handler, variables in environments.items():
        for key, value in variables.items():
            if key == "POWERTOOLS_SERVICE_NAME":
                continue
            if merged.setdefault(key, value) != value:
                raise ValueError(f"{handler} sets {key}={value}, another function {merged[key]}")
    return merged
