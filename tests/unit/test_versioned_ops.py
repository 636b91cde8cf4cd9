"""turnstile_ddb.versioned's read-free writes: their requests and their refusals of bad arguments
(no network: a client that fails the test if it is called)."""

from __future__ import annotations

from typing import Any

import pytest

from turnstile_ddb import retry, versioned


class NoCalls:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the client was called ({name}) for an argument that is refused")


@pytest.mark.parametrize("amount", [0, -1, 1.5, True, "2"])
@pytest.mark.parametrize("write", [versioned.decrement, versioned.increment])
def test_an_amount_that_is_not_a_positive_int_is_refused_before_any_call(write, amount):
    with pytest.raises(ValueError, match="positive int"):
        write(
            NoCalls(),
            table="t",
            key={"id": "a"},
            attr="n",
            amount=amount,
            backoff=retry.Backoff(),
        )


@pytest.mark.parametrize(
    ("names", "values"),
    [({"#shards": "shards"}, {}), ({}, {":one": 1}), ({"#xa": "a"}, {":a": 1})],
)
def test_a_condition_whose_placeholders_could_clash_is_refused(names, values):
    with pytest.raises(ValueError, match="#x / :x"):
        versioned.Condition("#shards = :one", names=names, values=values)


def test_bump_op_at_any_version_requires_the_item_and_ands_the_callers_condition():
    # Given a bump at any version with a condition of the caller's own
    condition = versioned.Condition("#xk <> :xv", names={"#xk": "kind"}, values={":xv": "gone"})
    op = versioned.bump_op("t", {"id": "a"}, {"name": "b"}, condition=condition)["Update"]
    # Then it sets the change and version + 1, only on an existing item, and only if the caller's
    # condition holds too, reading the item back on a refusal
    assert op["UpdateExpression"] == "SET #c0 = :c0, #version = #version + :one"
    assert op["ConditionExpression"] == "(attribute_exists(#version)) AND (#xk <> :xv)"
    assert op["ExpressionAttributeNames"] == {"#version": "version", "#c0": "name", "#xk": "kind"}
    assert op["ExpressionAttributeValues"] == {
        ":one": {"N": "1"},
        ":c0": {"S": "b"},
        ":xv": {"S": "gone"},
    }
    assert op["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"


def test_bump_op_at_an_expected_version_checks_that_version():
    op = versioned.bump_op("t", {"id": "a"}, {}, expected=7, version_attr="rev")["Update"]
    assert op["UpdateExpression"] == "SET #version = #version + :one"
    assert op["ConditionExpression"] == "#version = :expected"
    assert op["ExpressionAttributeNames"] == {"#version": "rev"}
    assert op["ExpressionAttributeValues"][":expected"] == {"N": "7"}
