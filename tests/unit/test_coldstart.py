"""Cold start: the short version of ``make bench``'s coldstart section, and what a first request
may import. Each start is a fresh interpreter on the source tree plus this venv's packages (the
bench proper runs the synthesized asset plus the layer); no timing is asserted, only what ran."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from bench import coldstart
from local import init_report
from service import catalog, observability

ROOT = Path(__file__).resolve().parents[2]
TREE = [str(ROOT / "functions"), sysconfig.get_paths()["purelib"]]
ENVIRONMENT = {
    "POWERTOOLS_METRICS_DISABLED": "true",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "coldstart",
    "AWS_SECRET_ACCESS_KEY": "coldstart",
}


def test_an_api_function_answers_its_first_unauthenticated_request_without_other_functions_models():
    # Given the products function, cold
    event = coldstart.route_event(catalog.spec("products"))
    # When it answers its first request, without a token
    found = coldstart.start("service.handlers.products", TREE, ENVIRONMENT, event)
    # Then it refused it (401), having built only its own request models and no X-Ray SDK
    assert found["status"] == 401
    assert 0 < found["import_ms"] <= found["first_request_ms"]
    assert found["maxrss_kb"] > 0 and found["cpu_ms"] > 0
    assert found["loaded"] == ["pydantic", "service.api.bodies.products", "service.api.routes"]


def test_a_stream_consumer_skips_a_record_without_loading_the_routes_or_pydantic():
    found = coldstart.start(
        "service.handlers.registration_consumer",
        TREE,
        ENVIRONMENT,
        {"Records": [coldstart.SKIPPED_RECORD]},
    )
    assert found["status"] == "failures=0"
    assert found["loaded"] == []


def test_the_baseline_is_boto3_and_one_client():
    found = coldstart.start("boto3", TREE, ENVIRONMENT, None)
    assert found["status"] is None
    assert found["import_ms"] == found["first_request_ms"] > 0


def test_pairs_become_one_row_per_function_with_ratios_taken_pair_by_pair():
    def start(import_ms: float, first: float) -> dict[str, float]:
        return {"import_ms": import_ms, "first_request_ms": first, "cpu_ms": first,
                "maxrss_kb": 1024, "status": 401, "modules": 10}  # fmt: skip

    def base(ms: float) -> dict[str, float | None]:
        return {"import_ms": ms, "first_request_ms": ms, "cpu_ms": ms, "maxrss_kb": 512,
                "status": None, "modules": 5}  # fmt: skip

    probe = coldstart.Probe("products", "unauthenticated", "m", [], {}, None)
    # a slow machine moment slows both sides of a pair: pair-wise ratios stay 2.0
    probe.runs = [
        {"probe": start(100, 200), "baseline": base(100)},
        {"probe": start(300, 600), "baseline": base(300)},
        {"probe": start(150, 300), "baseline": base(150)},
    ]
    (row,) = coldstart.rows([probe])
    assert row["function"] == "products"
    assert row["first_request_over_baseline"] == 2.0
    assert row["import_over_baseline"] == 1.0
    assert row["maxrss_over_baseline"] == 2.0
    assert row["first_request_ms"] == 300 and row["baseline_ms"] == 150


@pytest.mark.parametrize(
    ("environment", "traced"),
    [
        ({}, False),
        ({"LAMBDA_TASK_ROOT": "/var/task"}, True),
        ({"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "true"}, False),
        ({"LAMBDA_TASK_ROOT": "/var/task", "AWS_SAM_LOCAL": "true"}, False),
    ],
)
def test_the_tracer_is_built_only_where_it_traces(monkeypatch, environment, traced):
    for name in ("LAMBDA_TASK_ROOT", "POWERTOOLS_TRACE_DISABLED", "AWS_SAM_LOCAL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert observability.tracing_enabled() is traced


def test_the_local_stack_logs_each_functions_init_duration(caplog):
    with caplog.at_level(logging.INFO, logger="local.init"):
        handler, elapsed = init_report.load("json.dumps", "products")
    assert handler is __import__("json").dumps
    assert elapsed >= 0
    (line,) = [r.getMessage() for r in caplog.records if "INIT_REPORT" in r.getMessage()]
    assert line.startswith("INIT_REPORT Function: products Handler: json.dumps Init Duration: ")
    assert line.endswith("ms (already imported)")  # json was imported: nothing to initialize


# What a fresh interpreter reports after the products function's first requests, then after its
# OpenAPI document: the pydantic models it has built that only the document needs (each route's
# error body, ``<Operation>Error``, and its success body) and the modules it has loaded.
_DOCUMENT_ONLY_PROBE = """
import json, sys
from pydantic import BaseModel
from service.handlers import products

ONLY_DOCUMENTED = {"Product", "PurchaseReceipt", *(
    "".join(p.title() for p in op.split("_")) + "Error" for op in products.app.declarations)}

def seen():
    models, todo = set(), list(BaseModel.__subclasses__())
    while todo:
        model = todo.pop()
        models.add(model.__name__)
        todo.extend(model.__subclasses__())
    return {"models": sorted(models & ONLY_DOCUMENTED),
            "answers": "service.api.answers.products" in sys.modules}

class Context:
    function_name = "products"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:local:000000000000:function:products"
    aws_request_id = "coldstart"
    def get_remaining_time_in_millis(self):
        return 10_000

answers = [products.handler(event, Context()) for event in json.loads(sys.argv[1])]
statuses = [[a["statusCode"], json.loads(a["body"])["error"]] for a in answers]
answered = seen()
document = json.loads(products.app.get_openapi_json_schema(title="t", version="1"))
print(json.dumps({"statuses": statuses, "answered": answered, "documented": seen(),
                  "responses": sorted(document["paths"]["/products/{productId}/purchases"]
                                      ["post"]["responses"])}))
"""


def test_an_api_function_builds_the_models_only_its_openapi_document_needs_when_asked_for_it():
    # Given the products function, cold, and two first requests that reach its resolver: one
    # without a token, one authenticated purchase whose body is invalid (validated, nothing run)
    spec = catalog.spec("products")
    events = [
        coldstart.route_event(spec),
        coldstart.route_event(spec, "purchase", coldstart.CLAIMS, {"quantity": 0}),
    ]
    # When a fresh interpreter imports it and answers them, then builds its OpenAPI document
    completed = subprocess.run(
        [sys.executable, "-c", _DOCUMENT_ONLY_PROBE, json.dumps(events)],
        env={**os.environ, **ENVIRONMENT, "PYTHONPATH": os.pathsep.join(TREE)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    found = json.loads(completed.stdout.splitlines()[-1])
    # Then both were answered as before (401, 400) without building the error and success
    # bodies the document describes, or importing the module of the success bodies
    assert found["statuses"] == [[401, "UNAUTHORIZED"], [400, "VALIDATION_ERROR"]]
    assert found["answered"] == {"models": [], "answers": False}
    # and the document, asked for, has them, every status of the route described
    assert "PurchaseError" in found["documented"]["models"]
    assert "PurchaseReceipt" in found["documented"]["models"]
    assert found["documented"]["answers"] is True
    assert {"201", "400", "401", "404", "409"} <= set(found["responses"])
