"""Each module declares the metrics it counts (``METRICS``, next to its code), the service's
catalogue is built from those declarations, and docs/operations.md lists the same names: a metric
counted in two places (a library refusal counted again by a domain) or nowhere shows here."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import pytest

from service import observability
from service.domain import inventory
from turnstile_ddb import (
    adaptive,
    claims,
    consumption,
    idempotency,
    lease,
    lease_queue,
    retry,
    sharded,
    slots,
    transact,
    versioned,
)

ROOT = Path(__file__).resolve().parents[2]
COUNTED = re.compile(r'metrics\.(?:count|timing)\(\s*"(\w+)"')
DECLARING = [
    adaptive,
    claims,
    consumption,
    idempotency,
    lease,
    lease_queue,
    sharded,
    slots,
    transact,
    versioned,
    inventory,
]


def counted_in(module: ModuleType) -> set[str]:
    """What ``module`` counts, with the private modules its protocols live in, if it names them
    (``_PROTOCOL_MODULES``: they count under its declaration)."""
    sources = [module, *getattr(module, "_PROTOCOL_MODULES", ())]
    return {name for m in sources for name in COUNTED.findall(Path(str(m.__file__)).read_text())}


@pytest.mark.parametrize("module", DECLARING, ids=lambda module: module.__name__)
def test_a_module_declares_exactly_the_metrics_its_code_counts(module):
    # Given a module's declaration, When its sources are read, Then they name the same metrics
    assert len(set(module.METRICS)) == len(module.METRICS)
    assert set(module.METRICS) == counted_in(module)


def test_retry_declares_every_figure_it_counts_under_its_callers_pattern():
    assert {"OutcomeUnknown", "RetriesExhausted"} <= set(retry.METRICS)
    assert {retry.retried_as(error) for error in _retried()} <= set(retry.METRICS)


def _retried() -> list[BaseException]:
    from botocore.exceptions import ClientError, ReadTimeoutError

    return [
        ClientError({"Error": {"Code": "ThrottlingException"}}, "PutItem"),
        ClientError({"Error": {"Code": "TransactionConflictException"}}, "PutItem"),
        ReadTimeoutError(endpoint_url="http://ddb"),
    ]


def test_the_catalogue_holds_each_declaration_under_its_pattern_once():
    # Built once (it parses every declaring module's source)
    catalog = observability.catalog()
    for module in (adaptive, claims, consumption, idempotency, sharded, slots, versioned):
        assert set(module.METRICS) <= set(catalog[module.PATTERN])
    assert set(lease.METRICS) | set(lease_queue.METRICS) <= set(catalog["lease"])
    assert set(transact.METRICS) <= set(catalog["transact"])
    assert set(inventory.METRICS) <= set(catalog["inventory"])
    for names in catalog.values():
        assert len(names) == len(set(names))


def documented() -> dict[str, set[str]]:
    """Per pattern, the metrics docs/operations.md's table lists (rows naming one pattern)."""
    rows = re.findall(
        r"^\| `(\w+)` \| ([^|]+) \|", (ROOT / "docs" / "operations.md").read_text(), re.M
    )
    return {pattern: set(re.findall(r"`(\w+)`", names)) for pattern, names in rows}


def test_the_operations_guide_lists_the_catalogue():
    # Given the guide's table, Then each pattern's row names exactly its catalogued metrics
    # (the retry figures have a row of their own)
    rows = documented()
    catalog = observability.catalog()
    assert {"claims", "lease", "inventory"} <= set(rows)  # the table was read
    for pattern, names in rows.items():
        assert names == set(catalog[pattern]) - set(RETRY), pattern


RETRY = retry.METRICS


def test_the_catalogue_reads_each_declaration_as_the_module_holds_it():
    # observability.declared reads METRICS from the source (deploy time imports no runtime); it
    # must give what importing the module gives
    modules = (
        adaptive,
        claims,
        consumption,
        idempotency,
        lease,
        lease_queue,
        retry,
        sharded,
        slots,
        transact,
        versioned,
    )
    for module in modules:
        assert observability.declared(module.__name__) == module.METRICS, module.__name__
    assert observability.declared("service.domain.inventory") == inventory.METRICS
