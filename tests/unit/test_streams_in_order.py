"""service.streams: after the first failed record, the rest of the batch is reported, not run."""

from __future__ import annotations

from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from service.streams import process_in_order


def batch(*sequences: str) -> dict[str, Any]:
    return {
        "Records": [
            {
                "eventID": f"id-{s}",
                "eventName": "INSERT",
                "eventSource": "aws:dynamodb",
                "dynamodb": {"Keys": {"pk": {"S": s}}, "SequenceNumber": s},
            }
            for s in sequences
        ]
    }


def runner(fail_on: set[str]):
    ran: list[str] = []

    def handle(record: Any) -> None:
        sequence = record.dynamodb.sequence_number
        ran.append(sequence)
        if sequence in fail_on:
            raise RuntimeError(f"cannot process {sequence}")

    return handle, ran


def test_records_after_a_failure_are_reported_without_running():
    handle, ran = runner({"2"})
    response = process_in_order(batch("1", "2", "3", "4"), None, handle)
    assert ran == ["1", "2"]
    assert response == {"batchItemFailures": [{"itemIdentifier": s} for s in ("2", "3", "4")]}


def test_a_clean_batch_reports_nothing():
    handle, ran = runner(set())
    assert process_in_order(batch("1", "2"), None, handle) == {"batchItemFailures": []}
    assert ran == ["1", "2"]


def test_a_batch_whose_first_record_fails_fails_whole_so_lambda_bisects_it():
    handle, ran = runner({"1"})
    with pytest.raises(BatchProcessingError):
        process_in_order(batch("1", "2", "3"), None, handle)
    assert ran == ["1"]
