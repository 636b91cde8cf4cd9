"""service.observability: the EMF sink, one flush per invocation, thread safety (no network)."""

from __future__ import annotations

import json
import logging
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from service import observability
from service.handlers.registration_consumer import pending_age_ms
from tests.helpers import ALICE, emf_documents, totals
from turnstile_ddb import metrics

ROOT = Path(__file__).resolve().parents[2]


def test_pending_sums_counts_keeps_durations_and_take_empties_it():
    pending = observability.Pending()
    pending(metrics.Figure("versioned", "VersionConflict", 1, metrics.COUNT))
    pending(metrics.Figure("versioned", "VersionConflict", 2, metrics.COUNT))
    pending(metrics.Figure("lease", "LeaseWait", 5, metrics.MILLISECONDS))
    pending(metrics.Figure("lease", "LeaseWait", 7, metrics.MILLISECONDS))
    taken = pending.take()
    assert sorted(taken) == sorted(
        [
            metrics.Figure("versioned", "VersionConflict", 3, metrics.COUNT),
            metrics.Figure("lease", "LeaseWait", 5, metrics.MILLISECONDS),
            metrics.Figure("lease", "LeaseWait", 7, metrics.MILLISECONDS),
        ]
    )
    assert pending.take() == []


def test_emf_has_namespace_one_pattern_dimension_and_service_as_metadata(capsys):
    figures = [
        metrics.Figure("versioned", "VersionConflict", 4, metrics.COUNT),
        metrics.Figure("lease", "LeaseWait", 12.5, metrics.MILLISECONDS),
    ]
    assert observability.write_emf(figures, "turnstile-products") == 2
    documents = emf_documents(capsys.readouterr().out)
    assert len(documents) == 2
    by_pattern = {document["pattern"]: document for document in documents}
    versioned = by_pattern["versioned"]
    directive = versioned["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "turnstile"
    assert directive["Dimensions"] == [["pattern"]]
    assert directive["Metrics"] == [{"Name": "VersionConflict", "Unit": "Count"}]
    assert versioned["VersionConflict"] == [4.0]
    assert versioned["service"] == "turnstile-products"
    lease = by_pattern["lease"]["_aws"]["CloudWatchMetrics"][0]
    assert lease["Metrics"] == [{"Name": "LeaseWait", "Unit": "Milliseconds"}]


def test_observed_flushes_once_per_invocation_and_counts_conflict_answers(capsys):
    @observability.observed
    def handler(event: Any, context: Any) -> dict[str, Any]:
        metrics.count("VersionConflict", pattern="unit-observed", value=3)
        return {"statusCode": 409, "body": json.dumps({"error": "CONFLICT", "message": "x"})}

    capsys.readouterr()
    handler({"requestContext": {"requestId": "req-1"}}, None)
    first = totals(emf_documents(capsys.readouterr().out))
    assert first[("unit-observed", "VersionConflict")] == 3
    assert first[("api", "ConflictAnswer")] == 1
    observability.flush()  # nothing left over: the invocation took its figures
    assert ("unit-observed", "VersionConflict") not in totals(
        emf_documents(capsys.readouterr().out)
    )


def test_observed_flushes_even_when_the_handler_raises(capsys):
    @observability.observed
    def handler(event: Any, context: Any) -> Any:
        metrics.count("RecordFailed", pattern="unit-raise")
        raise RuntimeError("boom")

    capsys.readouterr()
    with pytest.raises(RuntimeError):
        handler({}, None)
    assert totals(emf_documents(capsys.readouterr().out))[("unit-raise", "RecordFailed")] == 1


def test_many_threads_many_flushes_nothing_lost_nothing_twice(capsys):
    """100 threads count and flush at once (as the local bridge does): the EMF totals equal the
    counts made, exactly."""

    @observability.observed
    def handler(event: Any, context: Any) -> dict[str, Any]:
        for _ in range(20):
            metrics.count("ClaimLost", pattern="unit-threads")
        metrics.timing("LeaseWait", 1.0, pattern="unit-threads")
        return {"statusCode": 200, "body": "{}"}

    barrier = threading.Barrier(100)

    def worker() -> None:
        barrier.wait()
        for _ in range(5):
            handler({}, None)

    capsys.readouterr()
    threads = [threading.Thread(target=worker) for _ in range(100)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    observability.flush()
    summed = totals(emf_documents(capsys.readouterr().out))
    assert summed[("unit-threads", "ClaimLost")] == 100 * 5 * 20
    assert summed[("unit-threads", "LeaseWait")] == 100 * 5


def test_correlation_id_and_context_in_log_lines():
    class Context:
        function_name = "turnstile-products"
        aws_request_id = "lambda-request-1"

    logger = observability.parts().logger
    lines: list[dict[str, Any]] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(json.loads(logger.registered_formatter.format(record)))

    @observability.observed
    def handler(event: Any, context: Any) -> dict[str, Any]:
        logger.info("inside")
        return {"statusCode": 200, "body": "{}"}

    keep = Keep()
    logging.getLogger(logger.name).addHandler(keep)
    try:
        handler(
            {"requestContext": {"requestId": "gateway-request-7", "authorizer": {"claims": ALICE}}},
            Context(),
        )
    finally:
        logging.getLogger(logger.name).removeHandler(keep)
    logged = next(line for line in lines if line.get("message") == "inside")
    assert logged["correlation_id"] == "gateway-request-7"
    assert logged["function_request_id"] == "lambda-request-1"
    assert logged["function_name"] == "turnstile-products"
    assert logged["caller"] == ALICE["sub"]


def test_the_catalog_names_every_metric_the_code_counts():
    """The dashboard draws the catalogue (observability.catalog()); a metric counted in the
    sources but missing there would be invisible once deployed."""
    literal = re.compile(r'metrics\.(?:count|timing)\(\s*"(\w+)"')
    counted = set()
    for folder in ("functions", "local"):
        for path in (ROOT / folder).rglob("*.py"):
            counted |= set(literal.findall(path.read_text()))
    counted |= {"RequestAccepted", "RequestRejected", "SummaryApplied", "SummarySkipped"}
    counted |= set(observability.declared("turnstile_ddb.retry"))
    counted |= set(observability.ANSWERS.values())
    catalogued = {name for names in observability.catalog().values() for name in names}
    assert counted <= catalogued, counted - catalogued
    assert "VersionConflict" in counted and "ClaimLost" in counted  # the scan found the calls


def test_summary_line_groups_by_pattern():
    line = observability.summary(
        {("versioned", "VersionConflict"): 12.0, ("versioned", "VersionedWrite"): 5.0}
        | {("lease", "LeaseWait"): 2.5}
    )
    assert line == "lease: LeaseWait=2.5ms | versioned: VersionConflict=12 VersionedWrite=5"


def test_pending_age_from_requested_at():
    from datetime import UTC, datetime

    now = datetime(2026, 11, 23, 12, 0, 5, tzinfo=UTC)
    assert pending_age_ms("2026-11-23T12:00:00.000Z", now) == 5000
    assert pending_age_ms("not a time", now) is None


def test_many_durations_split_into_documents_of_at_most_99_values(capsys):
    figures = [metrics.Figure("decider", "StreamLag", 1.0, metrics.MILLISECONDS)] * 250
    figures += [metrics.Figure("decider", "RequestAccepted", 3, metrics.COUNT)]
    written = observability.write_emf(figures, None)
    documents = emf_documents(capsys.readouterr().out)
    assert written == len(documents) == 3
    assert all(len(document.get("StreamLag", [])) <= 99 for document in documents)
    assert totals(documents) == {("decider", "StreamLag"): 250, ("decider", "RequestAccepted"): 3}


def test_throttles_are_also_written_summed_over_every_pattern(capsys):
    # Given throttles met in two patterns and a figure that is not rolled up
    figures = [
        metrics.Figure("atomic", "Throttle", 2, metrics.COUNT),
        metrics.Figure("sharded", "Throttle", 3, metrics.COUNT),
        metrics.Figure("versioned", "VersionConflict", 4, metrics.COUNT),
    ]
    # When they are written
    observability.write_emf(figures, None)
    written = totals(emf_documents(capsys.readouterr().out))
    # Then each pattern keeps its own figure and pattern "all" has the throttles' sum only
    assert written[("atomic", "Throttle")] == 2
    assert written[("sharded", "Throttle")] == 3
    assert written[("all", "Throttle")] == 5
    assert ("all", "VersionConflict") not in written
