"""The local pump's event filter matching, as Lambda's filter patterns use it here."""

from __future__ import annotations

from local.pump import matches
from service.domain.inventory import CREATION_FILTER


def record(sk: str, status: str | None) -> dict:
    change: dict = {"Keys": {"sku": {"S": "a"}, "sk": {"S": sk}}}
    if status is not None:
        change["NewImage"] = {"sku": {"S": "a"}, "sk": {"S": sk}, "status": {"S": status}}
    return {"eventName": "MODIFY", "dynamodb": change}


def test_only_headers_still_creating_pass_the_creation_filter():
    assert matches(CREATION_FILTER, record("sku", "CREATING"))
    assert not matches(CREATION_FILTER, record("sku", "READY"))
    assert not matches(CREATION_FILTER, record("unit#000001", "free"))
    assert not matches(CREATION_FILTER, record("sku", None))  # a removal has no new image


def test_a_list_names_the_allowed_values_and_objects_nest():
    assert matches({"a": {"b": [1, 2]}}, {"a": {"b": 2, "c": 3}})
    assert not matches({"a": {"b": [1, 2]}}, {"a": {"b": 3}})
    assert not matches({"a": {"b": [1]}}, {"a": 1})
