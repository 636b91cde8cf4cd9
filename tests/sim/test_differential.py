"""The simulator's DynamoDBs against DynamoDB Local: moto, as the simulator drives it, and the
simulator's own in-memory model (sim/model.py). The same random sequences of the requests
turnstile sends must get the same answers, errors and cancellation reasons, and leave the same
items and, for the model, the same stream records per item (sim/differential.py generates them;
see docs/sim.md for what is not compared)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from sim import differential
from sim.ddb import create_table, moto_dynamodb
from sim.model import Model

pytestmark = pytest.mark.integration

SEQUENCES = range(16)
LENGTH = 50


def _run(client, table, seed):
    generator = differential.Generator(seed, prefix=f"s{seed}")
    answers = []
    for step in range(LENGTH):
        operation, params = generator.request(table)
        answers.append((step, operation, params, differential.outcome(client, operation, params)))
    return answers


@pytest.fixture(scope="module")
def local_answers(dynamodb_local, streams):
    client = dynamodb_local.client()
    table = f"sim-diff-{uuid.uuid4().hex[:8]}"
    differential.create_streamed_table(client, table)
    try:
        answers = {seed: _run(client, table, seed) for seed in SEQUENCES}
        records = differential.local_stream(client, streams, table)
        return answers, differential.table_contents(client, table), records
    finally:
        client.delete_table(TableName=table)


@pytest.fixture(scope="module")
def moto_answers(local_answers):  # after DynamoDB Local's: moto must not intercept those calls
    with moto_dynamodb() as client:
        table = "sim-diff"
        create_table(client, table, differential.KEY)
        answers = {seed: _run(client, table, seed) for seed in SEQUENCES}
        return answers, differential.table_contents(client, table)


@pytest.fixture(scope="module")
def model_answers():
    client = Model()
    table = "sim-diff"
    differential.create_streamed_table(client, table)
    answers = {seed: _run(client, table, seed) for seed in SEQUENCES}
    return answers, differential.table_contents(client, table), client.stream_records(table)


@pytest.fixture(params=["moto", "model"])
def simulated(request):
    """One of the simulator's DynamoDBs' answers, by name."""
    return request.getfixturevalue(f"{request.param}_answers")


@pytest.mark.parametrize("seed", SEQUENCES)
def test_each_simulated_dynamodb_answers_every_request_as_dynamodb_local_does(
    seed, local_answers, simulated
):
    _assert_same_answers(local_answers[0][seed], simulated[0][seed], seed)


def _assert_same_answers(expected, got, seed):
    for (step, operation, params, local), (_, _, _, answer) in zip(expected, got, strict=True):
        assert answer == local, f"sequence {seed} step {step}: {operation}({params})"


def test_the_sequences_leave_the_same_items(local_answers, simulated):
    assert simulated[1] == local_answers[1]


def test_the_model_writes_the_stream_records_dynamodb_local_writes(local_answers, model_answers):
    """Per item, the same records in the same order: event names, keys, old and new images. So a
    refused write, a cancelled transaction and a write that changes nothing write no record, and
    each element of a transaction that goes through writes one."""
    expected = differential.changes_by_key(local_answers[2])
    got = differential.changes_by_key(model_answers[2])
    assert got.keys() == expected.keys()
    for key, changes in expected.items():
        assert got[key] == changes, key


def test_the_stream_comparison_is_not_vacuous(local_answers):
    """The sequences write every kind of record, and some writes that change nothing (a put of
    the item as it is, an update to the values it has), which write none."""
    records = local_answers[2]
    assert {r["eventName"] for r in records} == {"INSERT", "MODIFY", "REMOVE"}
    writes = [
        a
        for answers in local_answers[0].values()
        for a in answers
        if a[1] != "get_item" and "error" not in a[3]
    ]
    assert len(records) < len(writes)


def test_the_sequences_exercise_refusals_and_cancellations(local_answers):
    """Not a vacuous comparison: the generated requests do hit every kind of answer."""
    errors = {answer[3].get("error") for answers in local_answers[0].values() for answer in answers}
    assert {"ConditionalCheckFailedException", "TransactionCanceledException"} <= errors


# One name for both (BatchGetItem answers by table name); unique, as DynamoDB Local is shared.
EXTENDED_TABLE = f"sim-diffx-{uuid.uuid4().hex[:8]}"


def _run_extended(client, table, seed):
    generator = differential.ExtendedGenerator(seed, prefix=f"x{seed}")
    answers = []
    for step in range(LENGTH):
        operation, params = generator.request(table)
        answer: Any
        if operation == "query":
            answer = differential.pages(client, params)
        else:
            answer = differential.outcome(client, operation, params)
        answers.append((step, operation, params, answer))
    return answers


def _extended(client, table):
    differential.create_indexed_table(client, table, stream=True)
    answers = {seed: _run_extended(client, table, seed) for seed in SEQUENCES}
    return answers, differential.indexed_contents(client, table)


@pytest.fixture(scope="module")
def local_extended(dynamodb_local, streams):
    client = dynamodb_local.client()
    try:
        answers, contents = _extended(client, EXTENDED_TABLE)
        return answers, contents, differential.local_stream(client, streams, EXTENDED_TABLE)
    finally:
        client.delete_table(TableName=EXTENDED_TABLE)


@pytest.fixture(scope="module")
def model_extended():
    model = Model()
    answers, contents = _extended(model, EXTENDED_TABLE)
    return answers, contents, model.stream_records(EXTENDED_TABLE)


@pytest.mark.parametrize("seed", SEQUENCES)
def test_the_model_answers_index_queries_batches_and_every_expression_as_dynamodb_local_does(
    seed, local_extended, model_extended
):
    _assert_same_answers(local_extended[0][seed], model_extended[0][seed], seed)
    assert model_extended[1] == local_extended[1]


def test_the_model_writes_the_extended_sequences_stream_records_as_dynamodb_local_does(
    local_extended, model_extended
):
    """With sort keys, sets, maps and lists in the images, and ADD/DELETE/REMOVE updates."""
    expected = differential.changes_by_key(local_extended[2])
    assert differential.changes_by_key(model_extended[2]) == expected
    assert len(expected) > 10


def test_the_extended_sequences_read_pages_and_hit_every_kind_of_answer(local_extended):
    """Not vacuous: queries return items and continue over pages, batches find items, updates
    are refused and cancelled, and some requests are invalid."""
    answers = [a for seeds in local_extended[0].values() for a in seeds]
    queries = [pages for _, operation, _, pages in answers if operation == "query"]
    assert any(len(pages) > 1 for pages in queries)
    assert any(page.get("Items") for pages in queries for page in pages)
    batches = [a for _, operation, _, a in answers if operation == "batch_get_item"]
    assert any(a.get("Responses", {}) and any(a["Responses"].values()) for a in batches)
    errors = {a.get("error") for _, operation, _, a in answers if operation != "query"}
    assert {"ConditionalCheckFailedException", "TransactionCanceledException"} <= errors


# Capacity rows and slots (the signup workload's requests), on a table of their own.
ROWS_TABLE = f"sim-diffr-{uuid.uuid4().hex[:8]}"


def _rows(client, table):
    create_table(client, table, differential.KEY)
    answers = {}
    for seed in SEQUENCES:
        generator = differential.RowsGenerator(seed, prefix=f"r{seed}")
        answers[seed] = [
            (step, *request, differential.outcome(client, *request))
            for step, request in ((step, generator.request(table)) for step in range(LENGTH))
        ]
    return answers, differential.table_contents(client, table)


@pytest.fixture(scope="module")
def local_rows(dynamodb_local):
    client = dynamodb_local.client()
    try:
        return _rows(client, ROWS_TABLE)
    finally:
        client.delete_table(TableName=ROWS_TABLE)


@pytest.fixture(scope="module")
def moto_rows(local_rows):  # after DynamoDB Local's: moto must not intercept those calls
    with moto_dynamodb() as client:
        return _rows(client, ROWS_TABLE)


@pytest.fixture(scope="module")
def model_rows():
    return _rows(Model(), ROWS_TABLE)


@pytest.fixture(params=["moto", "model"])
def simulated_rows(request):
    return request.getfixturevalue(f"{request.param}_rows")


@pytest.mark.parametrize("seed", SEQUENCES)
def test_capacity_rows_and_slots_are_answered_as_dynamodb_local_answers_them(
    seed, local_rows, simulated_rows
):
    _assert_same_answers(local_rows[0][seed], simulated_rows[0][seed], seed)
    assert simulated_rows[1] == local_rows[1]


def test_the_row_sequences_join_leave_book_and_release_and_are_refused(local_rows):
    """Not vacuous: joins, leaves, bookings and releases each succeed and are refused, alone and
    in transactions (a join at its limit cancelled with the row's image)."""
    seen = set()
    for answers in local_rows[0].values():
        for _, operation, params, answer in answers:
            if operation == "transact_write_items":
                condition = params["TransactItems"][0]["Update"]["ConditionExpression"]
            else:
                condition = params.get("ConditionExpression", "")
            seen.add((operation, condition, answer.get("error")))
    join, leave, release = "#count < #limit", "#count > :zero", "#holder = :holder"
    book = "attribute_exists(#pk) AND (attribute_not_exists(#holder) OR #holder = :holder)"
    for operation, condition, refused in (
        ("update_item", join, "ConditionalCheckFailedException"),
        ("update_item", leave, "ConditionalCheckFailedException"),
        ("update_item", book, "ConditionalCheckFailedException"),
        ("update_item", release, "ConditionalCheckFailedException"),
        ("transact_write_items", join, "TransactionCanceledException"),
        ("transact_write_items", leave, "TransactionCanceledException"),
    ):
        assert {(operation, condition, None), (operation, condition, refused)} <= seen, condition
