"""What is tested is what is deployed: every function of the synthesized stack imports
its handler from its ``cdk.out`` asset plus the layer, in a clean interpreter, and serves a request.

The workers (``functions``, one per function, started once per session) are what ``make local``
and this tier run. A layer holding another Powertools than the lock's shows here as an init
failure: Powertools 3.23.0 (what the public layer 27 the stack used to take holds) lacks
``RequestUnsupportedContentType`` and ``ApiGatewayResolver._build_response`` (defect 1).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from local import workers
from service import catalog
from tests.helpers import ALICE, proxy_event, signed_in

ROOT = Path(__file__).resolve().parents[2]
OLD_POWERTOOLS = "3.23.0"  # Powertools' SSM parameters: layer 27 of ...python312-arm64

# One harmless request per API function: a route that reads (or refuses) and writes nothing.
REQUESTS: dict[str, tuple[str, str, dict[str, str], Any]] = {
    "products": ("GET", "/products/{productId}", {"productId": "as-deployed-none"}, None),
    "locks": (  # releasing a lock nobody holds: refused, nothing written
        "DELETE",
        "/locks/{resource}",
        {"resource": "as-deployed-none"},
        {"owner": "alice", "fence": 1},
    ),
    "wallets": ("GET", "/wallets/{walletId}", {"walletId": "as-deployed-none"}, None),
    "inventory": ("GET", "/inventory/{sku}", {"sku": "as-deployed-none"}, None),
    "events": ("GET", "/events/{eventId}", {"eventId": "as-deployed-none"}, None),
}


def skipped_record(table: str) -> dict[str, Any]:
    """A stream record every consumer passes over without a write (a removal of a non-unit)."""
    return {
        "eventID": "as-deployed-1",
        "eventName": "REMOVE",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": {
            "Keys": {"sku": {"S": "none"}, "sk": {"S": "none"}, "eventId": {"S": "none"}},
            "SequenceNumber": "100000000000000000001",
            "SizeBytes": 10,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
        "eventSourceARN": f"arn:aws:dynamodb:us-east-1:123456789012:table/{table}/stream/1",
    }


def test_every_function_of_the_template_runs_in_a_worker(functions, template):
    handlers = {
        r["Properties"]["Handler"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
    }
    assert set(functions) == handlers
    assert handlers == {s.handler for s in catalog.API_FUNCTIONS + catalog.STREAM_CONSUMERS}


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_each_api_function_as_deployed_refuses_the_anonymous_and_serves_the_signed_in(
    functions, name
):
    worker = functions[catalog.spec(name).handler]
    method, resource, params, body = REQUESTS[name]
    event = proxy_event(
        method,
        resource,
        resource.format(**params),
        body=None if body is None else json.dumps(body),
        params=params,
        caller=None,
    )
    # When the request comes without an authorizer's claims, then with alice's
    anonymous = worker(signed_in(event, None))
    answered = worker(signed_in(event, ALICE))
    # Then the first is refused by the function itself, the second answered in the contract
    assert anonymous["statusCode"] == 401, anonymous
    assert json.loads(anonymous["body"])["error"] == "UNAUTHORIZED"
    assert answered["statusCode"] in (200, 403, 404, 409), answered
    assert "error" in json.loads(answered["body"]) or answered["statusCode"] == 200


@pytest.mark.parametrize("name", [s.name for s in catalog.STREAM_CONSUMERS])
def test_each_stream_function_as_deployed_takes_a_batch(functions, name):
    worker = functions[catalog.spec(name).handler]
    assert worker({"Records": [skipped_record("TablesX")]}) == {"batchItemFailures": []}


def test_a_worker_has_only_the_asset_the_layer_and_the_stdlib(tmp_path, functions):
    # Given a probe function in an asset of its own, run as the workers run every function
    asset = tmp_path / "asset"
    asset.mkdir()
    (asset / "probe.py").write_text(
        "import os, sys\n"
        "def handler(event, context):\n"
        "    found = {}\n"
        "    for name in ('pytest', 'local', 'werkzeug', 'turnstile_ddb', 'boto3'):\n"
        "        try:\n"
        "            __import__(name)\n"
        "            found[name] = True\n"
        "        except ImportError:\n"
        "            found[name] = False\n"
        "    return {'path': sys.path, 'env': dict(os.environ), 'imports': found}\n"
    )
    layer = workers.host_layer()
    function = workers.FunctionDef("Probe", "probe.handler", asset, {"ONLY": "this"}, 3, 128, "R")
    worker = workers.Worker(function, [layer], {"AWS_ENDPOINT_URL_DYNAMODB": "x"}, None)
    try:
        seen = worker.spawn().ready()({}, None)
    finally:
        worker.stop()
    # Then its path is the asset, the layer and the interpreter's standard library
    probe = "import sysconfig; print(sysconfig.get_paths()['stdlib'])"
    stdlib = Path(
        subprocess.check_output([sys.executable, "-I", "-S", "-c", probe], text=True).strip()
    )
    assert seen["path"][:2] == [str(asset), str(layer)]
    assert all(Path(p).is_relative_to(stdlib.parent) for p in seen["path"][2:]), seen["path"]
    assert not any("site-packages" in p or str(ROOT) in p for p in seen["path"][2:])
    # nothing of the source tree or the dev venv: the layer's boto3 is there, the rest is not
    assert seen["imports"] == {
        "pytest": False,
        "local": False,
        "werkzeug": False,
        "turnstile_ddb": False,
        "boto3": True,
    }
    # and its environment is the template's plus Lambda's and the local endpoint
    assert seen["env"]["ONLY"] == "this" and seen["env"]["AWS_ENDPOINT_URL_DYNAMODB"] == "x"
    assert seen["env"]["AWS_LAMBDA_FUNCTION_NAME"] == "Probe"
    assert "VIRTUAL_ENV" not in seen["env"] and "PYTHONPATH" not in seen["env"]


def powertools_layer(version: str, locked: Path, into: Path) -> Path:
    """The locked layer with only Powertools swapped for ``version`` (cached under build/)."""
    content = into / "python"
    if (into / ".done").exists():
        return content
    content.mkdir(parents=True, exist_ok=True)
    for entry in locked.iterdir():
        if not entry.name.startswith("aws_lambda_powertools"):
            (content / entry.name).symlink_to(entry)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--no-deps", "--target", str(content), f"aws-lambda-powertools=={version}"],
        check=True,
    )  # fmt: skip
    (into / ".done").write_text(version)
    return content


def test_a_layer_with_the_public_layer_27s_powertools_fails_the_api_functions_init(
    template, assembly, dynamodb_local
):
    # Given the layer with Powertools 3.23.0 instead of the locked version
    old = powertools_layer(
        OLD_POWERTOOLS,
        workers.host_layer(),
        ROOT / "build" / f"layer-powertools-{OLD_POWERTOOLS}" / workers.host_arch(),
    )
    # When the products function is started from its asset on it
    with pytest.raises(workers.InitError) as failed:
        workers.start(
            template,
            Path(assembly.directory),
            dynamodb_local.environment(),
            layers=[old],
            only={catalog.spec("products").handler},
        )
    # Then its handler does not import, as it would fail on Lambda
    assert "RequestUnsupportedContentType" in str(failed.value)
