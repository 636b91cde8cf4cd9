"""Cold start: the short version of ``make bench``'s coldstart section, and what a first request
may import. Each start is a fresh interpreter on the source tree plus this venv's packages (the
bench proper runs the synthesized asset plus the layer); no timing is asserted, only what ran."""

from __future__ import annotations

import logging
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
