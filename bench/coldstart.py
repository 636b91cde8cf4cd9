"""Bench section ``coldstart``: every function of the synthesized template, cold, as deployed.

"As deployed" is the function's asset directory in ``cdk.out`` plus the layer's ``python/``
(``infra.layer.layer_dir`` for the host's architecture) and nothing else: each start is a fresh
``python -I -S -B`` whose ``sys.path`` is that tree plus the standard library
(``bench/coldstart_probe.py``). Each measurement is paired with a baseline start in the same tree,
a bare ``import boto3`` plus one DynamoDB client, run right before or right after it (the order
alternates), and every ratio is taken pair by pair, then the median of the ratios is reported.

First requests: an API function answers an unauthenticated request (401, before anything else
runs); products also answers an authenticated GET and a purchase against DynamoDB Local (each in
its own cold process); a stream consumer gets an empty batch.

``importtime``: ``python -X importtime`` of each handler module in the same tree, top 10 by
cumulative time, written to ``bench/results/coldstart_importtime.json``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from local import template
from service import catalog, config

ROOT = Path(__file__).resolve().parent.parent
PROBE = Path(__file__).with_name("coldstart_probe.py")
CDK_OUT = ROOT / "cdk.out"
REPEATS = 15
PRODUCT = "coldstart-1"
CLAIMS = {"sub": "coldstart-user", "cognito:username": "coldstart"}
# Heavy imports a first request should pay only when it needs them (reported per start).
WATCHED = ["aws_xray_sdk", "pydantic", "service.api.routes", *[f"service.api.bodies.{f}" for f in (
    "products", "events", "inventory", "locks", "wallets")]]  # fmt: skip
COLUMNS = [
    "function",
    "import_ms",
    "first_request_ms",
    "baseline_ms",
    "import_over_baseline",
    "first_request_over_baseline",
    "cpu_over_baseline",
    "maxrss_over_baseline",
    "get_over_baseline",
    "purchase_over_baseline",
    "modules",
    "loaded",
]


@dataclass
class Probe:
    """One kind of cold start: a function, the tree it runs from, its first request."""

    function: str
    variant: str
    module: str
    path: list[str]
    environment: dict[str, str]
    event: dict[str, Any] | None
    runs: list[dict[str, Any]] = field(default_factory=list)  # (probe, baseline) pairs


SKIPPED_RECORD = {
    "eventID": "coldstart-1",
    "eventName": "REMOVE",
    "eventVersion": "1.1",
    "eventSource": "aws:dynamodb",
    "awsRegion": "us-east-1",
    "eventSourceARN": "arn:aws:dynamodb:us-east-1:000000000000:table/coldstart/stream/2026-01-01",
    "dynamodb": {
        "Keys": {"sku": {"S": "coldstart"}, "sk": {"S": "coldstart"}},
        "SequenceNumber": "1",
        "SizeBytes": 10,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    },
}


def asset_dir(function: dict[str, Any], out: Path = CDK_OUT) -> Path:
    """The ``cdk.out`` directory of a function's code asset (``Code.S3Key`` is ``<hash>.zip``)."""
    key = function["Properties"]["Code"]["S3Key"]
    digest = key.removesuffix(".zip") if isinstance(key, str) else None
    if digest is None:
        raise ValueError(f"cannot read the asset of {function['Properties'].get('Handler')}")
    found = out / f"asset.{digest}"
    if not found.is_dir():
        raise FileNotFoundError(f"{found} is missing: synthesize first (make synth)")
    return found


def deployed_path(function: dict[str, Any]) -> list[str]:
    """``sys.path`` entries of the as-deployed tree: the asset, then the layer's content."""
    from infra.layer import host_arch, layer_dir

    return [str(asset_dir(function)), str(layer_dir(host_arch()) / "python")]


def event(method: str, path: str, resource: str, claims: dict[str, str] | None = None,
          body: Any = None, params: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """An API Gateway REST proxy event, as the deployed gateway sends it."""
    headers = {"Host": "coldstart", "Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    context: dict[str, Any] = {
        "requestId": "coldstart",
        "stage": "bench",
        "resourcePath": resource,
        "httpMethod": method,
        "path": path,
        "identity": {"sourceIp": "127.0.0.1"},
    }
    if claims is not None:
        context["authorizer"] = {"claims": claims}
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {key: [value] for key, value in headers.items()},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": params or None,
        "stageVariables": None,
        "requestContext": context,
        "body": json.dumps(body) if body is not None else None,
        "isBase64Encoded": False,
    }


def route_event(
    spec: catalog.FunctionSpec,
    operation: str | None = None,
    claims: dict[str, str] | None = None,
    body: Any = None,
) -> dict[str, Any]:
    """A request to ``operation`` (default: the function's first GET, else its first route)."""
    declared = spec.routes()
    if operation is None:
        route = next((r for r in declared if r.method == "GET"), declared[0])
    else:
        (route,) = [r for r in declared if r.operation == operation]
    params = {name: PRODUCT for name in route.params}
    path = route.path
    for name, value in params.items():
        path = path.replace("{" + name + "}", value)
    return event(route.method, path, route.path, claims, body, params)


def probes(loaded: dict[str, Any], db_environment: dict[str, str]) -> list[Probe]:
    """One probe per function of the template (plus products' authenticated requests)."""
    physical = {logical: logical for logical in template.resources(loaded, "AWS::DynamoDB::Table")}
    found: list[Probe] = []
    by_handler = {spec.handler: spec for spec in catalog.API_FUNCTIONS + catalog.STREAM_CONSUMERS}
    for resource in template.resources(loaded, "AWS::Lambda::Function").values():
        properties = resource["Properties"]
        spec = by_handler.get(properties.get("Handler", ""))
        if spec is None:
            continue  # CDK's own helper functions
        variables = (properties.get("Environment") or {}).get("Variables") or {}
        environment = {
            **db_environment,
            **{key: template.resolve(value, physical) for key, value in variables.items()},
            "POWERTOOLS_METRICS_DISABLED": "true",
            "POWERTOOLS_LOG_LEVEL": "WARNING",
        }
        path = deployed_path(resource)

        def probe(
            variant: str,
            first: dict[str, Any] | None,
            spec: Any = spec,
            path: list[str] = path,
            environment: dict[str, str] = environment,
        ) -> Probe:
            return Probe(spec.name, variant, spec.module, path, environment, first)

        if isinstance(spec, catalog.ConsumerSpec):
            found.append(probe("skipped record", {"Records": [SKIPPED_RECORD]}))
            continue
        found.append(probe("unauthenticated", route_event(spec)))
        if spec.name == "products":
            found.append(probe("get", route_event(spec, "get_product", CLAIMS)))
            purchase = route_event(spec, "purchase", CLAIMS, {"quantity": 1})
            found.append(probe("purchase", purchase))
    return sorted(found, key=lambda p: (p.function, p.variant))


def seed(client: Any, tables: dict[str, str]) -> None:
    """The product the authenticated first requests read and buy."""
    client.put_item(
        TableName=tables[config.PRODUCTS],
        Item={
            "productId": {"S": PRODUCT},
            "name": {"S": "cold start"},
            "stock": {"N": "100000000"},
            "version": {"N": "1"},
        },
    )


def start(module: str, path: list[str], environment: dict[str, str], first: Any) -> dict[str, Any]:
    """One fresh interpreter: the probe's measurements (``bench/coldstart_probe.py``)."""
    with tempfile.TemporaryDirectory(prefix="coldstart-") as scratch:
        job = Path(scratch) / "job.json"
        result = Path(scratch) / "result.json"
        job.write_text(
            json.dumps({"path": path, "module": module, "event": first, "watch": WATCHED})
        )
        completed = subprocess.run(
            [sys.executable, "-I", "-S", "-B", str(PROBE), str(job), str(result)],
            env={**_clean_environment(), **environment},
            capture_output=True,
            text=True,
            cwd=scratch,
            timeout=120,
        )
        if completed.returncode != 0 or not result.exists():
            raise RuntimeError(f"{module}: cold start failed\n{completed.stderr[-3000:]}")
        found: dict[str, Any] = json.loads(result.read_text())
        return found


def _clean_environment() -> dict[str, str]:
    """The parent's environment minus what would change the child's imports or clients."""
    dropped = ("PYTHON", "AWS_", "POWERTOOLS_", "VIRTUAL_ENV")
    return {k: v for k, v in os.environ.items() if not k.startswith(dropped)}


def measure(found: list[Probe], repeats: int = REPEATS) -> None:
    """``repeats`` rounds; each probe with its baseline, the order alternating per round."""
    for round_ in range(repeats):
        for probe in found:
            sides = [(probe.module, probe.event), ("boto3", None)]
            if round_ % 2:
                sides.reverse()
            done = {m: start(m, probe.path, probe.environment, e) for m, e in sides}
            measured, baseline = done[probe.module], done["boto3"]
            probe.runs.append({"probe": measured, "baseline": baseline})


def _ratio(runs: list[dict[str, Any]], key: str, base_key: str | None = None) -> float:
    return round(
        statistics.median(run["probe"][key] / run["baseline"][base_key or key] for run in runs), 2
    )


def _median(runs: list[dict[str, Any]], side: str, key: str) -> float:
    return round(statistics.median(run[side][key] for run in runs), 1)


def rows(found: list[Probe]) -> list[dict[str, Any]]:
    """One row per function (the medians; ratios pair by pair), products' GET and purchase as
    extra columns of the products row."""
    by_function: dict[str, dict[str, Any]] = {}
    for probe in found:
        runs = probe.runs
        statuses = sorted({str(run["probe"]["status"]) for run in runs})
        if probe.variant in ("get", "purchase"):
            row = by_function.setdefault(probe.function, {"function": probe.function})
            row[f"{probe.variant}_ms"] = _median(runs, "probe", "first_request_ms")
            row[f"{probe.variant}_over_baseline"] = _ratio(runs, "first_request_ms", "import_ms")
            row[f"{probe.variant}_status"] = ",".join(statuses)
            continue
        row = by_function.setdefault(probe.function, {"function": probe.function})
        row.update(
            {
                "first_request": probe.variant,
                "import_ms": _median(runs, "probe", "import_ms"),
                "first_request_ms": _median(runs, "probe", "first_request_ms"),
                "baseline_ms": _median(runs, "baseline", "import_ms"),
                "import_over_baseline": _ratio(runs, "import_ms"),
                # the baseline makes no request: its import_ms is its whole cold start
                "first_request_over_baseline": _ratio(runs, "first_request_ms", "import_ms"),
                "cpu_ms": _median(runs, "probe", "cpu_ms"),
                "baseline_cpu_ms": _median(runs, "baseline", "cpu_ms"),
                "cpu_over_baseline": _ratio(runs, "cpu_ms"),
                "maxrss_mb": round(_median(runs, "probe", "maxrss_kb") / 1024, 1),
                "maxrss_over_baseline": _ratio(runs, "maxrss_kb"),
                "status": ",".join(statuses),
                "modules": int(_median(runs, "probe", "modules")),
                "loaded": ",".join(runs[0]["probe"].get("loaded", [])),
                "runs": len(runs),
            }
        )
    return [by_function[name] for name in sorted(by_function)]


def importtime(probe: Probe, top: int = 10) -> list[dict[str, Any]]:
    """``python -X importtime`` of ``probe``'s module in its tree: the ``top`` imports by
    cumulative time (microseconds), nested imports included."""
    code = f"import sys; sys.path[:0] = {probe.path!r}; import {probe.module}"
    completed = subprocess.run(
        [sys.executable, "-I", "-S", "-B", "-X", "importtime", "-c", code],
        env={**_clean_environment(), **probe.environment},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    entries: list[dict[str, Any]] = []
    for line in completed.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        self_us, cumulative_us, name = line.removeprefix("import time:").split("|", 2)
        entries.append(
            {"module": name.strip(), "self_us": int(self_us), "cumulative_us": int(cumulative_us)}
        )
    return sorted(entries, key=lambda e: -int(e["cumulative_us"]))[:top]


def run(db: Any, loaded: dict[str, Any], tables: dict[str, str], repeats: int = REPEATS,
        only: set[str] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
    """Measure every function; returns (rows, importtime top-10 per function)."""
    seed(db.client(), tables)
    found = [p for p in probes(loaded, db.environment()) if not only or p.function in only]
    measure(found, repeats)
    tops = {
        p.function: importtime(p)
        for p in found
        if p.variant in ("unauthenticated", "skipped record")
    }
    return rows(found), tops


def chart(found: list[dict[str, Any]], path: Path, target: float) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["function"] for r in found]
    figure, axis = plt.subplots(figsize=(10, 4))
    width = 0.27
    series = [
        ("import_over_baseline", "import", "#4C72B0"),
        ("first_request_over_baseline", "import + first request", "#DD8452"),
        ("cpu_over_baseline", "CPU", "#55A868"),
    ]
    for offset, (key, label, color) in enumerate(series):
        xs = [i + (offset - 1) * width for i in range(len(names))]
        axis.bar(xs, [r[key] for r in found], width, label=label, color=color)
    axis.set_xticks(range(len(names)), names, rotation=20)
    axis.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    axis.axhline(target, color="red", linestyle=":", linewidth=1, label=f"target {target}x")
    axis.set_ylabel("ratio to import boto3 + one client")
    axis.legend()
    figure.suptitle("turnstile bench: cold start per function, as deployed")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
