"""moto, as the simulator drives it, against DynamoDB Local: the same random sequences of the
requests turnstile sends must get the same answers, errors and cancellation reasons, and leave
the same items (sim/differential.py generates them; see docs/sim.md for what is not compared)."""

from __future__ import annotations

import uuid

import pytest

from sim import differential
from sim.ddb import create_table, moto_dynamodb

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
def local_answers(dynamodb_local):
    client = dynamodb_local.client()
    table = f"sim-diff-{uuid.uuid4().hex[:8]}"
    create_table(client, table, differential.KEY)
    try:
        answers = {seed: _run(client, table, seed) for seed in SEQUENCES}
        return answers, differential.table_contents(client, table)
    finally:
        client.delete_table(TableName=table)


@pytest.fixture(scope="module")
def moto_answers(local_answers):  # after DynamoDB Local's: moto must not intercept those calls
    with moto_dynamodb() as client:
        table = "sim-diff"
        create_table(client, table, differential.KEY)
        answers = {seed: _run(client, table, seed) for seed in SEQUENCES}
        return answers, differential.table_contents(client, table)


@pytest.mark.parametrize("seed", SEQUENCES)
def test_moto_answers_every_request_as_dynamodb_local_does(seed, local_answers, moto_answers):
    for (step, operation, params, local), (_, _, _, moto) in zip(
        local_answers[0][seed], moto_answers[0][seed], strict=True
    ):
        assert moto == local, f"sequence {seed} step {step}: {operation}({params})"


def test_the_sequences_leave_the_same_items(local_answers, moto_answers):
    assert moto_answers[1] == local_answers[1]


def test_the_sequences_exercise_refusals_and_cancellations(local_answers):
    """Not a vacuous comparison: the generated requests do hit every kind of answer."""
    errors = {answer[3].get("error") for answers in local_answers[0].values() for answer in answers}
    assert {"ConditionalCheckFailedException", "TransactionCanceledException"} <= errors
