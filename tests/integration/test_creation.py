"""turnstile_ddb.creation against DynamoDB Local: concurrent creates of one key, exactly one
wins."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from service import config
from turnstile_ddb import creation, retry, transact


def test_twenty_concurrent_creates_of_one_key_make_one_item_and_nineteen_refusals(
    ddb, tables, unique
):
    # Given twenty writers creating the same product at once, each with its own name
    table = tables[config.PRODUCTS]

    def create(n: int) -> str:
        item = {"productId": unique, "name": f"writer-{n}", "stock": n, "version": 1}
        try:
            creation.create_if_absent(
                ddb, table=table, item=item, key_attr="productId", backoff=retry.Backoff()
            )
        except creation.AlreadyExists as refused:
            assert refused.current is not None  # the winner's item, from the failed write
            return f"refused:{refused.current['name']}"
        return f"won:writer-{n}"

    with ThreadPoolExecutor(max_workers=10) as pool:
        outcomes = list(pool.map(create, range(20)))
    # Then exactly one won, every loser saw that winner, and the stored item is the winner's
    (won,) = [o for o in outcomes if o.startswith("won:")]
    winner = won.removeprefix("won:")
    assert outcomes.count(f"refused:{winner}") == 19
    stored = ddb.get_item(TableName=table, Key={"productId": {"S": unique}}, ConsistentRead=True)
    assert stored["Item"]["name"] == {"S": winner}


def test_the_transaction_element_refuses_an_existing_key_and_writes_nothing(ddb, tables, unique):
    # Given an existing item
    table = tables[config.PRODUCTS]
    creation.create_if_absent(
        ddb,
        table=table,
        item={"productId": unique, "name": "first"},
        key_attr="productId",
        backoff=retry.Backoff(),
    )
    # When a transaction creates it again together with a new item
    other = f"{unique}-other"
    with pytest.raises(transact.Cancelled) as cancelled:
        transact.transact_write(
            ddb,
            [
                creation.put_new_op(table, {"productId": other, "name": "x"}, "productId"),
                creation.put_new_op(table, {"productId": unique, "name": "second"}, "productId"),
            ],
            backoff=retry.Backoff(),
        )
    # Then the existing one is the reason, and neither write happened
    assert cancelled.value.failed_at(1) and not cancelled.value.failed_at(0)
    assert "Item" not in ddb.get_item(TableName=table, Key={"productId": {"S": other}})


def test_concurrent_creates_with_tokens_make_one_winner_whose_resend_alone_is_created(
    ddb, tables, unique
):
    # Given twenty requests creating the same key at once, each with its own token, each sending
    # its create twice (the second as if the first reply had been lost)
    table = tables[config.PRODUCTS]

    def create(n: int) -> tuple[str, str]:
        answers = []
        for _ in range(2):
            try:
                created = creation.create_if_absent(
                    ddb,
                    table=table,
                    item={"productId": unique, "name": f"writer-{n}"},
                    key_attr="productId",
                    backoff=retry.Backoff(),
                    token=f"request-{n}",
                )
            except creation.AlreadyExists:
                answers.append("exists")
            else:
                answers.append("resent" if created.resent else "created")
        return answers[0], answers[1]

    with ThreadPoolExecutor(max_workers=10) as pool:
        outcomes = list(pool.map(create, range(20)))
    # Then exactly one request created the item, its resend found it its own, and every other
    # request (first send and resend alike) was told it exists
    assert outcomes.count(("created", "resent")) == 1
    assert outcomes.count(("exists", "exists")) == 19
    stored = ddb.get_item(TableName=table, Key={"productId": {"S": unique}}, ConsistentRead=True)
    winner = outcomes.index(("created", "resent"))
    assert stored["Item"]["name"] == {"S": f"writer-{winner}"}
    assert stored["Item"][creation.TOKEN] == {"S": f"request-{winner}"}
