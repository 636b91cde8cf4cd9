"""How fast the inventory creation worker may write: the pace it keeps, the
setting that lifts it where there is no capacity to protect, and the time it is told it has."""

from __future__ import annotations

from typing import Any

import pytest

from local.capacity_model import CapacityModel
from local.dynamo_proxy import DynamoProxy
from local.dynamodb_local import INVENTORY_CREATE_PACE_ENV, DynamoDBLocal
from local.pump import _Context
from service import config
from service.domain import inventory
from service.domain.inventory import Inventory


def builder(**extra: Any) -> Inventory:
    return Inventory(client=None, table="inventory", summary_table="summary", **extra)


@pytest.mark.parametrize(
    ("raw", "pace"), [(None, None), ("", None), ("0", 0.0), ("500", 500.0), ("-3", 0.0)]
)
def test_the_environment_names_the_pace_or_leaves_it_to_the_default(raw, pace):
    env = {} if raw is None else {config.INVENTORY_CREATE_PACE_ENV: raw}
    assert config.inventory_create_pace(env) == pace


def test_without_a_setting_creation_keeps_a_new_on_demand_tables_pace(monkeypatch):
    monkeypatch.delenv(config.INVENTORY_CREATE_PACE_ENV, raising=False)
    # 4,000 WCU/s at 2 WCU per transactional put
    assert builder().create_pace() == config.INVENTORY_CREATE_UNITS_PER_SECOND == 2_000


def test_the_setting_is_read_by_the_handlers_not_by_the_domain(monkeypatch):
    """One reader of the environment per function (its handler's wiring); an Inventory built
    anywhere else keeps the pace it is given, or the default, whatever the environment says."""
    from service.handlers import inventory as api

    monkeypatch.setenv(config.INVENTORY_CREATE_PACE_ENV, "0")
    assert builder().create_pace() == config.INVENTORY_CREATE_UNITS_PER_SECOND
    assert builder(create_units_per_second=750).create_pace() == 750
    monkeypatch.setattr(api.runtime.dynamodb, "get", lambda: None)
    monkeypatch.setattr(
        api.catalog, "tables", lambda _: {"inventory": "i", "inventory_summary": "s"}
    )
    assert api._inventory().create_pace() == 0


def test_dynamodb_local_tells_what_runs_against_it_that_it_has_no_capacity_limit():
    # The local stack, the chaos runner and the bench give their functions this environment
    environment = DynamoDBLocal(port=1).environment()
    assert config.inventory_create_pace(environment) == 0


def test_behind_the_capacity_model_creation_is_paced_again(monkeypatch):
    monkeypatch.setattr(DynamoProxy, "endpoint", "http://127.0.0.1:2")  # not started: no server
    environment = DynamoDBLocal(port=1).environment()
    faults_only = DynamoProxy("http://127.0.0.1:1")
    assert config.inventory_create_pace(faults_only.environment(environment)) == 0
    modelled = DynamoProxy("http://127.0.0.1:1", capacity=CapacityModel(1.0))
    assert config.inventory_create_pace(modelled.environment(environment)) is None


def test_an_unpaced_step_never_sleeps(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(inventory.time, "sleep", slept.append)
    monkeypatch.setattr(inventory.time, "monotonic", lambda: 100.0)  # a stopped clock
    pace = inventory._Pace(0)
    for _ in range(100):
        pace.wait(100)
    assert slept == []
    paced = inventory._Pace(1_000)
    paced.wait(100)
    paced.wait(100)  # 100 units at 1,000 a second: the second starts 0.1 s after the first
    assert slept == [pytest.approx(0.1)]


def test_a_local_invocation_is_told_the_time_its_function_has_left():
    assert 0 < _Context("creator", 120).get_remaining_time_in_millis() <= 120_000
    assert _Context("creator", 0).get_remaining_time_in_millis() == 0


def described(**table: Any) -> dict[str, Any]:
    """A ``DescribeTable`` answer's ``Table``, with the claimable index."""
    return {
        "TableName": "inventory",
        "GlobalSecondaryIndexes": [{"IndexName": config.INVENTORY_CLAIMABLE_INDEX}],
        **table,
    }


ON_DEMAND = {"BillingModeSummary": {"BillingMode": "PAY_PER_REQUEST"}}


def test_a_new_on_demand_table_paces_creation_to_half_its_4000_write_units():
    # DynamoDB Local answers this way too (no warm throughput): hence its explicit setting
    assert inventory.table_pace(described(**ON_DEMAND), config.INVENTORY_CLAIMABLE_INDEX) == 2_000
    assert inventory.table_pace(described(), config.INVENTORY_CLAIMABLE_INDEX) == 2_000


def test_an_on_demand_table_that_serves_more_or_is_capped_paces_by_that():
    warm = {"WarmThroughput": {"WriteUnitsPerSecond": 12_000, "Status": "ACTIVE"}}
    index = config.INVENTORY_CLAIMABLE_INDEX
    assert inventory.table_pace(described(**ON_DEMAND, **warm), index) == 6_000
    capped = {"OnDemandThroughput": {"MaxWriteRequestUnits": 1_000}}
    assert inventory.table_pace(described(**ON_DEMAND, **warm, **capped), index) == 500
    unlimited = {"OnDemandThroughput": {"MaxWriteRequestUnits": -1}}
    assert inventory.table_pace(described(**ON_DEMAND, **unlimited), index) == 2_000


def test_a_provisioned_table_paces_by_its_write_units_or_its_index_s_if_fewer():
    table = {
        "BillingModeSummary": {"BillingMode": "PROVISIONED"},
        "ProvisionedThroughput": {"ReadCapacityUnits": 5, "WriteCapacityUnits": 600},
    }
    index = config.INVENTORY_CLAIMABLE_INDEX
    assert inventory.table_pace(described(**table), index) == 300
    starved = described(**table)
    starved["GlobalSecondaryIndexes"][0]["ProvisionedThroughput"] = {"WriteCapacityUnits": 100}
    assert inventory.table_pace(starved, index) == 50
    tiny = {**table, "ProvisionedThroughput": {"WriteCapacityUnits": 1}}
    assert inventory.table_pace(described(**tiny), index) == 1  # never stalls


def test_the_worker_paces_by_the_table_unless_the_environment_says(monkeypatch):
    from service.handlers import inventory_creator

    class Client:
        def describe_table(self, TableName: str) -> dict[str, Any]:
            return {"Table": described(**ON_DEMAND, WarmThroughput={"WriteUnitsPerSecond": 8_000})}

    monkeypatch.setattr(inventory_creator.runtime.dynamodb, "get", Client)
    monkeypatch.setattr(
        inventory_creator.catalog, "tables", lambda _: {"inventory": "i", "inventory_summary": "s"}
    )
    monkeypatch.delenv(config.INVENTORY_CREATE_PACE_ENV, raising=False)
    assert inventory_creator._inventory().create_pace() == 4_000
    monkeypatch.setenv(config.INVENTORY_CREATE_PACE_ENV, "0")
    assert inventory_creator._inventory().create_pace() == 0


def test_the_local_stack_names_the_pace_setting_the_service_reads():
    # local.dynamodb_local spells the name out (it is imported where the service is not)
    assert INVENTORY_CREATE_PACE_ENV == config.INVENTORY_CREATE_PACE_ENV
