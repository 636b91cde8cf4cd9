"""Errors that say what happened (issue 39, on moto, one thread): a typo'd attribute is not an
empty balance, a missing item or table is named, a lease table keyed otherwise says to pass
``key_attr=``, and "gave up" errors are exceptions of their own, never "after 0 attempts"."""

from __future__ import annotations

from typing import Any

import pytest

from turnstile_ddb import claims, codec, errors, lease, retry, sharded, transact, versioned

FAST = retry.Backoff(attempts=2, sleep=lambda _: None)


def wallet(client: Any, table: str, key: dict[str, Any], **attributes: Any) -> None:
    client.put_item(TableName=table, Item=codec.encode_item({**key, **attributes}))


def test_a_typo_in_the_attribute_is_not_an_empty_balance(moto_ddb, moto_tables):
    # Given a product that holds 5 in "stock"
    table, key = moto_tables["products"], {"productId": "p-typo"}
    wallet(moto_ddb, table, key, stock=5, version=1)
    # When a decrement names an attribute it does not have
    with pytest.raises(versioned.ConditionFailed) as refused:
        versioned.decrement(moto_ddb, table=table, key=key, attr="stok", amount=1, backoff=FAST)
    # Then the error says the attribute is absent, not that it holds 0
    assert not isinstance(refused.value, versioned.Insufficient), str(refused.value)
    assert isinstance(refused.value, versioned.NoSuchAttribute)
    assert "stok" in str(refused.value) and "no attribute" in str(refused.value)


def test_no_such_item_names_the_table_and_the_key(moto_ddb, moto_tables):
    table = moto_tables["products"]
    with pytest.raises(versioned.NoSuchItem) as refused:
        versioned.decrement(
            moto_ddb, table=table, key={"productId": "p-none"}, attr="stock", amount=1, backoff=FAST
        )
    assert table in str(refused.value) and "p-none" in str(refused.value)


def test_a_missing_table_is_named(moto_ddb):
    with pytest.raises(errors.AwsRefused) as refused:
        versioned.read(moto_ddb, "no-such-table", {"productId": "p1"}, FAST)
    assert refused.value.code == "ResourceNotFoundException"
    assert isinstance(refused.value, errors.TableNotFound)
    assert "'no-such-table'" in str(refused.value)


def test_a_missing_table_is_named_from_a_method(moto_ddb):
    leases = lease.Leases(moto_ddb, "no-lease-table")
    with pytest.raises(errors.TableNotFound, match="'no-lease-table'"):
        leases.acquire("r1", "me", 1000)


def test_leases_on_a_table_keyed_otherwise_say_to_pass_key_attr(moto_ddb, moto_tables):
    # Given the idempotency table, keyed "id", used as a lease table with the default key
    leases = lease.Leases(moto_ddb, moto_tables["idempotency"])
    # When a lease is acquired
    with pytest.raises(errors.AwsRefused) as refused:
        leases.acquire("r1", "me", 1000)
    # Then the error names the key attribute used and says to pass key_attr=
    assert refused.value.code == "ValidationException"
    assert isinstance(refused.value, errors.KeyMismatch)
    assert "'resource'" in str(refused.value) and "key_attr=" in str(refused.value)


class Cancelling:
    """A client whose every transaction is cancelled by a conflict (a sale in between)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def transact_write_items(self, **request: Any) -> Any:
        from botocore.exceptions import ClientError

        reasons = [{"Code": "ConditionalCheckFailed"} for _ in request["TransactItems"]]
        response: Any = {
            "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
            "CancellationReasons": reasons,
        }
        raise ClientError(response, "TransactWriteItems")


def test_set_total_that_kept_losing_says_so_in_its_own_exception(moto_ddb, moto_tables):
    counter = sharded.ShardedCounter(moto_tables["products"], "productId", "p-set", 2, "stock")
    for item in sharded.shard_items(counter, 10):
        wallet(moto_ddb, counter.table, {}, **item)
    with pytest.raises(retry.RetriesExhausted) as gave_up:
        cancelling: Any = Cancelling(moto_ddb)
        sharded.set_total(cancelling, counter, 4, backoff=FAST, attempts=2)
    assert isinstance(gave_up.value, errors.LostEveryRace)
    assert not isinstance(gave_up.value.last, RuntimeError)
    assert isinstance(gave_up.value.last, transact.Cancelled)


def test_a_hold_lapsed_before_any_round_never_says_after_0_attempts(moto_ddb, moto_tables):
    units = claims.UnitTable(
        table=moto_tables["inventory"], index="claimable", key_attrs=("sku", "sk")
    )
    item = claims.new_unit(units, {"sku": "s-lapse", "sk": "u#1"}, "s-lapse", 1)
    moto_ddb.put_item(TableName=units.table, Item=codec.encode_item(item))
    with pytest.raises(claims.ClaimHoldLapsed) as lapsed:
        claims.reserve(
            moto_ddb,
            units,
            pools=["s-lapse"],
            quantity=1,
            holder=lambda lead: "r",
            now_ms=1000,
            until_ms=2000,
            options=claims.ReserveOptions(backoff=FAST, clock_ms=lambda: 5000),
        )
    assert "after 0 attempts" not in str(lapsed.value)
    assert not isinstance(lapsed.value.last, RuntimeError)


def test_a_missing_table_and_a_key_mismatch_keep_their_messages_and_attributes():
    # Given the refusal AWS sent
    cause = RuntimeError("AWS said no")
    # When each error is made of it
    missing = errors.TableNotFound(cause, "ResourceNotFoundException", "gone", "GetItem", table="t")
    keyed = errors.KeyMismatch(
        cause, "ValidationException", "bad key", "PutItem", table="t", key_attr="pk"
    )
    # Then each says what it means for the table before AWS's words, and keeps its attributes
    assert str(missing) == (
        "table 't' not found in this account and region: GetItem: ResourceNotFoundException: gone"
    )
    assert str(keyed) == (
        "table 't' is not keyed by 'pk', the key attribute this call used: pass "
        "key_attr=<the table's partition key> (PutItem: ValidationException: bad key)"
    )
    common = {"cause": cause, "table": "t"}
    assert vars(missing) == {
        **common, "code": "ResourceNotFoundException", "aws_message": "gone", "operation": "GetItem"
    }  # fmt: skip
    assert vars(keyed) == {
        **common, "code": "ValidationException", "aws_message": "bad key", "operation": "PutItem",
        "key_attr": "pk",
    }  # fmt: skip
    assert isinstance(missing, errors.AwsRefused) and isinstance(keyed, errors.AwsRefused)


def test_the_table_refusals_share_one_constructor():
    # The refusals about a table are built one way: one base names the table and puts what the
    # refusal means before AWS's words; a missing table adds nothing to it
    shared = errors.TableNotFound.__mro__[1]
    assert shared is not errors.AwsRefused and issubclass(shared, errors.AwsRefused)
    assert errors.KeyMismatch.__mro__[1] is shared
    assert "__init__" not in vars(errors.TableNotFound)
